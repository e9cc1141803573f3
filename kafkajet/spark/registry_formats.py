"""The source's and sink's Schema Registry options: which columns are Avro, against which registry, with
which schema. Resolved on the driver at planning (one registry round trip per column), into plain data the
executors receive pickled (`AvroColumn`).

Options (case-insensitive, as all of the source's): valueFormat / keyFormat (binary, the default, or avro),
schema.registry.url and the registry client's auth settings (basic.auth.*, bearer.auth.*), valueSubject /
keySubject (default `<topic>-value` / `<topic>-key`), valueSchemaVersion / valueSchemaId (and key*) to pin the
planned schema instead of the subject's latest, avroSchema / keyAvroSchema to give it as JSON, mode
(FAILFAST or PERMISSIVE, the source's answer to a record it cannot decode), and for the sink
auto.register.schemas (true: register the schema; false: it must be registered already).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkajet.errors import ConfigError

REGISTRY_KEYS = ("schema.registry.url", "basic.auth.credentials.source", "basic.auth.user.info",
                 "bearer.auth.credentials.source", "bearer.auth.token", "bearer.auth.logical.cluster",
                 "bearer.auth.identity.pool.id")
FORMAT_OPTIONS = ("valueFormat", "keyFormat", *REGISTRY_KEYS, "valueSubject", "keySubject",
                  "valueSchemaVersion", "keySchemaVersion", "valueSchemaId", "keySchemaId", "avroSchema",
                  "keyAvroSchema")
SOURCE_FORMAT_OPTIONS = (*FORMAT_OPTIONS, "mode")
SINK_FORMAT_OPTIONS = (*FORMAT_OPTIONS, "auto.register.schemas")
_LATER = ("protobuf", "json-schema")


@dataclass(frozen=True)
class AvroColumn:
    """One Avro column of a query: `field` is "key" or "value"; `schema_str` the schema the column is planned
    with (the source's reader schema, the sink's writer schema); `schema_id` its registry id when it has one."""

    field: str
    registry: tuple[tuple[str, str], ...]
    schema_str: str
    schema_id: int | None
    subject: str | None
    permissive: bool = False

    @property
    def registry_conf(self) -> dict[str, str]:
        return dict(self.registry)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in options.items()}


def registry_conf(opts: Mapping[str, str]) -> dict[str, str]:
    """The registry client's settings among the (lower-cased) options; url under the client's name."""
    conf = {k: opts[k] for k in REGISTRY_KEYS if k in opts}
    if "schema.registry.url" in conf:
        conf["url"] = conf.pop("schema.registry.url")
    return conf


def _client(conf: Mapping[str, str]) -> Any:
    from kafkajet.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient(dict(conf))


def column_format(opts: Mapping[str, str], field: str) -> str:
    fmt = opts.get(f"{field}format", "binary").strip().lower()
    name = "keyFormat" if field == "key" else "valueFormat"
    if fmt in _LATER:
        raise ConfigError(f"option {name}={fmt}: only avro is supported by the kafkajet source and sink yet; "
                          f"decode {fmt} with kafkajet.schema_registry's deserializers in a UDF meanwhile")
    if fmt not in ("binary", "avro"):
        raise ConfigError(f"option {name}={fmt!r}: expected binary (the default) or avro")
    return fmt


def _int_option(opts: Mapping[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"option {name}={raw!r} must be an integer") from None


def _mode(opts: Mapping[str, str]) -> bool:
    mode = opts.get("mode", "FAILFAST").strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise ConfigError(f"option mode={mode!r}: expected FAILFAST (the default: a record that cannot be "
                          f"decoded fails the query) or PERMISSIVE (it becomes null)")
    return mode == "PERMISSIVE"


def _subject(opts: Mapping[str, str], field: str, topics: tuple[str, ...], side: str) -> str:
    given = opts.get(f"{field}subject")
    if given:
        return given
    if len(topics) != 1:
        where = "reads several topics or a pattern" if side == "source" else "takes its topic from a column"
        raise ConfigError(f"the {side} {where}: name the Schema Registry subject of the {field} with option "
                          f"{field}Subject (by default it is <topic>-{field})")
    return f"{topics[0]}-{field}"


def source_columns(options: Mapping[str, str], topics: tuple[str, ...]) -> dict[str, AvroColumn]:
    """The source's Avro columns, each planned with its subject's latest schema (or the pinned one)."""
    opts = _lower(options)
    permissive = _mode(opts)
    out: dict[str, AvroColumn] = {}
    for field in ("key", "value"):
        if column_format(opts, field) != "avro":
            continue
        conf = registry_conf(opts)
        given = opts.get("keyavroschema" if field == "key" else "avroschema")
        schema_id = _int_option(opts, f"{field}schemaid", f"{field}SchemaId")
        version = _int_option(opts, f"{field}schemaversion", f"{field}SchemaVersion")
        if "url" not in conf:
            raise ConfigError(f"option {field}Format=avro needs schema.registry.url: the records carry schema ids "
                              f"that only the registry resolves")
        subject = None
        if given is not None:
            _check_json(given, "keyAvroSchema" if field == "key" else "avroSchema")
            schema_str = given
        else:
            with _client(conf) as client:
                if schema_id is not None:
                    schema_str = client.get_schema(schema_id).schema_str
                else:
                    subject = _subject(opts, field, topics, "source")
                    reg = (client.get_version(subject, version) if version is not None
                           else client.get_latest_version(subject))
                    schema_str, schema_id = reg.schema.schema_str, reg.schema_id
        out[field] = AvroColumn(field, tuple(sorted(conf.items())), schema_str, schema_id, subject, permissive)
    return out


def sink_columns(options: Mapping[str, str], topic: str | None, column_types: Mapping[str, Any]) -> dict[str, AvroColumn]:
    """The sink's Avro columns: each one's schema (given, or derived from the column's Spark type) registered
    under its subject (or looked up there with auto.register.schemas=false) on the driver, once."""
    from kafkajet.schema_registry import Schema
    from kafkajet.spark.avro_types import avro_schema_of

    opts = _lower(options)
    auto_register = opts.get("auto.register.schemas", "true").strip().lower()
    if auto_register not in ("true", "false"):
        raise ConfigError(f"option auto.register.schemas={auto_register!r} must be true or false")
    out: dict[str, AvroColumn] = {}
    for field in ("key", "value"):
        if column_format(opts, field) != "avro":
            continue
        if field not in column_types:
            raise ConfigError(f"option {field}Format=avro: the DataFrame has no '{field}' column to encode")
        conf = registry_conf(opts)
        if "url" not in conf:
            raise ConfigError(f"option {field}Format=avro needs schema.registry.url to register the schema at")
        given = opts.get("keyavroschema" if field == "key" else "avroschema")
        if given is not None:
            _check_json(given, "keyAvroSchema" if field == "key" else "avroSchema")
        schema_str = given if given is not None else json.dumps(avro_schema_of(column_types[field]))
        subject = _subject(opts, field, () if topic is None else (topic,), "sink")
        with _client(conf) as client:
            schema = Schema(schema_str, "AVRO")
            if auto_register == "true":
                schema_id = client.register_schema(subject, schema)
            else:
                schema_id = client.lookup_schema(subject, schema).schema_id
        out[field] = AvroColumn(field, tuple(sorted(conf.items())), schema_str, schema_id, subject)
    return out


def _check_json(raw: str, name: str) -> None:
    try:
        json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"option {name} is not JSON ({e}): give the Avro schema's JSON text") from None
