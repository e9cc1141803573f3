"""Arrow tables and record batches as producer input: the columns of Spark's Kafka sink, checked once per batch.

Columns (the names and types Spark's Kafka sink uses, so a DataFrame goes in unchanged): `value` (binary or
string, required), `key` (binary or string), `topic` (string), `partition` (int), `headers`
(list<struct<key: string, value: binary>>), `timestamp` (timestamp, or int milliseconds). pyarrow is imported
only when this module is used: it is not a runtime dependency of the producer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ArrowRows:
    """The columns of one batch as the lists send_batch() takes; None for an absent column."""

    n: int
    values: list[bytes | None]
    keys: list[bytes | None] | None
    topics: list[str | None] | None
    partitions: list[int | None] | None
    headers: list[list[tuple[str, bytes | None]] | None] | None
    timestamps: list[int | None] | None

    def positions_by_topic(self) -> dict[str, list[int]]:
        """Each topic's row positions, topics in first-seen order; ValueError for a row without a topic."""
        groups: dict[str, list[int]] = {}
        for i, t in enumerate(self.topics or ()):
            if t is None:
                raise ValueError(f"send_arrow: row {i} has a null topic and no topic was given")
            groups.setdefault(t, []).append(i)
        return groups

    def take(self, positions: list[int]) -> ArrowRows:
        """The rows at `positions`, in that order, for one topic's send: positions_by_topic() chose them, so the
        topic column is left out rather than copied."""

        def pick(column: list[Any] | None) -> list[Any] | None:
            return None if column is None else [column[i] for i in positions]

        return ArrowRows(len(positions), pick(self.values), pick(self.keys),  # type: ignore[arg-type]
                         None, pick(self.partitions), pick(self.headers), pick(self.timestamps))


def _bad(column: str, typ: Any, expected: str) -> TypeError:
    return TypeError(f"column '{column}' has Arrow type {typ}; expected {expected} (the types of Spark's Kafka sink)")


def _bytes_column(name: str, column: Any) -> list[bytes | None]:
    import pyarrow as pa

    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        column = column.cast(pa.binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise _bad(name, t, "binary or string")
    return column.to_pylist()  # type: ignore[no-any-return]


def _headers_column(column: Any) -> list[list[tuple[str, bytes | None]] | None]:
    """Per-row lists of (key, value) tuples, built from the flattened struct fields, not a dict per header."""
    import pyarrow as pa

    t = column.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type) or \
            t.value_type.get_field_index("key") < 0 or t.value_type.get_field_index("value") < 0:
        raise _bad("headers", t, "array<struct<key: string, value: binary>>")
    key_type = t.value_type.field("key").type
    if not (pa.types.is_string(key_type) or pa.types.is_large_string(key_type)):
        raise _bad("headers", t, "array<struct<key: string, value: binary>>")
    offsets = column.offsets.to_pylist()
    flat = column.flatten()  # the struct values of exactly these rows, also for a sliced array
    keys = flat.field("key").to_pylist()
    if None in keys:
        raise ValueError("column 'headers' has a header with a null key; header keys must be strings")
    values = _bytes_column("headers.value", flat.field("value"))
    base = offsets[0]
    rows = len(offsets) - 1
    width = offsets[1] - base if rows else 0
    if width and offsets == list(range(base, base + width * rows + 1, width)) and all(
            keys[p::width].count(keys[p]) == rows and values[p::width].count(values[p]) == rows for p in range(width)):
        # Every row carries the same headers (a source or schema tag, say): one list for all, which the
        # producer then encodes once.
        return [list(zip(keys[:width], values[:width], strict=True))] * rows
    pairs = list(zip(keys, values, strict=True))
    # A null row and an empty list both mean "no headers".
    return [pairs[offsets[j] - base:offsets[j + 1] - base] or None for j in range(rows)]


def _timestamps_column(column: Any) -> list[int | None]:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_timestamp(t):
        return pc.cast(pc.cast(column, pa.timestamp("ms")), pa.int64()).to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_integer(t):
        return column.to_pylist()  # type: ignore[no-any-return]
    raise _bad("timestamp", t, "timestamp or int64 milliseconds")


def rows_of(data: Any) -> ArrowRows:
    """Read a pyarrow Table or RecordBatch; TypeError/ValueError naming the column if it cannot be sent."""
    try:
        import pyarrow as pa
    except ModuleNotFoundError as e:
        if e.name != "pyarrow":
            raise
        # A base install has no pyarrow: name the extra that brings it, as every optional part does.
        raise ModuleNotFoundError("send_arrow() needs pyarrow: pip install 'kafkajet[spark]' (or pyarrow alone)",
                                  name="pyarrow") from e

    if isinstance(data, pa.Table):
        batches = data.combine_chunks().to_batches()
        data = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=data.schema)
    if not isinstance(data, pa.RecordBatch):
        raise TypeError(f"expected a pyarrow Table or RecordBatch, got {type(data).__name__}")
    columns = {name: data.column(i) for i, name in enumerate(data.schema.names)}
    if "value" not in columns:
        raise ValueError(f"no 'value' column (columns: {sorted(columns)}); Kafka records need a value column "
                         "(it may hold nulls)")
    partitions = None
    if "partition" in columns:
        pt = columns["partition"].type
        if not pa.types.is_integer(pt):
            raise _bad("partition", pt, "int")
        partitions = columns["partition"].to_pylist()
    topics = None
    if "topic" in columns:
        tt = columns["topic"].type
        if not (pa.types.is_string(tt) or pa.types.is_large_string(tt)):
            raise _bad("topic", tt, "string")
        topics = columns["topic"].to_pylist()
    return ArrowRows(
        n=data.num_rows,
        values=_bytes_column("value", columns["value"]),
        keys=_bytes_column("key", columns["key"]) if "key" in columns else None,
        topics=topics,
        partitions=partitions,
        headers=_headers_column(columns["headers"]) if "headers" in columns else None,
        timestamps=_timestamps_column(columns["timestamp"]) if "timestamp" in columns else None,
    )
