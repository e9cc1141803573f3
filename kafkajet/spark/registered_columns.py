"""The registered-format columns of the source and the sink, from their Schema Registry options: which columns
are Avro, Protobuf or JSON Schema, against which registry, with which schema. Resolved on the driver at planning (one registry round trip per column,
plus one per Protobuf import), into plain data the executors receive pickled (`RegistryColumn`).

Options (case-insensitive, as all of the source's): valueFormat / keyFormat (binary, the default, avro,
protobuf or json-schema), schema.registry.url and the registry client's auth settings (basic.auth.*,
bearer.auth.*), valueSubject / keySubject (default `<topic>-value` / `<topic>-key`), valueSchemaVersion /
valueSchemaId (and key*) to pin the planned schema instead of the subject's latest, avroSchema / jsonSchema /
protobufSchema (and key*) to give it as text (Protobuf: the base64 FileDescriptorProto the registry holds),
protobufMessage / keyProtobufMessage (the message of the file to plan with; the file's first by default), mode
(FAILFAST or PERMISSIVE, the source's answer to a record it cannot decode), and for the sink
auto.register.schemas (true: register the schema; false: it must be registered already).

A format is found by its option value in the table of Spark formats (formats/), which holds its Spark pieces
(options, types, extra) and names the registry format each maps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkajet.config import SCHEMA_REGISTRY_OPTIONS
from kafkajet.errors import ConfigError
from kafkajet.schema_registry.formats import by_registry_name
from kafkajet.spark.formats import NAMES, SPARK_FORMATS, spark_format
from kafkajet.spark.formats.registry_column import RegistryColumn

REGISTRY_KEYS = SCHEMA_REGISTRY_OPTIONS
BINARY = "binary"  # a key or value column as it is, no format
FORMAT_OPTIONS = ("valueFormat", "keyFormat", *REGISTRY_KEYS, "valueSubject", "keySubject",
                  "valueSchemaVersion", "keySchemaVersion", "valueSchemaId", "keySchemaId",
                  *(name for f in SPARK_FORMATS.values() for name in f.given_options),
                  "protobufMessage", "keyProtobufMessage")
SOURCE_FORMAT_OPTIONS = (*FORMAT_OPTIONS, "mode")
SINK_FORMAT_OPTIONS = (*FORMAT_OPTIONS, "auto.register.schemas")


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
    fmt = opts.get(f"{field}format", BINARY).strip().lower()
    name = "keyFormat" if field == "key" else "valueFormat"
    if fmt != BINARY and fmt not in NAMES:
        raise ConfigError(f"option {name}={fmt!r}: expected binary (the default), {', '.join(NAMES)}")
    if fmt != BINARY:
        require_format(fmt, f"option {name}={fmt}")
    return fmt


def require_format(fmt: str, what: str) -> None:
    """ConfigError naming the extra when `fmt`'s module is missing: checked on the driver at planning, so a
    missing fastavro fails there in one line rather than in every task, deep inside Spark's traceback."""
    import importlib.util

    module, extra = spark_format(fmt).needs
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
        found = False
    if not found:
        raise ConfigError(f"{what} needs {module}: pip install 'kafkajet[{extra}]'")


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


def source_columns(options: Mapping[str, str], topics: tuple[str, ...]) -> dict[str, RegistryColumn]:
    """The source's registered columns, each planned with its subject's latest schema (or the pinned one)."""
    opts = _lower(options)
    permissive = _mode(opts)
    out: dict[str, RegistryColumn] = {}
    for field in ("key", "value"):
        fmt = column_format(opts, field)
        if fmt == BINARY:
            continue
        pieces = spark_format(fmt)
        conf = registry_conf(opts)
        given_name = pieces.given_options[field == "key"]
        given = opts.get(given_name.lower())
        schema_id, version = _pinned(opts, field)
        if "url" not in conf:
            raise ConfigError(f"option {field}Format={fmt} needs schema.registry.url: the records carry schema ids "
                              f"that only the registry resolves")
        subject = None
        with _client(conf) as client:
            if given is not None:
                schema = _given_schema(fmt, given, given_name)
            elif schema_id is not None:
                schema = client.get_schema(schema_id)
            else:
                subject = _subject(opts, field, topics, "source")
                reg = (client.get_version(subject, version) if version is not None
                       else client.get_latest_version(subject))
                schema, schema_id = reg.schema, reg.schema_id
            _check_type(schema, fmt, field)
            imports = pieces.imports(client, schema)
        column = RegistryColumn(field, tuple(sorted(conf.items())), schema.schema_str, schema_id, subject, permissive,
                                fmt, imports, pieces.message(opts, field, schema.schema_str))
        column.arrow_type()  # a schema Spark cannot take fails here, at planning, naming the field
        out[field] = column
    return out


