"""JSON Schema as a schema format: its schemas are JSON documents (references are not resolved: the
serdes refuse them); compatibility by Confluent's rules for documents (json_compatibility.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kafkajet.schema_registry import json_compatibility
from kafkajet.schema_registry.formats.json_text import compact_json
from kafkajet.schema_registry.schema_format import InvalidSchemaError


class JsonSchemaFormat:
    registry_name = "JSON"
    resolves_references = False

    def parse(self, schema_str: str, referenced: Sequence[str] = ()) -> Any:
        try:
            return json.loads(schema_str)
        except ValueError as e:
            raise InvalidSchemaError(f"not JSON: {e}") from None

    def canonical(self, schema_str: str, normalize: bool) -> str:
        return compact_json(schema_str, normalize)

    def incompatibilities(self, reader: Any, writer: Any) -> list[str]:
        return json_compatibility.incompatibilities(reader, writer)

    def __repr__(self) -> str:
        return "<schema format JSON>"


JSON = JsonSchemaFormat()
