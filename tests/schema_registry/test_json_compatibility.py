"""JSON Schema compatibility as Confluent's registry judges the common cases, and the registry refusing an
incompatible JSON Schema under BACKWARD with its error code (confluent-kafka's client asking)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as CSchema
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.error import SchemaRegistryError as ConfluentError

from kafkajet.schema_registry.compatibility import check
from kafkajet.schema_registry.json_compatibility import incompatibilities


def obj(props: dict[str, Any], required: tuple[str, ...] = (), closed: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, "required": list(required)}
    if closed:
        out["additionalProperties"] = False
    return out


INT, NUM, STR = {"type": "integer"}, {"type": "number"}, {"type": "string"}
NULLABLE_STR = {"oneOf": [{"type": "null"}, STR]}


@pytest.mark.parametrize(("new", "old", "why"), [
    # (new = reader, old = writer): BACKWARD asks whether the new schema reads what the old one wrote.
    (obj({"id": INT, "name": NULLABLE_STR}, closed=True), obj({"id": INT}, closed=True), None),
    (obj({"id": INT}, closed=True), obj({"id": INT, "name": STR}, closed=True), "removed from a closed"),
    (obj({"id": INT}), obj({"id": INT, "name": STR}), None),  # open: the reader still accepts "name"
    (obj({"id": INT, "name": STR}), obj({"id": INT}), "added to an open content model"),
    (obj({"id": INT, "name": STR}, ("name",), closed=True), obj({"id": INT}, closed=True), "required properties"),
    (obj({"id": INT}, ("id",)), obj({"id": INT}), "required properties ['id'] added"),
    (obj({"id": INT}), obj({"id": INT}, ("id",)), None),
    (obj({"id": INT}), obj({"id": NUM}), "type narrowed"),
    (obj({"id": NUM}), obj({"id": INT}), None),  # integer widens to number
    (obj({"id": STR}), obj({"id": INT}), "type narrowed or changed"),
    (obj({"n": NULLABLE_STR}), obj({"n": {"type": ["string", "null"]}}), None),  # both null patterns
    (obj({"n": STR}), obj({"n": NULLABLE_STR}), "null"),
    (obj({"id": INT}, closed=True), obj({"id": INT}), "content model was closed"),
    (obj({"s": {"enum": ["a", "b", "c"]}}), obj({"s": {"enum": ["a", "b"]}}), None),
    (obj({"s": {"enum": ["a"]}}), obj({"s": {"enum": ["a", "b"]}}), "enum values ['b'] removed"),
    (obj({"s": {"type": "string", "maxLength": 5}}), obj({"s": {"type": "string", "maxLength": 9}}), "maxLength"),
    (obj({"a": {"type": "array", "items": INT}}), obj({"a": {"type": "array", "items": STR}}), "items"),
    ({"$ref": "#/definitions/A", "definitions": {"A": obj({"id": INT})}}, obj({"id": STR}), "properties/id"),
    ({}, obj({"id": INT}), None),  # anything can change to the empty schema
])
def test_backward_rules(new: dict[str, Any], old: dict[str, Any], why: str | None) -> None:
    problems = incompatibilities(new, old)
    if why is None:
        assert problems == []
    else:
        assert problems and why in " ".join(problems), problems


def test_levels_use_the_json_rules() -> None:
    v1, v2 = obj({"id": INT}, closed=True), obj({"id": INT, "name": NULLABLE_STR}, closed=True)
    assert check("BACKWARD", v2, [v1], incompatibilities) == []
    assert check("FORWARD", v2, [v1], incompatibilities) != []  # v1 (closed) cannot read v2's "name"
    assert check("FULL", v2, [v1], incompatibilities)[0].startswith("FORWARD:")


def test_the_registry_refuses_an_incompatible_json_schema_under_backward(theirs: ConfluentClient,
                                                                         topic_name: str) -> None:
    import json

    subject = f"{topic_name}-value"
    v1 = obj({"id": INT, "name": STR}, ("id",), closed=True)
    theirs.register_schema(subject, CSchema(json.dumps(v1), "JSON"))
    v2 = obj({"id": INT, "name": STR, "email": NULLABLE_STR}, ("id",), closed=True)
    theirs.register_schema(subject, CSchema(json.dumps(v2), "JSON"))
    v3 = obj({"id": INT, "email": NULLABLE_STR}, ("id",), closed=True)  # "name" removed from a closed model
    assert theirs.test_compatibility(subject, CSchema(json.dumps(v3), "JSON")) is False
    with pytest.raises(ConfluentError) as e:
        theirs.register_schema(subject, CSchema(json.dumps(v3), "JSON"))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert "name" in e.value.error_message and "closed content model" in e.value.error_message
    assert theirs.get_versions(subject) == [1, 2]
