"""Avro as a schema format: its schemas are JSON, parsed with the named types of the schemas their references
name; compatibility by the specification's schema-resolution rules (avro_compatibility.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkajet.schema_registry import avro_compatibility
from kafkajet.schema_registry.formats.json_text import compact_json


class AvroFormat:
    registry_name = "AVRO"
    resolves_references = True

    def parse(self, schema_str: str, referenced: Sequence[str] = ()) -> Any:
        return avro_compatibility.parse(schema_str, referenced)

    def canonical(self, schema_str: str, normalize: bool) -> str:
        return compact_json(schema_str, normalize)

    def incompatibilities(self, reader: Any, writer: Any) -> list[str]:
        return avro_compatibility.incompatibilities(reader, writer)

    def __repr__(self) -> str:
        return "<schema format AVRO>"


AVRO = AvroFormat()
