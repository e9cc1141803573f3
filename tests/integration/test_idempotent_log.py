"""What the broker stored for an idempotent producer: one producer id, contiguous sequences per partition."""

from __future__ import annotations

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import stored_batches


def test_idempotent_sequences_are_contiguous_per_partition(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=3)
    # Fixed 1 KiB batches (no growth while waiting): many batches per partition, so many sequence steps.
    with Producer(bootstrap_servers=broker.bootstrap_servers, batch_size=1024, batch_max_size=1024,
                  linger_ms=2) as p:
        futs = [p.send(topic_name, f"v{i}".encode() * 10, key=f"k{i % 17}".encode()) for i in range(5000)]
        p.flush(timeout=60)
    assert all(f.exception() is None for f in futs)
    producer_ids = set()
    for partition in range(3):
        batches = stored_batches(broker.bootstrap_servers, topic_name, partition)
        assert len(batches) > 10, "fixed 1 KiB batches must give many batches per partition"
        expected_seq = 0
        for b in batches:
            producer_ids.add((b.producer_id, b.producer_epoch))
            assert b.base_sequence == expected_seq, (partition, b)
            expected_seq += b.records_count
        assert expected_seq == sum(1 for f in futs if f.result().partition == partition)
    (pid, epoch), = producer_ids
    assert pid >= 0 and epoch >= 0
