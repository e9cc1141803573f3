"""Avro schemas <-> Spark and Arrow types, as Spark's own Avro support maps them (SchemaConverters).

Avro -> Spark: records are structs, a union with null is the nullable other branch, enums and uuids are
strings, and the logical types become Spark's: timestamp-millis/micros -> timestamp, local-timestamp-* ->
timestamp_ntz, date -> date, decimal -> decimal(p, s). Spark -> Avro (the sink, to_avro): the reverse, a
nullable column as the union ["null", T] with default null, so a later version may add such a column and
stay BACKWARD compatible. No I/O here.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from kafkajet.errors import ConfigError

_PRIMITIVE_ARROW = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
                    "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
_TIMESTAMPS = {"timestamp-millis": True, "timestamp-micros": True, "local-timestamp-millis": False,
               "local-timestamp-micros": False}


def _named(schema: Any, named: dict[str, Any]) -> Any:
    """A type by name (a reference to a record, enum or fixed defined earlier) resolved to its definition."""
    if isinstance(schema, str) and schema not in _PRIMITIVE_ARROW and schema != "null":
        if schema not in named:
            raise ConfigError(f"Avro type {schema!r} is not defined before its use")
        return named[schema]
    return schema


def _remember(schema: dict[str, Any], named: dict[str, Any], namespace: str | None) -> None:
    name = schema.get("name")
    if name:
        ns = schema.get("namespace", namespace)
        named[name] = schema
        if ns and "." not in name:
            named[f"{ns}.{name}"] = schema


def arrow_type(schema: Any, named: dict[str, Any] | None = None, namespace: str | None = None) -> tuple[pa.DataType, bool]:
    """The Arrow type Spark's columns take for an Avro schema (parsed JSON), and whether it is nullable."""
    named = {} if named is None else named
    schema = _named(schema, named)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        nullable = len(branches) < len(schema)
        if len(branches) == 1:
            return arrow_type(branches[0], named, namespace)[0], nullable
        kinds = sorted(str(b if isinstance(b, str) else b.get("type") if isinstance(b, dict) else "")
                       for b in branches)
        if kinds == ["int", "long"]:
            return pa.int64(), nullable
        if kinds == ["double", "float"]:
            return pa.float64(), nullable
        raise ConfigError(f"the Avro union {json.dumps(schema)} has several non-null branches: kafkajet maps only "
                          "unions of one type with null (and int|long, float|double), as a nullable column")
    if isinstance(schema, str):
        if schema == "null":
            return pa.null(), True
        return _PRIMITIVE_ARROW[schema], False
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if isinstance(kind, (list, dict)) or (isinstance(kind, str) and kind in named):
        return arrow_type(kind, named, namespace)
    if kind == "record":
        _remember(schema, named, namespace)
        ns = schema.get("namespace", namespace)
        fields = []
        for f in schema["fields"]:
            t, nullable = arrow_type(f["type"], named, ns)
            fields.append(pa.field(f["name"], t, nullable=nullable))
        return pa.struct(fields), False
    if kind == "enum":
        _remember(schema, named, namespace)
        return pa.string(), False
    if kind == "fixed":
        _remember(schema, named, namespace)
        if logical == "decimal":
            return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0))), False
        return pa.binary(), False
    if kind == "array":
        item, nullable = arrow_type(schema["items"], named, namespace)
        return pa.list_(pa.field("element", item, nullable=nullable)), False
    if kind == "map":
        item, nullable = arrow_type(schema["values"], named, namespace)
        return pa.map_(pa.string(), pa.field("value", item, nullable=nullable)), False
    if logical in _TIMESTAMPS and kind == "long":
        return pa.timestamp("us", tz="UTC" if _TIMESTAMPS[logical] else None), False
    if logical == "date" and kind == "int":
        return pa.date32(), False
    if logical == "decimal" and kind == "bytes":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0))), False
    if kind in _PRIMITIVE_ARROW or kind == "null":
        return arrow_type(kind, named, namespace)
    raise ConfigError(f"Avro type {json.dumps(schema)} is not supported by the kafkajet source")


def spark_type(schema: Any) -> Any:
    """The Spark DataType of an Avro schema (what the decoded column is declared as)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(arrow_type(schema)[0])


# --- Spark -> Avro (the sink and to_avro) --------------------------------------------------------------------


def avro_schema_of(data_type: Any, name: str = "topLevelRecord", namespace: str = "") -> dict[str, Any] | str:
    """The Avro schema of a Spark type (Spark's to_avro naming: "topLevelRecord", nested records named after
    their field), nullable fields as ["null", T] with default null."""
    from pyspark.sql import types as T

    def convert(dt: Any, rec_name: str, ns: str) -> Any:
        if isinstance(dt, T.StructType):
            fields = []
            inner_ns = f"{ns}.{rec_name}" if ns else rec_name
            for f in dt.fields:
                t = convert(f.dataType, f.name, inner_ns)
                if f.nullable:
                    fields.append({"name": f.name, "type": ["null", t], "default": None})
                else:
                    fields.append({"name": f.name, "type": t})
            out: dict[str, Any] = {"type": "record", "name": rec_name, "fields": fields}
            if ns:
                out["namespace"] = ns
            return out
        if isinstance(dt, T.ArrayType):
            item = convert(dt.elementType, rec_name, ns)
            return {"type": "array", "items": ["null", item] if dt.containsNull else item}
        if isinstance(dt, T.MapType):
            if not isinstance(dt.keyType, T.StringType):
                raise ConfigError(f"Avro maps have string keys; this column's keys are {dt.keyType.simpleString()}")
            value = convert(dt.valueType, rec_name, ns)
            return {"type": "map", "values": ["null", value] if dt.valueContainsNull else value}
        if isinstance(dt, T.DecimalType):
            return {"type": "bytes", "logicalType": "decimal", "precision": dt.precision, "scale": dt.scale}
        if isinstance(dt, T.TimestampType):
            return {"type": "long", "logicalType": "timestamp-micros"}
        if isinstance(dt, T.TimestampNTZType):
            return {"type": "long", "logicalType": "local-timestamp-micros"}
        if isinstance(dt, T.DateType):
            return {"type": "int", "logicalType": "date"}
        simple = {T.BooleanType: "boolean", T.ByteType: "int", T.ShortType: "int", T.IntegerType: "int",
                  T.LongType: "long", T.FloatType: "float", T.DoubleType: "double", T.StringType: "string",
                  T.BinaryType: "bytes"}
        for cls, avro in simple.items():
            if isinstance(dt, cls):
                return avro
        raise ConfigError(f"Spark type {dt.simpleString()} has no Avro counterpart")

    return convert(data_type, name, namespace)  # type: ignore[no-any-return]
