"""Avro's binary encoding of one value of each primitive type (and the timestamp / date logical types): the
pieces of the per-record encoders that avro_encode.py writes for flat schemas. Compiled with the send path
(hatch_build.py): these bodies are most of a record's encoding time, and compiled they take 0.6 us less on a
10-field record. The Python source is the reference and the pure build.

Each takes only the values whose bytes it is sure match fastavro's (exact types: an int, a str, a float, a bool,
bytes, an aware datetime) and raises TypeError for anything else, which sends the record to fastavro. Standard
library only, and outside kafkajet.schema_registry: every Producer() imports the compiled modules to say which
build runs (kafkajet._build.describe), and that package's registry client would load ssl into plaintext
producers. No I/O here.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any, Final

_BYTE: Final = [bytes((i,)) for i in range(256)]
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1
_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE: Final = dt.date(1970, 1, 1)
_MS: Final = dt.timedelta(milliseconds=1)
_US: Final = dt.timedelta(microseconds=1)
_VARINT_LENGTH: Final = [max(1, (bits + 6) // 7) for bits in range(65)]  # a varint's bytes by its bit length
# 0x80 in every byte but the last: the continuation bits of a varint of that many bytes
_CONTINUATION: Final = [0, *(int.from_bytes(b"\x80" * (k - 1) + b"\x00", "little") for k in range(1, 9))]
_pack_double: Final = struct.Struct("<d").pack
_pack_float: Final = struct.Struct("<f").pack


def varint(n: int) -> bytes:
    """The zig-zag varint of a long."""
    if not _LONG_MIN <= n <= _LONG_MAX:
        raise TypeError(f"{n} is out of range for a long")  # fastavro refuses it in its own words
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _BYTE[z]
    if z < 0x4000:
        return bytes((z & 0x7F | 0x80, z >> 7))
    k = _VARINT_LENGTH[z.bit_length()]
    if k <= 8:
        # The 7-bit groups spread into bytes without a step per byte (a timestamp's varint has 6): 28-bit
        # halves into 32-bit lanes, 14-bit quarters into 16-bit lanes, 7-bit groups into bytes.
        x = (z & 0xFFFFFFF) | (z >> 28) << 32
        x = (x & 0x00003FFF00003FFF) | (x & 0x0FFFC0000FFFC000) << 2
        x = (x & 0x007F007F007F007F) | (x & 0x3F803F803F803F80) << 1
        return (x | _CONTINUATION[k]).to_bytes(k, "little")
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def long_(v: Any) -> bytes:
    if type(v) is not int:
        raise TypeError(f"not an int: {type(v).__name__}")
    n: int = v
    return varint(n)


def int_in_union(v: Any) -> bytes:
    # fastavro picks a union's "int" branch only for a value in 32-bit range
    if type(v) is not int:
        raise TypeError(f"not an int: {type(v).__name__}")
    n: int = v
    if not _INT_MIN <= n <= _INT_MAX:
        raise TypeError(f"{n} is out of range for an int")
    return varint(n)


def string(v: Any) -> bytes:
    if type(v) is not str:
        raise TypeError(f"not a str: {type(v).__name__}")
    s: str = v
    b = s.encode()
    n = len(b)
    return _BYTE[n + n] + b if n < 0x40 else varint(n) + b


def bytes_(v: Any) -> bytes:
    if type(v) is not bytes:
        raise TypeError(f"not bytes: {type(v).__name__}")
    b: bytes = v
    n = len(b)
    return _BYTE[n + n] + b if n < 0x40 else varint(n) + b


def boolean(v: Any) -> bytes:
    if v is True:
        return b"\x01"
    if v is False:
        return b"\x00"
    raise TypeError(f"not a bool: {type(v).__name__}")


def double(v: Any) -> bytes:
    result: bytes = _pack_double(v)  # an int or a float (fastavro float()s them); anything else raises
    return result


def float_(v: Any) -> bytes:
    result: bytes = _pack_float(v)
    return result


def double_in_union(v: Any) -> bytes:
    # in a union fastavro picks the branch by the value's type (a bool is no number there): only a float is
    # surely this branch
    if type(v) is not float:
        raise TypeError(f"not a float: {type(v).__name__}")
    return double(v)


def float_in_union(v: Any) -> bytes:
    if type(v) is not float:
        raise TypeError(f"not a float: {type(v).__name__}")
    return float_(v)


def timestamp_millis(v: Any) -> bytes:
    if type(v) is int:
        n: int = v
        return varint(n)
    if type(v) is dt.datetime and v.tzinfo is not None:  # a naive one: fastavro's (local time) rules
        ms: int = (v - _EPOCH) // _MS
        return varint(ms)
    raise TypeError(f"not an aware datetime or int: {type(v).__name__}")


def timestamp_micros(v: Any) -> bytes:
    if type(v) is int:
        n: int = v
        return varint(n)
    if type(v) is dt.datetime and v.tzinfo is not None:
        us: int = (v - _EPOCH) // _US
        return varint(us)
    raise TypeError(f"not an aware datetime or int: {type(v).__name__}")


def date(v: Any) -> bytes:
    if type(v) is int:
        return int_in_union(v)
    if type(v) is dt.date:
        days: int = (v - _EPOCH_DATE).days
        return varint(days)
    raise TypeError(f"not a date or int: {type(v).__name__}")
