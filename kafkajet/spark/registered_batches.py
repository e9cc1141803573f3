"""Registered key/value columns in Arrow record batches: the source's decoded in place (decode_batch), the
sink's encoded into framed payloads (encode_batch), each by its format's decoder or encoder (found through the
format table: formats/), one per planned column and worker process, kept across tasks."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

from kafkajet.spark.formats import spark_format
from kafkajet.spark.formats.registry_column import RegistryColumn

_LOCK = threading.Lock()
_DECODERS: dict[RegistryColumn, Any] = {}
_ENCODERS: dict[RegistryColumn, Any] = {}


def _cached(cache: dict[RegistryColumn, Any], column: RegistryColumn, make: Any) -> Any:
    with _LOCK:
        hit = cache.get(column)
    if hit is None:
        hit = make(column)  # outside the lock: it may ask the registry
        with _LOCK:
            cache[column] = hit
    return hit


def decoder(column: RegistryColumn) -> Any:
    """The column's decoder: Avro's by column where it can (avro_columns), the others record by record
    (message_columns)."""
    return _cached(_DECODERS, column, spark_format(column.format).decoder)


def encoder(column: RegistryColumn) -> Any:
    return _cached(_ENCODERS, column, spark_format(column.format).encoder)


def decode_batch(rb: pa.RecordBatch, columns: dict[str, RegistryColumn], topic: str,
                 partition: int) -> pa.RecordBatch:
    """The source's batch with its registered key/value columns decoded in place."""
    offsets = rb.column(rb.schema.get_field_index("offset"))
    arrays = list(rb.columns)
    fields = list(rb.schema)
    for name, column in columns.items():
        i = rb.schema.get_field_index(name)
        arrays[i] = decoder(column).decode_array(rb.column(i), topic,
                                                 lambda row: f"{topic}-{partition} offset {offsets[row].as_py()}")
        fields[i] = pa.field(name, arrays[i].type, nullable=True)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def encode_batch(rb: pa.RecordBatch, columns: dict[str, RegistryColumn]) -> pa.RecordBatch:
    """The sink's batch with its registered key/value columns encoded into binary."""
    arrays = list(rb.columns)
    fields = list(rb.schema)
    for name, column in columns.items():
        i = rb.schema.get_field_index(name)
        arrays[i] = encoder(column).encode_array(rb.column(i))
        fields[i] = pa.field(name, pa.binary())
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
