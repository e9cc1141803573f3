"""Protobuf and JSON Schema through the Spark source and sink, against the real broker and kafkajet's registry,
with confluent-kafka's serializers and deserializers as referees both ways: decoded columns and their Spark
types, proto3 defaults, bad records (FAILFAST names the record, PERMISSIVE nulls it, the others intact)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from kafkajet import Producer
from kafkajet.schema_registry import Schema, SchemaRegistryClient
from kafkajet.schema_registry.wire import frame
from kafkajet.testing import EmbeddedBroker, SchemaRegistry
from tests.spark.conftest import make_topic

F = descriptor_pb2.FieldDescriptorProto
ROOT = Path(__file__).resolve().parents[2]
AT = dt.datetime(2026, 11, 26, 1, 2, 3, 456000, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r


def _ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def send_raw(broker: EmbeddedBroker, topic: str, values: list[bytes]) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        futures = [p.send(topic, v, partition=0) for v in values]
        p.flush(timeout=60)
        for f in futures:
            f.result(timeout=0)


def read(spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry, topic: str, fmt: str, **options: str) -> Any:
    reader = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic).option("valueFormat", fmt).option("schema.registry.url", registry.url))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def raw_values(spark: Any, broker: EmbeddedBroker, topic: str) -> list[bytes]:
    rows = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic).load().select("value").collect())
    return [bytes(r.value) for r in rows]


# --- Protobuf ------------------------------------------------------------------------------------------------


def _money_file() -> descriptor_pb2.FileDescriptorProto:
    fp = descriptor_pb2.FileDescriptorProto(name="kj_spark/money.proto", package="kjmoney", syntax="proto3")
    fp.message_type.add(name="Money").field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    return fp


def _order_file() -> descriptor_pb2.FileDescriptorProto:
    # Imports a file of its own (registered as a reference the source must resolve) and a well-known one.
    fp = descriptor_pb2.FileDescriptorProto(name="kj_spark/order.proto", package="kjspark", syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto", "kj_spark/money.proto"])
    status = fp.enum_type.add(name="Status")
    for i, name in enumerate(("NEW", "PAID", "SHIPPED")):
        status.value.add(name=name, number=i)
    order = fp.message_type.add(name="Order")
    address = order.nested_type.add(name="Address")
    address.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    fields = [("id", F.TYPE_INT64, ""), ("name", F.TYPE_STRING, ""), ("qty", F.TYPE_INT32, ""),
              ("big", F.TYPE_UINT64, ""), ("status", F.TYPE_ENUM, ".kjspark.Status"),
              ("address", F.TYPE_MESSAGE, ".kjspark.Order.Address"),
              ("at", F.TYPE_MESSAGE, ".google.protobuf.Timestamp"), ("blob", F.TYPE_BYTES, "")]
    for number, (name, kind, type_name) in enumerate(fields, start=1):
        field = order.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
        if type_name:
            field.type_name = type_name
    order.field.add(name="tags", number=9, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    order.field.add(name="counts", number=10, type=F.TYPE_MESSAGE, type_name=".kjspark.Order.CountsEntry",
                    label=F.LABEL_REPEATED)
    # proto3 `optional`: presence, so unset reads as null where a plain scalar reads as its default.
    order.field.add(name="discount", number=11, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL, proto3_optional=True,
                    oneof_index=0)
    order.oneof_decl.add(name="_discount")
    order.field.add(name="price", number=12, type=F.TYPE_MESSAGE, type_name=".kjmoney.Money", label=F.LABEL_OPTIONAL)
    return fp


def _order_class() -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(_money_file())
    pool.Add(_order_file())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kjspark.Order"))


Order = _order_class()


def _order(i: int) -> Any:
    msg = Order(id=i, qty=i % 5, big=2**40 + i, status=i % 3, blob=bytes([i]), tags=[f"t{i}", "x"])
    if i % 2:
        msg.name = f"n{i}"  # even ids leave it unset: proto3 reads back ""
        msg.address.city = f"c{i}"  # and the message null
        msg.discount = i / 4
    msg.counts["a"] = i
    msg.price.cents = 100 * i
    msg.at.FromDatetime(AT + dt.timedelta(seconds=i))
    return msg


def test_protobuf_written_by_confluent_reads_through_the_source(spark: Any, broker: EmbeddedBroker,
                                                                registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as ConfluentSerializer

    topic = make_topic(broker, "proto-read", partitions=1)
    serializer = ConfluentSerializer(Order, ConfluentClient({"url": registry.url}), {"use.deprecated.format": False})
    send_raw(broker, topic, [serializer(_order(i), _ctx(topic)) for i in range(6)])
    registered = SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic}-value").schema
    assert [r.name for r in registered.references] == ["kj_spark/money.proto"]

    df = read(spark, broker, registry, topic, "protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,qty:int,big:bigint,status:string,address:struct<city:string>,at:timestamp,"
        "blob:binary,tags:array<string>,counts:map<string,bigint>,discount:double,price:struct<cents:bigint>>")
    rows = df.select("value.*").orderBy("id").collect()
    assert [r.id for r in rows] == list(range(6))
    for r in rows:
        i = r.id
        assert (r.name, r.qty, r.big, r.status, bytes(r.blob), list(r.tags), dict(r.counts)) == (
            f"n{i}" if i % 2 else "", i % 5, 2**40 + i, ("NEW", "PAID", "SHIPPED")[i % 3], bytes([i]),
            [f"t{i}", "x"], {"a": i})
        assert r.address == (None if i % 2 == 0 else (f"c{i}",))
        assert r.discount == (i / 4 if i % 2 else None)
        assert r.price.cents == 100 * i
        assert r.at.timestamp() == (AT + dt.timedelta(seconds=i)).timestamp()


def test_protobuf_bad_records_fail_naming_the_record_or_are_null_when_permissive(
        spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    from kafkajet.schema_registry import ProtobufSerializer

    topic = make_topic(broker, "proto-bad", partitions=1)
    client = SchemaRegistryClient({"url": registry.url})
    good = ProtobufSerializer(Order, client)
    valid = good(_order(1), _ctx(topic))
    schema_id = int.from_bytes(valid[1:5], "big")
    # offsets: 0 good, 1 not framed, 2 unknown id, 3 truncated, 4 id's varint never ends, 5 message indexes
    # naming no message of the schema, 6 good. (A string where id is declared, i.e. another wire type, is
    # no error in any protobuf library: the field is kept as unknown and id reads as 0.)
    corrupt = frame(schema_id, b"\x08" + b"\xff" * 11, [0])
    elsewhere = frame(schema_id, valid[6:], [5])
    send_raw(broker, topic, [good(_order(0), _ctx(topic)), b"plain bytes", frame(999_999, valid[6:], [0]),
                             valid[:-1], corrupt, elsewhere, valid])

    with pytest.raises(Exception) as e:
        read(spark, broker, registry, topic, "protobuf").select("value.id").collect()
    message = str(e.value)
    assert f"{topic}-0 offset 1" in message and f"schema id {schema_id}" in message, message[-3000:]

    rows = read(spark, broker, registry, topic, "protobuf", mode="PERMISSIVE").select(
        "offset", "value.id").orderBy("offset").collect()
    assert [(r.offset, r.id) for r in rows] == [(0, 0), (1, None), (2, None), (3, None), (4, None), (5, None),
                                                (6, 1)]
    for start, what in ((2, "schema id 999999 is not in the schema registry"), (3, "not a valid kjspark.Order"),
                        (4, "not a valid kjspark.Order"), (5, "message indexes [5] do not name a message")):
        with pytest.raises(Exception) as e:
            read(spark, broker, registry, topic, "protobuf",
                 startingOffsets=json.dumps({topic: {"0": start}})).select("value.id").collect()
        assert f"{topic}-0 offset {start}" in str(e.value) and what in str(e.value), str(e.value)[-3000:]


def test_the_protobuf_sink_registers_a_message_confluent_decodes(spark: Any, broker: EmbeddedBroker,
                                                                 registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as ConfluentDeserializer

    topic = make_topic(broker, "proto-sink", partitions=2)
    df = spark.range(30, numPartitions=2).selectExpr(
        "named_struct('id', id, 'name', if(id % 3 = 0, null, concat('n', cast(id as string))), "
        "'tags', array('a', cast(id as string)), 'scores', map('s', cast(id as double) / 2), "
        "'inner', if(id % 2 = 0, null, named_struct('x', cast(id as int))), "
        "'at', timestamp_millis(1700000000000 + id)) as value")
    (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic).option("valueFormat", "protobuf").option("schema.registry.url", registry.url).save())

    registered = SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic}-value").schema
    assert registered.schema_type == "PROTOBUF"
    # The referee's message class comes from the registered descriptor through the protobuf library alone.
    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(registered.schema_str))
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(proto.message_type[0].name))
    deserializer = ConfluentDeserializer(cls, {"use.deprecated.format": False}, ConfluentClient({"url": registry.url}))
    decoded = sorted((deserializer(v, _ctx(topic)) for v in raw_values(spark, broker, topic)), key=lambda m: m.id)
    assert [m.id for m in decoded] == list(range(30))
    for m in decoded:
        assert (m.HasField("name"), m.name) == ((False, "") if m.id % 3 == 0 else (True, f"n{m.id}"))
        assert (list(m.tags), dict(m.scores), m.HasField("inner")) == (["a", str(m.id)], {"s": m.id / 2},
                                                                        m.id % 2 == 1)
        assert m.inner.x == (m.id if m.id % 2 else 0)
        assert m.at.ToMilliseconds() == 1700000000000 + m.id

    # And the source reads the sink's records back, nulls as nulls.
    back = read(spark, broker, registry, topic, "protobuf").select("value.*").orderBy("id").collect()
    assert [(r.id, r.name, r.inner) for r in back[:4]] == [(0, None, None), (1, "n1", (1,)), (2, "n2", None),
                                                           (3, None, (3,))]


# --- JSON Schema ---------------------------------------------------------------------------------------------

ORDER_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "price": {"type": "number"},
        "customer": {"type": "string"},
        "note": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "paid": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Address"}]},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        "either": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
    },
    "required": ["id", "price", "customer", "at"],
    "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]}},
}


def _json_order(i: int) -> dict[str, Any]:
    o: dict[str, Any] = {"id": i, "price": i + 0.5, "customer": f"c{i}",
                         "at": (AT + dt.timedelta(seconds=i)).isoformat(), "tags": ["a", str(i)],
                         "extra": {"k": i}, "either": i if i % 2 else str(i)}
    if i % 2:
        o.update(note=f"n{i}", day=f"2026-01-0{i % 9 + 1}", paid=True, address={"city": f"c{i}"})
    return o


def test_json_schema_written_by_confluent_reads_through_the_source(spark: Any, broker: EmbeddedBroker,
                                                                   registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer as ConfluentSerializer

    topic = make_topic(broker, "json-read", partitions=1)
    serializer = ConfluentSerializer(json.dumps(ORDER_SCHEMA), ConfluentClient({"url": registry.url}))
    send_raw(broker, topic, [serializer(_json_order(i), _ctx(topic)) for i in range(6)])

    df = read(spark, broker, registry, topic, "json-schema")
    value = df.schema["value"].dataType
    assert value.simpleString() == (
        "struct<id:bigint,price:double,customer:string,note:string,at:timestamp,day:date,paid:boolean,"
        "tags:array<string>,address:struct<city:string>,extra:string,either:string>")
    assert [f.name for f in value.fields if not f.nullable] == ["id", "price", "customer", "at"]
    assert [f.nullable for f in value["address"].dataType.fields] == [False]
    rows = df.select("value.*").orderBy("id").collect()
    assert [r.id for r in rows] == list(range(6))
    for r in rows:
        i = r.id
        assert (r.price, r.customer, list(r.tags)) == (i + 0.5, f"c{i}", ["a", str(i)])
        assert (r.note, r.day, r.paid, r.address) == (
            (f"n{i}", dt.date(2026, 1, i % 9 + 1), True, (f"c{i}",)) if i % 2 else (None, None, None, None))
        assert r.at.timestamp() == (AT + dt.timedelta(seconds=i)).timestamp()
        # No single Spark type: the part's JSON text, for from_json.
        assert (json.loads(r.extra), json.loads(r.either)) == ({"k": i}, i if i % 2 else str(i))


def test_json_schema_bad_records_fail_naming_the_record_or_are_null_when_permissive(
        spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    from kafkajet.schema_registry import JSONSerializer

    topic = make_topic(broker, "json-bad", partitions=1)
    client = SchemaRegistryClient({"url": registry.url})
    good = JSONSerializer(json.dumps(ORDER_SCHEMA), client)
    valid = good(_json_order(1), _ctx(topic))
    schema_id = int.from_bytes(valid[1:5], "big")
    # A looser schema registered under another subject: its records validate, but "at" is no date-time.
    loose_id = client.register_schema("json-bad-loose", Schema(json.dumps({"type": "object"}), "JSON"))
    # offsets: 0 good, 1 not framed, 2 unknown id, 3 truncated, 4 a string where id (an integer) is,
    # 5 valid for its writer's schema yet not the planned type, 6 good
    send_raw(broker, topic, [good(_json_order(0), _ctx(topic)), b"plain bytes", frame(999_999, valid[5:]),
                             valid[:12], frame(schema_id, json.dumps({**_json_order(2), "id": "two"}).encode()),
                             frame(loose_id, json.dumps({**_json_order(3), "at": "noon"}).encode()), valid])

    with pytest.raises(Exception) as e:
        read(spark, broker, registry, topic, "json-schema").select("value.id").collect()
    message = str(e.value)
    assert f"{topic}-0 offset 1" in message and f"schema id {schema_id}" in message, message[-3000:]

    rows = read(spark, broker, registry, topic, "json-schema", mode="PERMISSIVE").select(
        "offset", "value.id").orderBy("offset").collect()
    assert [(r.offset, r.id) for r in rows] == [(0, 0), (1, None), (2, None), (3, None), (4, None), (5, None),
                                                (6, 1)]
    for start, what in ((2, "schema id 999999 is not in the schema registry"), (3, "is not valid JSON"),
                        (4, "does not match JSON Schema"), (5, "/at: expected an RFC 3339 date-time")):
        with pytest.raises(Exception) as e:
            read(spark, broker, registry, topic, "json-schema",
                 startingOffsets=json.dumps({topic: {"0": start}})).select("value.id").collect()
        assert f"{topic}-0 offset {start}" in str(e.value) and what in str(e.value), str(e.value)[-3000:]


def test_the_json_schema_sink_registers_a_schema_confluent_decodes(spark: Any, broker: EmbeddedBroker,
                                                                   registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer as ConfluentDeserializer

    topic = make_topic(broker, "json-sink", partitions=2)
    df = spark.range(30, numPartitions=2).selectExpr(
        "cast(id as string) as key",
        "named_struct('id', id, 'name', if(id % 3 = 0, null, concat('n', cast(id as string))), "
        "'tags', array('a', cast(id as string)), 'at', timestamp_millis(1700000000000 + id), "
        "'day', date_add(date'2026-01-01', cast(id as int)), 'blob', cast(cast(id as string) as binary), "
        "'inner', named_struct('x', cast(id as double) / 2)) as value")
    (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic).option("valueFormat", "json-schema").option("schema.registry.url", registry.url)
     .save())

    registered = SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic}-value").schema
    assert registered.schema_type == "JSON"
    derived = json.loads(registered.schema_str)
    assert derived["properties"]["at"] == {"type": "string", "format": "date-time"}
    assert derived["additionalProperties"] is False
    deserializer = ConfluentDeserializer(None, schema_registry_client=ConfluentClient({"url": registry.url}))
    decoded = sorted((deserializer(v, _ctx(topic)) for v in raw_values(spark, broker, topic)), key=lambda o: o["id"])
    assert [o["id"] for o in decoded] == list(range(30))
    assert decoded[4] == {"id": 4, "name": "n4", "tags": ["a", "4"], "at": "2023-11-14T22:13:20.004000Z",
                          "day": "2026-01-05", "blob": base64.b64encode(b"4").decode(), "inner": {"x": 2.0}}
    assert decoded[3]["name"] is None

    back = read(spark, broker, registry, topic, "json-schema").select("value.*").orderBy("id").collect()
    assert [(r.id, r.name, r.day, r.inner.x) for r in back[3:5]] == [(3, None, dt.date(2026, 1, 4), 1.5),
                                                                      (4, "n4", dt.date(2026, 1, 5), 2.0)]
    assert int(back[4].at.timestamp() * 1000) == 1700000000004


def test_the_sink_encodes_keys_too_and_with_a_given_schema_refuses_a_row_that_does_not_fit(
        spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    topic = make_topic(broker, "json-given", partitions=1)
    given = {"title": "Point", "type": "object", "properties": {"x": {"type": "integer", "minimum": 0},
                                                                 "label": {"type": "string"}},
             "required": ["x"]}

    def write(df: Any) -> None:
        (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("topic", topic).option("valueFormat", "json-schema").option("keyFormat", "json-schema")
         .option("jsonSchema", json.dumps(given)).option("schema.registry.url", registry.url).save())

    write(spark.range(5).selectExpr("named_struct('k', id) as key",
                                    "named_struct('x', id, 'label', concat('p', cast(id as string))) as value"))
    client = SchemaRegistryClient({"url": registry.url})
    assert json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str) == given
    assert json.loads(client.get_latest_version(f"{topic}-key").schema.schema_str)["required"] == ["k"]
    back = read(spark, broker, registry, topic, "json-schema", keyFormat="json-schema").select(
        "key.k", "value.*").orderBy("k").collect()
    assert [(r.k, r.x, r.label) for r in back] == [(i, i, f"p{i}") for i in range(5)]

    with pytest.raises(Exception) as e:  # x = -1 breaks the given schema's minimum
        write(spark.range(3).selectExpr("named_struct('k', id) as key",
                                        "named_struct('x', id - 1, 'label', 'q') as value"))
    message = str(e.value)
    assert "row 0 of the batch" in message and "does not fit json-schema schema id" in message, message[-3000:]
    assert "x" in message and "minimum" in message, message[-3000:]


def test_json_schema_and_protobuf_versions_read_back_in_one_query_and_an_incompatible_one_is_refused(
        spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ConfluentError
    from confluent_kafka.schema_registry.json_schema import JSONSerializer as ConfluentJSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as ConfluentProtobufSerializer

    theirs = ConfluentClient({"url": registry.url})
    # JSON Schema, closed models (so adding a nullable property is BACKWARD compatible).
    topic = make_topic(broker, "json-evolution", partitions=1)
    v1 = {"title": "User", "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
          "additionalProperties": False}
    v2 = {**v1, "properties": {**v1["properties"], "email": {"oneOf": [{"type": "null"}, {"type": "string"}]}}}
    send_raw(broker, topic, [ConfluentJSONSerializer(json.dumps(v1), theirs)({"id": i}, _ctx(topic)) for i in range(3)])
    send_raw(broker, topic, [ConfluentJSONSerializer(json.dumps(v2), theirs)({"id": i, "email": f"u{i}@x"}, _ctx(topic))
                             for i in range(3, 5)])
    rows = read(spark, broker, registry, topic, "json-schema").select("value.*").orderBy("id").collect()
    assert [(r.id, r.email) for r in rows] == [(0, None), (1, None), (2, None), (3, "u3@x"), (4, "u4@x")]
    pinned = read(spark, broker, registry, topic, "json-schema", valueSchemaVersion="1")
    assert pinned.schema["value"].dataType.fieldNames() == ["id"]
    assert sorted(r.id for r in pinned.select("value.id").collect()) == list(range(5))
    v3 = {**v2, "properties": {"email": v2["properties"]["email"]}, "required": []}  # "id" dropped: closed
    with pytest.raises(ConfluentError) as e:
        ConfluentJSONSerializer(json.dumps(v3), theirs)({"email": None}, _ctx(topic))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)

    # Protobuf: v2 adds a field; the v1-planned query skips it, the v2-planned one reads v1's as proto3 gives it.
    topic = make_topic(broker, "proto-evolution", partitions=1)

    def user_class(*extra: tuple[str, int, int]) -> Any:
        fp = descriptor_pb2.FileDescriptorProto(name=f"kj_evo/user{len(extra)}.proto", package="kjevo",
                                                syntax="proto3")
        user = fp.message_type.add(name="User")
        for name, number, kind in (("id", 1, F.TYPE_INT64), *extra):
            user.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fp)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName("kjevo.User"))

    conf = {"use.deprecated.format": False}
    u1, u2 = user_class(), user_class(("email", 2, F.TYPE_STRING))
    send_raw(broker, topic, [ConfluentProtobufSerializer(u1, theirs, conf)(u1(id=i), _ctx(topic)) for i in range(2)])
    send_raw(broker, topic, [ConfluentProtobufSerializer(u2, theirs, conf)(u2(id=i, email=f"u{i}"), _ctx(topic))
                             for i in range(2, 4)])
    rows = read(spark, broker, registry, topic, "protobuf").select("value.*").orderBy("id").collect()
    assert [(r.id, r.email) for r in rows] == [(0, ""), (1, ""), (2, "u2"), (3, "u3")]
    pinned = read(spark, broker, registry, topic, "protobuf", valueSchemaVersion="1")
    assert [r.id for r in pinned.select("value.*").orderBy("id").collect()] == [0, 1, 2, 3]
    u3 = user_class(("email", 2, F.TYPE_INT64))  # field 2 from string to a varint
    with pytest.raises(ConfluentError) as e:
        ConfluentProtobufSerializer(u3, theirs, conf)(u3(id=9), _ctx(topic))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert "FIELD_SCALAR_KIND_CHANGED" in e.value.error_message


def test_a_dataframe_gaining_a_nullable_column_derives_a_backward_compatible_json_schema() -> None:
    from pyspark.sql import types as T

    from kafkajet.schema_registry.compatibility import check
    from kafkajet.schema_registry.json_compatibility import incompatibilities
    from kafkajet.spark.formats.json_schema_types import json_schema_of

    v1 = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType())])
    v2 = T.StructType([*v1.fields, T.StructField("email", T.StringType())])
    assert check("BACKWARD", json_schema_of(v2), [json_schema_of(v1)], incompatibilities) == []
    v3 = T.StructType([v1.fields[0], T.StructField("email", T.StringType())])  # "name" dropped
    assert check("BACKWARD", json_schema_of(v3), [json_schema_of(v2)], incompatibilities) != []


@pytest.mark.broker_kinds("tansu", reason=(
    "option checking is kafkajet's own logic, refused before any record is read"))
def test_format_options_are_checked_at_planning(spark: Any, broker: EmbeddedBroker,
                                                registry: SchemaRegistry) -> None:
    topic = make_topic(broker, "fmt-options", partitions=1)
    with pytest.raises(Exception, match="expected binary"):
        read(spark, broker, registry, topic, "thrift")
    SchemaRegistryClient({"url": registry.url}).register_schema(f"{topic}-value",
                                                                Schema(json.dumps(ORDER_SCHEMA), "JSON"))
    with pytest.raises(Exception, match="holds a JSON schema"):
        read(spark, broker, registry, topic, "protobuf")
    assert read(spark, broker, registry, topic, "json-schema").count() == 0
    with pytest.raises(Exception, match="protobufMessage='Nope'"):
        read(spark, broker, registry, topic, "protobuf", valueSubject="x",
             protobufSchema=base64.b64encode(_order_file().SerializeToString()).decode(), protobufMessage="Nope")


# --- Streaming: the same formats through readStream and writeStream --------------------------------------------


def _money_class() -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_money_file())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kjmoney.Money"))


def test_a_stream_reads_protobuf_keys_and_values_decoded_and_writes_json_schema_through_the_sink(
        spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry, tmp_path: Any) -> None:
    from kafkajet.schema_registry import ProtobufSerializer

    source = make_topic(broker, "proto-stream-in", partitions=2)
    out = make_topic(broker, "json-stream-out", partitions=2)
    client = SchemaRegistryClient({"url": registry.url})
    Money = _money_class()
    keys = ProtobufSerializer(Money, client)  # registers under <topic>-key: the key is a message of its own
    values = ProtobufSerializer(Order, client)
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        futures = [p.send(source, values(_order(i), _ctx(source)),
                          key=keys(Money(cents=1000 + i), SerializationContext(source, MessageField.KEY)),
                          partition=i % 2) for i in range(10)]
        p.flush(timeout=60)
        for f in futures:
            f.result(timeout=0)

    stream = (spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "4")
              .option("valueFormat", "protobuf").option("keyFormat", "protobuf")
              .option("schema.registry.url", registry.url).load())
    assert stream.schema["key"].dataType.simpleString() == "struct<cents:bigint>"
    query = (stream.selectExpr("named_struct('cents', key.cents) as key",
                               "named_struct('id', value.id, 'name', value.name, 'city', value.address.city, "
                               "'status', value.status, 'at', value.at, 'tags', value.tags) as value")
             .writeStream.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("topic", out).option("valueFormat", "json-schema").option("keyFormat", "json-schema")
             .option("schema.registry.url", registry.url).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(240), "an availableNow query must stop by itself"
    assert query.exception() is None, query.exception()
    assert query.lastProgress is not None and len(query.recentProgress) >= 3  # 10 records, at most 4 a batch

    assert client.get_latest_version(f"{out}-value").schema.schema_type == "JSON"
    back = read(spark, broker, registry, out, "json-schema", keyFormat="json-schema").select(
        "key.cents", "value.*").orderBy("id").collect()
    assert [(r.cents, r.id, r.name, r.city, r.status, list(r.tags)) for r in back] == [
        (1000 + i, i, f"n{i}" if i % 2 else "", f"c{i}" if i % 2 else None, ("NEW", "PAID", "SHIPPED")[i % 3],
         [f"t{i}", "x"]) for i in range(10)]
    assert [r.at.timestamp() for r in back] == [(AT + dt.timedelta(seconds=i)).timestamp() for i in range(10)]


# --- Spark Connect: the Python data source runs in the Connect server's workers, the client has no py4j ---------

CONNECT_SCRIPT = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import kafkajet.spark

bootstrap, url, proto_topic, json_topic, streamed, checkpoint = sys.argv[1:7]
spark = SparkSession.builder.remote("local[2]").getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
kafkajet.spark.register(spark)
for topic, fmt in ((proto_topic, "protobuf"), (json_topic, "json-schema")):
    (spark.range(6, numPartitions=2).selectExpr(
        "named_struct('k', id) as key",
        "named_struct('id', id, 'tag', if(id % 2 = 0, null, 'odd'), 'at', timestamp_millis(1700000000000 + id)) as value")
     .write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("valueFormat", fmt).option("keyFormat", fmt).option("schema.registry.url", url).save())
    df = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("valueFormat", fmt).option("keyFormat", fmt).option("schema.registry.url", url).load())
    print(fmt, df.schema["value"].dataType.simpleString(),
          sorted((r.k, r.id, r.tag, r.ms) for r in df.selectExpr("key.k", "value.id", "value.tag", "unix_millis(value.at) as ms").collect()))
# A stream too: the protobuf topic through readStream into the json-schema sink, Trigger.AvailableNow.
q = (spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", proto_topic)
     .option("startingOffsets", "earliest").option("valueFormat", "protobuf").option("schema.registry.url", url)
     .load().selectExpr("value").writeStream.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", streamed).option("valueFormat", "json-schema").option("schema.registry.url", url)
     .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
assert q.awaitTermination(240) and q.exception() is None, q.exception()
df = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", streamed)
      .option("valueFormat", "json-schema").option("schema.registry.url", url).load())
print("streamed", sorted((r.id, r.tag) for r in df.select("value.*").collect()))
spark.stop()
"""


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is Spark Connect's plan path for kafkajet's formats; the same formats on each broker are "
    "tested in a classic session"))
