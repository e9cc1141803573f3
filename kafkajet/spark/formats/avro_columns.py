"""Avro columns in Arrow record batches: framed payloads decoded into the planned struct column (the
source, from_avro), and struct columns encoded into framed payloads (the sink, to_avro).

Decoding goes through kafkajet.schema_registry's AvroDeserializer: the writer's schema found by the frame's
id (one registry round trip per id and worker process), and Avro schema resolution into the planned schema
when a record was written with another version. A record that cannot be decoded fails the task naming
topic, partition and offset, or is null under mode PERMISSIVE. No Python object outlives its batch.

The columns' decoders and encoders are kept per worker process by registered_batches.py, which finds this
module through the format table (formats/avro.py).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from kafkajet.errors import SerializationError
from kafkajet.schema_registry.formats import AVRO
from kafkajet.spark.formats.registry_clients import registry_client
from kafkajet.spark.formats.registry_column import RegistryColumn


def _has_uuid(schema: Any) -> bool:
    if isinstance(schema, dict):
        return schema.get("logicalType") == "uuid" or any(_has_uuid(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_uuid(v) for v in schema)
    return False


def _uuids_to_str(value: Any) -> Any:
    """fastavro gives uuid.UUID objects; Spark's from_avro gives the string."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _uuids_to_str(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_uuids_to_str(v) for v in value]
    return value


class ColumnDecoder:
    """Framed Avro payloads -> Arrow values of the column's planned type."""

    def __init__(self, column: RegistryColumn) -> None:
        import json

        import fastavro

        from kafkajet.schema_registry.avro import AvroDeserializer
        from kafkajet.spark.formats.avro_types import arrow_type

        self.column = column
        parsed = json.loads(column.schema_str)
        self.type = arrow_type(parsed)[0]
        self._fix_uuids = _has_uuid(parsed)
        self._deserializer = AvroDeserializer(registry_client(column.registry), column.schema_str)
        from kafkajet.schema_registry.avro import Schema, parse_avro
        from kafkajet.schema_registry.wire import frame
        from kafkajet.spark.formats.avro_flat import flat_plan

        self._parsed = parse_avro(Schema(column.schema_str, AVRO.registry_name))
        self._read = fastavro.schemaless_reader
        self._planned_head = None if column.schema_id is None else frame(column.schema_id, b"")

        # Flat records of the planned id decode by column (avro_flat.py); the rest record by record.
        self._flat = flat_plan(parsed) if column.schema_id is not None else None

    def decode_array(self, values: pa.Array, topic: str, where: Callable[[int], str]) -> pa.Array:
        """decode(), by column where avro_flat can (same result, checked by the tests), else record by record."""
        if self._flat is not None:
            from kafkajet.spark.formats.avro_flat import decode_flat

            assert self.column.schema_id is not None
            out = decode_flat(values, self._flat, self.column.schema_id, self.type)
            if out is not None:
                return out
        return self.decode(values.to_pylist(), topic, where)

    def decode(self, payloads: Sequence[bytes | None], topic: str, where: Callable[[int], str]) -> pa.Array:
        """`where(i)` names the i-th payload's record in errors ("t-0 offset 12"); `topic` is the subject's
        topic for the deserializer's context."""
        from kafkajet.serialization import MessageField, SerializationContext

        field = MessageField.KEY if self.column.field == "key" else MessageField.VALUE
        ctx = SerializationContext(topic, field)
        out: list[Any] = []
        append = out.append
        deserialize = self._deserializer
        planned = self._planned_head
        read, parsed, buffer = self._read, self._parsed, io.BytesIO
        for i, data in enumerate(payloads):
            if data is None:
                append(None)  # a tombstone (or a record without a key) stays null
                continue
            if planned is not None and data[:5] == planned:
                # The planned schema wrote it: no resolution, no lookup. Whatever goes wrong is retried by
                # the deserializer below, which words the error.
                try:
                    buf = buffer(data)
                    buf.seek(5)
                    value = read(buf, parsed, None)
                    if buf.tell() == len(data):
                        append(value)
                        continue
                except Exception:  # noqa: BLE001, S110 - the deserializer's turn
                    pass
            try:
                append(deserialize(data, ctx))
            except SerializationError as e:
                if self.column.permissive:
                    append(None)
                    continue
                raise SerializationError(
                    f"{where(i)}: {e} (planned with "
                    f"{self.column.planned_with}; option mode=PERMISSIVE reads such records as null)") from e
        if self._fix_uuids:
            out = [_uuids_to_str(v) for v in out]
        try:
            return pa.array(out, type=self.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            raise SerializationError(f"{where(0)} to {where(len(out) - 1)}: a decoded {self.column.field} does "
                                     f"not fit the planned Spark type: {e}") from e


class ColumnEncoder:
    """Arrow values -> framed Avro payloads (magic 0, the schema's id, the Avro binary)."""

    def __init__(self, column: RegistryColumn) -> None:
        import fastavro

        from kafkajet.schema_registry.avro import Schema, parse_avro

        if column.schema_id is None:
            raise SerializationError("an Avro column to encode needs its registered schema id")
        self.column = column
        self._parsed = parse_avro(Schema(column.schema_str, AVRO.registry_name))
        self._write = fastavro.schemaless_writer
        import json

        from kafkajet.spark.formats.avro_flat import flat_plan

        # Flat records encode by column (avro_flat_encode.py); the rest record by record.
        schema = json.loads(column.schema_str)
        self._flat = flat_plan(schema)
        self._names = [f["name"] for f in schema["fields"]] if self._flat is not None else []

    def encode_array(self, values: pa.Array, where: Callable[[int], str] = lambda row: f"row {row} of the batch"
                     ) -> pa.Array:
        """encode(), by column where avro_flat_encode can (the same bytes, checked by the tests)."""
        if self._flat is not None:
            from kafkajet.spark.formats.avro_flat_encode import encode_flat

            assert self.column.schema_id is not None
            out = encode_flat(values, self._flat, self._names, self.column.schema_id)
            if out is not None:
                return out
        return pa.array(self.encode(values.to_pylist(), where), type=pa.binary())

    def encode(self, values: Sequence[Any], where: Callable[[int], str] = lambda row: f"row {row} of the batch"
               ) -> list[bytes | None]:
        from kafkajet.schema_registry.avro import _explain
        from kafkajet.schema_registry.wire import frame

        out: list[bytes | None] = []
        schema_id = self.column.schema_id
        assert schema_id is not None
        for row, value in enumerate(values):
            if value is None:
                out.append(None)
                continue
            buf = io.BytesIO()
            try:
                self._write(buf, self._parsed, value)
            except Exception as e:
                raise SerializationError(
                    f"{where(row)}: its {self.column.field} does not match Avro schema id {schema_id} "
                    f"(subject '{self.column.subject}'): {_explain(self._parsed, value, e)}") from e
            out.append(frame(schema_id, buf.getvalue()))
        return out
