"""The whole mapping from the registry's schema formats to Spark's columns, keyed by Spark's own names for them
(the keyFormat / valueFormat values: avro, json-schema, protobuf). One module of Spark pieces per format here
(avro.py, json_schema.py, protobuf.py: the options that give its schema as text, the extra it needs, the Spark
and Arrow types of its columns, its decoders and encoders), the type mappings and the column codecs they use
beside them, and the column they are planned into (registry_column.py).

The registry layer (kafkajet.schema_registry.formats) knows nothing of Spark: each piece here names the
registry format it maps (`schema_format`). Nothing here imports the modules of kafkajet.spark above it; each
format's libraries (fastavro, jsonschema, protobuf) are imported only when used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kafkajet.schema_registry.schema_format import SchemaFormat
from kafkajet.spark.formats.avro import SPARK as _AVRO
from kafkajet.spark.formats.json_schema import SPARK as _JSON_SCHEMA
from kafkajet.spark.formats.protobuf import SPARK as _PROTOBUF

if TYPE_CHECKING:
    from kafkajet.spark.formats.registry_column import RegistryColumn


class SparkFormat(Protocol):
    """A format's Spark pieces. `name`: Spark's name of it (the keyFormat / valueFormat value);
    `schema_format`: the registry format it maps; `given_options`: the options giving the schema as text, the
    value's and the key's; `needs`: the module its decoders and encoders import, and the kafkajet extra that
    installs it."""

    name: str
    given_options: tuple[str, str]
    needs: tuple[str, str]

    @property
    def schema_format(self) -> SchemaFormat: ...

    def given_schema(self, raw: str, option: str) -> None:
        """ConfigError naming `option` when its text is not a schema of this format."""
        ...

    def derived_schema(self, data_type: Any) -> str:
        """The schema text of a Spark type (what the sink registers when no schema is given)."""
        ...

    def arrow_type(self, column: RegistryColumn) -> Any:
        """The Arrow type of a registered column's decoded values."""
        ...

    def imports(self, client: Any, schema: Any) -> tuple[tuple[str, str], ...]:
        """(file name, schema text) of what the schema imports, for the executors; () for most formats."""
        ...

    def message(self, opts: Mapping[str, str], field: str, schema_str: str) -> str | None:
        """The message of the schema a column is planned with, for formats with several per schema."""
        ...

    def decoder(self, column: RegistryColumn) -> Any:
        """A new decoder of the column: framed payloads -> Arrow values (decode_array)."""
        ...

    def encoder(self, column: RegistryColumn) -> Any:
        """A new encoder of the column: Arrow values -> framed payloads (encode_array)."""
        ...


SPARK_FORMATS: dict[str, SparkFormat] = {f.name: f for f in (_AVRO, _JSON_SCHEMA, _PROTOBUF)}
NAMES = tuple(SPARK_FORMATS)
AVRO_NAME = _AVRO.name  # the format a RegistryColumn has when none is named (from_avro / to_avro's)


def spark_format(name: str) -> SparkFormat:
    """The Spark pieces of the format a keyFormat / valueFormat names (a known one: registered_columns checks)."""
    return SPARK_FORMATS[name]
