"""The one table of schema formats, keyed by the registry's schemaType (AVRO, JSON, PROTOBUF). The registry
server's store and the serdes look a format up here, and so do the layers built on the registry (each with its
own names for the formats, mapped to these objects); no other module compares the registry's format names."""

from __future__ import annotations

from kafkajet.schema_registry.formats.avro import AVRO
from kafkajet.schema_registry.formats.json_schema import JSON
from kafkajet.schema_registry.formats.protobuf import PROTOBUF
from kafkajet.schema_registry.schema_format import InvalidSchemaError, SchemaFormat

FORMATS: tuple[SchemaFormat, ...] = (AVRO, JSON, PROTOBUF)
# The registry's schemaType when a request or a stored schema names none (and which answers leave out).
DEFAULT = AVRO
DEFAULT_TYPE = DEFAULT.registry_name
REGISTRY_NAMES = tuple(f.registry_name for f in FORMATS)
_BY_REGISTRY_NAME = {f.registry_name: f for f in FORMATS}

__all__ = ["AVRO", "DEFAULT", "DEFAULT_TYPE", "FORMATS", "JSON", "PROTOBUF", "REGISTRY_NAMES",
           "InvalidSchemaError", "SchemaFormat", "by_registry_name", "schema_type_entry"]


def by_registry_name(schema_type: str) -> SchemaFormat | None:
    """The format of a registry schemaType (upper case, as Schema and the store keep it); None if unknown."""
    return _BY_REGISTRY_NAME.get(schema_type)


def schema_type_entry(schema_type: str) -> dict[str, str]:
    """The schemaType member of a registry request, answer or log record: none for the default type, as
    Confluent's registry and clients write them."""
    return {} if schema_type == DEFAULT_TYPE else {"schemaType": schema_type}
