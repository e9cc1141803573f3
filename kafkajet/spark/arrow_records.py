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
from kafkajet.spark.formats.buffer_columns import binary_column, zigzag_varints

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_PAD = bytes(16)  # lets the vectorised varint reader look past the last record without bounds checks
# The run guess of _record_bodies: how many records one numpy check covers (growing while guesses hold), and
# how long the walk stays in Python after a run shorter than _SHORT_RUN (varied lengths: guessing costs more
# than it finds there), growing while guesses keep failing.
_RUN_WINDOW, _RUN_WINDOW_MAX, _SHORT_RUN = 16, 16384, 4
_PYTHON_STRETCH, _PYTHON_STRETCH_MAX = 64, 4096


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
    body, lengths = _record_bodies(data, batches)
    n = len(body)
    if n == 0:
        return _empty(include_headers)
    buf = np.frombuffer(data, dtype=np.uint8)
    counts = np.fromiter((b.records_count for b in batches), dtype=np.int64, count=len(batches))
    ts_delta, w = zigzag_varints(buf, body + 1)  # after the attributes byte
    pos = body + 1 + w
    offset_delta, w = zigzag_varints(buf, pos)
    pos += w
    key_len, w = zigzag_varints(buf, pos)
    key_start = pos + w
    pos = key_start + np.maximum(key_len, 0)
    value_len, w = zigzag_varints(buf, pos)
    value_start = pos + w
    pos = value_start + np.maximum(value_len, 0)
    header_count, w = zigzag_varints(buf, pos)
    header_start = pos + w
    ends = body + lengths
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
        binary_column(buf, key_start, key_len), binary_column(buf, value_start, value_len), _constant_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)), pa.array(offsets),
        pa.array(timestamps * 1000, type=pa.timestamp("us", tz="UTC")), pa.array(log_append),
    ]
    if include_headers:
        columns.append(_headers(data, header_start, header_count))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _empty(include_headers: bool) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)


def _record_bodies(data: bytes, batches: Sequence[RecordBatch]) -> tuple[Any, Any]:
    """Where each record's body starts (after its length prefix) and how long it is, batch by batch.

    A record's start depends on every record before it, so the walk is sequential; but a producer's records
    often come in runs of one length (same-size values, varint widths that change rarely). So the length
    prefix of one record, decoded in Python, is guessed to repeat for the next records, and the guess is
    checked for all of them at once with numpy: a record whose prefix bytes match starts where the guess put
    the next one, so every record up to the first mismatch is exact. Where lengths vary, a failed guess sends
    the walk back to plain Python for a stretch that doubles while guesses keep failing.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    start_chunks: list[Any] = []
    length_chunks: list[Any] = []
    starts: array[int] = array("q")
    lengths: array[int] = array("q")
    window, stretch = _RUN_WINDOW, _PYTHON_STRETCH
    pos = 0
    for b in batches:
        region_end = pos + len(b.records_data or b"")
        left = b.records_count
        while left:
            raw, body = _slow_varint(data, pos)
            length = (raw >> 1) ^ -(raw & 1)
            if length < 0 or body + length > region_end:
                raise CorruptRecordError(f"a record at byte {body} of its batch declares length {length}, past "
                                         "the end of the batch")
            step = body - pos + length
            fits = min(left, window, (region_end - pos) // step)
            run = 1
            if fits > 1:
                guess = pos + step * np.arange(1, fits, dtype=np.int64)
                same = buf[guess] == data[pos]
                for j in range(1, body - pos):
                    same &= buf[guess + j] == data[pos + j]
                run += fits - 1 if same.all() else int(np.argmin(same))
            if run >= _SHORT_RUN:
                if starts:
                    start_chunks.append(np.frombuffer(starts, dtype=np.int64))
                    length_chunks.append(np.frombuffer(lengths, dtype=np.int64))
                    starts, lengths = array("q"), array("q")
                start_chunks.append(body + step * np.arange(run, dtype=np.int64))
                length_chunks.append(np.full(run, length, dtype=np.int64))
            else:
                for k in range(run):
                    starts.append(body + k * step)
                    lengths.append(length)
            pos += step * run
            left -= run
            if run == fits:
                window = min(window * 4, _RUN_WINDOW_MAX)
                stretch = _PYTHON_STRETCH
            else:
                window = _RUN_WINDOW
                if run < _SHORT_RUN and left:
                    walk = min(left, stretch)
                    pos = _walk(data, pos, region_end, walk, starts, lengths)
                    left -= walk
                    stretch = min(stretch * 2, _PYTHON_STRETCH_MAX)
        if pos != region_end:
            raise CorruptRecordError(f"a batch holds {region_end - pos} bytes after its {b.records_count} records")
    if starts:
        start_chunks.append(np.frombuffer(starts, dtype=np.int64))
        length_chunks.append(np.frombuffer(lengths, dtype=np.int64))
    if not start_chunks:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(start_chunks), np.concatenate(length_chunks)


def _walk(data: bytes, pos: int, region_end: int, count: int, starts: array[int], lengths: array[int]) -> int:
    """The next `count` records from pos, one length prefix at a time; the position after them."""
    add_start, add_length = starts.append, lengths.append
    for _ in range(count):
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
    return pos


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


def _constant_string(text: str, n: int) -> pa.Array:
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _headers(data: bytes, starts: Any, counts: Any) -> pa.Array:
    # A record without headers is null, not an empty array: what Spark's own Kafka source gives.
    rows: list[list[dict[str, Any]] | None] = [None] * len(starts)
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
