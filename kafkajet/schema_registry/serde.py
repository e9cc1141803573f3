"""What the Avro, JSON Schema and Protobuf serdes share: the confluent-kafka settings, the subject and
schema-id resolution (auto-register, look up, latest version, a fixed id) cached per subject, the framing,
and the reader side's schema lookup by id or GUID."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kafkajet.errors import ConfigError, SerializationError
from kafkajet.schema_registry.client import Schema, SchemaRegistryClient
from kafkajet.schema_registry.formats import AVRO
from kafkajet.schema_registry.schema_format import SchemaFormat
from kafkajet.schema_registry.strategies import BUILTIN_STRATEGIES, resolve_strategy
from kafkajet.schema_registry.wire import (
    KEY_SCHEMA_ID_HEADER,
    VALUE_SCHEMA_ID_HEADER,
    SchemaRef,
    frame,
    schema_id_header_value,
    unframe,
)
from kafkajet.serialization import MessageField, SerializationContext

P = TypeVar("P")  # a parsed schema: fastavro's dict, a jsonschema validator, a protobuf descriptor

_SERIALIZER_KEYS = {"auto.register.schemas": True, "normalize.schemas": False, "use.schema.id": None,
                    "use.latest.version": False, "subject.name.strategy": None, "schema.id.serializer": "prefix"}
_DESERIALIZER_KEYS = {"use.latest.version": False, "subject.name.strategy": None}


def _bool_conf(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    v = conf.get(key, default)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    if not isinstance(v, bool):
        raise ConfigError(f"{key} must be a bool, got {v!r}")
    return v


def merged_conf(kind: str, conf: Mapping[str, Any] | None, defaults: Mapping[str, Any],
                extra: Mapping[str, Any]) -> dict[str, Any]:
    known = {**defaults, **extra}
    conf = dict(conf or {})
    unknown = set(conf) - set(known)
    if unknown:
        raise ConfigError(f"{kind}: unknown setting(s) {', '.join(sorted(unknown))}; known: "
                          f"{', '.join(sorted(known))}")
    return {**known, **conf}


@dataclass(frozen=True, slots=True)
class Writer(Generic[P]):
    """What a serializer writes a subject's records with, resolved once per subject."""

    schema_id: int
    guid: str | None
    parsed: P
    subject: str
    prefix: bytes | None  # magic 0 and the id, ready to go in front of the payload; None in the header form


def ctx_what(ctx: SerializationContext | None) -> str:
    if ctx is None:
        return "record"
    return f"{'key' if ctx.field == MessageField.KEY else 'value'} of a record on topic '{ctx.topic}'"


