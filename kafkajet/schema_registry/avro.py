"""Avro in the Confluent wire format, with fastavro (`pip install 'kafkajet[avro]'`): AvroSerializer and
AvroDeserializer, constructed and called as confluent-kafka's are. The bytes are those of confluent-kafka's
and Java's serializers for the same schema and id (a bare "bytes" schema writes the bytes unencoded, as they do)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

try:
    import fastavro
    from fastavro.validation import ValidationError, validate
except ModuleNotFoundError as e:  # pragma: no cover - the extra's absence
    raise ModuleNotFoundError("kafkajet's Avro serializers need fastavro: pip install 'kafkajet[avro]'") from e

from kafkajet.errors import SerializationError
from kafkajet.schema_registry.avro_encode import fastavro_encoder, flat_encoder
from kafkajet.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from kafkajet.schema_registry.formats import AVRO, by_registry_name
from kafkajet.schema_registry.serde import BaseDeserializer, BaseSerializer, Writer, ctx_what
from kafkajet.serialization import SerializationContext


def avro_schema(schema_str: str | Schema | None) -> Schema | None:
    """The Schema a serializer registers: a str as given (a bare primitive name wrapped as confluent-kafka
    does, so both register the same text and get the same id)."""
    if schema_str is None or isinstance(schema_str, Schema):
        return schema_str
    s = schema_str.strip()
    if s[:1] not in ("{", "["):
        s = '{"type":' + s + "}"
    return Schema(s, AVRO.registry_name)


def parse_avro(schema: Schema, registry: SchemaRegistryClient | None = None) -> Any:
    """The schema parsed by fastavro, the named types of the schemas its references name (fetched from
    `registry`, and theirs, dependencies first) known to it."""
    if by_registry_name(schema.schema_type) is not AVRO:
        raise SerializationError(f"an Avro serde was given a {schema.schema_type} schema")
    named: dict[str, Any] = {}
    if schema.references:
        if registry is None:
            raise SerializationError(
                f"the Avro schema references {', '.join(r.name for r in schema.references)}: resolving them "
                f"needs a schema registry client")
        _load_references(schema.references, registry, named, set())
    try:
        return fastavro.parse_schema(json.loads(schema.schema_str), named_schemas=named)
    except (ValueError, fastavro.schema.SchemaParseException, fastavro.schema.UnknownType) as e:
        raise SerializationError(f"invalid Avro schema: {e}") from e


def _load_references(references: tuple[SchemaReference, ...], registry: SchemaRegistryClient,
                     named: dict[str, Any], seen: set[tuple[str, int]]) -> None:
    """Each referenced schema's named types into `named` (fastavro adds them there as it parses), its own
    references first; each (subject, version) fetched and parsed once, however many schemas reference it."""
    for ref in references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        dep = registry.get_version(ref.subject, ref.version).schema
        _load_references(dep.references, registry, named, seen)
        try:
            fastavro.parse_schema(json.loads(dep.schema_str), named_schemas=named)
        except (ValueError, fastavro.schema.SchemaParseException, fastavro.schema.UnknownType) as e:
            raise SerializationError(f"invalid Avro schema for reference {ref.name!r} (subject "
                                     f"'{ref.subject}' version {ref.version}): {e}") from e


def _is_bytes(parsed: Any) -> bool:
    return parsed == "bytes" or (isinstance(parsed, dict) and parsed.get("type") == "bytes")


def _name_of(parsed: Any) -> str | None:
    if isinstance(parsed, dict):
        return parsed.get("name") or parsed.get("type")
    return parsed if isinstance(parsed, str) else None


@dataclass(frozen=True, slots=True)
class AvroWriterSchema:
    """A writer schema as fastavro parsed it, and its encoders, built once: `fast`, the function written for a
    flat record (else `general`), and `general`, fastavro's, for whatever `fast` does not take."""

    parsed: Any
    fast: Callable[[Any], bytes]
    general: Callable[[Any], bytes]

    @classmethod
    def of(cls, parsed: Any) -> AvroWriterSchema:
        general = _bytes_as_they_are if _is_bytes(parsed) else fastavro_encoder(parsed)
        return cls(parsed, flat_encoder(parsed) or general, general)


