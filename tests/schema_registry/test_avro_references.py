"""Avro schema references: a schema that uses named types registered under other subjects, named by
`references` (name, subject, version). kafkajet's registry stores and checks them, and kafkajet's serdes
resolve them; confluent-kafka's client and serdes are the referee: the same ids, the same bytes, each decoding
the other's."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema as ConfluentSchema
from confluent_kafka.schema_registry import SchemaReference as ConfluentReference
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentAvroSerializer
from confluent_kafka.serialization import MessageField as CField
from confluent_kafka.serialization import SerializationContext as CContext

from kafkajet.errors import SerializationError
from kafkajet.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    MessageField,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
    SerializationContext,
)

KIND = {"type": "enum", "name": "Kind", "namespace": "ref", "symbols": ["HOME", "WORK"]}
ADDRESS = {"type": "record", "name": "Address", "namespace": "ref", "fields": [
    {"name": "city", "type": "string"}, {"name": "kind", "type": "ref.Kind"}]}
PERSON = {"type": "record", "name": "Person", "namespace": "ref", "fields": [
    {"name": "name", "type": "string"}, {"name": "home", "type": "ref.Address"},
    {"name": "kind", "type": "ref.Kind"},  # also reached through Address: one definition, not two
    {"name": "other", "type": ["null", "ref.Address"], "default": None}]}
ALICE = {"name": "alice", "home": {"city": "Lyon", "kind": "HOME"}, "kind": "WORK",
         "other": {"city": "Oslo", "kind": "WORK"}}


def _register_dependencies(client: SchemaRegistryClient, topic: str) -> list[SchemaReference]:
    client.register_schema(f"{topic}-kind", Schema(json.dumps(KIND), "AVRO"))
    client.register_schema(f"{topic}-address", Schema(json.dumps(ADDRESS), "AVRO",
                                                      [SchemaReference("ref.Kind", f"{topic}-kind", 1)]))
    return [SchemaReference("ref.Address", f"{topic}-address", 1), SchemaReference("ref.Kind", f"{topic}-kind", 1)]


def test_same_bytes_as_confluent_and_each_decodes_the_other(ours: SchemaRegistryClient, theirs: ConfluentClient,
                                                            topic_name: str) -> None:
    refs = _register_dependencies(ours, topic_name)
    ctx, cctx = SerializationContext(topic_name, MessageField.VALUE), CContext(topic_name, CField.VALUE)
    mine = AvroSerializer(ours, Schema(json.dumps(PERSON), "AVRO", refs))(ALICE, ctx)
    confluent_schema = ConfluentSchema(json.dumps(PERSON), "AVRO",
                                       [ConfluentReference(r.name, r.subject, r.version) for r in refs])
    confluents = ConfluentAvroSerializer(theirs, confluent_schema)(ALICE, cctx)
    assert mine == confluents  # the same registration (id) and the same payload
    assert ConfluentAvroDeserializer(theirs)(mine, cctx) == ALICE
    assert AvroDeserializer(ours)(confluents, ctx) == ALICE
    # The registry hands the references back as registered, to both clients.
    schema_id = int.from_bytes(mine[1:5], "big")
    assert [(r.name, r.subject, r.version) for r in theirs.get_schema(schema_id).references] == \
        [(r.name, r.subject, r.version) for r in refs]
    assert ours.get_schema(schema_id).references == tuple(refs)


def test_the_registry_checks_references(ours: SchemaRegistryClient, theirs: ConfluentClient, topic_name: str) -> None:
    refs = _register_dependencies(ours, topic_name)
    subject = f"{topic_name}-value"
    with pytest.raises(SchemaRegistryError) as e:  # the named types are unknown without the references
        ours.register_schema(subject, Schema(json.dumps(PERSON), "AVRO"))
    assert e.value.error_code == 42201
    missing = [SchemaReference("ref.Address", f"{topic_name}-nowhere", 1)]
    with pytest.raises(SchemaRegistryError, match="nowhere") as e:
        ours.register_schema(subject, Schema(json.dumps(PERSON), "AVRO", missing))
    assert e.value.error_code == 42201
    v1 = ours.register_schema(subject, Schema(json.dumps(PERSON), "AVRO", refs))
    # The same text with the same references is the same schema, found by lookup, confluent's client too.
    assert ours.lookup_schema(subject, Schema(json.dumps(PERSON), "AVRO", refs)).schema_id == v1
    assert theirs.lookup_schema(subject, ConfluentSchema(
        json.dumps(PERSON), "AVRO", [ConfluentReference(r.name, r.subject, r.version) for r in refs])).schema_id == v1
    # The same text with other references (a later Address) is another schema: a new version and id.
    address_v2 = {**ADDRESS, "fields": [*ADDRESS["fields"], {"name": "zip", "type": "string", "default": ""}]}
    ours.register_schema(f"{topic_name}-address", Schema(json.dumps(address_v2), "AVRO", refs[1:]))
    refs_v2 = [SchemaReference("ref.Address", f"{topic_name}-address", 2), refs[1]]
    v1_on_v2 = ours.register_schema(subject, Schema(json.dumps(PERSON), "AVRO", refs_v2))
    assert v1_on_v2 != v1 and ours.get_schema(v1_on_v2).references == tuple(refs_v2)
    # Compatibility (BACKWARD) is checked with the referenced types resolved, in the new and old versions.
    added = {**PERSON, "fields": [*PERSON["fields"], {"name": "note", "type": "string", "default": ""}]}
    assert ours.register_schema(subject, Schema(json.dumps(added), "AVRO", refs)) != v1
    required = {**PERSON, "fields": [*PERSON["fields"], {"name": "age", "type": "int"}]}
    with pytest.raises(SchemaRegistryError) as e:
        ours.register_schema(subject, Schema(json.dumps(required), "AVRO", refs))
    assert e.value.http_status_code == 409


def test_a_serde_without_a_registry_says_it_cannot_resolve_references(topic_name: str) -> None:
    schema = Schema(json.dumps(PERSON), "AVRO", [SchemaReference("ref.Address", "a", 1)])
    with pytest.raises(SerializationError, match="references ref.Address: resolving them needs a schema registry"):
        AvroDeserializer(None, schema)
