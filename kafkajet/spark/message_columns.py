"""Protobuf and JSON Schema columns in Arrow record batches, record by record: framed payloads decoded by
kafkajet.schema_registry's deserializers into the planned struct column (the source), and struct values
encoded by its serializers into framed payloads (the sink). avro_columns.decoder / encoder pick these for a
column of either format; the type mappings are protobuf_types.py and json_schema_types.py.

A record that cannot be decoded (not framed, an unknown schema id, a payload the writer's schema rejects, a
value that does not fit the planned Spark type) fails the task naming topic, partition, offset and the
schema, or is null under mode PERMISSIVE; the batch's other records are decoded as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from kafkajet.errors import SerializationError
from kafkajet.serialization import MessageField, SerializationContext
from kafkajet.spark.registry_formats import RegistryColumn, arrow_type_of


def _ctx(column: RegistryColumn, topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if column.field == "key" else MessageField.VALUE)


class RecordDecoder:
    """Framed payloads -> Arrow values of the column's planned type, one deserializer call per record."""

    def __init__(self, column: RegistryColumn) -> None:
        from kafkajet.spark.avro_columns import registry_client

        self.column = column
        self.type = arrow_type_of(column)
        client = registry_client(column.registry)
        self._errors: tuple[type[Exception], ...]
        if column.format == "protobuf":
            from kafkajet.schema_registry.protobuf import ProtobufDeserializer
            from kafkajet.spark.protobuf_types import converter, message_class

            cls = message_class(column)
            self._deserialize: Any = ProtobufDeserializer(cls, schema_registry_client=client)
            self._convert: Callable[[Any], Any] = converter(cls.DESCRIPTOR)  # type: ignore[attr-defined]
            self._errors = (SerializationError, OverflowError)
        else:
            import json

            from kafkajet.schema_registry.json_schema import JSONDeserializer
            from kafkajet.spark.json_schema_types import Mismatch
            from kafkajet.spark.json_schema_types import converter as json_converter

            # A planned (registry) schema is the reader's shape, not its validator: a record is checked against
            # the schema it was written with, so a newer version (a property added under a closed model)
            # reads into the planned columns. A schema the user gave (jsonSchema) is theirs to enforce.
            validate_with = column.schema_str if column.schema_id is None else None
            self._deserialize = JSONDeserializer(validate_with, schema_registry_client=client)
            self._convert = json_converter(json.loads(column.schema_str))
            self._errors = (SerializationError, Mismatch)

    def decode_array(self, values: pa.Array, topic: str, where: Callable[[int], str]) -> pa.Array:
        """`where(i)` names the i-th payload's record in errors ("t-0 offset 12"); `topic` is the subject's
        topic for the deserializer's context."""
        ctx = _ctx(self.column, topic)
        out: list[Any] = []
        for i, data in enumerate(values.to_pylist()):
            if data is None:
                out.append(None)  # a tombstone (or a record without a key) stays null
                continue
            try:
                out.append(self._convert(self._deserialize(data, ctx)))
            except self._errors as e:
                self._failed(i, e, where)
                out.append(None)
        try:
            return pa.array(out, type=self.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            # Find the value Arrow refused (a uint64 above a long's range, say), and treat it as undecodable.
            for i, value in enumerate(out):
                try:
                    pa.array([value], type=self.type)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                    self._failed(i, e, where)
                    out[i] = None
            return pa.array(out, type=self.type)

    def _failed(self, i: int, e: Exception, where: Callable[[int], str]) -> None:
        """Raise naming the record, unless PERMISSIVE (then the caller puts a null)."""
        if self.column.permissive:
            return
        raise SerializationError(f"{where(i)}: {e} (planned with {self.column.planned_with}; option "
                                 f"mode=PERMISSIVE reads such records as null)") from e


class RecordEncoder:
    """Arrow struct values -> framed payloads with the column's registered schema id."""

    def __init__(self, column: RegistryColumn) -> None:
        from kafkajet.spark.avro_columns import registry_client

        if column.schema_id is None:
            raise SerializationError(f"a {column.format} column to encode needs its registered schema id")
        self.column = column
        client = registry_client(column.registry)
        # The id was registered (or looked up) at planning: the serializers only fetch it, once per worker.
        conf = {"auto.register.schemas": False, "use.schema.id": column.schema_id}
        self._make: Callable[[Any], Any]
        if column.format == "protobuf":
            from kafkajet.schema_registry.protobuf import ProtobufSerializer
            from kafkajet.spark.protobuf_types import fill, message_class

            cls = message_class(column)

            def make(value: Any) -> Any:
                msg = cls()
                fill(msg, value)
                return msg

            self._make = make
            self._serialize: Any = ProtobufSerializer(cls, client, conf)  # type: ignore[arg-type]
        else:
            from kafkajet.schema_registry.json_schema import JSONSerializer

            self._make = lambda value: value
            self._serialize = JSONSerializer(column.schema_str, client, conf=conf)
        topic = (column.subject or "").removesuffix(f"-{column.field}")
        self._ctx = _ctx(column, topic)

    def encode_array(self, values: pa.Array, where: Callable[[int], str] = lambda row: f"row {row} of the batch"
                     ) -> pa.Array:
        from kafkajet.spark.json_schema_types import to_json

        out: list[bytes | None] = []
        json_values = self.column.format == "json-schema"
        for row, value in enumerate(values.to_pylist()):
            if value is None:
                out.append(None)
                continue
            try:
                obj = self._make(to_json(value, values.type) if json_values else value)
                out.append(self._serialize(obj, self._ctx))
            except (SerializationError, ValueError, TypeError) as e:
                raise SerializationError(
                    f"{where(row)}: its {self.column.field} does not fit {self.column.format} schema id "
                    f"{self.column.schema_id} (subject '{self.column.subject}'): {e}") from e
        return pa.array(out, type=pa.binary())
