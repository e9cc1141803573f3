"""Protobuf serdes against confluent-kafka's: the same frames (message indexes included), each decoding the
other's, a record of another message type refused. The message classes are built from descriptors here
(protoc is not installed), which is how generated code builds them too."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as ConfluentProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as ConfluentProtobufSerializer
from confluent_kafka.serialization import MessageField as CField
from confluent_kafka.serialization import SerializationContext as CContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kafkajet.errors import SerializationError
from kafkajet.schema_registry import (
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    Schema,
    SchemaRegistryClient,
    SerializationContext,
)
from kafkajet.schema_registry.protobuf import message_indexes

F = descriptor_pb2.FieldDescriptorProto


def _classes() -> dict[str, Any]:
    fp = descriptor_pb2.FileDescriptorProto(name="kj_test/orders.proto", package="kjtest", syntax="proto3")
    first = fp.message_type.add(name="Other")
    first.field.add(name="x", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    order = fp.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.field.add(name="item", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fp)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"kjtest.{n}"))
            for n in ("Other", "Order", "Order.Line")}


M = _classes()


def test_message_indexes() -> None:
    assert message_indexes(M["Other"].DESCRIPTOR) == [0]
    assert message_indexes(M["Order"].DESCRIPTOR) == [1]
    assert message_indexes(M["Order.Line"].DESCRIPTOR) == [1, 0]


@pytest.mark.parametrize(("name", "fields"), [("Other", {"x": 5}), ("Order", {"id": 7, "item": "pen"}),
                                              ("Order.Line", {"sku": "A-1"})])
def test_same_frames_as_confluent_and_each_decodes_the_other(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                                             topic_name: str, name: str, fields: dict[str, Any]) -> None:
    cls = M[name]
    conf = {"subject.name.strategy": "topic_record"}  # three types on one topic: a subject each
    msg = cls(**fields)
    mine = ProtobufSerializer(cls, ours, conf)(msg, SerializationContext(topic_name, MessageField.VALUE))
    from confluent_kafka.schema_registry import topic_record_subject_name_strategy

    confluents = ConfluentProtobufSerializer(cls, theirs, {"subject.name.strategy": topic_record_subject_name_strategy})(
        msg, CContext(topic_name, CField.VALUE))
    assert mine == confluents
    got = ConfluentProtobufDeserializer(cls, {"use.deprecated.format": False}, theirs)(
        mine, CContext(topic_name, CField.VALUE))
    assert got == msg
    assert ProtobufDeserializer(cls, None, ours)(confluents, SerializationContext(topic_name, MessageField.VALUE)) == msg


def test_another_message_type_and_corrupt_payloads_are_refused(ours: SchemaRegistryClient, topic_name: str) -> None:
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    framed = ProtobufSerializer(M["Order"], ours)(M["Order"](id=1, item="a"), ctx)
    with pytest.raises(SerializationError, match="holds a kjtest.Order .* not the kjtest.Other"):
        ProtobufDeserializer(M["Other"], None, ours)(framed, ctx)
    with pytest.raises(SerializationError, match="not a valid kjtest.Order"):
        ProtobufDeserializer(M["Order"], None, ours)(framed[:-1], ctx)
    with pytest.raises(SerializationError, match="do not name a message"):
        ProtobufDeserializer(M["Order"], None, ours)(framed[:5] + b"\x02\x0a" + framed[7:], ctx)
    with pytest.raises(SerializationError, match="not the kjtest.Order this serializer was made for"):
        ProtobufSerializer(M["Order"], ours)(M["Other"](x=1), ctx)


def test_an_imported_file_is_registered_as_a_reference(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                                       topic_name: str) -> None:
    from google.protobuf import timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    money = descriptor_pb2.FileDescriptorProto(name=f"kj_test/{topic_name}/money.proto", package="kjmoney",
                                               syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    pool.Add(money)
    pay = descriptor_pb2.FileDescriptorProto(name=f"kj_test/{topic_name}/pay.proto", package="kjpay",
                                             syntax="proto3", dependency=[money.name, "google/protobuf/timestamp.proto"])
    p = pay.message_type.add(name="Payment")
    p.field.add(name="amount", number=1, type=F.TYPE_MESSAGE, type_name=".kjmoney.Money", label=F.LABEL_OPTIONAL)
    p.field.add(name="at", number=2, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                label=F.LABEL_OPTIONAL)
    pool.Add(pay)
    payment = message_factory.GetMessageClass(pool.FindMessageTypeByName("kjpay.Payment"))
    msg = payment()
    msg.amount.cents = 250
    msg.at.seconds = 1_700_000_000
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    framed = ProtobufSerializer(payment, ours)(msg, ctx)
    latest = theirs.get_latest_version(f"{topic_name}-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [(money.name, money.name, 1)]
    assert ConfluentProtobufDeserializer(payment, {"use.deprecated.format": False}, theirs)(
        framed, CContext(topic_name, CField.VALUE)) == msg
    assert ProtobufDeserializer(payment, None, ours)(framed, ctx) == msg


def test_use_latest_version_frames_the_subjects_latest_id(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                                          topic_name: str) -> None:
    order = M["Order"](id=3, item="cup")
    ctx, cctx = SerializationContext(topic_name, MessageField.VALUE), CContext(topic_name, CField.VALUE)
    registered = ProtobufSerializer(M["Order"], ours)(order, ctx)
    # A later version of the subject (another description of the same messages): "latest" means it.
    v2 = descriptor_pb2.FileDescriptorProto()
    M["Order"].DESCRIPTOR.file.CopyToProto(v2)
    v2.message_type[1].field.add(name="note", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    latest_id = ours.register_schema(f"{topic_name}-value",
                                     Schema(base64.b64encode(v2.SerializeToString()).decode(), "PROTOBUF"))
    assert registered is not None and latest_id != int.from_bytes(registered[1:5], "big")
    conf = {"use.latest.version": True, "auto.register.schemas": False}
    mine = ProtobufSerializer(M["Order"], ours, conf)(order, ctx)
    assert mine is not None and int.from_bytes(mine[1:5], "big") == latest_id
    assert mine == ConfluentProtobufSerializer(M["Order"], theirs, conf)(order, cctx)
    # The deserializer takes the setting as confluent-kafka's does: the message class decides the decoding.
    assert ProtobufDeserializer(M["Order"], {"use.latest.version": True}, ours)(mine, ctx) == order
    assert ConfluentProtobufDeserializer(M["Order"], {"use.latest.version": True}, theirs)(mine, cctx) == order
