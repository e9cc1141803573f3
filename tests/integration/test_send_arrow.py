"""send_arrow(): Arrow tables with the Spark Kafka sink's columns, read back by kafka-python (CRCs checked)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.producer.partitioner import partition_for_key
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def test_every_column_reaches_kafka_in_input_order(broker: EmbeddedBroker, topic_name: str) -> None:
    other = topic_name + "-other"
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name, other], num_partitions=3)
    n = 6000
    keys = [None if i % 4 == 0 else f"k{i % 50}" for i in range(n)]  # strings: cast to UTF-8 bytes
    values = [None if i % 97 == 0 else f"value-{i}".encode() for i in range(n)]
    topics = [other if i % 5 == 0 else topic_name for i in range(n)]
    partitions = [i % 3 if i % 7 == 0 else None for i in range(n)]
    headers = [None if i % 3 else [{"key": "i", "value": str(i).encode()}, {"key": "nil", "value": None}]
               for i in range(n)]
    base = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    stamps = [base + dt.timedelta(milliseconds=i) if i % 2 else None for i in range(n)]
    table = pa.table({"key": pa.array(keys, pa.string()), "value": pa.array(values, pa.binary()),
                      "topic": topics, "partition": pa.array(partitions, pa.int32()),
                      "headers": pa.array(headers, HEADERS), "timestamp": pa.array(stamps, pa.timestamp("us"))})
    # Two chunks, and one row group sliced out of a bigger batch: offsets into shared buffers must hold.
    table = pa.concat_tables([table.slice(0, 2500), table.slice(2500)])
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        result = p.send_arrow(None, table)
        mds = result.result(timeout=60)
    assert len(mds) == n and result.errors() == []
    # Input order: within each partition, rows are stored in the order they stood in the table.
    last_offset: dict[tuple[str, int], int] = {}
    for i, md in enumerate(mds):
        assert md.offset > last_offset.get((md.topic, md.partition), -1), f"row {i} stored before an earlier row"
        last_offset[(md.topic, md.partition)] = md.offset
    read = {(t, r.partition, r.offset): r for t in (topic_name, other)
            for r in read_topic(broker.bootstrap_servers, t, sum(1 for x in topics if x == t))}
    for i, md in enumerate(mds):
        assert md.topic == topics[i]
        r = read[(md.topic, md.partition, md.offset)]
        assert r.key == (None if keys[i] is None else keys[i].encode())  # type: ignore[union-attr]
        assert r.value == values[i]
        assert r.headers == (() if headers[i] is None else (("i", str(i).encode()), ("nil", None)))
        if stamps[i] is not None:
            assert r.timestamp == int(stamps[i].timestamp() * 1000)  # type: ignore[union-attr]
        if partitions[i] is not None:
            assert md.partition == partitions[i]
        elif keys[i] is not None:
            assert md.partition == partition_for_key(keys[i].encode(), 3)  # type: ignore[union-attr]


def test_the_topic_argument_wins_over_the_topic_column(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=1)
    batch = pa.record_batch([pa.array([b"a", b"b"]), pa.array(["elsewhere", "elsewhere"])], names=["value", "topic"])
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        mds = p.send_arrow(topic_name, batch).result(timeout=30)
    assert [(m.topic, m.offset) for m in mds] == [(topic_name, 0), (topic_name, 1)]


@pytest.mark.parametrize(("columns", "message"), [
    ({"key": [b"k"]}, "no 'value' column"),
    ({"value": [1]}, "column 'value' has Arrow type int64; expected binary or string"),
    ({"value": [b"v"], "partition": ["0"]}, "column 'partition' has Arrow type string; expected int"),
    ({"value": [b"v"], "headers": [[1]]}, "column 'headers' has Arrow type list<item: int64>"),
    ({"value": [b"v"], "timestamp": [1.5]}, "column 'timestamp' has Arrow type double"),
    ({"value": [b"v"]}, "no topic given and no 'topic' column"),
    ({"value": [b"v"], "topic": pa.array([None], pa.string())}, "row 0 has a null topic"),
])
def test_bad_columns_get_an_error_naming_the_column(columns: dict[str, object], message: str) -> None:
    # Checked before anything is queued or any broker is contacted.
    with Producer(bootstrap_servers="127.0.0.1:1", max_block_ms=1000) as p:
        with pytest.raises((TypeError, ValueError), match=message):
            p.send_arrow(None, pa.table(columns))
        with pytest.raises(TypeError, match="expected a pyarrow Table or RecordBatch"):
            p.send_arrow("t", [b"v"])


_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@pytest.mark.parametrize("rows", [
    [[("source", b"app"), ("v", b"1")]] * 6,                      # the same headers on every row
    [[("source", b"app"), ("v", b"1")]] * 5 + [[("source", b"app"), ("v", b"2")]],   # all but the last value
    [[("source", b"app"), ("v", b"1")]] * 5 + [[("v", b"1"), ("source", b"app")]],   # the same, reordered
    [[("source", b"app")]] * 3 + [[("source", b"app"), ("source", b"app")]] + [[("source", b"app")]] * 2,
    [[("source", b"app")]] * 3 + [None] + [[("source", b"app")]] * 2,
    [[("a", None)]] * 4 + [[("a", b"")]] + [[("a", None)]],          # null and empty values differ
])
def test_rows_of_keeps_each_rows_headers(rows: list) -> None:
    # One header list shared by every row is a shortcut for the common case (a tag on every record); a row
    # that differs in any way must keep its own headers.
    from kafkajet.producer.arrow import rows_of

    batch = pa.record_batch([pa.array([b"v"] * len(rows)), pa.array(
        [None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows], _HEADERS)],
        names=["value", "headers"])
    assert rows_of(batch).headers == [r or None for r in rows]
    assert rows_of(batch.slice(1, 4)).headers == [r or None for r in rows[1:5]]
