"""The schema id carried only in the `__key_schema_id` / `__value_schema_id` headers (schema.id.serializer=
'header'), from the producer through a real broker to the deserializers: the payloads are bare, the headers
carry the ids, and kafkajet's and confluent-kafka's deserializers decode them from there. As in Java, whose
producer hands every serializer the record's Headers, a record sent without headers gets them too."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentAvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as ConfluentJSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as ConfluentProtobufDeserializer
from confluent_kafka.serialization import MessageField as CField
from confluent_kafka.serialization import SerializationContext as CContext

from kafkajet import Producer
from kafkajet.errors import SerializationError
from kafkajet.schema_registry import (
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    SchemaRegistryClient,
    SerializationContext,
)
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic
from tests.schema_registry.test_protobuf import M

HEADER = {"schema.id.serializer": "header"}
AVRO = json.dumps({"type": "record", "name": "Order", "namespace": "hdr", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
JSON_ORDER = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}})


def _avro(client: SchemaRegistryClient, theirs: ConfluentClient) -> tuple[Any, Any, Any, Callable[[int], Any]]:
    return (AvroSerializer(client, AVRO, conf=HEADER), AvroDeserializer(client), ConfluentAvroDeserializer(theirs),
            lambda i: {"id": i, "item": f"pen-{i}"})


def _json(client: SchemaRegistryClient, theirs: ConfluentClient) -> tuple[Any, Any, Any, Callable[[int], Any]]:
    return (JSONSerializer(JSON_ORDER, client, conf=HEADER), JSONDeserializer(None, schema_registry_client=client),
            ConfluentJSONDeserializer(None, schema_registry_client=theirs), lambda i: {"id": i, "item": f"pen-{i}"})


def _protobuf(client: SchemaRegistryClient, theirs: ConfluentClient) -> tuple[Any, Any, Any, Callable[[int], Any]]:
    order = M["Order"]
    return (ProtobufSerializer(order, client, conf={**HEADER, "use.deprecated.format": False}),
            ProtobufDeserializer(order, conf={"use.deprecated.format": False}, schema_registry_client=client),
            ConfluentProtobufDeserializer(order, {"use.deprecated.format": False}),
            lambda i: order(id=i, item=f"pen-{i}"))


@pytest.mark.parametrize("make", [_avro, _json, _protobuf], ids=["avro", "json", "protobuf"])
def test_ids_in_headers_through_the_producer(broker: EmbeddedBroker, ours: SchemaRegistryClient,
                                             theirs: ConfluentClient, topic_name: str,
                                             make: Callable[..., tuple[Any, Any, Any, Callable[[int], Any]]]) -> None:
    value_ser, value_de, confluent_de, obj = make(ours, theirs)
    key_ser = AvroSerializer(ours, '"string"', conf=HEADER)
    with Producer(bootstrap_servers=broker.bootstrap_servers, value_serializer=value_ser,
                  key_serializer=key_ser) as p:
        futures = [p.send(topic_name, obj(0), key="k0"),  # no headers given: the producer makes the list
                   p.send(topic_name, obj(1), key="k1", headers=[("trace", b"t1")]),
                   p.send(topic_name, obj(2), key="k2", headers={"trace": b"t2"}),
                   p.send_batch(topic_name, [obj(3), obj(4)], keys=["k3", "k4"]),
                   p.send_batch(topic_name, [obj(5)], keys=["k5"], headers=[[("trace", b"t5")]])]
        for f in futures:
            f.result(timeout=30)
    records = sorted(read_topic(broker.bootstrap_servers, topic_name, 6), key=lambda r: r.key or b"")
    assert len(records) == 6
    ids = {}
    for i, r in enumerate(records):
        names = [h[0] for h in r.headers]
        assert sorted(n for n in names if n.startswith("__")) == ["__key_schema_id", "__value_schema_id"], names
        assert ("trace" in names) == (i in (1, 2, 5))
        headers = list(r.headers)
        value_ctx = SerializationContext(topic_name, MessageField.VALUE, headers)
        got = value_de(r.value, value_ctx)
        assert got == obj(i)
        assert AvroDeserializer(ours)(
            r.key, SerializationContext(topic_name, MessageField.KEY, headers)) == f"k{i}"
        assert confluent_de(r.value, CContext(topic_name, CField.VALUE, headers)) == obj(i)
        ids[i] = dict(r.headers)["__value_schema_id"]
        # The payload is bare: without the headers there is no id to find.
        with pytest.raises(SerializationError):
            value_de(r.value, SerializationContext(topic_name, MessageField.VALUE))
    assert len(set(ids.values())) == 1
