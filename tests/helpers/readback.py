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


def read_topic_confluent(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[ReadRecord]:
    """Every record of `topic` read with confluent-kafka (librdkafka), partitions assigned explicitly (no group).

    Reads each partition from its log start to the high watermark asked at the start, so the result is exact:
    no count to guess, no sleep to wait for duplicates. Call it after the producer has finished.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkajet-readback",
                         "enable.auto.commit": False, "enable.partition.eof": False, "log_level": 3})
    deadline = time.monotonic() + timeout_s
    try:
        ends: dict[int, int] = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=max(1.0, timeout_s / 4))
            ends[p] = high
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        positions = dict.fromkeys(ends, 0)
        out: list[ReadRecord] = []
        while any(positions[p] < ends[p] for p in ends):
            left = {p: ends[p] - positions[p] for p in ends if positions[p] < ends[p]}
            assert time.monotonic() < deadline, f"{topic}: records still unread per partition: {left}"
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is not None:
                    raise KafkaException(m.error())
                p, offset = m.partition(), m.offset()
                positions[p] = max(positions[p], offset + 1)
                if offset < ends[p]:
                    out.append(ReadRecord(p, offset, m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
        return out
    finally:
        consumer.close()
