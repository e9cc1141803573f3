"""The by-column decoder of flat Avro records against the per-record one (fastavro): the same columns for
every kind of field, nulls in each nullable one, and None (the per-record path) wherever it must not guess."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from kafkajet.schema_registry import AvroSerializer, MessageField, SchemaRegistryClient, SerializationContext
from kafkajet.schema_registry.wire import frame
from kafkajet.spark.formats.avro_columns import ColumnDecoder
from kafkajet.spark.formats.avro_flat import decode_flat, flat_plan
from kafkajet.spark.formats.registry_column import RegistryColumn
from kafkajet.testing import SchemaRegistry

FLAT = {"type": "record", "name": "Flat", "fields": [
    {"name": "l", "type": "long"}, {"name": "i", "type": "int"}, {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"}, {"name": "ok", "type": "boolean"}, {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
    {"name": "tm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ns", "type": ["null", "string"], "default": None},
    {"name": "nd", "type": ["double", "null"]},
    {"name": "nl", "type": ["null", "long"], "default": None},
    {"name": "nb", "type": ["null", "boolean"], "default": None},
]}
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r


def record(rng: random.Random, i: int) -> dict[str, Any]:
    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.3 else v

    return {"l": rng.randint(-(1 << 63), (1 << 63) - 1), "i": rng.randint(-(1 << 31), (1 << 31) - 1),
            "s": "é" * rng.randint(0, 200) + str(i), "b": rng.randbytes(rng.randint(0, 40)), "ok": rng.random() < 0.5,
            "f": float(rng.randint(-1000, 1000)) / 8, "d": rng.uniform(-1e300, 1e300),
            "e": rng.choice(["RED", "GREEN", "BLUE"]), "tm": T0 + dt.timedelta(milliseconds=rng.randint(0, 10**12)),
            "tu": T0 + dt.timedelta(microseconds=rng.randint(0, 10**15)),
            "day": dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(-10000, 10000)),
            "ns": maybe("x" * rng.randint(0, 300)), "nd": maybe(rng.random()), "nl": maybe(rng.randint(-9, 1 << 40)),
            "nb": maybe(rng.random() < 0.5)}


def setup(registry: SchemaRegistry, n: int) -> tuple[ColumnDecoder, list[bytes], int]:
    client = SchemaRegistryClient({"url": registry.url})
    ser = AvroSerializer(client, json.dumps(FLAT))
    ctx = SerializationContext("flat", MessageField.VALUE)
    rng = random.Random(29)
    payloads = [ser(record(rng, i), ctx) for i in range(n)]
    schema_id = int.from_bytes(payloads[0][1:5], "big")
    column = RegistryColumn("value", (("url", registry.url),), json.dumps(FLAT), schema_id, "flat-value")
    return ColumnDecoder(column), payloads, schema_id


def test_by_column_and_per_record_give_the_same_columns(registry: SchemaRegistry) -> None:
    decoder, payloads, schema_id = setup(registry, 3000)
    plan = flat_plan(FLAT)
    assert plan is not None
    by_column = decode_flat(pa.array(payloads, pa.binary()), plan, schema_id, decoder.type)
    assert by_column is not None
    per_record = decoder.decode(payloads, "flat", str)
    assert by_column.type == per_record.type
    assert by_column.to_pylist() == per_record.to_pylist()
    sliced = pa.array(payloads, pa.binary()).slice(100, 50)  # an Arrow slice: offsets not from zero
    part = decode_flat(sliced, plan, schema_id, decoder.type)
    assert part is not None and part.to_pylist() == per_record.to_pylist()[100:150]


def test_anything_doubtful_goes_to_the_per_record_path(registry: SchemaRegistry) -> None:
    decoder, payloads, schema_id = setup(registry, 20)
    plan = flat_plan(FLAT)
    assert plan is not None
    good = payloads[:5]

    def flat(*extra: bytes | None) -> Any:
        return decode_flat(pa.array([*good, *extra], pa.binary()), plan, schema_id, decoder.type)

    assert flat() is not None
    body = payloads[5][5:]
    for bad in (frame(schema_id + 1, body),  # another version: needs schema resolution
                payloads[5][:-1],  # truncated
                payloads[5] + b"\x00",  # a byte after the record
                b"plain", None):  # not framed; a tombstone
        assert flat(bad) is None, bad
    bad_utf8 = frame(schema_id, body.replace(b"\xc3\xa9", b"\xc3\x28", 1))
    assert b"\xc3\x28" in bad_utf8
    assert flat(bad_utf8) is None
    assert flat_plan({"type": "record", "name": "N", "fields": [
        {"name": "r", "type": {"type": "record", "name": "In", "fields": []}}]}) is None
    assert flat_plan({"type": "record", "name": "U", "fields": [{"name": "u", "type": ["int", "string"]}]}) is None


ENCODABLE = {**FLAT, "fields": [f for f in FLAT["fields"] if f["name"] != "e"]}  # enums go record by record


def test_by_column_encoding_writes_fastavros_bytes() -> None:
    from kafkajet.spark.formats.avro_columns import ColumnEncoder

    column = RegistryColumn("value", (("url", "http://unused"),), json.dumps(ENCODABLE), 70000, "flat-value")
    encoder = ColumnEncoder(column)
    rng = random.Random(7)
    rows = [{k: v for k, v in record(rng, i).items() if k != "e"} for i in range(2000)]
    names = [f["name"] for f in ENCODABLE["fields"]]
    arrow = pa.Table.from_pylist(rows).select(names)
    struct = pa.StructArray.from_arrays([arrow.column(n).combine_chunks() for n in names], names=names)
    plan = flat_plan(ENCODABLE)
    assert plan is not None
    from kafkajet.spark.formats.avro_flat_encode import encode_flat

    by_column = encode_flat(struct, plan, names, 70000)
    assert by_column is not None
    assert by_column.to_pylist() == encoder.encode(struct.to_pylist())
    assert encode_flat(struct.slice(10, 30), plan, names, 70000).to_pylist() == by_column.to_pylist()[10:40]
    # A null where the schema has none, fields in another order: the per-record path (which words errors).
    broken = pa.StructArray.from_arrays(
        [pa.array([None, *range(1, 5)], pa.int64()) if n == "l" else struct.field(n).slice(0, 5) for n in names],
        names=names)
    assert encode_flat(broken, plan, names, 70000) is None
    assert encode_flat(struct, plan, names[::-1], 70000) is None
