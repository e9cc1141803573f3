"""Quota throttling (KIP-219) end to end on the MockCluster: every Produce answer names a throttle time, as a
broker does to a client over its quota, and the producer sends that node nothing until each window has passed.
(The byte-rate quota of a real broker is tests/apache/test_quota_on_apache.py; here the windows are exact.)"""

from __future__ import annotations

from typing import Any

from kafkajet import Producer
from kafkajet.protocol import RequestHeader
from kafkajet.testing import MockCluster
from kafkajet.testing.mock import Action, throttled
from tests.helpers.throttle_watch import ThrottleWatch

THROTTLE_MS = 100
RECORDS = 4000
VALUE = 1000


def test_no_produce_reaches_a_node_inside_a_window_its_answer_announced() -> None:
    with MockCluster(brokers=2) as cluster:
        cluster.create_topic("quota", partitions=4)

        def over_quota(header: RequestHeader, body: dict[str, Any], broker_id: int) -> Action:
            return throttled(THROTTLE_MS)

        cluster.control("Produce", over_quota)
        watch = ThrottleWatch()
        # Batches of at most 64 KiB: many requests, so many of them come due inside a window.
        with Producer(bootstrap_servers=cluster.bootstrap_servers, client_id="over-quota",
                      batch_max_size=65536) as producer:
            watch.attach(producer._client)
            futures = [producer.send("quota", value=b"%06d" % i + b"x" * (VALUE - 6), partition=i % 4)
                       for i in range(RECORDS)]
            producer.flush(timeout=60)
            metrics = producer.metrics()
        assert all(f.exception(timeout=0) is None for f in futures)

    assert not watch.sends_inside_windows(), watch.sends_inside_windows()[:5]
    # Every answer opened a window, on both brokers, and most requests went out after one had been announced to
    # their node: each of those could have broken the rule.
    assert len(watch.windows) == len(watch.sends)
    assert {w.node for w in watch.windows} == set(cluster.broker_ids)
    exposed = [s for s in watch.sends if any(w.node == s.node and w.start_ms < s.at_ms for w in watch.windows)]
    assert len(exposed) >= 20, (len(exposed), len(watch.sends))
    assert metrics["produce-throttle-time-max"] == THROTTLE_MS
    values = sorted(bytes(r.value or b"") for p in range(4) for r in cluster.records("quota", p))
    assert values == sorted(b"%06d" % i + b"x" * (VALUE - 6) for i in range(RECORDS))  # each exactly once
