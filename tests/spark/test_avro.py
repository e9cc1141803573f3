"""Registered Avro through the Spark source and sink, against the real broker and kafkajet's registry:
decoded columns with logical types, schema evolution in one query, bad records, the sink's registration,
confluent-kafka's deserializer and the Avro Java library as referees."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.schema_registry import AvroSerializer, Schema, SchemaRegistryClient
from kafkajet.schema_registry.wire import frame
from kafkajet.testing import EmbeddedBroker, SchemaRegistry
from tests.spark.conftest import make_topic

V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "customer", "type": "string"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "discount", "type": ["null", "double"], "default": None},
]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "channel", "type": "string", "default": "web"}]}
AT = dt.datetime(2026, 11, 26, 1, 2, 3, 456000, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r


def order(i: int, v2: bool = False) -> dict[str, Any]:
    o: dict[str, Any] = {"id": i, "qty": i % 7, "customer": f"c{i % 3}", "at": AT + dt.timedelta(seconds=i),
                         "day": dt.date(2026, 1, 1) + dt.timedelta(days=i), "price": Decimal(i) / 4,
                         "ref": str(uuid.UUID(int=i)), "discount": None if i % 2 else i / 8}
    if v2:
        o["channel"] = "app"
    return o


def produce(broker: EmbeddedBroker, topic: str, serializer: Any, values: list[Any], partition: int = 0) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers, value_serializer=serializer) as p:
        futures = [p.send(topic, v, partition=partition) for v in values]
        p.flush(timeout=60)
        for f in futures:
            f.result(timeout=0)


def read(spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry, topic: str, **options: str) -> Any:
    reader = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic).option("valueFormat", "avro").option("schema.registry.url", registry.url))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_v1_then_v2_records_read_back_in_one_query_with_logical_types(spark: Any, broker: EmbeddedBroker,
                                                                      registry: SchemaRegistry) -> None:
    topic = make_topic(broker, "avro-evolution", partitions=1)
    client = SchemaRegistryClient({"url": registry.url})
    produce(broker, topic, AvroSerializer(client, json.dumps(V1)), [order(i) for i in range(5)])
    produce(broker, topic, AvroSerializer(client, json.dumps(V2)), [order(i, v2=True) for i in range(5, 8)])

    df = read(spark, broker, registry, topic)  # planned with the subject's latest: v2
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,qty:int,customer:string,at:timestamp,day:date,price:decimal(9,2),ref:string,"
        "discount:double,channel:string>")
    rows = df.select("offset", "value.*").orderBy("offset").collect()
    assert [r.id for r in rows] == list(range(8))
    assert [r.channel for r in rows] == ["web"] * 5 + ["app"] * 3  # v1 records take v2's default
    for r in rows:
        want = order(r.id)
        assert (r.qty, r.customer, r.day, r.price, r.ref, r.discount) == (
            want["qty"], want["customer"], want["day"], want["price"], want["ref"], want["discount"])
    # Spark hands timestamps back in the session's zone, naive: compare as instants.
    assert [int(r.at.timestamp() * 1000) for r in rows] == [int(order(i)["at"].timestamp() * 1000) for i in range(8)]

    # Pinned to version 1: the v2 records are resolved into v1 (the added field dropped).
    pinned = read(spark, broker, registry, topic, valueSchemaVersion="1")
    assert "channel" not in pinned.schema["value"].dataType.fieldNames()
    assert sorted(r.id for r in pinned.select("value.id").collect()) == list(range(8))


def test_a_version_registered_between_planning_and_reading_does_not_change_what_the_readers_decode_into(
        broker: EmbeddedBroker, registry: SchemaRegistry, topic_name: str) -> None:
    # Spark calls schema() on the data source, pickles it, and calls reader() on the copy; a v2 registered in
    # between must not reach the readers: the rows come in the shape Spark was told (v1's), v2's records
    # resolved into it. Driven without a session so the registration lands exactly between the two calls.
    import pickle

    import pyarrow as pa

    from kafkajet.spark.data_source import KafkaDataSource

    # A subject of its own: the module's registry outlives a broker kind's runs, and a v2 left by one fails the next.
    topic = make_topic(broker, topic_name, partitions=2)
    client = SchemaRegistryClient({"url": registry.url})
    produce(broker, topic, AvroSerializer(client, json.dumps(V1)), [order(i) for i in range(4)])
    v1_id = client.get_latest_version(f"{topic}-value").schema_id
    source = KafkaDataSource({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic,
                              "valueFormat": "avro", "schema.registry.url": registry.url})
    schema = source.schema()
    planned_fields = schema["value"].dataType.fieldNames()
    assert "channel" not in planned_fields

    produce(broker, topic, AvroSerializer(client, json.dumps(V2)), [order(i, v2=True) for i in range(4, 7)],
            partition=1)
    fresh = SchemaRegistryClient({"url": registry.url})  # (a client caches the latest version it saw)
    assert fresh.get_latest_version(f"{topic}-value").schema_id != v1_id  # v2 is the latest now

    copy = pickle.loads(pickle.dumps(source))
    reader = copy.reader(schema)
    batches = [b for part in reader.partitions() for b in pickle.loads(pickle.dumps(reader)).read(part)]
    values = pa.Table.from_batches(batches).column("value").combine_chunks()
    assert [f.name for f in values.type] == planned_fields
    assert sorted(v["id"] for v in values.to_pylist()) == list(range(7))
    assert copy.streamReader(schema).opts.formats["value"].schema_id == v1_id


def test_bad_records_fail_the_query_naming_the_record_or_are_null_when_permissive(
        spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    topic = make_topic(broker, "avro-bad", partitions=1)
    client = SchemaRegistryClient({"url": registry.url})
    good = AvroSerializer(client, json.dumps(V1))
    produce(broker, topic, good, [order(0)])
    schema_id = client.get_latest_version(f"{topic}-value").schema_id
    valid = good(order(1), _ctx(topic))
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        for bad in (b"plain bytes", frame(999_999, valid[5:]), valid[:12], frame(schema_id, b"\x06abc")):
            p.send(topic, bad, partition=0)  # not framed, unknown id, truncated, a str where a long is
        p.send(topic, valid, partition=0)
        p.flush(timeout=60)

    with pytest.raises(Exception) as e:
        read(spark, broker, registry, topic).select("value.id").collect()
    message = str(e.value)
    assert f"{topic}-0 offset 1" in message, message[-3000:]
    assert "unknown magic byte" in message

    rows = read(spark, broker, registry, topic, mode="PERMISSIVE").select("offset", "value.id").orderBy(
        "offset").collect()
    assert [(r.offset, r.id) for r in rows] == [(0, 0), (1, None), (2, None), (3, None), (4, None), (5, 1)]
    for start, what in ((2, "schema id 999999 is not in the schema registry"), (3, "truncated"),
                        (4, "schema id")):
        with pytest.raises(Exception) as e:
            read(spark, broker, registry, topic,
                 startingOffsets=json.dumps({topic: {"0": start}})).select("value.id").collect()
        assert f"{topic}-0 offset {start}" in str(e.value) and what in str(e.value), str(e.value)[-3000:]


def _ctx(topic: str) -> Any:
    from kafkajet.schema_registry import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)


def test_the_sink_registers_the_dataframes_schema_and_others_decode_it(spark: Any, broker: EmbeddedBroker,
                                                                       registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = make_topic(broker, "avro-sink", partitions=2)
    df = spark.range(40, numPartitions=2).selectExpr(
        "cast(id as string) as key",
        "named_struct('id', id, 'name', concat('n', cast(id as string)), 'score', "
        "if(id % 2 = 0, null, cast(id as double) / 2), 'tags', array('a', cast(id as string)), "
        "'at', timestamp_millis(1700000000000 + id)) as value")
    (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic).option("valueFormat", "avro").option("keyFormat", "avro")
     .option("schema.registry.url", registry.url).save())

    client = SchemaRegistryClient({"url": registry.url})
    assert json.loads(client.get_latest_version(f"{topic}-key").schema.schema_str) in ("string", ["null", "string"])
    registered = client.get_latest_version(f"{topic}-value")
    schema = json.loads(registered.schema.schema_str)
    assert [f["name"] for f in schema["fields"]] == ["id", "name", "score", "tags", "at"]

    back = read(spark, broker, registry, topic, keyFormat="avro").select("key", "value.*").orderBy("id").collect()
    assert [(r.key, r.id, r.name, r.score, list(r.tags)) for r in back] == [
        (str(i), i, f"n{i}", None if i % 2 == 0 else i / 2, ["a", str(i)]) for i in range(40)]

    # confluent-kafka's own deserializer, against the same registry, reads what the sink wrote.
    raw = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
           .option("subscribe", topic).load().select("value").collect())
    deserializer = ConfluentDeserializer(ConfluentClient({"url": registry.url}))
    decoded = sorted((deserializer(bytes(r.value), SerializationContext(topic, MessageField.VALUE))
                      for r in raw), key=lambda o: o["id"])
    assert [(o["id"], o["name"], o["score"]) for o in decoded] == [
        (i, f"n{i}", None if i % 2 == 0 else i / 2) for i in range(40)]
    assert decoded[3]["at"] == dt.datetime.fromtimestamp(1700000000.003, dt.UTC)


def test_the_avro_java_library_spark_ships_decodes_kafkajets_payload(spark: Any, registry: SchemaRegistry) -> None:
    import glob
    import os

    import pyspark

    assert glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "avro-1*.jar"))
    client = SchemaRegistryClient({"url": registry.url})
    schema = {"type": "record", "name": "Point", "fields": [
        {"name": "x", "type": "long"}, {"name": "label", "type": "string"},
        {"name": "w", "type": ["null", "double"], "default": None}]}
    data = AvroSerializer(client, json.dumps(schema))({"x": -123456789, "label": "héllo", "w": 2.5},
                                                      _ctx("java-referee"))
    jvm = spark.sparkContext._jvm
    avro = jvm.org.apache.avro
    parsed = avro.Schema.Parser().parse(client.get_schema(int.from_bytes(data[1:5], "big")).schema_str)
    reader = avro.generic.GenericDatumReader(parsed)
    decoder = avro.io.DecoderFactory.get().binaryDecoder(bytearray(data[5:]), None)
    record = reader.read(None, decoder)
    assert decoder.isEnd()
    assert (record.get("x"), str(record.get("label")), record.get("w")) == (-123456789, "héllo", 2.5)
    assert data[0] == 0


@pytest.mark.broker_kinds("tansu", reason=(
    "option checking is kafkajet's own logic, refused before any record is read"))
def test_options_are_checked_at_planning(spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    topic = make_topic(broker, "avro-options", partitions=1)
    with pytest.raises(Exception, match="schema.registry.url"):
        (spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("subscribe", topic).option("valueFormat", "avro").load())
    with pytest.raises(Exception, match=f"{topic}-value"):
        read(spark, broker, registry, topic)  # nothing registered under the subject
    with pytest.raises(Exception, match="mode"):
        read(spark, broker, registry, topic, mode="DROPMALFORMED",
             avroSchema=json.dumps(V1))
    SchemaRegistryClient({"url": registry.url}).register_schema(f"{topic}-value", Schema(json.dumps(V1)))
    assert read(spark, broker, registry, topic).count() == 0


def test_the_sink_writes_with_a_schema_pinned_by_version_or_id_and_registers_nothing(
        spark: Any, broker: EmbeddedBroker, registry: SchemaRegistry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    topic = make_topic(broker, "avro-sink-pinned", partitions=1)
    simple = {"type": "record", "name": "Pin", "namespace": "t", "fields": [{"name": "id", "type": "long"}]}
    v1 = client.register_schema(f"{topic}-value", Schema(json.dumps(simple), "AVRO"))
    v2_schema = {**simple, "fields": [*simple["fields"], {"name": "note", "type": "string", "default": ""}]}
    v2 = client.register_schema(f"{topic}-value", Schema(json.dumps(v2_schema), "AVRO"))
    assert v1 != v2

    df = spark.createDataFrame([(i,) for i in range(4)], "id long").selectExpr("struct(id) AS value")
    for pin in ({"valueSchemaVersion": "1"}, {"valueSchemaId": str(v1)}):
        writer = (df.write.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                  .option("topic", topic).option("valueFormat", "avro").option("schema.registry.url", registry.url))
        for k, v in pin.items():
            writer = writer.option(k, v)
        writer.mode("append").save()
    assert client.get_versions(f"{topic}-value") == [1, 2]  # nothing registered
    from kafkajet.fetch import FetchClient

    with FetchClient(broker.bootstrap_servers) as reader:
        values = [r.value or b"" for r in reader.fetch_range(topic, 0, *reader.offsets(topic, 0))]
    assert len(values) == 8 and {v[:5] for v in values} == {frame(v1, b"")}  # every record framed with v1's id
    rows = read(spark, broker, registry, topic, valueSchemaVersion="1").select("value.id").collect()
    assert sorted(r.id for r in rows) == sorted(list(range(4)) * 2)
