"""What the broker stored for an idempotent producer: one producer id, contiguous sequences per partition."""

from __future__ import annotations

import socket
import struct

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.protocol import ApiKey, decode_response, encode_request
from kafkajet.records import RecordBatch, decode_batches
from kafkajet.testing import EmbeddedBroker


def recv_exact(s: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "broker closed the connection"
        data += chunk
    return bytes(data)


def fetch_batches(bootstrap: str, topic: str, partition: int) -> list[RecordBatch]:
    """Every stored batch of a partition, headers intact, through a plain socket and the codec."""
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


def test_idempotent_sequences_are_contiguous_per_partition(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=3)
    with Producer(bootstrap_servers=broker.bootstrap_servers, batch_size=1024, linger_ms=2) as p:
        futs = [p.send(topic_name, f"v{i}".encode() * 10, key=f"k{i % 17}".encode()) for i in range(5000)]
        p.flush(timeout=60)
    assert all(f.exception() is None for f in futs)
    producer_ids = set()
    for partition in range(3):
        batches = fetch_batches(broker.bootstrap_servers, topic_name, partition)
        assert len(batches) > 1, "batch.size=1024 must give several batches per partition"
        expected_seq = 0
        for b in batches:
            producer_ids.add((b.producer_id, b.producer_epoch))
            assert b.base_sequence == expected_seq, (partition, b)
            expected_seq += b.records_count
        assert expected_seq == sum(1 for f in futs if f.result().partition == partition)
    (pid, epoch), = producer_ids
    assert pid >= 0 and epoch >= 0
