"""Per-record Avro encoders, built once per writer schema: the serializer's hot path.

For a flat record (fields of primitive types, enums, a union of one of those with null, and the timestamp-millis,
timestamp-micros and date logical types), a function written for that schema encodes a dict's fields in order,
with no per-field dispatch on the schema: about 1.7x faster than fastavro's schemaless_writer on a 10-field
record (benchmarks/avro_produce.py). It takes only values whose bytes it is sure of (exact types: int, str,
float, bool, bytes; aware datetimes); anything else raises inside it, and the record is written by fastavro
instead, which gives the same bytes for what both take, applies field defaults, and words the errors. Every
other schema is written by fastavro. tests/schema_registry/test_avro_encode.py holds both to the same bytes.
No I/O here.
"""

from __future__ import annotations

import datetime as dt
import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro

_BYTE = [bytes((i,)) for i in range(256)]
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)
_MS, _US = dt.timedelta(milliseconds=1), dt.timedelta(microseconds=1)


_VARINT_LENGTH = [max(1, (bits + 6) // 7) for bits in range(65)]  # bytes of a varint by its bit length
# 0x80 in every byte but the last: the continuation bits of a varint of that many bytes
_CONTINUATION = [0, *(int.from_bytes(b"\x80" * (k - 1) + b"\x00", "little") for k in range(1, 9))]


def _varint(v: int) -> bytes:
    """The zig-zag varint of a long that does not fit in one byte (the one-byte case is inlined by the caller)."""
    if type(v) is not int or not _LONG_MIN <= v <= _LONG_MAX:
        raise TypeError(f"not a long: {v!r:.40}")  # fastavro takes (or refuses) it
    z = (v << 1) ^ (v >> 63)
    if z < 0x4000:
        return bytes((z & 0x7F | 0x80, z >> 7))
    k = _VARINT_LENGTH[z.bit_length()]
    if k <= 8:
        # The 7-bit groups spread into bytes without a loop per byte (a timestamp is 6): 28-bit halves into
        # 32-bit lanes, then 14-bit quarters into 16-bit lanes, then 7-bit groups into bytes.
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


def _long(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)  # a float, str or None raises TypeError here: fastavro's turn
    return _BYTE[z] if 0 <= z < 0x80 else _varint(v)


def _int_in_union(v: int) -> bytes:
    # fastavro picks a union's "int" branch only for a value in 32-bit range
    if type(v) is not int or not _INT_MIN <= v <= _INT_MAX:
        raise TypeError(f"not an int: {v!r:.40}")
    return _long(v)


def _string(v: str) -> bytes:
    if type(v) is not str:
        raise TypeError(f"not a str: {type(v).__name__}")
    b = v.encode()
    n = len(b)
    return _BYTE[n + n] + b if n < 0x40 else _varint(n) + b


def _bytes(v: bytes) -> bytes:
    if type(v) is not bytes:
        raise TypeError(f"not bytes: {type(v).__name__}")
    n = len(v)
    return _BYTE[n + n] + v if n < 0x40 else _varint(n) + v


def _boolean(v: bool) -> bytes:
    if v is True:
        return b"\x01"
    if v is False:
        return b"\x00"
    raise TypeError(f"not a bool: {type(v).__name__}")


_pack_double = struct.Struct("<d").pack
_pack_float = struct.Struct("<f").pack


def _double(v: float) -> bytes:
    return _pack_double(v)  # int and float (fastavro float()s them); anything else raises


def _float(v: float) -> bytes:
    return _pack_float(v)


def _strict_double(v: float) -> bytes:
    # in a union fastavro chooses the branch by type: only a float is surely this one
    if type(v) is not float:
        raise TypeError(f"not a float: {type(v).__name__}")
    return _pack_double(v)


def _strict_float(v: float) -> bytes:
    if type(v) is not float:
        raise TypeError(f"not a float: {type(v).__name__}")
    return _pack_float(v)


def _timestamp_millis(v: Any) -> bytes:
    if type(v) is int:
        return _long(v)
    if type(v) is dt.datetime and v.tzinfo is not None:  # naive datetimes: fastavro's (local time) rules
        return _long((v - _EPOCH) // _MS)
    raise TypeError(f"not an aware datetime or int: {type(v).__name__}")


def _timestamp_micros(v: Any) -> bytes:
    if type(v) is int:
        return _long(v)
    if type(v) is dt.datetime and v.tzinfo is not None:
        return _long((v - _EPOCH) // _US)
    raise TypeError(f"not an aware datetime or int: {type(v).__name__}")


def _date(v: Any) -> bytes:
    if type(v) is int:
        return _int_in_union(v)
    if type(v) is dt.date:
        return _long((v - _EPOCH_DATE).days)
    raise TypeError(f"not a date or int: {type(v).__name__}")


# (Avro type, logicalType) -> (encoder as a field, encoder as a union's non-null branch)
_KINDS: dict[tuple[str, str | None], tuple[Callable[[Any], bytes], Callable[[Any], bytes]]] = {
    ("long", None): (_long, _long),
    ("int", None): (_long, _int_in_union),  # fastavro writes any 64-bit value for a plain "int" field
    ("string", None): (_string, _string),
    ("bytes", None): (_bytes, _bytes),
    ("boolean", None): (_boolean, _boolean),
    ("double", None): (_double, _strict_double),
    ("float", None): (_float, _strict_float),
    ("long", "timestamp-millis"): (_timestamp_millis, _timestamp_millis),
    ("long", "timestamp-micros"): (_timestamp_micros, _timestamp_micros),
    ("int", "date"): (_date, _date),
}


def _enum(symbols: list[str]) -> Callable[[Any], bytes]:
    index = {s: _long(i) for i, s in enumerate(symbols)}
    return index.__getitem__  # an unknown symbol raises KeyError: fastavro words it


def _field_encoder(t: Any, in_union: bool) -> Callable[[Any], bytes] | None:
    if isinstance(t, str):
        t = {"type": t}
    if not isinstance(t, dict):
        return None
    if t.get("type") == "enum" and not in_union:  # in a union fastavro tells an enum from a string by value
        return _enum(list(t["symbols"]))
    kinds = _KINDS.get((t.get("type"), t.get("logicalType")))
    return None if kinds is None else kinds[in_union]


def flat_encoder(parsed: Any) -> Callable[[Any], bytes] | None:
    """The function written for this record schema, or None when it is not a flat record."""
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return None
    names: dict[str, Any] = {"_join": b"".join}
    parts = []
    for i, field in enumerate(parsed["fields"]):
        t = field["type"]
        enc = f"_f{i}"
        if isinstance(t, list):
            if len(t) != 2 or "null" not in t:
                return None
            null = t.index("null")
            names[enc] = _field_encoder(t[1 - null], True)
            # the branch index as a varint (0 or 1: bytes 0 or 2), then the value
            absent, present = (b"\x00", b"\x02") if null == 0 else (b"\x02", b"\x00")
            parts.append(f"{absent!r} if (v := r[{field['name']!r}]) is None else {present!r} + {enc}(v)")
        else:
            names[enc] = _field_encoder(t, False)
            parts.append(f"{enc}(r[{field['name']!r}])")
        if names[enc] is None:
            return None
    source = f"def encode(r):\n    return _join(({', '.join(parts)},))\n"
    exec(compile(source, f"<avro encoder for {parsed.get('name')}>", "exec"), names)  # noqa: S102 - our own source
    encode: Callable[[Any], bytes] = names["encode"]
    return encode


def fastavro_encoder(parsed: Any) -> Callable[[Any], bytes]:
    """fastavro's schemaless writer for any schema: the reference, and the fallback."""
    writer = fastavro.schemaless_writer

    def encode(value: Any) -> bytes:
        buf = io.BytesIO()
        writer(buf, parsed, value)
        return buf.getvalue()

    return encode


def record_encoder(parsed: Any) -> Callable[[Any], bytes]:
    """value -> the Avro bytes of `parsed` (a fastavro.parse_schema result): the function written for a flat
    record, falling back to fastavro for the values it does not take; fastavro for every other schema. Raises
    what fastavro raises for a value that does not match the schema."""
    general = fastavro_encoder(parsed)
    flat = flat_encoder(parsed)
    if flat is None:
        return general

    def encode(value: Any) -> bytes:
        try:
            return flat(value)
        except Exception:  # noqa: BLE001 - a value it does not take as it is: fastavro writes it, or words why not
            return general(value)

    return encode
