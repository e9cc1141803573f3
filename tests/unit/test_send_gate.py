"""SendGate.ready(): AIOProducer's one per-record check that send() will not wait, for metadata or for memory
(a wrong True blocks the event loop inside the thread producer's send())."""

from __future__ import annotations

from kafkajet.cluster import Cluster, PartitionInfo
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.metadata import Metadata
from kafkajet.producer.send_gate import SendGate


def _gate(total: int = 10_000) -> tuple[SendGate, Metadata, BufferPool]:
    metadata = Metadata(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    pool = BufferPool(total, 1000)
    return SendGate(metadata, pool, lambda: None, 1000, lambda e: e), metadata, pool


def test_ready_only_with_the_topics_metadata_and_the_memory_at_hand() -> None:
    gate, metadata, pool = _gate()
    assert not gate.ready("t", 100)  # no metadata for t yet: send() would wait for it
    metadata.cluster = Cluster(partitions={"t": (PartitionInfo("t", 0, -1),)})
    assert gate.ready("t", 100)
    assert not gate.ready("other", 100)
    assert gate.ready("t", 10_000)
    held = pool.allocate(9_500, 1000)
    assert not gate.ready("t", 1_000)  # 500 bytes left: send() would wait for memory
    assert gate.ready("t", 500)
    pool.deallocate(held, 9_500)
    assert gate.ready("t", 1_000)
