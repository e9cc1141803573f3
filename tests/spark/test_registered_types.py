"""The Protobuf and JSON Schema type mappings alone (no session, no broker): what has no single Spark type,
what a record that does not fit gets, and the edges of the mapping."""

from __future__ import annotations

import base64
import datetime as dt
import re

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2

from kafkajet.errors import ConfigError
from kafkajet.spark.formats.json_schema_types import Mismatch, arrow_type, converter
from kafkajet.spark.formats.protobuf_types import arrow_type as proto_arrow_type
from kafkajet.spark.formats.protobuf_types import build_class, planned_message
from kafkajet.spark.formats.protobuf_types import converter as proto_converter

F = descriptor_pb2.FieldDescriptorProto


def test_json_parts_without_one_spark_type_become_their_json_text() -> None:
    doc = {"type": "object", "properties": {
        "tree": {"$ref": "#/definitions/Node"},
        "mixed": {"type": ["integer", "string"]},
        "anything": {},
        "n": {"type": "integer"}},
        "definitions": {"Node": {"type": "object", "properties": {"kids": {"type": "array",
                                                                          "items": {"$ref": "#/definitions/Node"}}}}}}
    t = arrow_type(doc)
    assert str(t) == "struct<tree: struct<kids: list<element: string>>, mixed: string, anything: string, n: int64>"
    value = converter(doc)({"tree": {"kids": [{"kids": []}]}, "mixed": 3, "anything": [1, {"a": None}], "n": 4.0})
    assert value == {"tree": {"kids": ['{"kids":[]}']}, "mixed": "3", "anything": '[1,{"a":null}]', "n": 4}
    pa.array([value], type=t)  # and Arrow takes it


@pytest.mark.parametrize(("value", "why"), [
    ({"n": True}, "/n: expected an integer, got a boolean"),
    ({"n": 1.5}, "/n: expected an integer, got a number"),
    ({"n": 1, "at": "yesterday"}, "/at: expected an RFC 3339 date-time"),
    ({"n": 1, "xs": [1, "2"]}, "/xs[1]: expected a number, got a string"),
    ({}, "/n: the required property is missing"),
    ([], "(the root): expected an object, got an array"),
])
def test_a_json_value_that_does_not_fit_names_its_path(value: object, why: str) -> None:
    doc = {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer"}, "at": {"type": "string", "format": "date-time"},
        "xs": {"type": "array", "items": {"type": "number"}}}}
    with pytest.raises(Mismatch, match=re.escape(why)):
        converter(doc)(value)


def test_json_date_times_without_an_offset_are_utc() -> None:
    doc = {"type": "string", "format": "date-time"}
    assert converter(doc)("2026-01-02T03:04:05") == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert converter(doc)("2026-01-02T05:04:05+02:00").astimezone(dt.UTC).hour == 3


def _file(*edits: object) -> str:
    fp = descriptor_pb2.FileDescriptorProto(name="kj_types/t.proto", package="kjt", syntax="proto3")
    node = fp.message_type.add(name="Node")
    node.field.add(name="id", number=1, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
    node.field.add(name="kind", number=2, type=F.TYPE_ENUM, type_name=".kjt.Kind", label=F.LABEL_OPTIONAL)
    kind = fp.enum_type.add(name="Kind")
    kind.value.add(name="A", number=0)
    kind.value.add(name="B", number=1)
    if "recursive" in edits:
        node.field.add(name="child", number=3, type=F.TYPE_MESSAGE, type_name=".kjt.Node", label=F.LABEL_OPTIONAL)
    return base64.standard_b64encode(fp.SerializeToString()).decode()


def test_a_recursive_protobuf_message_is_refused_naming_the_path() -> None:
    cls = build_class(_file("recursive"), (), "kjt.Node")
    with pytest.raises(ConfigError, match=r"kjt.Node contains itself \(kjt.Node -> kjt.Node\)"):
        proto_arrow_type(cls.DESCRIPTOR)


def test_protobuf_enums_by_name_unknown_numbers_as_digits_and_uint64_as_long() -> None:
    cls = build_class(_file(), (), "kjt.Node")
    assert str(proto_arrow_type(cls.DESCRIPTOR)) == "struct<id: int64, kind: string>"
    convert = proto_converter(cls.DESCRIPTOR)
    assert convert(cls(id=7, kind=1)) == {"id": 7, "kind": "B"}
    assert convert(cls.FromString(b"\x10\x05")) == {"id": 0, "kind": "5"}  # a newer writer's enum value
    with pytest.raises(OverflowError):
        pa.array([convert(cls(id=2**64 - 1))], type=proto_arrow_type(cls.DESCRIPTOR))


def test_the_planned_protobuf_message_is_the_first_unless_named() -> None:
    assert planned_message(_file(), None, "protobufMessage") == "kjt.Node"
    assert planned_message(_file(), "Node", "protobufMessage") == "kjt.Node"
    with pytest.raises(ConfigError, match="is not a base64 FileDescriptorProto"):
        planned_message('syntax = "proto3"; message A {}', None, "protobufMessage")


def test_field_shape_without_is_repeated_and_has_presence_as_older_protobufs_give_it() -> None:
    from types import SimpleNamespace

    from kafkajet.spark.formats.protobuf_types import _presence, _repeated

    def old(label: int, message: bool = False, oneof: bool = False, syntax: str = "proto3") -> object:
        return SimpleNamespace(label=label, message_type=object() if message else None,
                               containing_oneof=object() if oneof else None, file=SimpleNamespace(syntax=syntax))

    assert _repeated(old(F.LABEL_REPEATED)) and not _repeated(old(F.LABEL_OPTIONAL))  # type: ignore[arg-type]
    assert [_presence(old(F.LABEL_OPTIONAL, **kw)) for kw in (  # type: ignore[arg-type]
        {}, {"message": True}, {"oneof": True}, {"syntax": "proto2"})] == [False, True, True, True]
    assert not _presence(old(F.LABEL_REPEATED, message=True))  # type: ignore[arg-type]
