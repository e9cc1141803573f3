"""Protobuf compatibility as Confluent's registry judges it (fields by number, wire kinds), and the registry
refusing an incompatible Protobuf schema under BACKWARD with its error code (confluent-kafka's client asking)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as CSchema
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.error import SchemaRegistryError as ConfluentError
from google.protobuf import descriptor_pb2

from kafkajet.schema_registry.protobuf_compatibility import incompatibilities, parse

F = descriptor_pb2.FieldDescriptorProto


def schema(edit: Callable[[Any], None] = lambda m: None, package: str = "kjc") -> str:
    """A file with message Order {int64 id = 1; string name = 2; Line line = 3; oneof pay {string card = 4;}}."""
    fp = descriptor_pb2.FileDescriptorProto(name="kjc/order.proto", package=package, syntax="proto3")
    order = fp.message_type.add(name="Order")
    order.nested_type.add(name="Line").field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="name", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="line", number=3, type=F.TYPE_MESSAGE, type_name=f".{package}.Order.Line",
                    label=F.LABEL_OPTIONAL)
    order.oneof_decl.add(name="pay")
    order.field.add(name="card", number=4, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    edit(order)
    return base64.standard_b64encode(fp.SerializeToString()).decode()


def field(order: Any, number: int) -> Any:
    return next(f for f in order.field if f.number == number)


def add_field(order: Any) -> None:
    order.field.add(name="email", number=5, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)


def remove_name(order: Any) -> None:
    del order.field[1]


def rename_id(order: Any) -> None:
    field(order, 1).name = "order_id"


def id_to_int32(order: Any) -> None:
    field(order, 1).type = F.TYPE_INT32


def id_to_sint64(order: Any) -> None:
    field(order, 1).type = F.TYPE_SINT64


def name_to_bytes(order: Any) -> None:
    field(order, 2).type = F.TYPE_BYTES


def id_to_string(order: Any) -> None:
    field(order, 1).type = F.TYPE_STRING


def line_to_string(order: Any) -> None:
    f = field(order, 3)
    f.type, f.type_name = F.TYPE_STRING, ""
    f.ClearField("type_name")


def line_to_order(order: Any) -> None:
    field(order, 3).type_name = ".kjc.Order"


def drop_line_message(order: Any) -> None:
    del order.nested_type[0]
    line_to_string(order)


def card_out_of_oneof(order: Any) -> None:
    field(order, 4).ClearField("oneof_index")
    del order.oneof_decl[0]


def id_and_name_into_new_oneof(order: Any) -> None:
    order.oneof_decl.add(name="either")
    field(order, 1).oneof_index = 1
    field(order, 2).oneof_index = 1


@pytest.mark.parametrize(("edit", "why"), [
    (add_field, None), (remove_name, None), (rename_id, None), (id_to_int32, None), (name_to_bytes, None),
    (id_to_sint64, "FIELD_SCALAR_KIND_CHANGED"), (id_to_string, "FIELD_SCALAR_KIND_CHANGED"),
    (line_to_string, "FIELD_KIND_CHANGED"), (line_to_order, "FIELD_NAMED_TYPE_CHANGED"),
    (drop_line_message, "MESSAGE_REMOVED"), (card_out_of_oneof, "ONEOF_FIELD_REMOVED"),
    (id_and_name_into_new_oneof, "MULTIPLE_FIELDS_MOVED_TO_ONEOF"),
])
def test_backward_rules(edit: Callable[[Any], None], why: str | None) -> None:
    problems = incompatibilities(parse(schema(edit)), parse(schema()))
    if why is None:
        assert problems == []
    else:
        assert problems and why in " ".join(problems), problems


def test_a_changed_package_removes_the_messages_and_proto_text_is_not_compared() -> None:
    assert "MESSAGE_REMOVED" in " ".join(incompatibilities(parse(schema(package="other")), parse(schema())))
    assert parse('syntax = "proto3"; message A { int32 x = 1; }') is None
    assert incompatibilities(None, parse(schema())) == []


def test_the_registry_refuses_an_incompatible_protobuf_schema_under_backward(theirs: ConfluentClient,
                                                                             topic_name: str) -> None:
    subject = f"{topic_name}-value"
    theirs.register_schema(subject, CSchema(schema(), "PROTOBUF"))
    theirs.register_schema(subject, CSchema(schema(add_field), "PROTOBUF"))
    bad = CSchema(schema(id_to_string), "PROTOBUF")
    assert theirs.test_compatibility(subject, bad) is False
    with pytest.raises(ConfluentError) as e:
        theirs.register_schema(subject, bad)
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert "FIELD_SCALAR_KIND_CHANGED" in e.value.error_message and "kjc.Order/1" in e.value.error_message
    assert theirs.get_versions(subject) == [1, 2]
