"""Flat Avro records encoded by column: the fast path of the sink and to_avro, the mirror of avro_flat.py.

Each field is encoded for every row at once with numpy (zig-zag varints, little-endian floats, length-prefixed
strings), then the pieces are laid out row by row behind each row's frame (magic 0 and the schema id). It
applies to the schemas avro_flat.flat_plan accepts, except enums; a column it cannot take (a null in a
non-nullable field, a value of another type) returns None and the batch is encoded record by record with
fastavro, which words the error. The bytes are fastavro's (a test holds them equal). No I/O here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkajet.spark.formats.avro_flat import FlatField

_EPOCH_DAYS = np.datetime64("1970-01-01", "D")


def _varints(values: Any) -> tuple[Any, Any]:
    """Zig-zag varints of int64 values: (bytes end to end, per-value lengths)."""
    v = values.astype(np.int64)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    lengths = np.ones(len(z), dtype=np.int64)
    rest = z >> np.uint64(7)
    while np.any(rest):
        lengths += rest != 0
        rest >>= np.uint64(7)
    out = np.empty(int(lengths.sum()), dtype=np.uint8)
    starts = np.zeros(len(z), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    rest = z.copy()
    for k in range(int(lengths.max(initial=0))):
        live = lengths > k
        byte = (rest[live] & np.uint64(0x7F)).astype(np.uint8)
        more = lengths[live] > k + 1
        out[starts[live] + k] = byte | (more.astype(np.uint8) << 7)
        rest[live] >>= np.uint64(7)
    return out, lengths


def _pieces(field: FlatField, col: pa.Array) -> tuple[Any, Any] | None:
    """The field's encoded bytes for every row (end to end) and each row's length; None: not here."""
    n = len(col)
    present = None
    if col.null_count:
        if field.null_branch is None:
            return None
        present = np.asarray(col.is_valid())
    kind = field.kind
    parts: list[tuple[Any, Any]] = []
    if field.null_branch is not None:
        branch = np.where(present, 1 - field.null_branch, field.null_branch) if present is not None else \
            np.full(n, 1 - field.null_branch)
        parts.append(_varints(branch))
    if kind in ("string", "bytes"):
        if kind == "string" and not pa.types.is_string(col.type) or kind == "bytes" and not pa.types.is_binary(col.type):
            return None
        filled = col.fill_null("" if kind == "string" else b"") if present is not None else col
        offsets = np.frombuffer(filled.buffers()[1], dtype=np.int32)[filled.offset:filled.offset + n + 1]
        lengths = np.diff(offsets).astype(np.int64)
        if present is not None:
            lengths = np.where(present, lengths, 0)
        prefix, prefix_len = _varints(lengths)
        raw = filled.buffers()[2]
        data = np.frombuffer(raw, dtype=np.uint8) if raw is not None else np.zeros(0, dtype=np.uint8)
        body = data[int(offsets[0]):int(offsets[-1])]
        value = _interleave(prefix, prefix_len, body, lengths)
    elif kind == "boolean":
        if not pa.types.is_boolean(col.type):
            return None
        value = (np.asarray(col.fill_null(False)).astype(np.uint8), np.ones(n, dtype=np.int64))
    elif kind in ("float", "double"):
        want = pa.float32() if kind == "float" else pa.float64()
        if not pa.types.is_floating(col.type):
            return None
        arr = np.asarray(col.cast(want).fill_null(0))
        value = (arr.astype("<f4" if kind == "float" else "<f8").view(np.uint8), np.full(n, arr.itemsize))
    elif kind in ("int", "long"):
        if not pa.types.is_integer(col.type):
            return None
        value = _varints(np.asarray(col.cast(pa.int64()).fill_null(0)))
    elif kind == "int:date":
        if not pa.types.is_date32(col.type):
            return None
        value = _varints(np.asarray(col.cast(pa.int32()).fill_null(0)))
    elif kind.startswith("long:") and "timestamp" in kind:
        if not pa.types.is_timestamp(col.type):
            return None
        micros = np.asarray(pc.cast(col.cast(pa.timestamp("us", tz=col.type.tz)), pa.int64()).fill_null(0))
        value = _varints(micros // 1000 if kind.endswith("millis") else micros)
    else:
        return None
    if present is not None:
        data, lengths = value
        keep = np.repeat(np.where(present, True, False), lengths)
        value = (data[keep], np.where(present, lengths, 0))
    parts.append(value)
    if len(parts) == 1:
        return parts[0]
    (a, alen), (b, blen) = parts
    return _interleave(a, alen, b, blen)


def _interleave(a: Any, alen: Any, b: Any, blen: Any) -> tuple[Any, Any]:
    """Row i of the result is row i of a then row i of b (each array holds its rows end to end)."""
    total = alen + blen
    out = np.empty(int(total.sum()), dtype=np.uint8)
    row_start = np.zeros(len(total), dtype=np.int64)
    np.cumsum(total[:-1], out=row_start[1:])
    _scatter(out, a, alen, row_start)
    _scatter(out, b, blen, row_start + alen)
    return out, total


def _scatter(out: Any, data: Any, lengths: Any, dest: Any) -> None:
    """out[dest[i]:dest[i]+lengths[i]] = the i-th piece of data (pieces end to end)."""
    total = int(lengths.sum())
    if total == 0:
        return
    src_start = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=src_start[1:])
    index = np.repeat(dest - src_start, lengths) + np.arange(total, dtype=np.int64)
    out[index] = data[:total]


def encode_flat(values: pa.Array, plan: list[FlatField], names: list[str], schema_id: int) -> pa.Array | None:
    """`values` (a struct column without nulls, its fields named and ordered as the schema's `names`) as
    framed Avro payloads, or None for the per-record path."""
    if not isinstance(values, pa.StructArray) or values.null_count or len(values) == 0:
        return None
    if [f.name for f in values.type] != names or any(f.kind == "enum" for f in plan):
        return None
    n = len(values)
    pieces = []
    for i, field in enumerate(plan):
        got = _pieces(field, values.field(i))
        if got is None:
            return None
        pieces.append(got)
    row_len = 5 + sum(lengths for _, lengths in pieces)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_len, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        return None
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    head = np.frombuffer(bytes((0,)) + schema_id.to_bytes(4, "big"), dtype=np.uint8)
    out[(offsets[:-1, None] + np.arange(5)).reshape(-1)] = np.tile(head, n)
    at = offsets[:-1] + 5
    for data, lengths in pieces:
        _scatter(out, data, lengths, at)
        at = at + lengths
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out)])
