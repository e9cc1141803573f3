"""Per-record Avro encoders, built once per writer schema: the serializer's hot path.

For a flat record (fields of primitive types, enums, a union of one of those with null, and the timestamp-millis,
timestamp-micros and date logical types), a function written for that schema encodes a dict's fields in order,
with no per-field dispatch on the schema, each field by its type's encoder in avro_binary.py (compiled with
the send path). It takes only values whose bytes it is sure of (exact types: int, str, float, bool, bytes;
aware datetimes); anything else raises inside it, and the record is written by fastavro instead, which gives the
same bytes for what both take, applies field defaults, and words the errors. Every other schema is written by
fastavro. tests/unit/test_avro_encode.py holds both to the same bytes, on both builds. No I/O here.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import fastavro

import kafkajet.avro_binary as p

# (Avro type, logicalType) -> (encoder as a field, encoder as a union's non-null branch)
_KINDS: dict[tuple[Any, Any], tuple[Callable[[Any], bytes], Callable[[Any], bytes]]] = {
    ("long", None): (p.long_, p.long_),
    ("int", None): (p.long_, p.int_in_union),  # fastavro writes any 64-bit value for a plain "int" field
    ("string", None): (p.string, p.string),
    ("bytes", None): (p.bytes_, p.bytes_),
    ("boolean", None): (p.boolean, p.boolean),
    ("double", None): (p.double, p.double_in_union),
    ("float", None): (p.float_, p.float_in_union),
    ("long", "timestamp-millis"): (p.timestamp_millis, p.timestamp_millis),
    ("long", "timestamp-micros"): (p.timestamp_micros, p.timestamp_micros),
    ("int", "date"): (p.date, p.date),
}


def _enum(symbols: list[str]) -> Callable[[Any], bytes]:
    index = {s: p.varint(i) for i, s in enumerate(symbols)}
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
