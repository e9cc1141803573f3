"""The one table of schema formats (kafkajet.schema_registry.formats), found by the registry's names; the table of
their Spark pieces (kafkajet.spark.formats), by Spark's; the registry knowing no Spark; and no module but the
tables comparing a format's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kafkajet
from kafkajet.schema_registry import formats
from kafkajet.schema_registry.schema_format import InvalidSchemaError
from kafkajet.testing.schema_registry.store import SCHEMA_TYPES, RegistryError, canonical, validate
from tests.helpers.requires import require

PACKAGE = Path(kafkajet.__file__).parent
# Spark's names of the formats (the keyFormat / valueFormat values), written out: kafkajet.spark needs PySpark.
SPARK_NAMES = {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}
NAMES = {*formats.REGISTRY_NAMES, *SPARK_NAMES}


def test_each_format_is_found_by_its_registry_name_and_the_table_holds_the_three() -> None:
    assert formats.REGISTRY_NAMES == ("AVRO", "JSON", "PROTOBUF")
    for fmt in formats.FORMATS:
        assert formats.by_registry_name(fmt.registry_name) is fmt
    assert formats.by_registry_name("avro") is None and formats.by_registry_name("json-schema") is None
    assert SCHEMA_TYPES == ("AVRO", "JSON", "PROTOBUF")  # the registry's /schemas/types, in this order


def test_the_default_type_is_left_out_of_requests_and_answers() -> None:
    assert formats.schema_type_entry("AVRO") == {}
    assert formats.schema_type_entry("JSON") == {"schemaType": "JSON"}


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON"])
def test_json_schemas_compare_without_layout_and_sorted_only_when_normalizing(schema_type: str) -> None:
    text = '{ "type": "string",\n  "doc": "x" }'
    assert canonical(schema_type, text, False) == '{"type":"string","doc":"x"}'
    assert canonical(schema_type, text, True) == '{"doc":"x","type":"string"}'
    assert canonical(schema_type, "not json ", False) == "not json "


def test_protobuf_and_unknown_types_compare_stripped() -> None:
    assert canonical("PROTOBUF", " Cg9h \n", True) == "Cg9h"
    assert canonical("XML", " <a/> ", False) == "<a/>"


def test_validation_is_the_formats_parse_worded_by_the_registry() -> None:
    with pytest.raises(RegistryError, match="Invalid schema: not JSON") as e:
        validate("JSON", "{")
    assert (e.value.http_status, e.value.error_code) == (422, 42201)
    with pytest.raises(RegistryError, match="Invalid schema: unknown type 'ex.Missing'"):
        validate("AVRO", '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "ex.Missing"}]}')
    with pytest.raises(RegistryError, match="Invalid schema type 'XML'"):
        validate("XML", "<a/>")
    assert validate("PROTOBUF", "syntax = 'proto3';") is None  # a .proto text: accepted, not compared
    with pytest.raises(InvalidSchemaError):
        formats.AVRO.parse('{"type": "enum", "name": "E"}')


def test_avro_references_resolve_through_the_named_types_of_the_referenced_texts() -> None:
    dep = '{"type": "record", "name": "Dep", "namespace": "ex", "fields": []}'
    reader = formats.AVRO.parse('{"type": "record", "name": "R", "fields": [{"name": "d", "type": "ex.Dep"}]}',
                                [dep])
    assert formats.AVRO.incompatibilities(reader, reader) == []
    assert formats.AVRO.resolves_references and not formats.JSON.resolves_references


def test_every_format_has_its_spark_pieces_keyed_by_sparks_name() -> None:
    require("pyspark")
    from kafkajet.spark.formats import NAMES as SPARK_TABLE_NAMES
    from kafkajet.spark.formats import spark_format

    assert set(SPARK_TABLE_NAMES) == set(SPARK_NAMES)
    given = set()
    for name, registry_name in SPARK_NAMES.items():
        pieces = spark_format(name)
        assert pieces.name == name and pieces.schema_format is formats.by_registry_name(registry_name)
        given.update(pieces.given_options)
    with pytest.raises(KeyError):
        spark_format("binary")
    assert given == {"avroSchema", "keyAvroSchema", "jsonSchema", "keyJsonSchema", "protobufSchema",
                     "keyProtobufSchema"}


def _format_name_comparisons(source: str) -> list[str]:
    """Each comparison of a value with a format's name, or membership in a literal collection of them."""
    names = NAMES
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for operand in (node.left, *node.comparators):
            consts = [operand] if isinstance(operand, ast.Constant) else \
                list(operand.elts) if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else []
            if any(isinstance(c, ast.Constant) and c.value in names for c in consts):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_registry_layer_names_no_spark() -> None:
    # Not even as strings: a module path or a Spark name in the registry layer is a dependency in waiting.
    offenders = {}
    for path in sorted((PACKAGE / "schema_registry").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found = [n for n in ("spark", '"json-schema"') if n in text.lower()]
        if found:
            offenders[str(path.relative_to(PACKAGE))] = found
    assert offenders == {}


def test_no_module_compares_a_format_name_but_the_table() -> None:
    # The registry server's store and the serdes look formats up in the registry's table, the Spark side in its own.
    table = PACKAGE / "schema_registry" / "formats"
    users = [PACKAGE / "schema_registry", PACKAGE / "testing" / "schema_registry", PACKAGE / "spark"]
    offenders = {}
    for path in sorted(p for where in users for p in where.rglob("*.py")):
        if table in path.parents:
            continue
        if found := _format_name_comparisons(path.read_text(encoding="utf-8")):
            offenders[str(path.relative_to(PACKAGE))] = found
    assert offenders == {}


def test_the_check_sees_the_comparisons_it_looks_for() -> None:
    source = ('if t == "AVRO": pass\nif "protobuf" != f: pass\nif f in ("avro", "binary"): pass\n'
              'if t == "array": pass\n')
    assert _format_name_comparisons(source) == [
        "line 1: t == 'AVRO'", "line 2: 'protobuf' != f", "line 3: f in ('avro', 'binary')"]
