"""Avro's Spark pieces: types by avro_types.py, decoded and encoded by column where it can (avro_columns.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafkajet.schema_registry.formats import AVRO
from kafkajet.spark.formats.json_text import check_json

if TYPE_CHECKING:
    from kafkajet.spark.formats.registry_column import RegistryColumn


class AvroSpark:
    name = "avro"
    schema_format = AVRO
    given_options = ("avroSchema", "keyAvroSchema")
    needs = ("fastavro", "avro")

    def given_schema(self, raw: str, option: str) -> None:
        check_json(raw, option)

    def derived_schema(self, data_type: Any) -> str:
        from kafkajet.spark.formats.avro_types import avro_schema_of

        return json.dumps(avro_schema_of(data_type))

    def arrow_type(self, column: RegistryColumn) -> Any:
        from kafkajet.spark.formats.avro_types import arrow_type

        return arrow_type(json.loads(column.schema_str))[0]

    def imports(self, client: Any, schema: Any) -> tuple[tuple[str, str], ...]:
        return ()

    def message(self, opts: Mapping[str, str], field: str, schema_str: str) -> str | None:
        return None

    def decoder(self, column: RegistryColumn) -> Any:
        from kafkajet.spark.formats.avro_columns import ColumnDecoder

        return ColumnDecoder(column)

    def encoder(self, column: RegistryColumn) -> Any:
        from kafkajet.spark.formats.avro_columns import ColumnEncoder

        return ColumnEncoder(column)


SPARK = AvroSpark()
