"""JSON Schemas <-> Spark and Arrow types, and JSON values <-> Arrow's Python values.

JSON Schema -> Spark: an object with `properties` is a struct (a property is non-nullable when it is
`required` and does not allow null), integer -> long, number -> double, string -> string (format date-time ->
timestamp, date -> date), boolean, an array with one `items` schema -> array; nullable is the null pattern
(`"type": [T, "null"]`, or `oneOf` / `anyOf` of {"type": "null"} and one other schema); local `$ref`s
(#/definitions/..., #/$defs/...) are followed. What has no single Spark type (oneOf / anyOf of several
schemas, an object without properties, i.e. a map by additionalProperties, several types, no type at all,
a recursive $ref) becomes a string column holding that part's JSON text, compact, so a query can still read
the topic and parse the part with from_json; nothing of the record is lost. Properties a record has beyond
the planned schema's are dropped (a newer writer's additions, as Avro's resolution drops them).

Spark -> JSON Schema (the sink): draft-07, structs as closed objects (additionalProperties false, as
Confluent's Java serializer derives them: then a later version may add a nullable column and stay BACKWARD
compatible, which an open model forbids) whose non-nullable fields are required,
nullable fields as oneOf [null, T] (Confluent's own generator's form), long/int -> integer, float/double/
decimal -> number, timestamp -> string date-time (RFC 3339, UTC), date -> string date, binary -> string
with contentEncoding base64, map<string, V> -> object with additionalProperties V. No I/O here.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from kafkajet.errors import ConfigError

Convert = Callable[[Any, str], Any]  # (JSON value, its path for messages) -> the Arrow Python value


class Mismatch(ValueError):
    """A JSON value that does not fit the planned Spark type (named by its path)."""


def arrow_type(doc: Any) -> pa.DataType:
    """The Arrow type of the column a JSON Schema (parsed) plans."""
    return _plan(doc, doc, ())[0]


def converter(doc: Any) -> Callable[[Any], Any]:
    """JSON value (json.loads output) -> the value pa.array() takes for arrow_type(doc); raises Mismatch."""
    convert = _plan(doc, doc, ())[2]
    return lambda value: convert(value, "")


def _as_text(value: Any, path: str) -> Any:
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_TEXT = (pa.string(), True, _as_text)


def _resolve(schema: Any, root: Any, refs: tuple[str, ...]) -> tuple[Any, tuple[str, ...]] | None:
    """`schema` with its local $ref followed (None for a recursive or non-local one: JSON text)."""
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#") or ref in refs:
            return None
        refs = (*refs, ref)
        target = root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise ConfigError(f"JSON Schema $ref {ref!r} points at nothing in the schema")
            target = target[part]
        schema = target
    return schema, refs


def _null_pattern(schema: dict[str, Any]) -> tuple[Any, bool] | None:
    """(the non-null schema, True) for the null pattern; (schema, False) when there is no null in it;
    None when the schema is a choice of several non-null schemas."""
    for key in ("oneOf", "anyOf"):
        if key in schema:
            branches = schema[key]
            others = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(others) == 1 and len(others) < len(branches):
                rest = {k: v for k, v in schema.items() if k != key}
                return {**rest, **others[0]} if isinstance(others[0], dict) else others[0], True
            return None
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            return None
        return {**schema, "type": others[0]}, len(others) < len(kind)
    return schema, False


def _plan(schema: Any, root: Any, refs: tuple[str, ...]) -> tuple[pa.DataType, bool, Convert]:
    """(Arrow type, nullable, converter) of one schema node."""
    resolved = _resolve(schema, root, refs)
    if resolved is None or not isinstance(resolved[0], dict):
        return _TEXT
    schema, refs = resolved
    pattern = _null_pattern(schema)
    if pattern is None:
        return _TEXT
    inner, nullable = pattern
    if inner is not schema:
        t, inner_nullable, convert = _plan(inner, root, refs)
        return t, nullable or inner_nullable, convert
    kind = schema.get("type", "object" if "properties" in schema else None)
    if kind == "object" and isinstance(schema.get("properties"), dict):
        return _struct(schema, root, refs)
    if kind == "array" and isinstance(schema.get("items"), dict):
        item, item_nullable, convert_item = _plan(schema["items"], root, refs)

        def convert_array(value: Any, path: str) -> Any:
            if value is None:
                return None
            if not isinstance(value, list):
                raise Mismatch(f"{path or '(the root)'}: expected an array, got {_kind(value)}")
            return [convert_item(v, f"{path}[{i}]") for i, v in enumerate(value)]

        return pa.list_(pa.field("element", item, nullable=item_nullable)), False, convert_array
    if kind == "integer":
        return pa.int64(), False, _integer
    if kind == "number":
        return pa.float64(), False, _number
    if kind == "boolean":
        return pa.bool_(), False, _checked(bool, "a boolean")
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return pa.timestamp("us", tz="UTC"), False, _timestamp
        if fmt == "date":
            return pa.date32(), False, _date
        return pa.string(), False, _checked(str, "a string")
    return _TEXT


def _struct(schema: dict[str, Any], root: Any, refs: tuple[str, ...]) -> tuple[pa.DataType, bool, Convert]:
    required = set(schema.get("required", ()))
    fields = []
    plan = []
    for name, sub in schema["properties"].items():
        t, nullable, convert = _plan(sub, root, refs)
        must = name in required and not nullable
        fields.append(pa.field(name, t, nullable=not must))
        plan.append((name, must, convert))

    def convert_struct(value: Any, path: str) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise Mismatch(f"{path or '(the root)'}: expected an object, got {_kind(value)}")
        out = {}
        for name, must, convert in plan:
            v = value.get(name)
            where = f"{path}/{name}"
            if v is None and must:
                raise Mismatch(f"{where}: the required property is missing (or null)")
            out[name] = convert(v, where)
        return out

    return pa.struct(fields), False, convert_struct


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def _checked(cls: type, what: str) -> Convert:
    def convert(value: Any, path: str) -> Any:
        if value is None or type(value) is cls:
            return value
        raise Mismatch(f"{path or '(the root)'}: expected {what}, got {_kind(value)}")

    return convert


def _integer(value: Any, path: str) -> Any:
    if value is None or (type(value) is int):
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise Mismatch(f"{path or '(the root)'}: expected an integer, got {_kind(value)}")


def _number(value: Any, path: str) -> Any:
    if value is None or type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise Mismatch(f"{path or '(the root)'}: expected a number, got {_kind(value)}")


def _timestamp(value: Any, path: str) -> Any:
    if value is None:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise Mismatch(f"{path or '(the root)'}: expected an RFC 3339 date-time, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _date(value: Any, path: str) -> Any:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        raise Mismatch(f"{path or '(the root)'}: expected a date (YYYY-MM-DD), got {value!r}") from None


# --- Spark -> JSON Schema (the sink) -------------------------------------------------------------------------


def json_schema_of(data_type: Any, title: str = "topLevelRecord") -> dict[str, Any]:
    """The draft-07 JSON Schema of a Spark type."""
    doc = _schema_of(data_type, title)
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **doc}


def _nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]} if nullable else schema


def _schema_of(data_type: Any, where: str) -> dict[str, Any]:
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return {"type": "object",
                "properties": {f.name: _nullable(_schema_of(f.dataType, f"{where}.{f.name}"), f.nullable)
                               for f in data_type.fields},
                "required": [f.name for f in data_type.fields if not f.nullable], "additionalProperties": False}
    if isinstance(data_type, T.ArrayType):
        return {"type": "array", "items": _nullable(_schema_of(data_type.elementType, f"{where}[]"),
                                                    data_type.containsNull)}
    if isinstance(data_type, T.MapType):
        if not isinstance(data_type.keyType, T.StringType):
            raise ConfigError(f"field {where}: JSON objects have string keys, this map's are "
                              f"{data_type.keyType.simpleString()}")
        return {"type": "object", "additionalProperties": _nullable(
            _schema_of(data_type.valueType, f"{where}{{}}"), data_type.valueContainsNull)}
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return {"type": "integer"}
    if isinstance(data_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        return {"type": "number"}
    if isinstance(data_type, T.StringType):
        return {"type": "string"}
    if isinstance(data_type, T.BooleanType):
        return {"type": "boolean"}
    if isinstance(data_type, T.BinaryType):
        return {"type": "string", "contentEncoding": "base64"}
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        return {"type": "string", "format": "date-time"}
    if isinstance(data_type, T.DateType):
        return {"type": "string", "format": "date"}
    raise ConfigError(f"field {where}: Spark type {data_type.simpleString()} has no JSON Schema counterpart")


def to_json(value: Any, t: pa.DataType) -> Any:
    """An Arrow Python value (to_pylist's form) of type `t` as the JSON value json_schema_of's schema
    describes."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: to_json(value.get(f.name), f.type) for f in t}
    if pa.types.is_map(t):
        return {str(k): to_json(v, t.item_type) for k, v in value}  # Arrow gives (key, value) tuples
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [to_json(v, t.value_type) for v in value]
    if isinstance(value, dt.datetime):
        utc = value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return utc.isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.standard_b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value
