"""JSON Schema serdes against confluent-kafka's: the same bytes, each decoding the other's, bad input named."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as ConfluentJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as ConfluentJSONSerializer
from confluent_kafka.serialization import MessageField as CField
from confluent_kafka.serialization import SerializationContext as CContext
from confluent_kafka.serialization import SerializationError as ConfluentSerializationError

from kafkajet.errors import SerializationError
from kafkajet.schema_registry import (
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    Schema,
    SchemaRegistryClient,
    SerializationContext,
)

ORDER = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}, "qty": {"type": "number"}},
    "required": ["id", "item"],
})


@pytest.mark.parametrize("order", [{"id": 1, "item": "café", "qty": 2.5}, {"id": 2, "item": "x"}])
def test_same_bytes_as_confluent_and_each_decodes_the_other(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                                            topic_name: str, order: dict[str, Any]) -> None:
    mine = JSONSerializer(ORDER, ours)(order, SerializationContext(topic_name, MessageField.VALUE))
    confluents = ConfluentJSONSerializer(ORDER, theirs)(order, CContext(topic_name, CField.VALUE))
    assert mine == confluents
    assert ConfluentJSONDeserializer(None, schema_registry_client=theirs)(
        mine, CContext(topic_name, CField.VALUE)) == order
    assert JSONDeserializer(None, schema_registry_client=ours)(
        confluents, SerializationContext(topic_name, MessageField.VALUE)) == order
    assert theirs.get_latest_version(f"{topic_name}-value").schema.schema_type == "JSON"


def test_record_strategy_uses_the_title(ours: SchemaRegistryClient, topic_name: str) -> None:
    ser = JSONSerializer(ORDER, ours, conf={"subject.name.strategy": "topic_record"})
    ser({"id": 1, "item": "a"}, SerializationContext(topic_name, MessageField.VALUE))
    assert ours.get_versions(f"{topic_name}-Order") == [1]


def test_bad_input_is_named(ours: SchemaRegistryClient, topic_name: str) -> None:
    ctx = SerializationContext(topic_name, MessageField.VALUE)
    ser = JSONSerializer(ORDER, ours)
    with pytest.raises(SerializationError, match="at id: 'one' is not of type 'integer'"):
        ser({"id": "one", "item": "a"}, ctx)
    with pytest.raises(SerializationError, match="'item' is a required property"):
        ser({"id": 1}, ctx)
    good = ser({"id": 1, "item": "a"}, ctx)
    de = JSONDeserializer(None, schema_registry_client=ours)
    with pytest.raises(SerializationError, match="not valid JSON"):
        de(good[:-2], ctx)
    with pytest.raises(SerializationError, match="does not match JSON Schema"):
        de(good[:5] + b'{"id":"x","item":"a"}', ctx)
    with pytest.raises(SerializationError, match="unknown magic byte"):
        de(b'{"id":1}', ctx)


def test_use_latest_version_and_the_schema_given_as_confluent_reads_them(
        ours: SchemaRegistryClient, theirs: ConfluentClient, topic_name: str) -> None:
    v2 = json.loads(ORDER)
    v2["properties"]["note"] = {"type": "string"}
    v2["required"] = ["id", "item", "note"]
    v2_str = json.dumps(v2)
    ctx, cctx = SerializationContext(topic_name, MessageField.VALUE), CContext(topic_name, CField.VALUE)
    order = {"id": 1, "item": "pen"}
    data = JSONSerializer(ORDER, ours)(order, ctx)  # written with v1, which has no "note"
    # v2 requires "note", which v1's documents may lack: incompatible under BACKWARD, so the subject takes NONE.
    ours.set_compatibility(f"{topic_name}-value", "NONE")
    v2_id = ours.register_schema(f"{topic_name}-value", Schema(v2_str, "JSON"))
    assert v2_id != int.from_bytes(data[1:5], "big")
    # By default the writer's schema (v1) validates it, for both clients.
    assert JSONDeserializer(None, schema_registry_client=ours)(data, ctx) == order
    assert ConfluentJSONDeserializer(None, schema_registry_client=theirs)(data, cctx) == order
    # use.latest.version: the latest (v2) does, and refuses it; so does a given schema, over the writer's.
    latest = {"use.latest.version": True}
    with pytest.raises(SerializationError, match="'note' is a required property"):
        JSONDeserializer(None, schema_registry_client=ours, conf=latest)(data, ctx)
    with pytest.raises(ConfluentSerializationError):
        ConfluentJSONDeserializer(None, schema_registry_client=theirs, conf=latest)(data, cctx)
    with pytest.raises(SerializationError, match="'note' is a required property"):
        JSONDeserializer(v2_str, schema_registry_client=ours)(data, ctx)
    with pytest.raises(ConfluentSerializationError):
        ConfluentJSONDeserializer(v2_str, schema_registry_client=theirs)(data, cctx)
    # The serializer with use.latest.version frames v2's id and validates against v2, byte for byte confluent's.
    conf = {"use.latest.version": True, "auto.register.schemas": False}
    with pytest.raises(SerializationError, match="'note' is a required property"):
        JSONSerializer(None, ours, conf=conf)(order, ctx)
    noted = {**order, "note": "n"}
    mine = JSONSerializer(None, ours, conf=conf)(noted, ctx)
    assert mine is not None and int.from_bytes(mine[1:5], "big") == v2_id
    assert mine == ConfluentJSONSerializer(v2_str, theirs, conf=conf)(noted, cctx)
