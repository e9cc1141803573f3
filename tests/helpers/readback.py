"""Reading a topic back with an independent client (kafka-python, CRC checks on), for assertions."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaConsumer, TopicPartition


@dataclass(frozen=True)
class ReadRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def read_topic(bootstrap: str, topic: str, expected: int, timeout_s: float = 120.0) -> list[ReadRecord]:
    """All records of `topic`, waiting until `expected` arrived or the deadline passed (then assert)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, check_crcs=True, enable_auto_commit=False,
                             max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=64 * 1024 * 1024)
    try:
        deadline = time.monotonic() + timeout_s
        parts = None
        while parts is None:
            parts = consumer.partitions_for_topic(topic)
            if parts is None:
                assert time.monotonic() < deadline, f"topic {topic} never appeared"
                consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[ReadRecord] = []
        while len(out) < expected:
            assert time.monotonic() < deadline, f"read {len(out)} of {expected} records from {topic}"
            for tp, msgs in consumer.poll(timeout_ms=1000, max_records=100_000).items():
                out.extend(
                    ReadRecord(tp.partition, m.offset, m.key, m.value,
                               tuple((k, v) for k, v in m.headers), m.timestamp)
                    for m in msgs
                )
        # Anything beyond `expected` would be a duplicate: give it a moment to show up, then report it.
        for tp, msgs in consumer.poll(timeout_ms=500).items():
            out.extend(ReadRecord(tp.partition, m.offset, m.key, m.value,
                                  tuple((k, v) for k, v in m.headers), m.timestamp) for m in msgs)
        return out
    finally:
        consumer.close()
