"""Varints: the one codec for the protocol's (unsigned) varints and the zig-zag varints inside record batches.

Encoding is table-driven for the small non-negative values the hot path sees (offset deltas, timestamp
deltas within a linger window, key/value lengths): a list index is far cheaper than a loop of shifts.
"""

from __future__ import annotations

from kafkajet.errors import CorruptRecordError

_MASK64 = (1 << 64) - 1


def zigzag(n: int) -> int:
    """Zig-zag map a signed 64-bit int to unsigned (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    return ((n << 1) ^ (n >> 63)) & _MASK64


def encode_unsigned(zz: int) -> bytes:
    """Base-128 little-endian groups, high bit set on every byte but the last."""
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def encode_varint_slow(n: int) -> bytes:
    """Signed varint/varlong for any value in int64 range (int32 values encode identically either way)."""
    if not -(1 << 63) <= n < (1 << 63):
        raise ValueError(f"{n} does not fit in a varlong")
    return encode_unsigned(zigzag(n))


# VARINT[n] is the encoding of n for 0 <= n < TABLE_SIZE. 16384 covers every offset delta and small-record
# length in a default 16 KiB batch, and timestamp deltas up to 16 s; the table costs about 0.7 MB.
TABLE_SIZE = 1 << 14
VARINT: list[bytes] = [encode_unsigned(n << 1) for n in range(TABLE_SIZE)]


def encode_varint(n: int) -> bytes:
    if 0 <= n < TABLE_SIZE:
        return VARINT[n]
    return encode_varint_slow(n)


def varint_size(n: int) -> int:
    """Bytes taken by the zig-zag encoding of n."""
    zz = zigzag(n)
    size = 1
    while zz >= 0x80:
        zz >>= 7
        size += 1
    return size


def read_varint(data: bytes, pos: int, end: int, what: str, max_bytes: int = 5) -> tuple[int, int]:
    """Decode one signed varint (max_bytes 5) or varlong (10) at pos without reading at or past end.

    Returns (value, new_pos). A longer run of continuation bytes, or more significant bits than the type
    has, is corruption rather than a reason to keep reading.
    """
    if pos >= end:
        raise CorruptRecordError(f"truncated record: {what} missing at byte {pos}")
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    zz = b & 0x7F
    shift = 7
    i = pos + 1
    limit = pos + max_bytes
    while True:
        if i >= end:
            raise CorruptRecordError(f"truncated record: {what} runs past the end of the record at byte {i}")
        if i >= limit:
            raise CorruptRecordError(f"malformed record: {what} varint longer than {max_bytes} bytes at byte {pos}")
        b = data[i]
        zz |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            break
        shift += 7
    bits = 32 if max_bytes == 5 else 64
    if zz >> bits:
        raise CorruptRecordError(f"malformed record: {what} varint overflows {bits} bits at byte {pos}")
    return (zz >> 1) ^ -(zz & 1), i
