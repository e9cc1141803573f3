"""Protobuf compatibility, as Confluent's registry judges it: the schemas' messages compared by full name and
their fields by number, and only the changes that break reading the other's bytes refused. No I/O.

Refused (Confluent's incompatible difference types): a message removed (MESSAGE_REMOVED), a field changed
between scalar, message and enum (FIELD_KIND_CHANGED), a scalar changed across wire encodings
(FIELD_SCALAR_KIND_CHANGED: varint int32/int64/uint32/uint64/bool, zigzag sint32, zigzag sint64, 32-bit
fixed32/sfixed32, 64-bit fixed64/sfixed64, float, double, length-delimited string/bytes), a message or enum
field pointing at another type (FIELD_NAMED_TYPE_CHANGED), a proto2 `required` field added or removed, a
field taken out of a oneof, and several existing fields moved into one new oneof. Fields added or removed,
renamed, and enum values changed are compatible: the wire format carries numbers only.

Schemas are the registry's base64 FileDescriptorProto; one that is not (a `.proto` text) is not compared.
"""

from __future__ import annotations

import base64
from typing import Any

_WIRE = {  # FieldDescriptorProto.Type -> its scalar kind
    5: "varint", 3: "varint", 13: "varint", 4: "varint", 8: "varint",  # int32 int64 uint32 uint64 bool
    17: "zigzag32", 18: "zigzag64", 7: "fixed32", 15: "fixed32", 6: "fixed64", 16: "fixed64",
    2: "float", 1: "double", 9: "length", 12: "length",
}
_MESSAGE, _ENUM, _GROUP = 11, 14, 10
_REQUIRED = 2


def parse(schema_str: str) -> Any:
    """The FileDescriptorProto of a registered schema, or None when it is not one (or protobuf is absent)."""
    try:
        from google.protobuf import descriptor_pb2
        from google.protobuf.message import DecodeError
    except ModuleNotFoundError:  # pragma: no cover - the registry runs without the protobuf extra
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(base64.b64decode(schema_str.encode("ascii"), validate=True))
    except (ValueError, DecodeError):
        return None
    return proto


def _messages(proto: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, messages: Any) -> None:
        for m in messages:
            out[f"{prefix}{m.name}"] = m
            walk(f"{prefix}{m.name}.", m.nested_type)

    walk(f"{proto.package}." if proto.package else "", proto.message_type)
    return out


def _kind(field: Any) -> str:
    if field.type in (_MESSAGE, _GROUP):
        return "message"
    if field.type == _ENUM:
        return "enum"
    return "scalar"


def _oneof(message: Any, field: Any) -> str | None:
    """The real oneof a field belongs to (proto3 `optional`'s synthetic one does not count)."""
    if not field.HasField("oneof_index") or field.proto3_optional:
        return None
    return str(message.oneof_decl[field.oneof_index].name)


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why data written with `writer` (the original) may not be read with `reader` (the update)."""
    if reader is None or writer is None:
        return []
    out: list[str] = []
    new = _messages(reader)
    for name, old_msg in _messages(writer).items():
        new_msg = new.get(name)
        if new_msg is None:
            out.append(f"#/{name}: MESSAGE_REMOVED")
            continue
        out += _fields(name, old_msg, new_msg)
    return out


def _fields(name: str, old_msg: Any, new_msg: Any) -> list[str]:
    out: list[str] = []
    old_fields = {f.number: f for f in old_msg.field}
    new_fields = {f.number: f for f in new_msg.field}
    for number, old in old_fields.items():
        new = new_fields.get(number)
        where = f"#/{name}/{number}"
        if new is None:
            if old.label == _REQUIRED:
                out.append(f"{where}: REQUIRED_FIELD_REMOVED")
            continue
        if _kind(old) != _kind(new):
            out.append(f"{where}: FIELD_KIND_CHANGED ({_kind(old)} -> {_kind(new)})")
        elif _kind(old) == "scalar" and _WIRE.get(old.type) != _WIRE.get(new.type):
            out.append(f"{where}: FIELD_SCALAR_KIND_CHANGED ({_WIRE.get(old.type)} -> {_WIRE.get(new.type)})")
        elif _kind(old) != "scalar" and old.type_name.lstrip(".") != new.type_name.lstrip("."):
            out.append(f"{where}: FIELD_NAMED_TYPE_CHANGED ({old.type_name} -> {new.type_name})")
        if _oneof(old_msg, old) is not None and _oneof(new_msg, new) is None:
            out.append(f"{where}: ONEOF_FIELD_REMOVED")
    for number, new in new_fields.items():
        if number not in old_fields and new.label == _REQUIRED:
            out.append(f"#/{name}/{number}: REQUIRED_FIELD_ADDED")
    old_oneofs = {_oneof(old_msg, f) for f in old_msg.field} - {None}
    moved: dict[str, int] = {}
    for number, new in new_fields.items():
        oneof = _oneof(new_msg, new)
        if oneof is not None and number in old_fields and _oneof(old_msg, old_fields[number]) is None:
            moved[oneof] = moved.get(oneof, 0) + 1
    for oneof, count in moved.items():
        if oneof in old_oneofs:
            out.append(f"#/{name}/{oneof}: FIELD_MOVED_TO_EXISTING_ONEOF")
        elif count > 1:
            out.append(f"#/{name}/{oneof}: MULTIPLE_FIELDS_MOVED_TO_ONEOF")
    return out
