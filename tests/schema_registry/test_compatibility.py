"""Avro schema-resolution rules, the registry's compatibility levels built on them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkajet.schema_registry.avro_compatibility import InvalidSchemaError, incompatibilities, parse
from kafkajet.schema_registry.compatibility import check as check_level


def check(level: str, new: Any, previous: list[Any]) -> list[str]:
    """The registry's levels over Avro's rules."""
    return check_level(level, new, previous, incompatibilities)


def rec(*fields: dict[str, Any], name: str = "User") -> Any:
    return parse(json.dumps({"type": "record", "name": name, "namespace": "ex", "fields": list(fields)}))


ID = {"name": "id", "type": "long"}
NAME = {"name": "name", "type": "string"}
EMAIL_DEFAULT = {"name": "email", "type": ["null", "string"], "default": None}
EMAIL_REQUIRED = {"name": "email", "type": "string"}


def test_added_field_with_default_is_backward_compatible_without_default_not() -> None:
    v1 = rec(ID, NAME)
    assert incompatibilities(rec(ID, NAME, EMAIL_DEFAULT), v1) == []
    problems = incompatibilities(rec(ID, NAME, EMAIL_REQUIRED), v1)
    assert len(problems) == 1 and "email" in problems[0] and "no default" in problems[0]


def test_removed_field_is_backward_but_not_forward_compatible_unless_defaulted() -> None:
    v1, v2 = rec(ID, NAME), rec(ID)
    assert check("BACKWARD", v2, [v1]) == []
    assert check("FORWARD", v2, [v1]) != []
    assert check("FULL", v2, [v1]) != []
    assert check("NONE", v2, [v1]) == []


@pytest.mark.parametrize(("writer", "reader", "ok"), [
    ("int", "long", True), ("int", "double", True), ("long", "int", False), ("float", "double", True),
    ("string", "bytes", True), ("bytes", "string", True), ("string", "int", False), ("double", "float", False),
])
def test_promotions(writer: str, reader: str, ok: bool) -> None:
    assert (incompatibilities(rec({"name": "f", "type": reader}), rec({"name": "f", "type": writer})) == []) is ok


def test_unions_enums_arrays_maps_fixed_and_names() -> None:
    assert incompatibilities(parse('["null","string","int"]'), parse('["null","string"]')) == []
    assert incompatibilities(parse('["null","string"]'), parse('["null","string","int"]')) != []
    assert incompatibilities(parse('["null","long"]'), parse('"int"')) == []  # a branch promotes
    e = '{{"type":"enum","name":"E","symbols":{}{}}}'
    assert incompatibilities(parse(e.format('["A","B","C"]', "")), parse(e.format('["A","B"]', ""))) == []
    assert incompatibilities(parse(e.format('["A"]', "")), parse(e.format('["A","B"]', ""))) != []
    assert incompatibilities(parse(e.format('["A"]', ',"default":"A"')), parse(e.format('["A","B"]', ""))) == []
    assert incompatibilities(parse('{"type":"array","items":"long"}'), parse('{"type":"array","items":"int"}')) == []
    assert incompatibilities(parse('{"type":"map","values":"int"}'), parse('{"type":"map","values":"long"}')) != []
    assert incompatibilities(parse('{"type":"fixed","name":"F","size":4}'),
                             parse('{"type":"fixed","name":"F","size":8}')) != []
    assert incompatibilities(rec(ID, name="Other"), rec(ID)) != []


def test_recursive_types_terminate() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    node2 = json.loads(json.dumps(node))
    node2["fields"].append({"name": "w", "type": "int", "default": 0})
    assert incompatibilities(parse(json.dumps(node2)), parse(json.dumps(node))) == []


def test_transitive_checks_every_version_not_just_the_latest() -> None:
    v1 = rec(ID)
    v2 = rec(ID, {"name": "x", "type": "int", "default": 0})
    v3 = rec(ID, {"name": "x", "type": "int"})  # reads v2 data (x present), not v1 data (x missing)
    assert check("BACKWARD", v3, [v1, v2]) == []
    assert check("BACKWARD_TRANSITIVE", v3, [v1, v2]) != []


@pytest.mark.parametrize("text", ['{"type":"record","name":"R"}', '"nope"', "{", '{"type":"enum","name":"E"}',
                                  '{"type":"record","name":"R","fields":[{"name":"a","type":"int"},'
                                  '{"name":"a","type":"int"}]}'])
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        parse(text)
