"""Encode and decode message bodies by walking a per-version plan (see schema.py).

Bodies are plain dicts keyed by snake_case field names; structs are dicts, arrays are lists. Encoding appends
byte strings to a list of parts that the caller joins once, so a record batch is copied a single time.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

import kafkajet.protocol.types as t
from kafkajet.errors import ProtocolError
from kafkajet.protocol.schema import FieldPlan, FixedRun, StructPlan, fresh

Parts = list[Any]  # bytes-like pieces, joined by the caller
_MISSING = object()


# --- encode ----------------------------------------------------------------------------------------------


def encode_struct(plan: StructPlan, body: Any, out: Parts) -> None:
    if not isinstance(body, Mapping):
        raise ProtocolError(f"'{plan.path}' must be a dict, got {type(body).__name__}")
    if not plan.known.issuperset(body):
        # A misspelt key would otherwise be replaced by the field's default without a word.
        unknown = ", ".join(sorted(map(str, set(body) - plan.known)))
        raise ProtocolError(f"unknown field(s) {unknown} in '{plan.path}'; it has {', '.join(sorted(plan.known))}")
    for f in plan.fields:
        value = body.get(f.name, _MISSING)
        encode_value(f, f.default if value is _MISSING else value, out)
    if plan.flexible:
        encode_tagged(plan, body, out)


def encode_tagged(plan: StructPlan, body: Mapping[str, Any], out: Parts) -> None:
    if not plan.tagged:
        out.append(b"\x00")  # no tagged fields at this version: an empty section (most structs)
        return
    entries: list[bytes] = []
    for f in plan.tagged:  # already in ascending tag order
        value = body.get(f.name, _MISSING)
        if value is _MISSING or value == f.default or (
                f.type == "struct" and isinstance(value, Mapping) and {**f.default, **value} == f.default):
            # A tagged field at its default is left out (that is what makes it optional); a struct given in
            # part is at its default when the fields it names are, as the decoder fills in the others.
            continue
        parts: Parts = []
        encode_value(f, value, parts)
        data = b"".join(parts)
        assert f.tag is not None
        entries.append(t.uvarint(f.tag) + t.uvarint(len(data)) + data)
    out.append(t.uvarint(len(entries)))
    out.extend(entries)


def encode_value(f: FieldPlan, value: Any, out: Parts) -> None:
    if value is None and f.type != "uuid":
        if not f.nullable:  # structs never are: tools/gen_protocol.py refuses nullable struct fields
            raise ProtocolError(f"'{f.path}' is not nullable in this version, got None")
        out.append(t.array_length(None, f.compact) if f.type == "array" else _null(f))
        return
    _ENCODERS[f.type](f, value, out)


def _null(f: FieldPlan) -> bytes:
    if f.type == "string":
        return t.string(None, f.compact)
    return t.bytes_parts(None, f.compact)[0]


def _enc_fixed(f: FieldPlan, value: Any, out: Parts) -> None:
    st = t.FIXED[f.type]
    try:
        out.append(st.pack(value))
    except struct.error as e:
        raise ProtocolError(f"cannot encode {value!r} as {f.label}: {e}") from None


def _enc_bool(f: FieldPlan, value: Any, out: Parts) -> None:
    if not isinstance(value, int):
        raise ProtocolError(f"{f.label} must be a bool, got {type(value).__name__}")
    out.append(t.boolean(bool(value)))


def _enc_string(f: FieldPlan, value: Any, out: Parts) -> None:
    if not isinstance(value, str):
        raise ProtocolError(f"{f.label} must be a str, got {type(value).__name__}")
    try:
        out.append(t.string(value, f.compact))
    except ProtocolError as e:
        raise ProtocolError(f"{f.label}: {e}") from None


def _enc_bytes(f: FieldPlan, value: Any, out: Parts) -> None:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ProtocolError(f"{f.label} must be bytes, got {type(value).__name__}")
    prefix, payload = t.bytes_parts(value, f.compact)
    out.append(prefix)
    out.append(payload)  # not copied here: the final join is the only copy of a record batch


def _enc_uuid(f: FieldPlan, value: Any, out: Parts) -> None:
    # None is accepted as the all-zero uuid, Kafka's "no id" (Uuid.ZERO_UUID).
    if value is None:
        out.append(bytes(t.UUID_SIZE))
        return
    if not isinstance(value, bytes | bytearray | memoryview):
        raise ProtocolError(f"{f.label} must be 16 bytes, got {type(value).__name__}")
    try:
        out.append(t.uuid(value))
    except ProtocolError as e:
        raise ProtocolError(f"{f.label}: {e}") from None


def _enc_struct(f: FieldPlan, value: Any, out: Parts) -> None:
    assert f.struct is not None
    encode_struct(f.struct, value, out)


def _enc_array(f: FieldPlan, value: Any, out: Parts) -> None:
    if not isinstance(value, list | tuple):
        raise ProtocolError(f"'{f.path}' must be a list, got {type(value).__name__}")
    elem = f.element
    assert elem is not None
    out.append(t.array_length(len(value), f.compact))
    encode = _ENCODERS[elem.type]
    for item in value:
        if item is None:
            raise ProtocolError(f"'{f.path}' elements cannot be None")
        encode(elem, item, out)


_ENCODERS: dict[str, Callable[[FieldPlan, Any, Parts], None]] = {
    **{name: _enc_fixed for name in t.FIXED},
    "bool": _enc_bool, "string": _enc_string, "bytes": _enc_bytes, "records": _enc_bytes, "uuid": _enc_uuid,
    "struct": _enc_struct, "array": _enc_array,
}


# --- decode ----------------------------------------------------------------------------------------------


def decode_struct(plan: StructPlan, r: t.Reader) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for step in plan.decode_steps:
        if type(step) is FixedRun:
            pos = r.pos
            if step.size <= r.end - pos:
                r.pos = pos + step.size
                out.update(zip(step.names, step.struct.unpack_from(r.data, pos), strict=True))
                continue
            for f in step.fields:  # truncated: field by field, so the error names the one that is cut
                out[f.name] = _dec_fixed(f, r)
        else:
            assert type(step) is FieldPlan
            out[step.name] = _DECODERS[step.type](step, r)
    if plan.flexible:
        for f in plan.tagged:
            out[f.name] = fresh(f.default)
        decode_tagged(plan, r, out)
    return out


def decode_tagged(plan: StructPlan | None, r: t.Reader, out: dict[str, Any]) -> None:
    """Read a tagged-field section into ``out``; tags the plan does not know are skipped (a newer peer's)."""
    where = plan.path if plan is not None else "header"
    count = r.uvarint(f"tagged field count of '{where}'")
    if count * 2 > r.remaining:  # every entry takes at least a tag byte and a size byte
        raise r.error(f"{count} tagged fields claimed in '{where}' with only {r.remaining} bytes left")
    for _ in range(count):
        tag = r.uvarint(f"tag in '{where}'")
        size = r.uvarint(f"size of tag {tag} in '{where}'")
        r.need(size, f"tag {tag} in '{where}'")
        f = plan.by_tag.get(tag) if plan is not None else None
        if f is None:
            r.pos += size
            continue
        end = r.pos + size
        sub = t.Reader(r.data, r.context, pos=r.pos, end=end)
        out[f.name] = _DECODERS[f.type](f, sub)
        if sub.pos != end:
            raise r.error(f"tagged field {f.label} (tag {tag}) declared {size} bytes but used {sub.pos - r.pos}")
        r.pos = end


def _dec_fixed(f: FieldPlan, r: t.Reader) -> Any:
    return r.fixed(t.FIXED[f.type], f.label)


def _dec_bool(f: FieldPlan, r: t.Reader) -> Any:
    return r.boolean(f.label)


def _dec_string(f: FieldPlan, r: t.Reader) -> Any:
    return r.string(f.compact, f.nullable, f.label)


def _dec_bytes(f: FieldPlan, r: t.Reader) -> Any:
    return r.bytes_(f.compact, f.nullable, f.label)


def _dec_uuid(f: FieldPlan, r: t.Reader) -> Any:
    return r.uuid(f.label)


def _dec_struct(f: FieldPlan, r: t.Reader) -> Any:
    assert f.struct is not None
    return decode_struct(f.struct, r)


def _dec_array(f: FieldPlan, r: t.Reader) -> Any:
    elem = f.element
    assert elem is not None
    n = r.array_length(f.compact, f.nullable, f.element_min_size, f.label)
    if n is None:
        return None
    decode = _DECODERS[elem.type]
    return [decode(elem, r) for _ in range(n)]


_DECODERS: dict[str, Callable[[FieldPlan, t.Reader], Any]] = {
    **{name: _dec_fixed for name in t.FIXED},
    "bool": _dec_bool, "string": _dec_string, "bytes": _dec_bytes, "records": _dec_bytes, "uuid": _dec_uuid,
    "struct": _dec_struct, "array": _dec_array,
}
