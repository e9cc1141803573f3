"""Each schema format's Spark pieces, found through the one table of formats
(kafkajet.schema_registry.formats, by either name): the options that give its schema as text, the extra it
needs, the Spark and Arrow types of its columns, and its decoders and encoders. One module per format here,
named by SchemaFormat.spark_module, imported when a column of that format is planned; each imports its
format's libraries (fastavro, jsonschema, protobuf) only when used."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

from kafkajet.schema_registry.formats import by_spark_name
from kafkajet.schema_registry.schema_format import SchemaFormat


class SparkFormat(Protocol):
    """A format's Spark pieces. `given_options`: the options giving the schema as text, the value's and the
    key's; `needs`: the module its decoders and encoders import, and the kafkajet extra that installs it."""

    schema_format: SchemaFormat
    given_options: tuple[str, str]
    needs: tuple[str, str]

    def given_schema(self, raw: str, option: str) -> None:
        """ConfigError naming `option` when its text is not a schema of this format."""
        ...

    def derived_schema(self, data_type: Any) -> str:
        """The schema text of a Spark type (what the sink registers when no schema is given)."""
        ...

    def arrow_type(self, column: Any) -> Any:
        """The Arrow type of a registered column's decoded values."""
        ...

    def imports(self, client: Any, schema: Any) -> tuple[tuple[str, str], ...]:
        """(file name, schema text) of what the schema imports, for the executors; () for most formats."""
        ...

    def message(self, opts: Mapping[str, str], field: str, schema_str: str) -> str | None:
        """The message of the schema a column is planned with, for formats with several per schema."""
        ...

    def decoder(self, column: Any) -> Any:
        """A new decoder of the column: framed payloads -> Arrow values (decode_array)."""
        ...

    def encoder(self, column: Any) -> Any:
        """A new encoder of the column: Arrow values -> framed payloads (encode_array)."""
        ...


def spark_format(spark_name: str) -> SparkFormat:
    """The Spark pieces of the format a keyFormat / valueFormat names (a known one: registered_columns checks)."""
    fmt = by_spark_name(spark_name)
    if fmt is None:
        raise KeyError(spark_name)
    return importlib.import_module(fmt.spark_module).SPARK  # type: ignore[no-any-return]
