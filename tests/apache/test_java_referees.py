"""Apache Kafka's Java clients referee kafkajet on Apache Kafka itself.

- the Java KafkaConsumer reads what kafkajet writes, byte for byte: every codec, null keys and values,
  headers (a null header value too), timestamps;
- kafkajet's reader (FetchClient) reads what the Java KafkaProducer writes;
- with interleaved committed and aborted transactions, the Java consumer at read_committed and kafkajet's
  read_committed reader return the same records, and no aborted one.
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin, NewTopic
from kafkajet.fetch import FetchClient
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.java_clients import java_consume, java_produce
from tests.helpers.waiting import wait_for

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _records(codec: str, partition: int) -> list[dict[str, Any]]:
    """Records whose every field a careless encoder could get wrong: null and empty keys and values, binary
    bytes, a header with a null value, repeated header names, explicit timestamps far apart."""
    out: list[dict[str, Any]] = []
    for i in range(40):
        out.append({
            "partition": partition,
            "key": None if i % 4 == 0 else (b"" if i % 4 == 1 else bytes([i, 0, 255]) + codec.encode()),
            "value": None if i == 7 else bytes(range(i % 256)) * (1 + i % 3),
            "headers": [("h", b"\x00\x01"), ("n", None), ("h", f"{codec}-{i}".encode())] if i % 2 else [],
            "timestamp": 1_600_000_000_000 + i * 86_400_000,
        })
    return out


def _by_partition_offset(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["partition"], r["key"], r["value"], [tuple(h) for h in r["headers"]], r["timestamp"])
            for r in sorted(records, key=lambda r: (r["partition"], r["offset"]))]


def test_the_java_consumer_reads_what_kafkajet_writes_byte_for_byte(apache_kafka: ApacheKafka,
                                                                    topic_name: str) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        # Kept for ever: the records' timestamps (2020 on) are past the 7-day default retention.
        admin.create_topics(NewTopic(topic_name, len(CODECS), configs={"retention.ms": "-1"}))
    written: list[dict[str, Any]] = []
    for partition, codec in enumerate(CODECS):
        records = _records(codec, partition)
        with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, compression_type=codec,
                      linger_ms=50) as p:
            futures = [p.send(topic_name, key=r["key"], value=r["value"], partition=partition,
                              headers=r["headers"], timestamp_ms=r["timestamp"]) for r in records]
            for f in futures:
                f.result(timeout=60)
        written.extend(records)

    read = java_consume(apache_kafka, topic_name, len(written))
    assert len(read) == len(written)
    assert {r["timestamp_type"] for r in read} == {"CreateTime"}
    expected = [(r["partition"], r["key"], r["value"], [tuple(h) for h in r["headers"]], r["timestamp"])
                for r in written]
    assert _by_partition_offset(read) == expected
    # Offsets are dense from 0 on each partition: nothing written twice, nothing skipped.
    for partition in range(len(CODECS)):
        assert sorted(r["offset"] for r in read if r["partition"] == partition) == list(range(40))


def test_kafkajet_reads_what_the_java_producer_writes(apache_kafka: ApacheKafka, topic_name: str) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        # Kept for ever: the records' timestamps (2020 on) are past the 7-day default retention, and the run's
        # broker once deleted a rolled segment of them mid-test (log start 40, not 0).
        admin.create_topics(NewTopic(topic_name, 2, configs={"retention.ms": "-1"}))
    records = _records("java", 0) + _records("java", 1)
    for codec in ("gzip", "zstd"):
        result = java_produce(apache_kafka, [{"op": "send", "topic": topic_name, **r} for r in records],
                              **{"compression.type": codec, "linger.ms": 20})
        assert result == {"sent": len(records), "failed": 0}

    with FetchClient(apache_kafka.bootstrap_servers) as reader:
        got = []
        for partition in (0, 1):
            start, end = reader.offsets(topic_name, partition)
            assert (start, end) == (0, 80)
            got.extend((partition, r.key, r.value, [tuple(h) for h in r.headers], r.timestamp)
                       for r in reader.fetch_range(topic_name, partition, start, end))
    expected = [(r["partition"], r["key"], r["value"], [tuple(h) for h in r["headers"]], r["timestamp"])
                for r in records]
    by_partition = sorted(expected, key=lambda e: e[0])
    assert got == [e for e in by_partition if e[0] == 0] * 2 + [e for e in by_partition if e[0] == 1] * 2


def _committed_via_fetch(kafka: ApacheKafka, topic: str, partitions: int) -> list[tuple[int, bytes | None]]:
    with FetchClient(kafka.bootstrap_servers, isolation_level="read_committed") as reader:
        out = []
        for partition in range(partitions):
            start, end = reader.offsets(topic, partition)
            out.extend((partition, r.value) for r in reader.fetch_range(topic, partition, start, end))
    return out


@pytest.mark.parametrize("writer", ["java", "kafkajet"])
def test_read_committed_readers_agree_on_interleaved_transactions(apache_kafka: ApacheKafka, topic_name: str,
                                                                  writer: str) -> None:
    """Two transactional producers interleave on both partitions; one commits every other transaction and
    aborts the rest. Both readers must return exactly the committed records, in log order."""
    partitions = 2
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=partitions)
    committed: list[tuple[int, bytes]] = []
    if writer == "java":
        commands: list[dict[str, Any]] = [{"op": "init"}]
        for txn in range(6):
            commands.append({"op": "begin"})
            for i in range(10):
                value = f"txn{txn}-{i}".encode()
                commands.append({"op": "send", "topic": topic_name, "partition": i % partitions, "value": value})
                if txn % 2 == 0:
                    committed.append((i % partitions, value))
            commands += [{"op": "flush"}, {"op": "commit" if txn % 2 == 0 else "abort"}]
        java_produce(apache_kafka, commands, **{"transactional.id": f"{topic_name}-java"})
    else:
        with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, transactional_id=f"{topic_name}-kj") as p:
            p.init_transactions(timeout=60)
            for txn in range(6):
                p.begin_transaction()
                futures = []
                for i in range(10):
                    value = f"txn{txn}-{i}".encode()
                    futures.append(p.send(topic_name, value=value, partition=i % partitions))
                    if txn % 2 == 0:
                        committed.append((i % partitions, value))
                p.flush(timeout=60)
                if txn % 2 == 0:
                    p.commit_transaction(timeout=60)
                else:
                    p.abort_transaction(timeout=60)
        # A plain record after the last transaction: the readers must reach past the last control batch.
        with Producer(bootstrap_servers=apache_kafka.bootstrap_servers) as plain:
            plain.send(topic_name, value=b"after", partition=0).result(timeout=60)
        committed.append((0, b"after"))

    expected = sorted(committed, key=lambda c: c[0])
    java = java_consume(apache_kafka, topic_name, len(committed), **{"isolation.level": "read_committed"})
    java_values = [(r["partition"], r["value"]) for r in sorted(java, key=lambda r: (r["partition"], r["offset"]))]
    assert java_values == expected
    # The coordinator writes the last abort marker after answering EndTxn: until then the last stable offset
    # stops short of the record after it. Wait for the readable range to reach it.
    wait_for(lambda: len(_committed_via_fetch(apache_kafka, topic_name, partitions)) >= len(expected), 30,
             "read_committed to reach past the last transaction")
    assert _committed_via_fetch(apache_kafka, topic_name, partitions) == expected


def test_kafkas_console_consumer_prints_what_kafkajet_wrote(apache_kafka: ApacheKafka, topic_name: str) -> None:
    """kafka-console-consumer (kafka-tools) as a user runs it: keys, headers and timestamps printed."""
    with Admin(apache_kafka.bootstrap_servers) as admin:
        # The records are dated 2023: with the default retention the broker may delete them before the tool reads.
        admin.create_topics(topic_name, num_partitions=1, configs={"retention.ms": "-1"})
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, compression_type="zstd") as p:
        for i in range(5):
            p.send(topic_name, key=None if i == 0 else f"key-{i}".encode(), value=f"value {i}".encode(),
                   headers=[("trace", f"t{i}".encode())], timestamp_ms=1_700_000_000_000 + i)
        p.flush(timeout=60)
    done = apache_kafka.run_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", apache_kafka.bootstrap_servers,
        # One partition, assigned: no group to join (on a busy machine, the first group of a fresh broker once
        # took past the 60 s: the tool printed nothing and exited 0).
        "--topic", topic_name, "--partition", "0", "--offset", "earliest", "--max-messages", "5",
        "--timeout-ms", "60000",
        "--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
        "--formatter-property", "print.timestamp=true", "--formatter-property", "key.separator=|")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    lines = done.stdout.decode().splitlines()
    assert lines == [f"CreateTime:{1_700_000_000_000 + i}|trace:t{i}|{'null' if i == 0 else f'key-{i}'}|value {i}"
                     for i in range(5)], done.stderr.decode(errors="replace")
