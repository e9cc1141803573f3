"""The one table of schema formats (kafkajet.schema_registry.formats): each format found by either of its names,
its Spark pieces beside it, and no module but the formats' own comparing a format's name."""

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
NAMES = {(f.registry_name, f.spark_name) for f in formats.FORMATS}


def test_each_format_is_found_by_both_names_and_the_table_holds_the_three() -> None:
    assert NAMES == {("AVRO", "avro"), ("JSON", "json-schema"), ("PROTOBUF", "protobuf")}
    for fmt in formats.FORMATS:
        assert formats.by_registry_name(fmt.registry_name) is fmt
        assert formats.by_spark_name(fmt.spark_name) is fmt
    assert formats.by_registry_name("avro") is None and formats.by_spark_name("AVRO") is None
    assert formats.by_spark_name("binary") is None
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


def test_every_format_has_its_spark_pieces_beside_it() -> None:
    require("pyspark")
    from kafkajet.spark.formats import spark_format

    given = set()
    for fmt in formats.FORMATS:
        pieces = spark_format(fmt.spark_name)
        assert pieces.schema_format is fmt
        given.update(pieces.given_options)
    assert given == {"avroSchema", "keyAvroSchema", "jsonSchema", "keyJsonSchema", "protobufSchema",
                     "keyProtobufSchema"}


def _format_name_comparisons(source: str) -> list[str]:
    """Each comparison of a value with a format's name, or membership in a literal collection of them."""
    names = {n for pair in NAMES for n in pair}
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


def test_no_module_compares_a_format_name_but_the_table() -> None:
    # The registry server's store, the serdes and the Spark side look formats up in the table.
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
