"""Schema Registry support: a registry client and serializers in the Confluent wire format, importable as
confluent-kafka's are (`from kafkajet.schema_registry import SchemaRegistryClient, AvroSerializer, ...`).

The client needs nothing beyond the standard library; AvroSerializer / AvroDeserializer need
`kafkajet[avro]` (fastavro), JSONSerializer / JSONDeserializer `kafkajet[jsonschema]`, ProtobufSerializer /
ProtobufDeserializer `kafkajet[protobuf]`: each is imported on first use, so a missing extra is named then.
"""

from __future__ import annotations

from typing import Any

from kafkajet.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from kafkajet.schema_registry.strategies import (
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from kafkajet.serialization import MessageField, SerializationContext

_LAZY = {
    "AvroSerializer": "kafkajet.schema_registry.avro",
    "AvroDeserializer": "kafkajet.schema_registry.avro",
    "JSONSerializer": "kafkajet.schema_registry.json_schema",
    "JSONDeserializer": "kafkajet.schema_registry.json_schema",
    "ProtobufSerializer": "kafkajet.schema_registry.protobuf",
    "ProtobufDeserializer": "kafkajet.schema_registry.protobuf",
}

__all__ = [
    "MessageField", "RegisteredSchema", "Schema", "SchemaReference", "SchemaRegistryClient",
    "SchemaRegistryError", "SerializationContext", "record_subject_name_strategy",
    "topic_record_subject_name_strategy", "topic_subject_name_strategy", *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkajet.schema_registry' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
