"""Avro schemas <-> Spark types, as Spark's own Avro support maps them (no Spark session needed)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import types as T

from kafkajet.errors import ConfigError
from kafkajet.spark.formats.avro_types import avro_schema_of, spark_type


def test_avro_records_map_to_spark_types_with_logical_types_and_nullable_unions() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "dec", "type": {"type": "fixed", "name": "F", "size": 8, "logicalType": "decimal",
                                 "precision": 12, "scale": 3}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "color", "type": {"type": "enum", "name": "C", "symbols": ["A", "B"]}},
        {"name": "maybe", "type": ["null", {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}]},
        {"name": "again", "type": "In"},  # a named type used twice
        {"name": "wide", "type": ["int", "long"]},
        {"name": "tags", "type": {"type": "array", "items": ["null", "string"]}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
    ]}
    got = spark_type(schema)
    assert got.simpleString() == (
        "struct<ts:timestamp,local:timestamp_ntz,d:date,dec:decimal(12,3),id:string,color:string,"
        "maybe:struct<x:int>,again:struct<x:int>,wide:bigint,tags:array<string>,attrs:map<string,double>>")
    nullable = {f.name: f.nullable for f in got.fields}
    assert nullable["maybe"] and not nullable["again"] and not nullable["ts"]
    with pytest.raises(ConfigError, match="several non-null branches"):
        spark_type({"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "int", "string"]}]})


def test_spark_types_map_to_avro_with_nullable_fields_defaulting_to_null() -> None:
    st = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), True),
                       T.StructField("at", T.TimestampType(), False),
                       T.StructField("price", T.DecimalType(9, 2), False),
                       T.StructField("inner", T.StructType([T.StructField("x", T.IntegerType(), False)]), True)])
    avro = avro_schema_of(st)
    assert avro == {"type": "record", "name": "topLevelRecord", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "inner", "type": ["null", {"type": "record", "name": "inner", "namespace": "topLevelRecord",
                                            "fields": [{"name": "x", "type": "int"}]}], "default": None}]}
    assert spark_type(json.loads(json.dumps(avro))) == T.StructType(
        [T.StructField(f.name, f.dataType, f.nullable) for f in st.fields])
