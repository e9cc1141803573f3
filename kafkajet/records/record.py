"""Single records (magic 2): the per-send() encoder, its size bound, and the records-region decoder.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from kafkajet.errors import CorruptRecordError
from kafkajet.protocol.varint import TABLE_SIZE, VARINT, encode_varint, encode_varint_slow, read_varint

Headers = Sequence[tuple[str, bytes | None]]
Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


# Pre-joined pieces and precomputed sizes for the fast path, so a typical record is a handful of list
# lookups and one join (no len() of pieces, no per-field calls):
# _ATTR_TS[d] = attributes byte (always 0) + varint(timestamp delta d);
# _OFF_NULL_KEY[d] = varint(offset delta d) + varint(-1), the null key;
# _LEN[n] = len(varint(n)); _VALUE_PART[n] = bytes taken by a value of length n, its length varint, the
# attributes byte and the (empty) header count.
# Final: mypyc keeps these in C statics; a plain module global is a dict lookup per use.
_VARINT: Final[list[bytes]] = VARINT
_TABLE_SIZE: Final = TABLE_SIZE
_ATTR_TS: Final[list[bytes]] = [b"\x00" + v for v in VARINT]
_OFF_NULL_KEY: Final[list[bytes]] = [v + b"\x01" for v in VARINT]
_LEN: Final[list[int]] = [len(v) for v in VARINT]
# Keeps the value length far enough below TABLE_SIZE that a null-key record's length is a table hit too.
_FAST_LEN: Final = TABLE_SIZE // 2
_VALUE_PART: Final[list[int]] = [len(VARINT[n]) + n + 2 for n in range(_FAST_LEN)]
_NULL_KEY_VALUE_PART: Final[list[int]] = [size + 1 for size in _VALUE_PART]
_TABLE_BITS: Final = TABLE_SIZE.bit_length() - 1
_NULL: Final = b"\x01"  # varint(-1): null key, value or header value
_NO_HEADERS: Final = b"\x00"
_INT32_MIN: Final = -(1 << 31)
_INT32_LIMIT: Final = 1 << 31
_join: Final = b"".join


def append_record(
    buf: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None,
) -> int:
    """Append one encoded record (length varint first) to buf; returns the number of bytes appended.

    Runs once per send(), so the common shape (non-null value under 8 KiB, offset and timestamp deltas in
    0..16383) is table lookups plus a single join; anything else takes the general path.
    """
    if value is not None and not ((timestamp_delta | offset_delta) >> _TABLE_BITS):
        n = len(value)
        if n < _FAST_LEN:
            if headers:
                hb = encode_headers(headers)
                extra = len(hb) - 1  # the tables count a one-byte empty header section
            else:
                hb, extra = _NO_HEADERS, 0
            if key is None:
                size = _LEN[timestamp_delta] + _LEN[offset_delta] + _NULL_KEY_VALUE_PART[n] + extra
                if size < _TABLE_SIZE:
                    buf += _join((_VARINT[size], _ATTR_TS[timestamp_delta], _OFF_NULL_KEY[offset_delta], _VARINT[n],
                                  value, hb))
                    return _LEN[size] + size
            else:
                k = len(key)
                if k < _FAST_LEN:
                    size = _LEN[timestamp_delta] + _LEN[offset_delta] + _LEN[k] + k + _VALUE_PART[n] + extra
                    if size < _TABLE_SIZE:
                        buf += _join((_VARINT[size], _ATTR_TS[timestamp_delta], _VARINT[offset_delta], _VARINT[k], key,
                                      _VARINT[n], value, hb))
                        return _LEN[size] + size
    return _append_general(buf, offset_delta, timestamp_delta, key, value, headers)


def append_run(
    buf: bytearray,
    limit: int,
    offset: int,
    base_timestamp: int,
    indices: Sequence[int],
    pos: int,
    timestamps: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Headers | None] | None,
) -> tuple[int, int, int]:
    """Append records indices[pos:] to buf, offset deltas from `offset` on, while buf stays within `limit`
    bytes (a record into an empty batch always goes in). Returns (next pos, next offset, max timestamp or -1).

    The batch path (send_batch) in one loop: the same bytes as append_record per record, but the pieces of
    every record are joined once, instead of a call and a bytearray append per record.
    """
    parts: list[bytes] = []
    used = len(buf)
    max_ts = -1
    n = len(indices)
    while pos < n:
        i = indices[pos]
        value = values[i]
        t = timestamps[i]
        d = t - base_timestamp
        hs = headers[i] if headers else None
        total = -1
        if value is not None and not ((d | offset) >> _TABLE_BITS):
            vn = len(value)
            if vn < _FAST_LEN:
                if hs:
                    hb = encode_headers(hs)
                    extra = len(hb) - 1
                else:
                    hb, extra = _NO_HEADERS, 0
                key = keys[i]
                if key is None:
                    size = _LEN[d] + _LEN[offset] + _NULL_KEY_VALUE_PART[vn] + extra
                    if size < _TABLE_SIZE:
                        total = _LEN[size] + size
                        if used + total > limit and offset:
                            break
                        parts += (_VARINT[size], _ATTR_TS[d], _OFF_NULL_KEY[offset], _VARINT[vn], value, hb)
                else:
                    k = len(key)
                    if k < _FAST_LEN:
                        size = _LEN[d] + _LEN[offset] + _LEN[k] + k + _VALUE_PART[vn] + extra
                        if size < _TABLE_SIZE:
                            total = _LEN[size] + size
                            if used + total > limit and offset:
                                break
                            parts += (_VARINT[size], _ATTR_TS[d], _VARINT[offset], _VARINT[k], key, _VARINT[vn], value,
                                      hb)
        if total < 0:  # off the fast path: the general encoder, straight into buf
            if parts:
                buf += _join(parts)
                parts.clear()
            mark = len(buf)
            append_record(buf, offset, d, keys[i], value, hs)
            if len(buf) > limit and offset:
                del buf[mark:]
                break
            used = len(buf)
        else:
            used += total
        offset += 1
        if t > max_ts:
            max_ts = t
        pos += 1
    if parts:
        buf += _join(parts)
    return pos, offset, max_ts


def _append_general(
    buf: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None,
) -> int:
    if not _INT32_MIN <= offset_delta < _INT32_LIMIT:
        raise ValueError(f"offset delta {offset_delta} does not fit in a varint")
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(_NULL)
    else:
        parts.append(encode_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(_NULL)
    else:
        parts.append(encode_varint(len(value)))
        parts.append(value)
    parts.append(encode_headers(headers) if headers else _NO_HEADERS)
    body = _join(parts)
    size = len(body)
    lb = _VARINT[size] if size < _TABLE_SIZE else encode_varint_slow(size)
    buf += lb
    buf += body
    return len(lb) + size


# Header keys repeat on nearly every record ("trace-id", "source"): their encoded form is kept, bounded.
_HEADER_KEYS: dict[str, bytes] = {}
_HEADER_KEYS_MAX = 4096


def encode_headers(headers: Headers) -> bytes:
    """The header section of a record: the count, then each key and value with their length varints."""
    count = len(headers)
    parts = [_VARINT[count] if count < _TABLE_SIZE else encode_varint(count)]
    append = parts.append
    for hkey, hvalue in headers:
        hk = _HEADER_KEYS.get(hkey) if type(hkey) is str else None
        if hk is None:
            raw = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
            hk = encode_varint(len(raw)) + raw
            if type(hkey) is str and len(_HEADER_KEYS) < _HEADER_KEYS_MAX:
                _HEADER_KEYS[hkey] = hk
        append(hk)
        if hvalue is None:
            append(_NULL)
        else:
            m = len(hvalue)
            append(_VARINT[m] if m < _TABLE_SIZE else encode_varint(m))
            append(hvalue)
    return _join(parts)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None,
) -> bytes:
    """One encoded record (length varint first), as append_record would append it."""
    buf = bytearray()
    append_record(buf, offset_delta, timestamp_delta, key, value, headers)
    return bytes(buf)


# length(5) + attributes(1) + timestampDelta(10) + offsetDelta(5) + keyLength(5) + valueLength(5) +
# headersCount(5): every varint at its widest.
_RECORD_FRAMING_MAX = 36
_HEADER_OVERHEAD_MAX = 10


def record_size_upper_bound(key_len: int, value_len: int, headers: Headers | None) -> int:
    """Bytes append_record can take at most for such a record (key_len/value_len -1 for null).

    Assumes the widest varints rather than computing them: the accumulator calls this per send() and only
    needs a bound, not the exact size.
    """
    size = _RECORD_FRAMING_MAX + (key_len if key_len > 0 else 0) + (value_len if value_len > 0 else 0)
    if headers:
        for hkey, hvalue in headers:
            size += _HEADER_OVERHEAD_MAX + (len(hkey) if hkey.isascii() else len(hkey.encode("utf-8")))
            if hvalue is not None:
                size += len(hvalue)
    return size


# --- decoding ----------------------------------------------------------------------------------------

# A record is at least 7 bytes (length, attributes, timestamp, offset, key, value, header count: one byte
# each), which caps how many records a region can hold before anything is allocated for them.
MIN_RECORD_SIZE = 7


def _bytes_field(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos, end, f"{what} length")
    if length < 0:
        if length == -1:
            return None, pos
        raise CorruptRecordError(f"malformed record: negative {what} length {length} at byte {pos}")
    if length > end - pos:
        raise CorruptRecordError(
            f"truncated record: {what} length {length} but only {end - pos} bytes left in the record at byte {pos}"
        )
    return data[pos:pos + length], pos + length


def decode_records(records_data: Buffer, count: int, base_offset: int = 0, base_timestamp: int = 0) -> list[Record]:
    """Decode an uncompressed records region holding exactly `count` records.

    Offsets and timestamps come back absolute (base + delta). Anything that does not parse exactly, including
    leftover bytes after the last record, raises CorruptRecordError.
    """
    # An immutable copy, dropping our reference to the caller's object: a view of their bytearray kept alive
    # by an exception's traceback would stop them resizing it.
    if not isinstance(records_data, bytes):
        records_data = bytes(records_data)
    data = records_data
    end = len(data)
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    if count * MIN_RECORD_SIZE > end:
        raise CorruptRecordError(
            f"record count {count} disagrees with the records present: {end} bytes hold at most "
            f"{end // MIN_RECORD_SIZE} records"
        )
    records: list[Record] = []
    append = records.append
    pos = 0
    for index in range(count):
        if pos >= end:
            raise CorruptRecordError(f"record count {count} disagrees with the records present: only {index} found")
        length, pos = read_varint(data, pos, end, "record length")
        if length < 0 or length > end - pos:
            raise CorruptRecordError(
                f"truncated record {index}: length {length} but {end - pos} bytes remain at byte {pos}"
            )
        rend = pos + length
        if pos >= rend:
            raise CorruptRecordError(f"truncated record {index}: attributes missing at byte {pos}")
        pos += 1  # attributes: no bits are defined for records
        ts_delta, pos = read_varint(data, pos, rend, "timestamp delta", 10)
        off_delta, pos = read_varint(data, pos, rend, "offset delta")
        key, pos = _bytes_field(data, pos, rend, "key")
        value, pos = _bytes_field(data, pos, rend, "value")
        nheaders, pos = read_varint(data, pos, rend, "header count")
        if nheaders < 0 or nheaders * 2 > rend - pos:
            raise CorruptRecordError(
                f"malformed record {index}: header count {nheaders} impossible with {rend - pos} bytes left"
            )
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(nheaders):
            hkey, pos = _bytes_field(data, pos, rend, "header key")
            if hkey is None:
                raise CorruptRecordError(f"malformed record {index}: null header key at byte {pos}")
            try:
                hkey_str = hkey.decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptRecordError(f"malformed record {index}: header key is not valid UTF-8") from None
            hvalue, pos = _bytes_field(data, pos, rend, "header value")
            headers.append((hkey_str, hvalue))
        if pos != rend:
            raise CorruptRecordError(
                f"malformed record {index}: length says {length} bytes but its fields end {rend - pos} bytes early"
            )
        append(Record(base_offset + off_delta, base_timestamp + ts_delta, key, value, headers))
    if pos != end:
        raise CorruptRecordError(
            f"record count {count} disagrees with the records present: {end - pos} bytes left after the last record"
        )
    return records
