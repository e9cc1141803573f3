"""Flat Avro records decoded by column: the fast path of the source and from_avro.

A record of primitive fields (and unions of one of them with null, enums, and the timestamp / date logical
types) is decoded one field at a time for every record of a batch at once, with numpy, as arrow_records.py
decodes Kafka's records: field k of every record starts where field k-1 ended, and that position is advanced
for all records together. It applies only where it cannot differ from the per-record decoder: every payload
framed with the planned schema id (so no schema resolution is needed) and no tombstone, every record
consumed exactly to its end, every branch index and enum index in range, every string valid UTF-8.
Anything else returns None and the batch goes through the per-record path (fastavro), which also words the
errors. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kafkajet.errors import CorruptRecordError
from kafkajet.spark.formats.buffer_columns import binary_column, zigzag_varints

_PAD = 16  # the widest read past a field's start that a check only rejects afterwards (a double: 8 bytes)
_SCALARS = {"boolean", "int", "long", "float", "double", "string", "bytes"}
_LOGICAL = {("long", "timestamp-millis"), ("long", "timestamp-micros"), ("long", "local-timestamp-millis"),
            ("long", "local-timestamp-micros"), ("int", "date")}


@dataclass(frozen=True)
class FlatField:
    kind: str  # an Avro primitive, "enum", or "long:timestamp-millis"-style logical type
    null_branch: int | None  # the union's index of "null" when the field is nullable
    symbols: tuple[str, ...] = ()


def flat_plan(schema: Any) -> list[FlatField] | None:
    """The fields of a flat record schema (parsed JSON), or None when the schema is not flat."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    out = []
    for f in schema["fields"]:
        t, null_branch = f["type"], None
        if isinstance(t, list):
            if len(t) != 2 or "null" not in t:
                return None
            null_branch = t.index("null")
            t = t[1 - null_branch]
        kind = _kind(t)
        if kind is None:
            return None
        symbols = tuple(t["symbols"]) if kind == "enum" else ()
        out.append(FlatField(kind, null_branch, symbols))
    return out


def _kind(t: Any) -> str | None:
    if isinstance(t, str):
        return t if t in _SCALARS else None
    if not isinstance(t, dict):
        return None
    base, logical = t.get("type"), t.get("logicalType")
    if base == "enum":
        return "enum"
    if (base, logical) in _LOGICAL:
        return f"{base}:{logical}"
    if logical is None and base in _SCALARS:
        return str(base)
    return None


def decode_flat(values: pa.Array, plan: list[FlatField], schema_id: int, struct: pa.StructType) -> pa.Array | None:
    """`values` (framed payloads) as a StructArray of type `struct`, or None to take the per-record path."""
    if not isinstance(values, pa.BinaryArray) or values.null_count or len(values) == 0:
        return None
    n = len(values)
    _, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[values.offset:values.offset + n + 1].astype(np.int64)
    raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    buf = np.concatenate([raw[:int(offsets[-1])], np.zeros(_PAD, dtype=np.uint8)])
    starts, ends = offsets[:-1], offsets[1:]
    if np.any(ends - starts < 5) or np.any(buf[starts] != 0):
        return None
    ids = (buf[starts + 1].astype(np.int64) << 24 | buf[starts + 2].astype(np.int64) << 16
           | buf[starts + 3].astype(np.int64) << 8 | buf[starts + 4].astype(np.int64))
    if np.any(ids != schema_id):
        return None
    pos = starts + 5
    children = []
    try:
        for field, arrow_field in zip(plan, struct, strict=True):
            present = None
            if field.null_branch is not None:
                branch, width = zigzag_varints(buf, pos)
                if np.any((branch != 0) & (branch != 1)):
                    return None
                pos = pos + width
                present = branch != field.null_branch
            # A null's value is read at the pad's zeros (a valid one-byte varint), and then ignored.
            at = pos if present is None else np.where(present, pos, len(buf) - _PAD)
            column, width = _column(buf, at, ends, field, arrow_field.type, present)
            if column is None:
                return None
            pos = pos + (width if present is None else np.where(present, width, 0))
            if np.any(pos > ends):
                return None
            children.append(column)
    except CorruptRecordError:  # a varint that never ends: garbage the per-record path words
        return None
    if np.any(pos != ends):
        return None
    return pa.StructArray.from_arrays(children, fields=list(struct))


def _fixed(buf: Any, pos: Any, size: int, dtype: str) -> Any:
    return buf[pos[:, None] + np.arange(size)].copy().view(dtype).reshape(-1)


def _column(buf: Any, pos: Any, ends: Any, field: FlatField, arrow_type: pa.DataType,
            present: Any) -> tuple[pa.Array | None, Any]:
    """(the field's Arrow column, each record's field width); None when a value cannot be decoded here."""
    mask = None if present is None else ~present
    kind = field.kind
    if kind in ("string", "bytes"):
        length, width = zigzag_varints(buf, pos)
        if present is not None:
            length = np.where(present, length, -1)
            if np.any(present & ((length < 0) | (pos + width + length > ends))):
                return None, width
        elif np.any((length < 0) | (pos + width + length > ends)):
            return None, width
        binary = binary_column(buf, pos + width, length)
        if kind == "string":
            binary = pa.Array.from_buffers(pa.string(), len(binary), binary.buffers(), null_count=binary.null_count)
            try:
                binary.validate(full=True)  # UTF-8
            except pa.ArrowInvalid:
                return None, width
        return binary, width + np.maximum(length, 0)
    if kind == "boolean":
        byte = buf[pos]
        if np.any(byte > 1):  # a null's byte is the pad's 0
            return None, 1
        return pa.array(byte.astype(bool), type=pa.bool_(), mask=mask), np.ones(len(pos), dtype=np.int64)
    if kind == "float":
        return pa.array(_fixed(buf, pos, 4, "<f4"), mask=mask), np.full(len(pos), 4, dtype=np.int64)
    if kind == "double":
        return pa.array(_fixed(buf, pos, 8, "<f8"), mask=mask), np.full(len(pos), 8, dtype=np.int64)
    value, width = zigzag_varints(buf, pos)
    if kind == "enum":
        if np.any((value < 0) | (value >= len(field.symbols))):
            return None, width
        index = pa.array(value.astype(np.int32), type=pa.int32(), mask=mask)
        return pa.DictionaryArray.from_arrays(index, pa.array(field.symbols, pa.string())).cast(pa.string()), width
    if kind in ("int", "int:date"):
        if np.any((value < -(1 << 31)) | (value >= 1 << 31)):
            return None, width
        ints = pa.array(value.astype(np.int32), mask=mask)
        return (ints.cast(pa.date32()) if kind == "int:date" else ints), width
    if kind == "long":
        return pa.array(value, mask=mask), width
    # timestamps: Spark's are microseconds
    micros = value * 1000 if kind.endswith("millis") else value
    return pa.array(micros, type=arrow_type, mask=mask), width
