"""What the broker stored for an idempotent producer: one producer id, contiguous sequences per partition."""

from __future__ import annotations

import socket
import struct

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.protocol import ApiKey, decode_response, encode_request
from kafkajet.records import RecordBatch, decode_batches
from kafkajet.testing import EmbeddedBroker


def fetch_batches(bootstrap: str, topic: str, partition: int) -> list[RecordBatch]:
    """Every stored batch of a partition, headers intact, through a plain socket and the codec."""
    host, port = bootstrap.rsplit(":", 1)
    by_offset: dict[int, RecordBatch] = {}
    offset = 0
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for correlation_id in range(1, 10_000):
            body = {
                "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 16 * 1024 * 1024,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [{
                    "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                    "log_start_offset": -1, "partition_max_bytes": 16 * 1024 * 1024}]}],
                "forgotten_topics_data": [], "rack_id": "",
            }
            s.sendall(encode_request(ApiKey.FETCH, 4, correlation_id, "test", body))
            (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
            _, resp = decode_response(ApiKey.FETCH, 4, s.recv(size, socket.MSG_WAITALL))
            (p,) = resp["responses"][0]["partitions"]
            assert p["error_code"] == 0
            batches = decode_batches(p["records"] or b"", allow_partial_tail=True)
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
