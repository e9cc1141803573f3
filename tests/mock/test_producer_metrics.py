"""The tuning metrics through a producer: what batching and compression did shows up under Java's names."""

from __future__ import annotations

import pytest

from kafkajet import Producer
from kafkajet.testing import MockCluster

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 2}), pytest.mark.timeout(60)]


def test_batching_and_compression_show_in_the_metrics(cluster: MockCluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50, compression_type="lz4") as p:
        for i in range(2000):
            p.send("t", b"%05d" % i + b"a" * 195)  # 200 bytes that compress well
        p.send("t", b"b" * 3000)
        p.flush(30)
        m = p.metrics()
    assert m["record-send-total"] == 2001
    assert 0 < m["compression-rate-avg"] < 0.5, m["compression-rate-avg"]
    assert 0 < m["topic.t.compression-rate"] < 0.5
    assert m["record-size-max"] >= 3000 > m["record-size-avg"] > 200
    assert m["batch-size-max"] >= m["batch-size-avg"] > 0
    assert m["record-queue-time-max"] >= m["record-queue-time-avg"] > 0
    assert m["topic.t.record-send-rate"] > 0 and m["topic.t.byte-rate"] > 0 and m["outgoing-byte-rate"] > 0
    assert m["request-latency-max"] >= m["request-latency-avg"] > 0
    assert m["produce-throttle-time-max"] == 0
    assert 0 <= m["metadata-age"] < 30


@pytest.mark.mock_cluster(brokers=1, topics={"t": 1})
def test_blocking_calls_are_timed_under_javas_names(cluster: MockCluster) -> None:
    """Java's flush-time-ns-total and txn-*-time-ns-total: each blocking call's time, in nanoseconds, added to
    its own total; a call never made leaves its total at 0."""
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "timed"}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send("t", b"v")
        p.commit_transaction(30)
        m = p.metrics()
    assert m["txn-init-time-ns-total"] > 0 and m["txn-begin-time-ns-total"] > 0
    assert m["txn-commit-time-ns-total"] > 0
    # The commit waits for its records and its answer: far more than the begin, which only flips a state.
    assert m["txn-commit-time-ns-total"] > m["txn-begin-time-ns-total"]
    assert m["txn-abort-time-ns-total"] == m["txn-send-offsets-time-ns-total"] == 0
    assert m["txn-prepare-time-ns-total"] == 0
    assert m["record-send-total"] == 1 and m["topic.t.record-send-total"] == 1