class BaseSerializer(Generic[P]):
    """Resolves (subject -> schema id, writer schema) once per subject and frames payloads."""

    schema_format: SchemaFormat = AVRO  # the format it writes (its registry name: schema_type)
    wants_serialization_context = True  # the producer calls it as ser(obj, SerializationContext)

    @property
    def schema_type(self) -> str:
        """The registry's name of the format written (AVRO, JSON, PROTOBUF)."""
        return self.schema_format.registry_name

    def __init__(self, client: SchemaRegistryClient, schema: Schema | None, conf: Mapping[str, Any] | None,
                 extra: Mapping[str, Any] | None = None) -> None:
        kind = type(self).__name__
        self._conf = merged_conf(kind, conf, _SERIALIZER_KEYS, extra or {})
        self._registry = client
        self._schema = schema
        self._auto_register = _bool_conf(self._conf, "auto.register.schemas", True)
        self._normalize = _bool_conf(self._conf, "normalize.schemas", False)
        self._use_latest = _bool_conf(self._conf, "use.latest.version", False)
        self._use_schema_id = self._conf["use.schema.id"]
        if self._use_schema_id is not None and (not isinstance(self._use_schema_id, int)
                                                or isinstance(self._use_schema_id, bool)):
            raise ConfigError(f"use.schema.id must be an int schema id, got {self._use_schema_id!r}")
        if self._use_latest and self._auto_register:
            # confluent-kafka refuses this pair too: "latest" and "register mine" contradict each other.
            raise ConfigError(f"{kind}: use.latest.version=True cannot be used with auto.register.schemas=True; "
                              f"set auto.register.schemas=False")
        self._strategy = resolve_strategy(self._conf["subject.name.strategy"])
        where = self._conf["schema.id.serializer"]
        if where not in ("prefix", "header"):
            raise ConfigError(f"schema.id.serializer={where!r}: expected 'prefix' (magic byte 0 and the id "
                              f"before the payload, the default) or 'header' (the {VALUE_SCHEMA_ID_HEADER} header)")
        self._in_header = where == "header"
        self.adds_headers = self._in_header  # the producer then gives a record sent without headers a list
        self._lock = threading.Lock()
        # subject -> its Writer: the one registry round trip per subject.
        self._known: dict[str, Writer[P]] = {}
        # (topic, field) -> its Writer, skipping the subject name strategy per record. Only for the built-in
        # strategies: their subject is a function of the topic, the field and the schema's (fixed) record name;
        # a user's callable may look at anything.
        self._by_ctx: dict[tuple[str, str], Writer[P]] | None = \
            {} if self._strategy in BUILTIN_STRATEGIES else None

    def _record_name(self, obj: Any) -> str | None:
        return None

    def _parse(self, schema: Schema) -> P:
        raise NotImplementedError

    def _require_ctx(self, ctx: SerializationContext | None) -> SerializationContext:
        """ctx, which a serializer needs to name the subject."""
        if ctx is None:
            raise SerializationError(f"{type(self).__name__} needs a SerializationContext(topic, field) to name "
                                     f"the subject: ser(obj, SerializationContext('t', MessageField.VALUE))")
        return ctx

    def _writer(self, obj: Any, ctx: SerializationContext) -> Writer[P]:
        """The Writer of this record's subject."""
        by_ctx = self._by_ctx
        if by_ctx is not None:
            hit = by_ctx.get((ctx.topic, ctx.field))
            if hit is not None:
                return hit
        subject = self._strategy(ctx, self._record_name(obj))
        if subject is None:
            raise SerializationError(f"{type(self).__name__}: the subject name strategy gave no subject for the "
                                     f"{ctx_what(ctx)} (record strategies need a named record schema)")
        writer = self._known.get(subject)
        if writer is None:
            writer = self._resolve(subject)
        if by_ctx is not None:
            with self._lock:
                by_ctx[ctx.topic, ctx.field] = writer
        return writer

    def _resolve(self, subject: str) -> Writer[P]:
        """The subject's schema id and writer schema, from the registry (or use.schema.id)."""
        guid = None
        if self._use_schema_id is not None:
            schema_id = self._use_schema_id
            schema = self._registry.get_schema(schema_id, subject)
        elif self._use_latest:
            reg = self._registry.get_latest_version(subject)
            schema_id, schema, guid = reg.schema_id, reg.schema, reg.guid
        else:
            if self._schema is None:
                raise SerializationError(f"{type(self).__name__} has no schema: give schema_str, or set "
                                         f"use.latest.version / use.schema.id")
            if self._auto_register:
                reg = self._registry.register_schema_full_response(subject, self._schema, self._normalize)
            else:
                reg = self._registry.lookup_schema(subject, self._schema, self._normalize)
            schema_id, schema, guid = reg.schema_id, self._schema, reg.guid
        writer = Writer(schema_id, guid, self._parse(schema), subject,
                        None if self._in_header else frame(schema_id, b""))
        with self._lock:
            self._known[subject] = writer
        return writer

    def _frame(self, schema_id: int, guid: str | None, payload: bytes, ctx: SerializationContext,
               message_indexes: list[int] | None = None) -> bytes:
        if not self._in_header:
            return frame(schema_id, payload, message_indexes)
        name = KEY_SCHEMA_ID_HEADER if ctx.field == MessageField.KEY else VALUE_SCHEMA_ID_HEADER
        value = schema_id_header_value(schema_id, guid)
        if message_indexes is not None:
            from kafkajet.schema_registry.wire import encode_message_indexes

            value += encode_message_indexes(message_indexes)
        headers = ctx.headers
        if isinstance(headers, list):
            headers.append((name, value))
        elif isinstance(headers, dict):
            headers[name] = value
        else:
            raise SerializationError(
                f"schema.id.serializer='header' needs the record's headers as a list or dict to add {name} to "
                f"(the producer gives it one; called directly, pass SerializationContext(topic, field, headers=[])), "
                f"got {type(headers).__name__}")
        return payload


