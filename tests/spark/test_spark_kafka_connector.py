"""Spark's own Kafka connector as the reference for kafkajet's source and sink: the same batch query through
format("kafka") (spark-sql-kafka-0-10, the version jvm/spark-connector/pom.xml names, fetched by
benchmarks/_jvm.py) and format("kafkajet") returns the same rows, every column; a DataFrame written through each
reads back the same. On one Apache Kafka node (the `apache_kafka` fixture).

The connector's jars join the shared `spark` session with ADD JAR (driver class loader and executors) rather than
spark.jars, which only a new SparkContext reads: one process holds one SparkContext, and the other Spark tests
share it. ADD JAR puts the jars on the session for the rest of the run; nothing else uses format("kafka").

Where the two differ, Spark's behaviour is the reference: a difference is fixed in kafkajet/spark/, or listed
here and left out of the assertion with the rest asserted (Spark 4.3.0 with connector 4.2.0, Apache Kafka 4.4.0).
Found and fixed: a record with no headers, read with includeHeaders, was an empty array in kafkajet and null in
Spark's connector (KafkaRecordToRowConverter builds the array only when the record has a header); it is null now.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin, NewTopic
from kafkajet.testing.apache_kafka import ApacheKafka

_JVM = Path(__file__).resolve().parents[2] / "benchmarks" / "_jvm.py"
PARTITIONS = 3
RECORDS = 60
SECOND = 1000


def make_topic(kafka: ApacheKafka, name: str, partitions: int, **configs: str) -> str:
    with Admin(kafka.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(name, partitions, configs=configs or None)])
    return name


def _connector_jars() -> list[str]:
    spec = importlib.util.spec_from_file_location("kafkajet_benchmarks_jvm", _JVM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jars: list[str] = module.spark_connector_jars()
    return jars


@pytest.fixture(scope="module")
def spark_kafka(spark: Any) -> Any:
    """The shared session, with Spark's Kafka connector added (ADD JAR: see the module's docstring)."""
    for jar in _connector_jars():
        spark.sql(f"ADD JAR '{jar}'")
    return spark


@pytest.fixture(scope="module")
def loaded(apache_kafka: ApacheKafka) -> tuple[str, int]:
    """A topic of PARTITIONS partitions, RECORDS records a partition with timestamps a second apart from `base`:
    keys null on every other record, a null value (a tombstone) now and then, headers of every shape (none,
    repeated names, a null value, empty bytes). Returns (topic, base)."""
    topic = make_topic(apache_kafka, f"spark-kafka-reference-{time.time_ns()}", PARTITIONS)
    base = (int(time.time()) - 3600) * SECOND  # recent: within any retention
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, linger_ms=5) as p:
        futures = []
        for i in range(RECORDS * PARTITIONS):
            partition, n = i % PARTITIONS, i // PARTITIONS
            headers = [] if n % 4 == 0 else [("h", b"%d" % n), ("h", None), ("e", b""), ("\u00fc", b"\xff\x00")][:n % 4 + 1]
            futures.append(p.send(topic, None if n % 7 == 3 else b"v-%d-%d" % (partition, n),
                                  key=None if n % 2 else b"k-%d" % n, headers=headers, partition=partition,
                                  timestamp_ms=base + n * SECOND))
        p.flush(timeout=60)
        for f in futures:
            f.result(timeout=0)
    return topic, base


def _read(spark: Any, fmt: str, bootstrap: str, **options: str) -> list[tuple[Any, ...]]:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load()
    return sorted((_row(r) for r in df.collect()), key=lambda r: (r[0], r[1], r[2]))


def _row(r: Any) -> tuple[Any, ...]:
    """topic, partition, offset, key, value, timestamp, timestampType, headers (when read): bytes for binary."""
    def b(v: Any) -> bytes | None:
        return None if v is None else bytes(v)

    headers = (tuple((h["key"], b(h["value"])) for h in r["headers"]) if "headers" in r and r["headers"] is not None
               else r["headers"] if "headers" in r else "absent")
    return (r["topic"], r["partition"], r["offset"], b(r["key"]), b(r["value"]), r["timestamp"], r["timestampType"],
            headers)


def _same(spark: Any, bootstrap: str, expected_count: int | None = None, **options: str) -> list[tuple[Any, ...]]:
    reference = _read(spark, "kafka", bootstrap, **options)
    ours = _read(spark, "kafkajet", bootstrap, **options)
    if expected_count is not None:
        assert len(reference) == expected_count, f"Spark's connector read {len(reference)} rows with {options}"
    assert len(ours) == len(reference), f"{options}: kafkajet {len(ours)} rows, Spark's connector {len(reference)}"
    for mine, theirs in zip(ours, reference, strict=True):
        assert mine == theirs, f"{options}: kafkajet {mine} != Spark's connector {theirs}"
    return reference


def test_the_same_batch_queries_return_the_same_rows_every_column(
        spark_kafka: Any, apache_kafka: ApacheKafka, loaded: tuple[str, int]) -> None:
    topic, base = loaded
    bootstrap = apache_kafka.bootstrap_servers
    total = RECORDS * PARTITIONS
    rows = _same(spark_kafka, bootstrap, total, subscribe=topic, includeHeaders="true")
    assert {r[1] for r in rows} == set(range(PARTITIONS)) and any(r[3] is None for r in rows)
    assert any(r[4] is None for r in rows) and any(r[7] is None for r in rows)
    assert any(r[7] is not None and len(r[7]) == 4 for r in rows)
    _same(spark_kafka, bootstrap, total, subscribe=topic)  # no headers column
    _same(spark_kafka, bootstrap, total, subscribePattern=f"{topic[:-4]}.*", includeHeaders="true")
    # Offsets as JSON: a number, -2 (earliest) and -1 (latest) at either end.
    _same(spark_kafka, bootstrap, (10 - 2) + (RECORDS - 0) + (12 - 5), subscribe=topic, includeHeaders="true",
          startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": 5}}),
          endingOffsets=json.dumps({topic: {"0": 10, "1": -1, "2": 12}}))
    _same(spark_kafka, bootstrap, 3 + 4 + 5, includeHeaders="true",
          assign=json.dumps({topic: [0, 1, 2]}), startingOffsets=json.dumps({topic: {"0": 7, "1": 50, "2": 0}}),
          endingOffsets=json.dumps({topic: {"0": 10, "1": 54, "2": 5}}))
    # By timestamp: every partition from one time, per-partition times, and an end by time.
    _same(spark_kafka, bootstrap, (RECORDS - 20) * PARTITIONS, subscribe=topic, includeHeaders="true",
          startingTimestamp=str(base + 20 * SECOND))
    _same(spark_kafka, bootstrap, 10 + 25 + (RECORDS - 1), subscribe=topic, includeHeaders="true",
          startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 30 * SECOND, "1": base + 5 * SECOND,
                                                         "2": base + 500}}),
          endingOffsetsByTimestamp=json.dumps({topic: {"0": base + 40 * SECOND, "1": base + 30 * SECOND,
                                                       "2": base + 3600 * SECOND}}))
    _same(spark_kafka, bootstrap, 10 * PARTITIONS, subscribe=topic, startingTimestamp=str(base + 15 * SECOND),
          endingTimestamp=str(base + 25 * SECOND))
    # minPartitions splits offset ranges into more tasks than Kafka partitions: the rows are the same.
    _same(spark_kafka, bootstrap, total, subscribe=topic, includeHeaders="true", minPartitions="7")
    _same(spark_kafka, bootstrap, 10, assign=json.dumps({topic: [1]}), minPartitions="4",
          startingOffsets=json.dumps({topic: {"1": 20}}), endingOffsets=json.dumps({topic: {"1": 30}}))


def test_log_append_time_reads_the_same(spark_kafka: Any, apache_kafka: ApacheKafka, topic_name: str) -> None:
    """timestampType 1: the broker's append time, which replaces the producer's timestamps."""
    topic = make_topic(apache_kafka, topic_name, 2, **{"message.timestamp.type": "LogAppendTime"})
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, linger_ms=5) as p:
        for i in range(40):
            p.send(topic, b"%d" % i, key=b"k" if i % 3 else None, partition=i % 2, timestamp_ms=1_000_000 + i)
        p.flush(timeout=60)
    rows = _same(spark_kafka, apache_kafka.bootstrap_servers, 40, subscribe=topic, includeHeaders="true")
    assert {r[6] for r in rows} == {1}


def test_a_dataframe_written_through_each_reads_back_the_same(
        spark_kafka: Any, apache_kafka: ApacheKafka, topic_name: str) -> None:
    """Keys hashed to a partition (both use Kafka's murmur2), explicit partitions (null in the column: the
    partitioner's choice), null keys on explicit partitions, null values, headers: one Spark partition, so both
    write in the same order and the offsets match too."""
    bootstrap = apache_kafka.bootstrap_servers
    ours, theirs = (make_topic(apache_kafka, f"{topic_name}-{x}", 4) for x in ("kafkajet", "kafka"))
    rows = []
    for i in range(200):
        key = None if i % 5 == 1 else b"key-%d" % (i % 37)
        partition = i % 4 if key is None else (3 - i % 4 if i % 5 == 2 else None)
        headers = [] if i % 3 == 0 else [("n", b"%d" % i), ("n", None)][: i % 3]
        rows.append((key, None if i % 11 == 4 else b"value-%d" % i, partition, headers))
    df = spark_kafka.createDataFrame(
        rows, "key binary, value binary, partition int, headers array<struct<key: string, value: binary>>"
    ).coalesce(1)
    (df.write.format("kafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", theirs).save())
    (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", ours).save())

    def back(topic: str) -> list[tuple[Any, ...]]:
        # topic, partition, offset, key, value, headers: timestamps are each write's own time.
        return [(r[1], r[2], r[3], r[4], r[7]) for r in _read(spark_kafka, "kafka", bootstrap, subscribe=topic,
                                                                   includeHeaders="true")]

    reference, written = back(theirs), back(ours)
    assert len(reference) == len(rows)
    assert written == reference