def _bytes_as_they_are(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class AvroSerializer(BaseSerializer[AvroWriterSchema]):
    """AvroSerializer(schema_registry_client, schema_str, to_dict=None, conf=None); called as
    ser(obj, SerializationContext(topic, MessageField.VALUE)), or given to Producer(value_serializer=...).

    conf: auto.register.schemas (True), normalize.schemas (False), use.latest.version (False), use.schema.id,
    subject.name.strategy (topic, record, topic_record, or a callable(ctx, record_name)),
    schema.id.serializer ('prefix', or 'header' for the __key/value_schema_id header form).
    """

    def __init__(self, schema_registry_client: SchemaRegistryClient, schema_str: str | Schema | None = None,
                 to_dict: Callable[[Any, SerializationContext], Any] | None = None,
                 conf: Mapping[str, Any] | None = None) -> None:
        schema = avro_schema(schema_str)
        super().__init__(schema_registry_client, schema, conf)
        if to_dict is not None and not callable(to_dict):
            raise ValueError("to_dict must be callable as to_dict(obj, SerializationContext) -> dict")
        self._to_dict = to_dict
        self._given = None if schema is None else AvroWriterSchema.of(parse_avro(schema, schema_registry_client))
        self._schema_name = None if self._given is None else _name_of(self._given.parsed)

    def _record_name(self, obj: Any) -> str | None:
        return self._schema_name

    def _parse(self, schema: Schema) -> AvroWriterSchema:
        if schema == self._schema and self._given is not None:
            return self._given
        return AvroWriterSchema.of(parse_avro(schema, self._registry))

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        # The producer's hot path: the Writer cached per (topic, field), the encoder written for the schema, the
        # framing's prefix built once.
        if obj is None:
            return None
        if ctx is None:
            ctx = self._require_ctx(ctx)
        w = None if self._by_ctx is None else self._by_ctx.get((ctx.topic, ctx.field))
        if w is None:
            w = self._writer(obj, ctx)
        value = obj if self._to_dict is None else self._to_dict(obj, ctx)
        try:
            payload = w.parsed.fast(value)
        except Exception:  # noqa: BLE001 - a value the written encoder does not take as it is: fastavro's turn
            payload = self._general(w, value, ctx)
        if w.prefix is not None:
            return w.prefix + payload
        return self._frame(w.schema_id, w.guid, payload, ctx)

    def _general(self, w: Writer[AvroWriterSchema], value: Any, ctx: SerializationContext) -> bytes:
        """fastavro's bytes, or its refusal worded with the record, the schema id and the field."""
        try:
            return w.parsed.general(value)
        except Exception as e:
            raise SerializationError(
                f"the {ctx_what(ctx)} does not match Avro schema id {w.schema_id} (subject '{w.subject}'): "
                f"{_explain(w.parsed.parsed, value, e)}") from e


def _explain(parsed: Any, value: Any, e: Exception) -> str:
    """fastavro's writer says little (often a bare struct or type error): its validator names the field."""
    try:
        validate(value, parsed, raise_errors=True)
    except ValidationError as v:
        return "; ".join(str(x) for x in v.errors) or str(v)
    except Exception:  # noqa: BLE001 - the validator failing too: the writer's own message is all there is
        pass
    return f"{type(e).__name__}: {e}"


class AvroDeserializer(BaseDeserializer[Any]):
    """AvroDeserializer(schema_registry_client, schema_str=None, from_dict=None, return_record_name=False,
    conf=None): records decoded with the writer's schema (found by the frame's id or GUID, or the
    __key/value_schema_id header), resolved into `schema_str` when given (Avro schema evolution), or with
    conf use.latest.version=True into the subject's latest version (subject.name.strategy names it)."""

    def __init__(self, schema_registry_client: SchemaRegistryClient | None, schema_str: str | Schema | None = None,
                 from_dict: Callable[[Any, SerializationContext], Any] | None = None,
                 return_record_name: bool = False, conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(schema_registry_client, conf)
        reader = avro_schema(schema_str)
        self._reader = None if reader is None else parse_avro(reader, schema_registry_client)
        if from_dict is not None and not callable(from_dict):
            raise ValueError("from_dict must be callable as from_dict(dict, SerializationContext)")
        self._from_dict = from_dict
        self._return_record_name = return_record_name

    def _reader_for(self, ctx: SerializationContext | None, writer: Any) -> Any:
        """The reader schema: the one given, or with use.latest.version the subject's latest version."""
        return self._reader if self._reader is not None else self._latest_reader(ctx, _name_of(writer))

    def _parse(self, schema: Schema) -> Any:
        return parse_avro(schema, self._registry)

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        ref, payload = self._unframe(data, ctx)
        writer = self._writer_schema(ref, ctx)
        reader = self._reader_for(ctx, writer)
        if _is_bytes(writer) and (reader is None or _is_bytes(reader)):
            value: Any = bytes(payload)
        else:
            buf = io.BytesIO(payload)
            try:
                value = fastavro.schemaless_reader(buf, writer, reader,
                                                   return_record_name=self._return_record_name)
            except (EOFError, StopIteration, IndexError) as e:
                raise SerializationError(
                    f"the {ctx_what(ctx)} is truncated: its {len(payload)}-byte payload ends before the Avro "
                    f"record of {ref.describe()} does") from e
            except fastavro.read.SchemaResolutionError as e:
                raise SerializationError(
                    f"the {ctx_what(ctx)} ({ref.describe()}) cannot be read with the reader schema: {e}") from e
            except Exception as e:
                raise SerializationError(
                    f"the {ctx_what(ctx)} is not valid Avro for {ref.describe()}: {type(e).__name__}: {e}") from e
            if buf.tell() != len(payload):
                raise SerializationError(
                    f"the {ctx_what(ctx)} has {len(payload) - buf.tell()} bytes after its Avro record "
                    f"({ref.describe()}): a wrong schema id, or corrupt data")
        if self._from_dict is not None:
            return self._from_dict(value, ctx)  # type: ignore[arg-type]
        return value
