"""The per-record encoder written for a flat schema gives fastavro's bytes, for the values it takes itself and,
through its fallback, for the ones it hands to fastavro (the serializer's wording of a refused value is tested
in tests/schema_registry/test_avro.py). A unit test so that make test runs it on both builds: the per-field
encoders (avro_binary.py) are compiled."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkajet.schema_registry.avro_encode import flat_encoder, record_encoder

FLAT = {"type": "record", "name": "Flat", "namespace": "t", "fields": [
    {"name": "l", "type": "long"},
    {"name": "i", "type": "int"},
    {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"},
    {"name": "d", "type": "double"},
    {"name": "f", "type": "float"},
    {"name": "ok", "type": "boolean"},
    {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "nd", "type": ["null", "double"], "default": None},
    {"name": "ns", "type": ["string", "null"]},
    {"name": "ni", "type": ["null", "int"], "default": None},
    {"name": "nl", "type": ["null", "long"], "default": None},
    {"name": "nts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
    {"name": "name with \"quotes\"", "type": "string", "default": ""},
]}
PARSED = fastavro.parse_schema(FLAT)

longs = st.integers(-(2**63), 2**63 - 1)
ints = st.integers(-(2**31), 2**31 - 1)
datetimes = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30),
                         timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=-7, minutes=-30))]))
floats = st.floats(allow_nan=False, width=64)
records = st.fixed_dictionaries({
    "l": longs, "i": ints, "s": st.text(max_size=80), "b": st.binary(max_size=80), "d": floats,
    "f": st.floats(allow_nan=False, width=32), "ok": st.booleans(), "ms": datetimes | longs,
    "us": datetimes | st.integers(-(2**62), 2**62), "day": st.dates() | ints, "e": st.sampled_from(["A", "B", "C"]),
    "nd": st.none() | floats, "ns": st.none() | st.text(max_size=3), "ni": st.none() | ints,
    "nl": st.none() | longs, "nts": st.none() | datetimes | longs, "name with \"quotes\"": st.text(max_size=3),
})


def fastavro_bytes(value: Any, parsed: Any = PARSED) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, value)
    return buf.getvalue()


@settings(max_examples=400, deadline=None)
@given(record=records)
def test_the_written_encoder_gives_fastavros_bytes(record: dict[str, Any]) -> None:
    flat = flat_encoder(PARSED)
    assert flat is not None
    assert flat(record) == fastavro_bytes(record)  # the written function itself, no fallback


@pytest.mark.parametrize("change", [
    {"d": "NaN"},  # fastavro float()s a str in a double field
    {"nd": 3},  # an int in ["null", "double"]: fastavro's union picks by value
    {"nd": True},  # ... and takes a bool for no numeric branch (fastavro refuses it)
    {"ni": False},
    {"ms": dt.datetime(2026, 1, 1, 12, 30)},  # naive: fastavro's local-time rule
    {"l": True},  # a bool where a long is declared
    {"ni": 2**40},  # out of range for the union's int: fastavro refuses it (below)
    {"b": bytearray(b"xy")},
    {"l": 2**63},  # out of range for a long: fastavro refuses it
    {"l": -(2**63) - 1},
    {"ns": ("string", "tuple notation")},
])
def test_values_it_does_not_take_go_to_fastavro(change: dict[str, Any]) -> None:
    record = {"l": 1, "i": 2, "s": "s", "b": b"", "d": 0.5, "f": 1.5, "ok": True, "ms": 0, "us": 0, "day": 0,
              "e": "B", "nd": None, "ns": None, "ni": None, "nl": 5, "nts": 7, "name with \"quotes\"": "q",
              **change}
    encode = record_encoder(PARSED)
    try:
        expected = fastavro_bytes(record)
    except Exception as e:  # noqa: BLE001 - whatever fastavro raises, the encoder must raise too
        with pytest.raises(type(e)):
            encode(record)
        return
    assert encode(record) == expected


def test_missing_fields_take_their_defaults_as_fastavro_does() -> None:
    record = {"l": 1, "i": 2, "s": "s", "b": b"", "d": 0.5, "f": 1.5, "ok": False, "ms": 0, "us": 0, "day": 0,
              "e": "C", "ns": "x"}
    assert record_encoder(PARSED)(record) == fastavro_bytes(record)


def test_schemas_that_are_not_flat_are_written_by_fastavro() -> None:
    nested = fastavro.parse_schema({"type": "record", "name": "N", "fields": [
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "u", "type": ["null", "string", "long"]}]})
    assert flat_encoder(nested) is None
    assert record_encoder(nested)({"tags": ["a"], "u": 3}) == fastavro_bytes({"tags": ["a"], "u": 3}, nested)


@pytest.mark.parametrize("bits", range(64))
def test_longs_around_every_varint_length(bits: int) -> None:
    parsed = fastavro.parse_schema({"type": "record", "name": "L", "fields": [{"name": "l", "type": "long"}]})
    flat = flat_encoder(parsed)
    assert flat is not None
    for v in {1 << bits, (1 << bits) - 1, -(1 << bits), -(1 << bits) - 1}:
        if -(2**63) <= v < 2**63:
            assert flat({"l": v}) == fastavro_bytes({"l": v}, parsed), v


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 8191, 8192, 100_000])
def test_strings_and_bytes_of_every_length_prefix(n: int) -> None:
    parsed = fastavro.parse_schema({"type": "record", "name": "S", "fields": [
        {"name": "s", "type": "string"}, {"name": "b", "type": "bytes"}, {"name": "u", "type": ["null", "string"]}]})
    flat = flat_encoder(parsed)
    assert flat is not None
    for record in ({"s": "x" * n, "b": b"y" * n, "u": "z" * n}, {"s": "é" * n, "b": b"", "u": None}):
        assert flat(record) == fastavro_bytes(record, parsed)
