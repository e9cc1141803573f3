"""Avro serdes against confluent-kafka's (the referee): the same bytes for the same schema and id, each
decoding the other's, through kafkajet's registry; schema evolution; bad input named; the producer path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvroSerializer
from confluent_kafka.serialization import MessageField as CField
from confluent_kafka.serialization import SerializationContext as CContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet import Producer
from kafkajet.errors import SerializationError
from kafkajet.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    MessageField,
    SchemaRegistryClient,
    SchemaRegistryError,
    SerializationContext,
)
from kafkajet.testing import EmbeddedBroker, SchemaRegistry
from tests.helpers.readback import read_topic

USER = {"type": "record", "name": "User", "namespace": "ex", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "score", "type": ["null", "double"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}
USER_STR = json.dumps(USER)
V2 = {**USER, "fields": [*USER["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}

users = st.fixed_dictionaries({
    "id": st.integers(-(2**63), 2**63 - 1), "name": st.text(max_size=20),
    "score": st.none() | st.floats(allow_nan=False), "tags": st.lists(st.text(max_size=5), max_size=3),
    "kind": st.sampled_from(["A", "B"]), "ts": st.integers(0, 2**41),
})


def ctx(topic: str, field: str = MessageField.VALUE) -> SerializationContext:
    return SerializationContext(topic, field)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(user=users)
def test_byte_for_byte_with_confluent_and_each_decodes_the_other(ours: SchemaRegistryClient,
                                                                 theirs: ConfluentClient, user: dict[str, Any]) -> None:
    topic = "byte-for-byte"
    mine = AvroSerializer(ours, USER_STR)(user, ctx(topic))
    confluents = ConfluentAvroSerializer(theirs, USER_STR)(user, CContext(topic, CField.VALUE))
    assert mine == confluents
    assert ConfluentAvroDeserializer(theirs)(mine, CContext(topic, CField.VALUE)) == _as_read(user)
    assert AvroDeserializer(ours)(confluents, ctx(topic)) == _as_read(user)


def _as_read(user: dict[str, Any]) -> dict[str, Any]:
    # timestamp-millis reads back as a datetime in both libraries (fastavro underneath): compare the same way.
    import datetime

    return {**user, "ts": datetime.datetime.fromtimestamp(user["ts"] / 1000, datetime.UTC)}


def test_primitive_and_bytes_schemas_match_confluent(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                                     topic_name: str) -> None:
    for i, (schema, value) in enumerate((('"string"', "héllo"), ('"long"', 12345678901), ('"bytes"', b"\x00raw"))):
        topic = f"{topic_name}-{i}"  # each its own subject: a string key schema cannot become a long one
        mine = AvroSerializer(ours, schema)(value, ctx(topic, MessageField.KEY))
        confluents = ConfluentAvroSerializer(theirs, schema)(value, CContext(topic, CField.KEY))
        assert mine == confluents, schema
        assert AvroDeserializer(ours)(confluents, ctx(topic, MessageField.KEY)) == value


def test_one_registry_round_trip_per_schema_not_per_record(registry: SchemaRegistry, topic_name: str) -> None:
    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), USER_STR)
    de = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    user = {"id": 1, "name": "a", "score": None, "tags": [], "kind": "A", "ts": 0}
    before = registry.requests
    frames = [ser({**user, "id": i}, ctx(topic_name)) for i in range(200)]
    assert registry.requests - before == 1  # the registration
    assert [de(f, ctx(topic_name))["id"] for f in frames] == list(range(200))
    assert registry.requests - before == 2  # and one schema fetch by id


def test_evolution_reads_v1_and_v2_into_the_reader_schema(ours: SchemaRegistryClient, topic_name: str) -> None:
    v1 = AvroSerializer(ours, USER_STR)
    v2 = AvroSerializer(ours, json.dumps(V2))
    user = {"id": 1, "name": "a", "score": 1.5, "tags": ["x"], "kind": "B", "ts": 0}
    old, new = v1(user, ctx(topic_name)), v2({**user, "email": "a@b"}, ctx(topic_name))
    assert old[1:5] != new[1:5]  # two schema ids
    reader = AvroDeserializer(ours, json.dumps(V2))
    assert reader(old, ctx(topic_name))["email"] is None  # filled from the default
    assert reader(new, ctx(topic_name))["email"] == "a@b"
    plain = AvroDeserializer(ours)
    assert "email" not in plain(old, ctx(topic_name))
    latest = AvroDeserializer(ours, conf={"use.latest.version": True})  # reads into v2, the latest
    assert latest(old, ctx(topic_name))["email"] is None


def test_bad_input_is_named(ours: SchemaRegistryClient, topic_name: str) -> None:
    ser, de = AvroSerializer(ours, USER_STR), AvroDeserializer(ours)
    good = ser({"id": 1, "name": "a", "score": None, "tags": [], "kind": "A", "ts": 0}, ctx(topic_name))
    with pytest.raises(SerializationError, match=f"topic '{topic_name}'.*unknown magic byte"):
        de(b"plain text", ctx(topic_name))
    with pytest.raises(SerializationError, match="schema id 99999 is not in the schema registry"):
        de(b"\x00\x00\x01\x86\x9f" + good[5:], ctx(topic_name))
    with pytest.raises(SerializationError, match="truncated"):
        de(good[:-3], ctx(topic_name))
    with pytest.raises(SerializationError, match="bytes after its Avro record"):
        de(good + b"\x00", ctx(topic_name))
    with pytest.raises(SerializationError, match=r"ex\.User\.id is <nope> of type <class 'str'> expected long"):
        ser({"id": "nope", "name": "a", "score": None, "tags": [], "kind": "A", "ts": 0}, ctx(topic_name))
    with pytest.raises(SerializationError, match="needs a SerializationContext"):
        ser({"id": 1}, None)


def test_a_value_of_the_wrong_type_is_named(ours: SchemaRegistryClient, topic_name: str) -> None:
    # a flat schema: the written encoder refuses it, fastavro words it
    ser = AvroSerializer(ours, json.dumps({"type": "record", "name": "R", "namespace": "ex", "fields": [
        {"name": "id", "type": "long"}, {"name": "n", "type": "int"}]}))
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    assert ser({"id": 1, "n": 2}, ctx) is not None
    with pytest.raises(SerializationError, match=rf"topic '{topic_name}'.*ex\.R\.n is <x> of type <class 'str'>"):
        ser({"id": 1, "n": "x"}, ctx)
    with pytest.raises(SerializationError, match=r"ex\.R\.id"):
        ser({"n": 1}, ctx)  # a missing field without a default


def test_to_dict_is_called_once_per_record_with_its_context(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                                           topic_name: str) -> None:
    class Point:
        def __init__(self, x: int, y: int | None) -> None:
            self.x, self.y = x, y

    schema = json.dumps({"type": "record", "name": "P", "fields": [{"name": "x", "type": "long"},
                                                                   {"name": "y", "type": ["null", "long"]}]})
    calls: list[tuple[int, str]] = []

    def to_dict(p: Point, c: Any) -> dict[str, Any]:
        calls.append((p.x, c.topic))
        return {"x": p.x, "y": p.y}

    mine = AvroSerializer(ours, schema, to_dict=to_dict)
    confluents = ConfluentAvroSerializer(theirs, schema, to_dict=lambda p, c: {"x": p.x, "y": p.y})
    for p in (Point(1, 2), Point(-300, None)):
        assert mine(p, ctx(topic_name)) == confluents(p, CContext(topic_name, CField.VALUE))
    with pytest.raises(SerializationError, match=r"P\.y"):
        mine(Point(3, "no"), ctx(topic_name))  # type: ignore[arg-type]  # refused by both encoders in turn
    assert calls == [(1, topic_name), (-300, topic_name), (3, topic_name)]


def test_auto_register_off_names_the_subject_and_what_to_do(ours: SchemaRegistryClient, topic_name: str) -> None:
    ser = AvroSerializer(ours, USER_STR, conf={"auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError) as e:
        ser({"id": 1}, ctx(topic_name))
    assert e.value.error_code == 40401
    assert f"'{topic_name}-value'" in str(e.value) and "auto.register.schemas" in str(e.value)
    assert ours.urls[0] in str(e.value)


def test_use_latest_version_and_use_schema_id(ours: SchemaRegistryClient, topic_name: str) -> None:
    user = {"id": 1, "name": "a", "score": None, "tags": [], "kind": "A", "ts": 0}
    v1_id = ours.register_schema(f"{topic_name}-value", _schema(USER))
    v2_id = ours.register_schema(f"{topic_name}-value", _schema(V2))
    latest = AvroSerializer(ours, None, conf={"use.latest.version": True, "auto.register.schemas": False})
    assert latest(user, ctx(topic_name))[1:5] == v2_id.to_bytes(4, "big")
    pinned = AvroSerializer(ours, None, conf={"use.schema.id": v1_id})
    assert pinned(user, ctx(topic_name))[1:5] == v1_id.to_bytes(4, "big")
    with pytest.raises(ValueError, match="use.latest.version=True cannot be used with auto.register"):
        AvroSerializer(ours, USER_STR, conf={"use.latest.version": True})
    with pytest.raises(ValueError, match="unknown setting"):
        AvroSerializer(ours, USER_STR, conf={"auto.register.schema": False})


def _schema(d: dict[str, Any]) -> Any:
    from kafkajet.schema_registry import Schema

    return Schema(json.dumps(d), "AVRO")


@pytest.mark.parametrize(("strategy", "subject"), [
    ("topic", "{t}-value"), ("record", "ex.User"), ("topic_record", "{t}-ex.User"),
    ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "{t}-ex.User"),
    ("record_subject_name_strategy", "ex.User"),
])
def test_subject_name_strategies(ours: SchemaRegistryClient, topic_name: str, strategy: str, subject: str) -> None:
    ser = AvroSerializer(ours, USER_STR, conf={"subject.name.strategy": strategy})
    ser({"id": 1, "name": "a", "score": None, "tags": [], "kind": "A", "ts": 0}, ctx(topic_name))
    assert ours.get_latest_version(subject.format(t=topic_name)).schema.schema_str == USER_STR


def test_subjects_are_cached_per_topic_and_field_but_a_callable_strategy_is_asked_each_record(
        ours: SchemaRegistryClient, topic_name: str) -> None:
    user = {"id": 1, "name": "a", "score": None, "tags": [], "kind": "A", "ts": 0}
    tenant = ["a"]
    ser = AvroSerializer(ours, USER_STR, conf={"subject.name.strategy": lambda c, name: f"{c.topic}-{tenant[0]}"})
    ser(user, ctx(topic_name))
    tenant[0] = "b"  # same topic and field, another subject: a cache by (topic, field) would miss it
    ser(user, ctx(topic_name))
    assert {f"{topic_name}-a", f"{topic_name}-b"} <= set(ours.get_subjects())
    builtin = AvroSerializer(ours, USER_STR)
    for topic, field in ((topic_name, MessageField.VALUE), (topic_name, MessageField.KEY),
                         (f"{topic_name}-2", MessageField.VALUE)):
        builtin(user, ctx(topic, field))
    assert {f"{topic_name}-value", f"{topic_name}-key", f"{topic_name}-2-value"} <= set(ours.get_subjects())


def test_header_form_is_read_by_confluent(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                          topic_name: str) -> None:
    ser = AvroSerializer(ours, USER_STR, conf={"schema.id.serializer": "header"})
    headers: list[tuple[str, bytes]] = []
    user = {"id": 7, "name": "h", "score": None, "tags": [], "kind": "A", "ts": 0}
    payload = ser(user, SerializationContext(topic_name, MessageField.VALUE, headers))
    assert [h[0] for h in headers] == ["__value_schema_id"] and headers[0][1][0] == 1  # magic 1 + GUID
    got = ConfluentAvroDeserializer(theirs)(payload, CContext(topic_name, CField.VALUE, headers))
    assert got["id"] == 7
    assert AvroDeserializer(ours)(payload, SerializationContext(topic_name, MessageField.VALUE, headers))["id"] == 7


def test_producer_writes_avro_that_confluent_decodes(broker: EmbeddedBroker, registry: SchemaRegistry,
                                                    theirs: ConfluentClient, topic_name: str) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    key_ser = AvroSerializer(client, '"string"')
    users_sent = [{"id": i, "name": f"u{i}", "score": i / 2, "tags": ["t"] * (i % 3), "kind": "AB"[i % 2],
                   "ts": 1_700_000_000_000 + i} for i in range(50)]
    with Producer(bootstrap_servers=broker.bootstrap_servers, value_serializer=AvroSerializer(client, USER_STR),
                  key_serializer=key_ser) as p:
        futures = [p.send(topic_name, value=u, key=u["name"]) for u in users_sent[:40]]
        futures.append(p.send_batch(topic_name, users_sent[40:], keys=[u["name"] for u in users_sent[40:]]))
        for f in futures:
            f.result(timeout=30)
    records = read_topic(broker.bootstrap_servers, topic_name, 50)  # kafka-python reads them back
    de = ConfluentAvroDeserializer(theirs)
    got = sorted((de(r.value, CContext(topic_name, CField.VALUE)) for r in records), key=lambda g: g["id"])
    assert [g["id"] for g in got] == list(range(50))
    assert got[3] == _as_read(users_sent[3])
    keys = {ConfluentAvroDeserializer(theirs)(r.key, CContext(topic_name, CField.KEY)) for r in records}
    assert keys == {u["name"] for u in users_sent}
    assert theirs.get_latest_version(f"{topic_name}-key").schema.schema_str == '{"type":"string"}'


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's serializer interface taking confluent-kafka's serializer"))
def test_confluents_own_serializer_plugs_into_the_producer(broker: EmbeddedBroker, theirs: ConfluentClient,
                                                           topic_name: str, ours: SchemaRegistryClient) -> None:
    user = {"id": 5, "name": "c", "score": None, "tags": [], "kind": "A", "ts": 0}
    with Producer(bootstrap_servers=broker.bootstrap_servers,
                  value_serializer=ConfluentAvroSerializer(theirs, USER_STR)) as p:
        p.send(topic_name, value=user).result(timeout=30)
    (record,) = read_topic(broker.bootstrap_servers, topic_name, 1)
    assert AvroDeserializer(ours)(record.value, ctx(topic_name))["id"] == 5
