"""Record batches (magic 2): the 61-byte header, CRC-32C, compression, and a strict decoder.

Layout (big-endian), see record-format.md 3.1:
    baseOffset q | batchLength i | partitionLeaderEpoch i | magic b | crc I || attributes h | lastOffsetDelta i |
    baseTimestamp q | maxTimestamp q | producerId q | producerEpoch h | baseSequence i | recordsCount i | records
The CRC covers everything after itself ("||" onwards), so the broker can stamp the leader epoch without
recomputing it.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkajet.errors import CorruptRecordError
from kafkajet.records.codecs import Buffer, Compression, compress, decompress
from kafkajet.records.crc import crc32c
from kafkajet.records.record import Record, append_record, decode_records

BATCH_HEADER_SIZE = 61
MAGIC = 2
# batchLength counts from partitionLeaderEpoch on, so it excludes the first 12 bytes.
_LENGTH_PREFIX = 12
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - _LENGTH_PREFIX
_CRC_START = 21

_PREFIX = struct.Struct(">qiibI")  # baseOffset .. crc: the part outside the CRC (plus the CRC itself)
_CRC_HEADER = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: covered by the CRC
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_FIELD = struct.Struct(">I")

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20


@dataclass(slots=True)
class RecordBatch:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    compression: Compression
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    records: list[Record] = field(default_factory=list)
    # The records region, decompressed, when decode_batches() was asked not to decode it record by record
    # (a columnar reader parses it itself).
    records_data: Buffer | None = None


def build_batch(
    records_data: Buffer,
    count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Wrap an encoded records region (append_record output) in a batch header, compressing it and adding
    the CRC. last_offset_delta defaults to count - 1, which is right for a fresh producer batch."""
    if compression not in (0, 1, 2, 3, 4):
        raise ValueError(f"unknown compression codec {compression}")
    payload = compress(compression, records_data, compression_level) if compression else records_data
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    _write_header(out, count, len(payload), base_timestamp, max_timestamp, compression, producer_id,
                  producer_epoch, base_sequence, transactional, control, base_offset, partition_leader_epoch,
                  timestamp_type, last_offset_delta)
    return bytes(out)


def seal_in_place(
    buf: bytearray,
    count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression_level: int | None = None,
) -> bytes | memoryview:
    """The batch of the records region that follows a BATCH_HEADER_SIZE gap at the start of buf (a producer
    batch's buffer). Uncompressed, the header is written into the gap and the batch is a view of buf, not a
    copy: buf must not be resized while the view is in use. Compressed, it is new bytes."""
    if compression:
        return build_batch(memoryview(buf)[BATCH_HEADER_SIZE:], count, base_timestamp=base_timestamp,
                           max_timestamp=max_timestamp, compression=compression, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=base_sequence, transactional=transactional,
                           compression_level=compression_level)
    _write_header(buf, count, len(buf) - BATCH_HEADER_SIZE, base_timestamp, max_timestamp, 0, producer_id,
                  producer_epoch, base_sequence, transactional, False, 0, -1, 0, None)
    return memoryview(buf)


def _write_header(out: bytearray, count: int, payload_size: int, base_timestamp: int, max_timestamp: int,
                  compression: int, producer_id: int, producer_epoch: int, base_sequence: int,
                  transactional: bool, control: bool, base_offset: int, partition_leader_epoch: int,
                  timestamp_type: int, last_offset_delta: int | None) -> None:
    """Fill out[:BATCH_HEADER_SIZE] for the payload that follows it there, the CRC last."""
    attributes = (
        compression
        | (_TIMESTAMP_TYPE_BIT if timestamp_type else 0)
        | (_TRANSACTIONAL_BIT if transactional else 0)
        | (_CONTROL_BIT if control else 0)
    )
    try:
        _CRC_HEADER.pack_into(
            out, _CRC_START, attributes, count - 1 if last_offset_delta is None else last_offset_delta,
            base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count,
        )
        _PREFIX.pack_into(out, 0, base_offset, BATCH_HEADER_SIZE - _LENGTH_PREFIX + payload_size,
                          partition_leader_epoch, MAGIC, 0)
    except struct.error as e:
        raise ValueError(f"batch header field out of range: {e}") from None
    with memoryview(out) as view:
        crc = crc32c(view[_CRC_START:])
    _CRC_FIELD.pack_into(out, _CRC_START - 4, crc)


def encode_batch(
    records: Iterable[tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]] | None]],
    **kwargs: Any,
) -> bytes:
    """Encode (timestamp, key, value, headers) tuples as one batch with offset deltas 0, 1, 2, ...

    base_timestamp is the first record's and max_timestamp the largest unless given (an empty batch gets -1,
    Java's NO_TIMESTAMP); other keyword arguments go to build_batch.
    """
    buf = bytearray()
    count = 0
    base_ts = max_ts = -1
    for timestamp, key, value, headers in records:
        if count == 0:
            base_ts = max_ts = timestamp
        elif timestamp > max_ts:
            max_ts = timestamp
        append_record(buf, count, timestamp - base_ts, key, value, headers)
        count += 1
    kwargs.setdefault("base_timestamp", base_ts)
    kwargs.setdefault("max_timestamp", max_ts)
    return build_batch(buf, count, **kwargs)


