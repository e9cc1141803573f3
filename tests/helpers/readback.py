"""Reading a topic back with an independent client (kafka-python, CRC checks on), for assertions."""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from kafka import KafkaConsumer, TopicPartition

from kafkajet.protocol import ApiKey, decode_response, encode_request
from kafkajet.records import RecordBatch, decode_batches


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


def read_topic_confluent(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0, *, expected: int,
                         isolation_level: str = "read_uncommitted") -> list[ReadRecord]:
    """Every record of `topic` read with confluent-kafka (librdkafka), partitions assigned explicitly (no group).

    Reads until it has at least `expected` records and every partition's position has reached the high
    watermark the broker gives once that count is in (asked again then, not trusted from the start), or fails
    at the deadline naming what was missing. The count is what the caller knows must be there: Tansu reports a
    high watermark of 1 after a write of many batches, so the watermark alone would stop after one record. The
    watermark then catches what the count cannot: records beyond `expected` (duplicates), where the broker's
    watermark is right. At read_committed the consumer's position (which moves past markers and aborted
    records it hides) is what shows a partition was read to its end. Call it after the producer has finished.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafkajet-readback",
                         "enable.auto.commit": False, "enable.partition.eof": False, "log_level": 3,
                         "isolation.level": isolation_level})
    deadline = time.monotonic() + timeout_s
    parts = range(partitions)
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        positions = dict.fromkeys(parts, 0)
        read = dict.fromkeys(parts, 0)
        out: list[ReadRecord] = []

        def behind() -> dict[int, tuple[int, int]]:
            """Partitions whose position is short of the broker's high watermark now: {p: (position, high)}."""
            highs = {p: consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=5.0)[1] for p in parts}
            return {p: (positions[p], highs[p]) for p in parts if positions[p] < highs[p]}

        while len(out) < expected or behind():
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{topic}: read {len(out)} of at least {expected} records in {timeout_s} s; records read per "
                    f"partition {read}; partitions short of their high watermark (position, high): {behind()}")
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is not None:
                    raise KafkaException(m.error())
                p, offset = m.partition(), m.offset()
                positions[p] = max(positions[p], offset + 1)
                read[p] += 1
                out.append(ReadRecord(p, offset, m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
            for tp in consumer.position([CkTopicPartition(topic, p) for p in parts]):
                if tp.offset >= 0:
                    positions[tp.partition] = max(positions[tp.partition], tp.offset)
        return out
    finally:
        consumer.close()


def recv_exact(s: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "broker closed the connection"
        data += chunk
    return bytes(data)


def stored_batches(bootstrap: str, topic: str, partition: int) -> list[RecordBatch]:
    """Every stored batch of a partition, control batches and headers intact, through a plain socket and the
    codec: what the broker wrote, with no client logic in between."""
    host, port = bootstrap.rsplit(":", 1)
    by_offset: dict[int, RecordBatch] = {}
    offset = 0
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for correlation_id in range(1, 10_000):
            # Field names as in the FetchRequest/Response v4 definitions (Kafka renamed them later).
            body = {
                "replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 16 * 1024 * 1024,
                "isolation_level": 0,
                "topics": [{"name": topic, "fetch_partitions": [{
                    "partition_index": partition, "fetch_offset": offset, "max_bytes": 16 * 1024 * 1024}]}],
            }
            s.sendall(encode_request(ApiKey.FETCH, 4, correlation_id, "test", body))
            (size,) = struct.unpack(">i", recv_exact(s, 4))
            _, resp = decode_response(ApiKey.FETCH, 4, recv_exact(s, size))
            (p,) = resp["responses"][0]["partition_responses"]
            assert p["error_code"] == 0
            records = p["record_set"] or b""
            batches = decode_batches(records, allow_partial_tail=True)
            for b in batches:
                by_offset[b.base_offset] = b
                offset = max(offset, b.base_offset + b.last_offset_delta + 1)
            if not batches or offset >= p["high_watermark"]:
                break
    return [by_offset[k] for k in sorted(by_offset)]


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offset for each partition of `topic`, as confluent-kafka's consumer reads them."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([CkTopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return [tp.offset for tp in got]