class BaseDeserializer(Generic[P]):
    """Finds the writer's schema (by id or GUID, from the frame or a header) once per id."""

    schema_format: SchemaFormat = AVRO  # the format it reads (its registry name: schema_type)
    protobuf_framing = False

    @property
    def schema_type(self) -> str:
        """The registry's name of the format read (AVRO, JSON, PROTOBUF)."""
        return self.schema_format.registry_name

    def __init__(self, client: SchemaRegistryClient | None, conf: Mapping[str, Any] | None,
                 extra: Mapping[str, Any] | None = None) -> None:
        self._conf = merged_conf(type(self).__name__, conf, _DESERIALIZER_KEYS, extra or {})
        self._registry = client
        self._use_latest = _bool_conf(self._conf, "use.latest.version", False)
        self._strategy = resolve_strategy(self._conf["subject.name.strategy"])
        self._writers: dict[Any, P] = {}
        self._latest: dict[str, P] = {}  # subject -> its latest version, parsed (use.latest.version)
        self._lock = threading.Lock()

    def _parse(self, schema: Schema) -> P:
        raise NotImplementedError

    def _latest_reader(self, ctx: SerializationContext | None, record_name: str | None = None) -> P | None:
        """With use.latest.version, the subject's latest version (parsed once) as the reader schema, as
        confluent-kafka's deserializers take it; else None. The subject comes from the strategy, given the
        writer schema's record name for the record strategies."""
        if not self._use_latest or self._registry is None or ctx is None:
            return None
        subject = self._strategy(ctx, None) or self._strategy(ctx, record_name)
        if subject is None:
            raise SerializationError(f"use.latest.version needs a subject for the {ctx_what(ctx)}: the subject "
                                     f"name strategy gave none (record strategies need a named writer schema)")
        hit = self._latest.get(subject)
        if hit is None:
            hit = self._parse(self._registry.get_latest_version(subject).schema)
            with self._lock:
                self._latest[subject] = hit
        return hit

    def _unframe(self, data: bytes, ctx: SerializationContext | None) -> tuple[SchemaRef, memoryview]:
        is_key = ctx is not None and ctx.field == MessageField.KEY
        headers = None if ctx is None else ctx.headers
        return unframe(data, is_key=is_key, headers=headers, protobuf=self.protobuf_framing, what=ctx_what(ctx))

    def _writer_schema(self, ref: SchemaRef, ctx: SerializationContext | None) -> P:
        key = ref.id if ref.id is not None else ref.guid
        hit = self._writers.get(key)
        if hit is not None:
            return hit
        if self._registry is None:
            raise SerializationError(f"{type(self).__name__} has no schema registry client to look up "
                                     f"{ref.describe()}")
        from kafkajet.schema_registry.client import SchemaRegistryError

        try:
            schema = (self._registry.get_schema(ref.id) if ref.id is not None
                      else self._registry.get_schema_by_guid(str(ref.guid)))
        except SchemaRegistryError as e:
            if e.http_status_code == 404:
                raise SerializationError(
                    f"{ctx_what(ctx)}: {ref.describe()} is not in the schema registry "
                    f"({', '.join(self._registry.urls)}): written against another registry, or deleted "
                    f"permanently ({e.error_message})") from e
            raise
        parsed = self._parse(schema)
        with self._lock:
            self._writers[key] = parsed
        return parsed
