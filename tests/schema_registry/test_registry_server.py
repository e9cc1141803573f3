"""kafkajet's registry driven by confluent-kafka's own SchemaRegistryClient (an independent client of the REST
API), its error codes, and its persistence in a `_schemas` topic on the embedded broker."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as CSchema
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.error import SchemaRegistryError as ConfluentError

from kafkajet.testing import EmbeddedBroker, SchemaRegistry

V1 = {"type": "record", "name": "User", "namespace": "ex", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
V3_BAD = {**V1, "fields": [*V1["fields"], {"name": "age", "type": "int"}]}  # new field, no default


def avro(d: dict[str, Any]) -> CSchema:
    return CSchema(json.dumps(d), "AVRO")


@pytest.fixture
def client(registry: SchemaRegistry) -> ConfluentClient:
    return ConfluentClient({"url": registry.url})


def test_register_lookup_versions_latest_by_id(registry: SchemaRegistry, client: ConfluentClient,
                                              topic_name: str) -> None:
    subject = f"{topic_name}-value"
    id1 = client.register_schema(subject, avro(V1))
    id2 = client.register_schema(subject, avro(V2))
    assert id1 != id2
    # The same schema, laid out differently, is the same registration (no new version, the same id).
    again = ConfluentClient({"url": registry.url})  # a fresh client: no cache answers for the registry
    assert again.register_schema(subject, CSchema(json.dumps(V1, indent=2), "AVRO")) == id1
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version, json.loads(latest.schema.schema_str)) == (id2, 2, V2)
    assert json.loads(again.get_schema(id1).schema_str) == V1
    found = again.lookup_schema(subject, avro(V2))
    assert (found.schema_id, found.version) == (id2, 2)
    assert subject in client.get_subjects()
    assert again.get_version(subject, 1).schema_id == id1
    # Another subject with the same schema shares the id, as the registry's ids are global.
    assert client.register_schema(f"{topic_name}-other", avro(V1)) == id1


def test_error_codes(client: ConfluentClient, topic_name: str) -> None:
    subject = f"{topic_name}-value"
    with pytest.raises(ConfluentError) as e:
        client.get_latest_version(subject)
    assert (e.value.http_status_code, e.value.error_code) == (404, 40401)
    assert f"Subject '{subject}' not found" in e.value.error_message
    client.register_schema(subject, avro(V1))
    with pytest.raises(ConfluentError) as e:
        client.lookup_schema(subject, avro(V2))
    assert e.value.error_code == 40403
    with pytest.raises(ConfluentError) as e:
        client.get_schema(987654)
    assert e.value.error_code == 40403
    with pytest.raises(ConfluentError) as e:
        client.get_version(subject, 9)
    assert e.value.error_code == 40402
    with pytest.raises(ConfluentError) as e:
        client.register_schema(subject, CSchema('{"type":"record","name":"R"}', "AVRO"))
    assert (e.value.http_status_code, e.value.error_code) == (422, 42201)
    with pytest.raises(ConfluentError) as e:
        client.set_compatibility(subject, "SIDEWAYS")
    assert e.value.error_code == 42203


def test_backward_refuses_an_incompatible_v3_with_the_registrys_code(client: ConfluentClient,
                                                                      topic_name: str) -> None:
    subject = f"{topic_name}-value"
    assert client.get_compatibility() == "BACKWARD"
    client.register_schema(subject, avro(V1))
    client.register_schema(subject, avro(V2))
    assert client.test_compatibility(subject, avro(V3_BAD)) is False
    with pytest.raises(ConfluentError) as e:
        client.register_schema(subject, avro(V3_BAD))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert "incompatible" in e.value.error_message and "age" in e.value.error_message
    assert client.get_versions(subject) == [1, 2]
    # The subject's own level overrides the global one; NONE lets v3 in.
    client.set_compatibility(subject, "NONE")
    assert client.get_compatibility(subject) == "NONE"
    assert client.register_schema(subject, avro(V3_BAD)) > 0
    assert client.get_versions(subject) == [1, 2, 3]


def test_forward_and_full_levels(client: ConfluentClient, topic_name: str) -> None:
    subject = f"{topic_name}-value"
    client.set_compatibility(subject, "FORWARD")
    client.register_schema(subject, avro(V2))
    # Dropping the defaulted field: old readers (V2) fill it in from the default, so FORWARD accepts it...
    assert client.test_compatibility(subject, avro(V1)) is True
    client.set_compatibility(subject, "FULL")
    assert client.test_compatibility(subject, avro(V1)) is True
    # ...but a new required field breaks BACKWARD, so FULL refuses it.
    assert client.test_compatibility(subject, avro({**V2, "fields": [*V2["fields"], V3_BAD["fields"][1]]})) is False


def test_delete_soft_then_permanent(client: ConfluentClient, topic_name: str) -> None:
    subject = f"{topic_name}-value"
    client.register_schema(subject, avro(V1))
    with pytest.raises(ConfluentError) as e:
        client.delete_subject(subject, permanent=True)
    assert e.value.error_code == 40405
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    assert client.delete_subject(subject, permanent=True) == [1]


def test_unknown_endpoint_and_bad_body(registry: SchemaRegistry) -> None:
    def call(method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(registry.url + path, data=body, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    assert call("GET", "/nothing/here")[0] == 404
    status, body = call("POST", "/subjects/x/versions", b"not json")
    assert (status, body["error_code"]) == (422, 42201)
    assert call("GET", "/schemas/types") == (200, ["AVRO", "JSON", "PROTOBUF"])


def test_restart_on_a_broker_keeps_ids(broker: EmbeddedBroker, topic_name: str) -> None:
    topic = f"_schemas-{topic_name}"[:200]
    with SchemaRegistry(bootstrap_servers=broker.bootstrap_servers, topic=topic) as first:
        assert first.persistent
        c = ConfluentClient({"url": first.url})
        c.register_schema("other-value", avro(V2))  # so the ids below are not just "1, 2" by luck
        id1 = c.register_schema("s-value", avro(V1))
        id2 = c.register_schema("s-value", avro(V2))
        c.set_compatibility("s-value", "FULL")
        c.delete_subject("other-value")
    with SchemaRegistry(bootstrap_servers=broker.bootstrap_servers, topic=topic) as second:
        c = ConfluentClient({"url": second.url})
        assert json.loads(c.get_schema(id1).schema_str) == V1
        assert c.get_latest_version("s-value").schema_id == id2
        assert c.get_versions("s-value") == [1, 2]
        assert c.get_compatibility("s-value") == "FULL"
        assert "other-value" not in c.get_subjects()
        # A new schema after the restart gets a new id, not one already handed out.
        id3 = c.register_schema("t-value", avro({**V1, "name": "Other"}))
        assert id3 not in (id1, id2)


def test_memory_only_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"), SchemaRegistry() as r:
        assert not r.persistent and "memory" in r.storage()
    assert any("in memory" in m for m in caplog.messages)
