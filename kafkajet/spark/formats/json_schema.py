"""JSON Schema's Spark pieces: types by json_schema_types.py, decoded and encoded record by record by the
serdes (message_columns.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafkajet.schema_registry.formats import JSON
from kafkajet.spark.formats.json_text import check_json
from kafkajet.spark.formats.message_pieces import MessageColumnsFormat

if TYPE_CHECKING:
    from kafkajet.spark.formats.registry_column import RegistryColumn


class JsonSchemaSpark(MessageColumnsFormat):
    name = "json-schema"
    schema_format = JSON
    given_options = ("jsonSchema", "keyJsonSchema")
    needs = ("jsonschema", "jsonschema")

    def given_schema(self, raw: str, option: str) -> None:
        check_json(raw, option)

    def derived_schema(self, data_type: Any) -> str:
        from kafkajet.spark.formats.json_schema_types import json_schema_of

        return json.dumps(json_schema_of(data_type))

    def arrow_type(self, column: RegistryColumn) -> Any:
        from kafkajet.spark.formats.json_schema_types import arrow_type

        return arrow_type(json.loads(column.schema_str))

    def imports(self, client: Any, schema: Any) -> tuple[tuple[str, str], ...]:
        return ()

    def message(self, opts: Mapping[str, str], field: str, schema_str: str) -> str | None:
        return None

    def record_decoding(self, column: RegistryColumn, client: Any
                        ) -> tuple[Any, Callable[[Any], Any], tuple[type[Exception], ...]]:
        """(deserializer, converter to Arrow's values, the errors that make a record undecodable)."""
        from kafkajet.errors import SerializationError
        from kafkajet.schema_registry.json_schema import JSONDeserializer
        from kafkajet.spark.formats.json_schema_types import Mismatch, converter

        # A planned (registry) schema is the reader's shape, not its validator: a record is checked against
        # the schema it was written with, so a newer version (a property added under a closed model)
        # reads into the planned columns. A schema the user gave (jsonSchema) is theirs to enforce.
        validate_with = column.schema_str if column.schema_id is None else None
        return (JSONDeserializer(validate_with, schema_registry_client=client),
                converter(json.loads(column.schema_str)), (SerializationError, Mismatch))

    def record_encoding(self, column: RegistryColumn, client: Any, conf: dict[str, Any]
                        ) -> tuple[Callable[[Any, Any], Any], Any]:
        """(what the serializer takes, made from an Arrow value and its type; the serializer)."""
        from kafkajet.schema_registry.json_schema import JSONSerializer
        from kafkajet.spark.formats.json_schema_types import to_json

        return to_json, JSONSerializer(column.schema_str, client, conf=conf)


SPARK = JsonSchemaSpark()