def sink_columns(options: Mapping[str, str], topic: str | None,
                 column_types: Mapping[str, Any]) -> dict[str, RegistryColumn]:
    """The sink's registered columns: each one's schema (given, or derived from the column's Spark type)
    registered under its subject (or looked up there with auto.register.schemas=false) on the driver, once."""
    from kafkajet.schema_registry import Schema

    opts = _lower(options)
    auto_register = opts.get("auto.register.schemas", "true").strip().lower()
    if auto_register not in ("true", "false"):
        raise ConfigError(f"option auto.register.schemas={auto_register!r} must be true or false")
    out: dict[str, RegistryColumn] = {}
    for field in ("key", "value"):
        fmt = column_format(opts, field)
        if fmt == BINARY:
            continue
        pieces = spark_format(fmt)
        if field not in column_types:
            raise ConfigError(f"option {field}Format={fmt}: the DataFrame has no '{field}' column to encode")
        conf = registry_conf(opts)
        if "url" not in conf:
            raise ConfigError(f"option {field}Format={fmt} needs schema.registry.url to register the schema at")
        given_name = pieces.given_options[field == "key"]
        given = opts.get(given_name.lower())
        pinned_id, pinned_version = _pinned(opts, field)
        if given is not None and (pinned_id is not None or pinned_version is not None):
            raise ConfigError(f"options {given_name} and {field}SchemaId/{field}SchemaVersion both say which schema "
                              f"to write {field} with: give one")
        subject = _subject(opts, field, () if topic is None else (topic,), "sink")
        with _client(conf) as client:
            if pinned_id is not None or pinned_version is not None:
                # A schema pinned by id or version is written with as registered: nothing is registered.
                if pinned_id is not None:
                    schema, schema_id = client.get_schema(pinned_id), pinned_id
                else:
                    reg = client.get_version(subject, pinned_version)
                    schema, schema_id = reg.schema, reg.schema_id
                _check_type(schema, fmt, field)
            else:
                schema = (_given_schema(fmt, given, given_name) if given is not None
                          else Schema(derived_schema(fmt, column_types[field]), pieces.schema_format.registry_name))
                if auto_register == "true":
                    schema_id = client.register_schema(subject, schema)
                else:
                    schema_id = client.lookup_schema(subject, schema).schema_id
            imports = pieces.imports(client, schema)
        out[field] = RegistryColumn(field, tuple(sorted(conf.items())), schema.schema_str, schema_id, subject,
                                    False, fmt, imports, pieces.message(opts, field, schema.schema_str))
    return out


def derived_schema(fmt: str, data_type: Any) -> str:
    """The schema text of a Spark type in `fmt` (what the sink registers when no schema is given)."""
    return spark_format(fmt).derived_schema(data_type)


def _pinned(opts: Mapping[str, str], field: str) -> tuple[int | None, int | None]:
    """The schema id and the subject version a key or value column is pinned to (either may be None)."""
    return (_int_option(opts, f"{field}schemaid", f"{field}SchemaId"),
            _int_option(opts, f"{field}schemaversion", f"{field}SchemaVersion"))


def _given_schema(fmt: str, raw: str, name: str) -> Any:
    from kafkajet.schema_registry import Schema

    pieces = spark_format(fmt)
    pieces.given_schema(raw, name)
    return Schema(raw, pieces.schema_format.registry_name)


def _check_type(schema: Any, fmt: str, field: str) -> None:
    if by_registry_name(schema.schema_type) is not spark_format(fmt).schema_format:
        raise ConfigError(f"option {field}Format={fmt}, but the registry holds a {schema.schema_type} schema for the "
                          f"{field}: set {field}Format to the format the topic is written in")
