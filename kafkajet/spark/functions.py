"""Registry-aware column functions for ordinary DataFrames: `from_avro` decodes framed Avro (magic byte, schema
id, payload) into a struct, `to_avro` encodes a column into it, registering its schema.

They are Arrow UDFs in Python, not JVM expressions, so they work on Spark Connect too (where py4j is not
available) and need no jar. from_avro plans its Spark type on the driver (the subject's latest schema, or a
pinned version / id, or the given JSON); records written with other versions are resolved into it, as the
source does. to_avro derives the Avro schema from the column's Spark type (or takes `avro_schema`) and
registers it under `subject` from the workers, once per worker process (registering is idempotent).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from kafkajet.errors import ConfigError
from kafkajet.schema_registry.formats import AVRO
from kafkajet.spark.formats import AVRO_NAME
from kafkajet.spark.formats.registry_column import RegistryColumn
from kafkajet.spark.registered_columns import registry_conf, require_format, source_columns


def arrow_udf(f: Any, return_type: Any) -> Any:
    """pyspark's arrow_udf (4.1+), whose typed overloads want the decorator form."""
    from pyspark.sql import functions

    return functions.arrow_udf(f, return_type)  # type: ignore[call-overload]


def _options(schema_registry_url: str | None, options: Mapping[str, str] | None) -> dict[str, str]:
    opts = {k.lower(): str(v) for k, v in (options or {}).items()}
    if schema_registry_url is not None:
        opts["schema.registry.url"] = schema_registry_url
    return opts


def from_avro(data: Any, subject: str | None = None, *, schema_registry_url: str | None = None,
              version: int | None = None, schema_id: int | None = None, avro_schema: str | None = None,
              mode: str = "FAILFAST", options: Mapping[str, str] | None = None) -> Any:
    """The framed Avro in column `data` as a struct (the shape of Spark's from_avro), planned with `subject`'s
    latest version (or `version`, or the schema `schema_id`, or the JSON `avro_schema`). mode FAILFAST fails
    on a record it cannot decode; PERMISSIVE makes it null. `options` takes the registry's auth settings
    (basic.auth.user.info, bearer.auth.token, ...), named as for the source."""
    from kafkajet.spark.formats.avro_types import spark_type
    from kafkajet.spark.registered_batches import decoder

    opts = _options(schema_registry_url, options)
    if subject is None and schema_id is None and avro_schema is None:
        raise ConfigError("from_avro needs the schema to plan with: a subject (its latest version, or version=), "
                          "schema_id= or avro_schema=")
    opts.update({"valueformat": AVRO_NAME, "mode": mode})
    for key, value in (("valuesubject", subject), ("valueschemaversion", version), ("valueschemaid", schema_id),
                       ("avroschema", avro_schema)):
        if value is not None:
            opts[key] = str(value)
    column = source_columns(opts, ())["value"]
    topic = (subject or "").removesuffix("-value").removesuffix("-key")

    def decode(payloads: pa.Array) -> pa.Array:
        return decoder(column).decode_array(payloads, topic, lambda row: f"from_avro row {row} of a batch")

    return arrow_udf(decode, spark_type(json.loads(column.schema_str)))(data)


def to_avro(data: Any, subject: str, *, schema_registry_url: str | None = None, avro_schema: str | None = None,
            auto_register: bool = True, options: Mapping[str, str] | None = None) -> Any:
    """Column `data` as framed Avro (binary): the schema `avro_schema`, or one derived from the column's type
    (nullable fields as ["null", T] with default null), registered under `subject` (or, with
    auto_register=False, looked up there: it must be registered already)."""
    conf = registry_conf(_options(schema_registry_url, options))
    if "url" not in conf:
        raise ConfigError("to_avro needs schema_registry_url (or options={'schema.registry.url': ...})")
    require_format(AVRO_NAME, "to_avro")  # here on the driver, not in every task
    registry = tuple(sorted(conf.items()))

    def encode(values: pa.Array) -> pa.Array:
        from kafkajet.spark.registered_batches import encoder

        column = _registered(registry, subject, avro_schema or _derived(values.type), auto_register)
        return encoder(column).encode_array(values, lambda row: f"to_avro row {row} of a batch")

    return arrow_udf(encode, "binary")(data)


def _derived(arrow_type: pa.DataType) -> str:
    from pyspark.sql.pandas.types import from_arrow_type

    from kafkajet.spark.formats.avro_types import avro_schema_of

    return json.dumps(avro_schema_of(from_arrow_type(arrow_type)))


_REGISTERED: dict[tuple[Any, ...], RegistryColumn] = {}


def _registered(registry: tuple[tuple[str, str], ...], subject: str, schema_str: str,
                auto_register: bool) -> RegistryColumn:
    """The column's registered id: one registry round trip per worker process and schema."""
    from kafkajet.schema_registry import Schema
    from kafkajet.spark.formats.registry_clients import registry_client

    key = (registry, subject, schema_str, auto_register)
    hit = _REGISTERED.get(key)
    if hit is None:
        client = registry_client(registry)
        schema = Schema(schema_str, AVRO.registry_name)
        schema_id = (client.register_schema(subject, schema) if auto_register
                     else client.lookup_schema(subject, schema).schema_id)
        hit = _REGISTERED[key] = RegistryColumn("value", registry, schema_str, schema_id, subject)
    return hit
