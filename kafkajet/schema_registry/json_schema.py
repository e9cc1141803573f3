"""JSON Schema in the Confluent wire format, validated with jsonschema (`pip install 'kafkajet[jsonschema]'`):
JSONSerializer and JSONDeserializer, constructed and called as confluent-kafka's are (note its argument
order: the schema first). The JSON text is compact UTF-8, as confluent-kafka writes it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

try:
    import jsonschema
    from jsonschema.exceptions import best_match
except ModuleNotFoundError as e:  # pragma: no cover - the extra's absence
    raise ModuleNotFoundError("kafkajet's JSON Schema serializers need jsonschema: "
                              "pip install 'kafkajet[jsonschema]'") from e

from kafkajet.errors import SerializationError
from kafkajet.schema_registry.client import Schema, SchemaRegistryClient
from kafkajet.schema_registry.formats import JSON, by_registry_name
from kafkajet.schema_registry.json_accept import acceptor
from kafkajet.schema_registry.serde import BaseDeserializer, BaseSerializer, ctx_what
from kafkajet.schema_registry.wire import SchemaRef
from kafkajet.serialization import SerializationContext


def _schema(schema_str: str | Schema | None) -> Schema | None:
    if schema_str is None or isinstance(schema_str, Schema):
        return schema_str
    return Schema(schema_str, JSON.registry_name)


class JsonValidator:
    """A schema's jsonschema validator, fronted by its compiled acceptance check (json_accept.py): a record
    the check is sure of passes at once; any other is validated by jsonschema, which words the error."""

    def __init__(self, validator: Any) -> None:
        self.validator = validator
        self.schema = validator.schema
        self._accepts = acceptor(validator)

    def check(self, value: Any, what: str, ref: str) -> None:
        if self._accepts is not None and self._accepts(value):
            return
        error = best_match(self.validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(the root)"
            raise SerializationError(f"the {what} does not match JSON Schema {ref} at {where}: {error.message}")


def _validator(schema: Schema) -> JsonValidator:
    if by_registry_name(schema.schema_type) is not JSON:
        raise SerializationError(f"a JSON Schema serde was given a {schema.schema_type} schema")
    if schema.references:
        raise SerializationError("JSON Schema references are not supported yet: inline the referenced schemas")
    try:
        doc = json.loads(schema.schema_str)
        cls = jsonschema.validators.validator_for(doc)
        cls.check_schema(doc)
    except (ValueError, jsonschema.SchemaError) as e:
        raise SerializationError(f"invalid JSON Schema: {e}") from e
    return JsonValidator(cls(doc))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class JSONSerializer(BaseSerializer[Any]):
    """JSONSerializer(schema_str, schema_registry_client, to_dict=None, conf=None); conf as AvroSerializer's
    plus `validate` (True: check each object against the schema before writing it)."""

    schema_format = JSON

    def __init__(self, schema_str: str | Schema | None, schema_registry_client: SchemaRegistryClient,
                 to_dict: Callable[[Any, SerializationContext], Any] | None = None,
                 conf: Mapping[str, Any] | None = None) -> None:
        schema = _schema(schema_str)
        super().__init__(schema_registry_client, schema, conf, {"validate": True})
        self._validate = bool(self._conf["validate"])
        self._to_dict = to_dict
        self._validator = None if schema is None else _validator(schema)
        self._title = None if self._validator is None else self._validator.schema.get("title")

    def _record_name(self, obj: Any) -> str | None:
        return self._title  # type: ignore[no-any-return]

    def _parse(self, schema: Schema) -> Any:
        return self._validator if schema == self._schema else _validator(schema)

    def __call__(self, obj: Any, ctx: SerializationContext | None = None) -> bytes | None:
        if obj is None:
            return None
        ctx = self._require_ctx(ctx)
        w = self._writer(obj, ctx)
        value = obj if self._to_dict is None else self._to_dict(obj, ctx)
        if self._validate:
            w.parsed.check(value, ctx_what(ctx), f"id {w.schema_id} (subject '{w.subject}')")
        try:
            payload = _dumps(value)
        except (TypeError, ValueError) as e:
            raise SerializationError(f"the {ctx_what(ctx)} is not JSON-serializable: {e}") from e
        return self._frame(w.schema_id, w.guid, payload, ctx)


class JSONDeserializer(BaseDeserializer[Any]):
    """JSONDeserializer(schema_str, from_dict=None, schema_registry_client=None, conf=None): each record is
    validated (unless conf `validate` is False) against, as confluent-kafka's: with use.latest.version the
    subject's latest version; else `schema_str` when given; else the writer's schema, by the record's id."""

    schema_format = JSON

    def __init__(self, schema_str: str | Schema | None,
                 from_dict: Callable[[Any, SerializationContext], Any] | None = None,
                 schema_registry_client: SchemaRegistryClient | None = None,
                 conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(schema_registry_client, conf, {"validate": True})
        schema = _schema(schema_str)
        if schema is None and schema_registry_client is None:
            raise ValueError("JSONDeserializer needs schema_str or schema_registry_client")
        self._reader = None if schema is None else _validator(schema)
        self._validate = bool(self._conf["validate"])
        self._from_dict = from_dict

    def _parse(self, schema: Schema) -> Any:
        return _validator(schema)

    def _validator_for(self, ref: SchemaRef, ctx: SerializationContext | None) -> Any:
        """What a record is validated against, in confluent-kafka's order: with use.latest.version the
        subject's latest version, else the schema given, else the writer's (found by the record's id)."""
        if self._registry is None:
            return self._reader
        # Looked up even when another schema validates, as confluent-kafka does: an id the registry does not
        # know is a record this reader cannot vouch for, and fails here rather than passing a given schema.
        writer = self._writer_schema(ref, ctx)
        if self._use_latest:
            return self._latest_reader(ctx, writer.schema.get("title"))
        return self._reader if self._reader is not None else writer

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        ref, payload = self._unframe(data, ctx)
        validator = self._validator_for(ref, ctx)
        try:
            value = json.loads(bytes(payload))
        except ValueError as e:
            raise SerializationError(f"the {ctx_what(ctx)} ({ref.describe()}) is not valid JSON: {e}") from e
        if self._validate and validator is not None:
            validator.check(value, ctx_what(ctx), ref.describe())
        if self._from_dict is not None:
            return self._from_dict(value, ctx)  # type: ignore[arg-type]
        return value
