"""The JSON Schema acceptance check in front of jsonschema (json_accept.py) against jsonschema itself: it may
pass a value only when jsonschema accepts it (checked over valid records and their mutations, across drafts),
it does pass the common valid record (else it would not save anything), and a schema beyond it gets none."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from kafkajet.errors import SerializationError
from kafkajet.schema_registry import Schema
from kafkajet.schema_registry.json_accept import acceptor
from kafkajet.schema_registry.json_schema import JSONDeserializer

EVENT = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
         "additionalProperties": False, "required": ["id", "user", "qty", "price"],
         "properties": {"id": {"type": "integer"}, "user": {"type": "string", "minLength": 1, "maxLength": 8},
                        "qty": {"type": "integer", "minimum": 0, "maximum": 100},
                        "price": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e6},
                        "at": {"type": "string", "format": "date-time"},
                        "kind": {"enum": ["click", "view", 3, None]}, "v": {"const": 2},
                        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
                        "discount": {"oneOf": [{"type": "null"}, {"type": "number"}]},
                        "overlap": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
                        "either": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
                        "both": {"allOf": [{"type": "integer"}, {"maximum": 9}]},
                        "where": {"$ref": "#/definitions/Place"},
                        "meta": {"type": "object", "additionalProperties": {"type": "integer"}}},
         "definitions": {"Place": {"type": ["object", "null"], "required": ["city"],
                                   "properties": {"city": {"type": "string"}}}}}
GOOD = {"id": 7, "user": "ann", "qty": 3, "price": 2.5, "at": "2026-11-26T01:02:03Z", "kind": "click", "v": 2,
        "tags": ["a"], "discount": None, "overlap": 2.5, "either": "x", "both": 4, "where": {"city": "Oslo"}, "meta": {"n": 1}}
# What a wrong value may be: each type, bounds' edges, and the look-alikes jsonschema tells apart.
ODD: list[Any] = [None, True, False, 0, -1, 1, 5, 9, 10, 100, 101, 1.0, 2.5, -0.5, 1e6, 10**20, float("nan"), "",
                  "x", "click", "123456789", [], ["a", "b", "c", "d"], [1], {}, {"city": 1}, {"city": "x"},
                  {"n": "1"}, 2, 3, "view"]


def _mutations(record: dict[str, Any]) -> list[Any]:
    out: list[Any] = [record, None, [], "text", 1]
    for name in record:
        out.append({k: v for k, v in record.items() if k != name})
        for odd in ODD:
            changed = copy.deepcopy(record)
            changed[name] = odd
            out.append(changed)
    out.append({**record, "extra": 1})
    return out


def _variants() -> list[dict[str, Any]]:
    draft4 = json.loads(json.dumps(EVENT).replace("draft-07", "draft-04"))
    for prop in draft4["properties"].values():  # draft 4 spells the exclusive bounds as booleans
        prop.pop("exclusiveMinimum", None)
        prop.pop("exclusiveMaximum", None)
    draft2020 = {**json.loads(json.dumps(EVENT)), "$schema": "https://json-schema.org/draft/2020-12/schema"}
    draft2020["$defs"] = draft2020.pop("definitions")
    draft2020["properties"]["where"] = {"$ref": "#/$defs/Place"}
    return [EVENT, draft4, draft2020]


@pytest.mark.parametrize("doc", _variants(), ids=["draft-07", "draft-04", "2020-12"])
def test_it_passes_only_what_jsonschema_accepts_and_passes_the_valid_record(doc: dict[str, Any]) -> None:
    validator = jsonschema.validators.validator_for(doc)(doc)
    accepts = acceptor(validator)
    assert accepts is not None
    assert accepts(GOOD) and validator.is_valid(GOOD)
    refused = 0
    for value in _mutations(GOOD):
        valid = validator.is_valid(value)
        assert valid or not accepts(value), value  # never looser than jsonschema
        refused += not valid
    assert refused > 100  # the mutations do reach jsonschema's refusals


@pytest.mark.parametrize("doc", [
    {"type": "string", "pattern": "^a"},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
    {"$ref": "#/definitions/A", "type": "string", "definitions": {"A": {"type": "string"}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "minimum": 0, "exclusiveMinimum": True},
    {"type": "array", "items": [{"type": "integer"}]},
    {"definitions": {"T": {"type": "object", "properties": {"next": {"$ref": "#/definitions/T"}}}},
     "$ref": "#/definitions/T"},
    {"type": "string", "format": "date-time"},  # with a format checker, format is enforced: not compiled
], ids=["pattern", "patternProperties", "ref-siblings", "draft4-exclusive", "tuple-items", "recursive", "format"])
def test_a_schema_beyond_it_gets_no_check(doc: dict[str, Any]) -> None:
    cls = jsonschema.validators.validator_for(doc)
    checker = cls.FORMAT_CHECKER if "format" in doc else None
    assert acceptor(cls(doc, format_checker=checker)) is None


def test_a_value_it_is_unsure_of_is_still_refused_by_jsonschema_with_its_message() -> None:
    from kafkajet.schema_registry.wire import frame

    deserializer = JSONDeserializer(Schema(json.dumps(EVENT), "JSON"))
    assert deserializer(frame(1, json.dumps(GOOD).encode()))["qty"] == 3
    with pytest.raises(SerializationError, match=r"at qty: -1 is less than the minimum of 0"):
        deserializer(frame(1, json.dumps({**GOOD, "qty": -1}).encode()))