# --- control batches (transaction markers) -----------------------------------------------------------

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
_CONTROL_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def encode_control_record(commit: bool, coordinator_epoch: int = 0) -> tuple[bytes, bytes]:
    """(key, value) of an end-transaction marker, as the broker writes it into a control batch."""
    return (
        _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
        _CONTROL_VALUE.pack(0, coordinator_epoch),
    )


def build_control_batch(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding a single COMMIT or ABORT marker."""
    key, value = encode_control_record(commit, coordinator_epoch)
    return encode_batch(
        [(timestamp, key, value, None)], producer_id=producer_id, producer_epoch=producer_epoch,
        transactional=True, control=True, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
    )


def control_record_type(key: bytes | None) -> int:
    """CONTROL_COMMIT or CONTROL_ABORT from a control record's key (other types are returned as is)."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    return _CONTROL_KEY.unpack_from(key)[1]


# --- decoding ----------------------------------------------------------------------------------------


def decode_batches(
    data: Buffer, *, allow_partial_tail: bool = False, verify_crc: bool = True, decode: bool = True
) -> list[RecordBatch]:
    """Decode concatenated batches, validating every length, the CRC, and every record.

    allow_partial_tail drops an incomplete final batch (Fetch responses end that way) instead of raising.
    decode=False leaves the records of data batches undecoded and hands the decompressed region over as
    `records_data` instead.
    """
    # Work on an immutable copy: views into a caller's bytearray would stay exported while an exception's
    # traceback is alive and make the caller's buffer.clear() fail. Decoding is not a hot path.
    if not isinstance(data, bytes):
        data = bytes(data)
    view = memoryview(data)
    end = len(view)
    pos = 0
    batches: list[RecordBatch] = []
    while pos < end:
        remaining = end - pos
        if remaining < BATCH_HEADER_SIZE:
            if remaining >= _LENGTH_PREFIX:
                _check_length(view, pos, remaining, allow_partial_tail)
            if allow_partial_tail:
                break
            raise CorruptRecordError(
                f"truncated batch at byte {pos}: {remaining} bytes left, a batch header needs {BATCH_HEADER_SIZE}"
            )
        (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
         max_timestamp, producer_id, producer_epoch, base_sequence, count) = _HEADER.unpack_from(view, pos)
        if magic != MAGIC:
            raise CorruptRecordError(f"batch at byte {pos} has magic {magic}; only magic 2 is supported")
        if not _check_length(view, pos, remaining, allow_partial_tail):
            break
        batch_end = pos + _LENGTH_PREFIX + batch_length
        if verify_crc:
            computed = crc32c(view[pos + _CRC_START:batch_end])
            if computed != crc:
                raise CorruptRecordError(
                    f"CRC mismatch in batch at byte {pos}: expected {crc:#010x}, computed {computed:#010x}"
                )
        codec = attributes & _COMPRESSION_MASK
        if codec > 4:
            raise CorruptRecordError(f"batch at byte {pos}: unknown compression codec {codec}")
        region: Buffer = view[pos + BATCH_HEADER_SIZE:batch_end]
        if codec:
            region = decompress(codec, region)
        # Control batches are always decoded: their one record says commit or abort, which readers need.
        records = (decode_records(region, count, base_offset, base_timestamp)
                   if decode or attributes & _CONTROL_BIT else [])
        if attributes & _TIMESTAMP_TYPE_BIT:
            # LogAppendTime: the broker stamped the batch, so every record's time is the batch's max
            # timestamp (what the Java consumer, kafka-python and aiokafka report).
            for rec in records:
                rec.timestamp = max_timestamp
        batches.append(RecordBatch(
            base_offset, batch_length, leader_epoch, magic, crc, attributes, Compression(codec),
            1 if attributes & _TIMESTAMP_TYPE_BIT else 0, bool(attributes & _TRANSACTIONAL_BIT),
            bool(attributes & _CONTROL_BIT), last_offset_delta, base_timestamp, max_timestamp, producer_id,
            producer_epoch, base_sequence, count, records, None if decode else region,
        ))
        pos = batch_end
    return batches


def _check_length(view: memoryview, pos: int, remaining: int, allow_partial_tail: bool) -> bool:
    """False if the batch at pos runs past the data and a partial tail is allowed; raises if impossible."""
    batch_length = int.from_bytes(view[pos + 8:pos + _LENGTH_PREFIX], "big", signed=True)
    if batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at byte {pos} declares length {batch_length}, less than the {_MIN_BATCH_LENGTH}-byte minimum"
        )
    if _LENGTH_PREFIX + batch_length > remaining:
        if allow_partial_tail:
            return False
        raise CorruptRecordError(
            f"truncated batch at byte {pos}: declares {_LENGTH_PREFIX + batch_length} bytes, only {remaining} present"
        )
    return True
