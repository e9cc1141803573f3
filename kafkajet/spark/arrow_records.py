"""Record batches (magic 2) straight into Arrow columns for the Spark source: no Python object per record.

Python walks only the record length prefixes (a record's start depends on every record before it); each
field after that is decoded for all records of a Fetch answer at once with numpy, and the key and value
columns are gathered from the records buffer into Arrow's offsets/data layout. Headers, when asked for, are
the one column that takes Python objects, and only for records that have any. No I/O here.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from kafkajet.errors import CorruptRecordError
from kafkajet.records.batch import RecordBatch

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_PAD = bytes(16)  # lets the vectorised varint reader look past the last record without bounds checks


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
              pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
              pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32())]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def to_arrow(batches: Sequence[RecordBatch], topic: str, partition: int, start: int, end: int,
             include_headers: bool) -> pa.RecordBatch:
    """The records of `batches` (decoded with decode=False) with start <= offset < end, as Spark's columns."""
    data = b"".join([*(bytes(b.records_data or b"") for b in batches), _PAD])
    starts, lengths = _record_bodies(data, batches)
    n = len(starts)
    if n == 0:
        return _empty(include_headers)
    buf = np.frombuffer(data, dtype=np.uint8)
    body = np.frombuffer(starts, dtype=np.int64)
    counts = np.fromiter((b.records_count for b in batches), dtype=np.int64, count=len(batches))
    ts_delta, w = _varints(buf, body + 1)  # after the attributes byte
    pos = body + 1 + w
    offset_delta, w = _varints(buf, pos)
    pos += w
    key_len, w = _varints(buf, pos)
    key_start = pos + w
    pos = key_start + np.maximum(key_len, 0)
    value_len, w = _varints(buf, pos)
    value_start = pos + w
    pos = value_start + np.maximum(value_len, 0)
    header_count, w = _varints(buf, pos)
    header_start = pos + w
    ends = body + np.frombuffer(lengths, dtype=np.int64)
    if np.any((header_count == 0) & (header_start != ends)) or np.any(header_start > ends):
        raise CorruptRecordError(f"{topic}-{partition}: a record's fields do not add up to its length")

    base_offset = np.repeat(np.fromiter((b.base_offset for b in batches), np.int64, len(batches)), counts)
    offsets = base_offset + offset_delta
    log_append = np.repeat(np.fromiter((b.timestamp_type for b in batches), np.int32, len(batches)), counts)
    base_ts = np.repeat(np.fromiter((b.base_timestamp for b in batches), np.int64, len(batches)), counts)
    max_ts = np.repeat(np.fromiter((b.max_timestamp for b in batches), np.int64, len(batches)), counts)
    # LogAppendTime: the broker stamped the batch; every record's time is the batch's max timestamp.
    timestamps = np.where(log_append == 1, max_ts, base_ts + ts_delta)

    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        idx = np.nonzero(keep)[0]
        offsets, timestamps, log_append = offsets[idx], timestamps[idx], log_append[idx]
        key_start, key_len, value_start, value_len = key_start[idx], key_len[idx], value_start[idx], value_len[idx]
        header_start, header_count = header_start[idx], header_count[idx]
    n = len(offsets)
    columns: list[pa.Array] = [
        _binary(buf, key_start, key_len), _binary(buf, value_start, value_len), _constant_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)), pa.array(offsets),
        pa.array(timestamps * 1000, type=pa.timestamp("us", tz="UTC")), pa.array(log_append),
    ]
    if include_headers:
        columns.append(_headers(data, header_start, header_count))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _empty(include_headers: bool) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _record_bodies(data: bytes, batches: Sequence[RecordBatch]) -> tuple[array[int], array[int]]:
    """Where each record's body starts (after its length prefix) and how long it is, batch by batch."""
    starts: array[int] = array("q")
    lengths: array[int] = array("q")
    add_start, add_length = starts.append, lengths.append
    pos = 0
    for b in batches:
        region_end = pos + len(b.records_data or b"")
        for _ in range(b.records_count):
            byte = data[pos]
            if byte < 0x80:
                raw, pos = byte, pos + 1
            elif data[pos + 1] < 0x80:  # records of 64 B to 8 KiB: the common case, inline
                raw, pos = (byte & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                raw, pos = _slow_varint(data, pos)
            length = (raw >> 1) ^ -(raw & 1)
            if length < 0 or pos + length > region_end:
                raise CorruptRecordError(f"a record at byte {pos} of its batch declares length {length}, past the "
                                         "end of the batch")
            add_start(pos)
            add_length(length)
            pos += length
        if pos != region_end:
            raise CorruptRecordError(f"a batch holds {region_end - pos} bytes after its {b.records_count} records")
    return starts, lengths


def _slow_varint(data: bytes, pos: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        byte = data[pos]
        raw |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return raw, pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError(f"varint longer than 10 bytes at byte {pos}")


def _varints(buf: Any, pos: Any) -> tuple[Any, Any]:
    """Zigzag varints at every position of `pos` at once: (values, widths)."""
    byte = buf[pos].astype(np.uint64)
    value = byte & np.uint64(0x7F)
    width = np.ones(len(pos), dtype=np.int64)
    more = np.nonzero(byte >= 0x80)[0]
    shift = 7
    while len(more):
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in a record")
        byte = buf[pos[more] + width[more]].astype(np.uint64)
        value[more] |= (byte & np.uint64(0x7F)) << np.uint64(shift)
        width[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, width


def _binary(buf: Any, starts: Any, lengths: Any) -> pa.Array:
    """A binary column gathered from buf: null where the length is -1."""
    n = len(starts)
    nulls = lengths < 0
    sizes = np.where(nulls, 0, lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        # Byte k of the column comes from starts[i] + (k - offsets[i]) for the record i it belongs to.
        gather = np.repeat(starts - offsets[:-1], sizes) + np.arange(total, dtype=np.int64)
        data = buf[gather]
    else:
        data = np.zeros(0, dtype=np.uint8)
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    if total >= 1 << 31:
        raise CorruptRecordError(f"{total} bytes in one column: more than an Arrow binary column holds")
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data)], null_count=null_count)


def _constant_string(text: str, n: int) -> pa.Array:
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _headers(data: bytes, starts: Any, counts: Any) -> pa.Array:
    rows: list[list[dict[str, Any]]] = [[] for _ in range(len(starts))]
    for i in np.nonzero(counts > 0)[0].tolist():
        pos = int(starts[i])
        items = []
        for _ in range(int(counts[i])):
            raw, pos = _slow_varint(data, pos)
            klen = (raw >> 1) ^ -(raw & 1)
            key = data[pos:pos + klen].decode()
            pos += klen
            raw, pos = _slow_varint(data, pos)
            vlen = (raw >> 1) ^ -(raw & 1)
            value = None if vlen < 0 else data[pos:pos + vlen]
            pos += max(vlen, 0)
            items.append({"key": key, "value": value})
        rows[i] = items
    return pa.array(rows, type=HEADERS_TYPE)
