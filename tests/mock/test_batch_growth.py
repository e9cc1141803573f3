"""batch.max.size through the producer: under a backlog (slow answers, five requests in flight) batches grow past
batch.size, and everything arrives once, in order; a lone record still goes out as one small batch."""

from __future__ import annotations

import pytest

from kafkajet import Producer
from kafkajet.testing import MockCluster

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 1}), pytest.mark.timeout(120)]


def test_under_a_backlog_batches_grow_past_batch_size_up_to_batch_max_size(cluster: MockCluster) -> None:
    cluster.set_rtt(cluster.broker_ids[0], 100)
    n = 30_000
    with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=16 * 1024,
                  batch_max_size=256 * 1024) as p:
        p.send("t", b"warm-up").result(timeout=30)
        for i in range(n):
            p.send("t", b"%07d" % i + b"." * 93)
        p.flush(60)
    sizes = [b.batch_length + 12 for b in cluster.batches("t", 0)]  # the length field leaves out 12 bytes
    assert max(sizes) > 2 * 16 * 1024, f"no batch grew past batch.size under a backlog: {max(sizes)} bytes"
    assert max(sizes) <= 256 * 1024, "a batch went past batch.max.size"
    values = [r.value for r in cluster.records("t", 0)]
    assert values == [b"warm-up"] + [b"%07d" % i + b"." * 93 for i in range(n)]


def test_batch_max_size_equal_to_batch_size_keeps_javas_batches(cluster: MockCluster) -> None:
    cluster.set_rtt(cluster.broker_ids[0], 100)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=16 * 1024, batch_max_size=16 * 1024) as p:
        for i in range(10_000):
            p.send("t", b"%07d" % i + b"." * 93)
    sizes = [b.batch_length + 12 for b in cluster.batches("t", 0)]
    assert max(sizes) <= 16 * 1024 and sum(b.records_count for b in cluster.batches("t", 0)) == 10_000
