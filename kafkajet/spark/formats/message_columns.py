"""Protobuf and JSON Schema columns in Arrow record batches, record by record: framed payloads decoded by
kafkajet.schema_registry's deserializers into the planned struct column (the source), and struct values
encoded by its serializers into framed payloads (the sink). What differs between the two formats (the
serde, the conversion to and from Arrow's values) is each one's Spark piece (formats/protobuf.py,
formats/json_schema.py), which makes these for its columns; the type mappings are protobuf_types.py and
json_schema_types.py.

A record that cannot be decoded (not framed, an unknown schema id, a payload the writer's schema rejects, a
value that does not fit the planned Spark type) fails the task naming topic, partition, offset and the
schema, or is null under mode PERMISSIVE; the batch's other records are decoded as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import pyarrow as pa

from kafkajet.errors import SerializationError
from kafkajet.serialization import MessageField, SerializationContext
from kafkajet.spark.formats import spark_format
from kafkajet.spark.formats.registry_clients import registry_client
from kafkajet.spark.formats.registry_column import RegistryColumn


class RecordFormat(Protocol):
    """What a format decoded and encoded here adds to its Spark pieces (formats/)."""

    def record_decoding(self, column: RegistryColumn, client: Any
                        ) -> tuple[Any, Callable[[Any], Any], tuple[type[Exception], ...]]:
        """(deserializer, converter to Arrow's values, the errors that make a record undecodable)."""
        ...

    def record_encoding(self, column: RegistryColumn, client: Any, conf: dict[str, Any]
                        ) -> tuple[Callable[[Any, Any], Any], Any]:
        """(what the serializer takes, made from an Arrow value and its type; the serializer)."""
        ...


def _record_format(column: RegistryColumn) -> RecordFormat:
    return cast(RecordFormat, spark_format(column.format))


def _ctx(column: RegistryColumn, topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if column.field == "key" else MessageField.VALUE)


class RecordDecoder:
    """Framed payloads -> Arrow values of the column's planned type, one deserializer call per record."""

    def __init__(self, column: RegistryColumn) -> None:
        self.column = column
        self.type = column.arrow_type()
        client = registry_client(column.registry)
        self._deserialize: Any
        self._convert: Callable[[Any], Any]
        self._errors: tuple[type[Exception], ...]
        self._deserialize, self._convert, self._errors = _record_format(column).record_decoding(column, client)

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
        if column.schema_id is None:
            raise SerializationError(f"a {column.format} column to encode needs its registered schema id")
        self.column = column
        client = registry_client(column.registry)
        # The id was registered (or looked up) at planning: the serializers only fetch it, once per worker.
        conf = {"auto.register.schemas": False, "use.schema.id": column.schema_id}
        self._make: Callable[[Any, Any], Any]
        self._serialize: Any
        self._make, self._serialize = _record_format(column).record_encoding(column, client, conf)
        topic = (column.subject or "").removesuffix(f"-{column.field}")
        self._ctx = _ctx(column, topic)

    def encode_array(self, values: pa.Array, where: Callable[[int], str] = lambda row: f"row {row} of the batch"
                     ) -> pa.Array:
        out: list[bytes | None] = []
        for row, value in enumerate(values.to_pylist()):
            if value is None:
                out.append(None)
                continue
            try:
                obj = self._make(value, values.type)
                out.append(self._serialize(obj, self._ctx))
            except (SerializationError, ValueError, TypeError) as e:
                raise SerializationError(
                    f"{where(row)}: its {self.column.field} does not fit {self.column.format} schema id "
                    f"{self.column.schema_id} (subject '{self.column.subject}'): {e}") from e
        return pa.array(out, type=pa.binary())