def test_the_source_and_sink_with_protobuf_and_json_schema_work_on_spark_connect(
        tmp_path: Path, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    import grpc  # noqa: F401 - Spark Connect's client (pyspark[connect], a test dependency): absent, this fails

    proto_topic = make_topic(broker, "proto-connect", partitions=2)
    json_topic = make_topic(broker, "json-connect", partitions=2)
    streamed = make_topic(broker, "json-connect-streamed", partitions=1)
    script = tmp_path / "connect_formats.py"
    script.write_text(CONNECT_SCRIPT)
    r = subprocess.run([sys.executable, str(script), broker.bootstrap_servers, registry.url, proto_topic, json_topic,
                        streamed, str(tmp_path / "ck")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT,
                       env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    rows = [(i, i, None if i % 2 == 0 else "odd", 1700000000000 + i) for i in range(6)]
    assert r.stdout.strip().splitlines()[-3:] == [
        f"protobuf struct<id:bigint,tag:string,at:timestamp> {rows}",
        f"json-schema struct<id:bigint,tag:string,at:timestamp> {rows}",
        f"streamed {[(i, tag) for _, i, tag, _ in rows]}"]
    client = SchemaRegistryClient({"url": registry.url})
    assert [client.get_latest_version(f"{t}-{f}").schema.schema_type for t in (proto_topic, json_topic)
            for f in ("key", "value")] == ["PROTOBUF", "PROTOBUF", "JSON", "JSON"]
