"""Per-partition order survives leader moves: muting with one request in flight, sequences with five.

Java keeps order two ways. With max.in.flight.requests.per.connection=1 it mutes a partition while one of its
batches is in flight, so no later batch of it can reach a new leader first (guaranteeMessageOrder). With
idempotence it lets up to five go and relies on the broker refusing an out-of-order sequence, retrying the
later batches after the earlier one. The MockCluster checks sequences, so both are refereed here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kafkajet import Producer
from kafkajet.testing import MockCluster

TOPIC = "ordered"
PARTITIONS = 6
RECORDS = 12_000
KEYS = 60

pytestmark = [pytest.mark.mock_cluster(brokers=3, topics={TOPIC: PARTITIONS}), pytest.mark.timeout(120)]


@contextmanager
def leaders_moving(cluster: MockCluster, every_s: float = 0.05) -> Iterator[None]:
    """Move every partition's leader to the next broker every `every_s` until the block ends."""
    stop = threading.Event()

    def move() -> None:
        brokers = cluster.broker_ids
        while not stop.wait(every_s):
            for p in range(PARTITIONS):
                current = cluster.leader(TOPIC, p)
                cluster.set_leader(TOPIC, p, brokers[(brokers.index(current) + 1) % len(brokers)])

    mover = threading.Thread(target=move, daemon=True)
    mover.start()
    try:
        yield
    finally:
        stop.set()
        mover.join(5)


def produce_keyed(cluster: MockCluster, **config: object) -> None:
    for b in cluster.broker_ids:
        cluster.set_rtt(b, 20)  # a batch stays in flight long enough for a leader move to race its successor
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2, batch_size=2048, retry_backoff_ms=10,
                  retry_backoff_max_ms=50, **config) as p:
        with leaders_moving(cluster):
            futures = [p.send(TOPIC, key=b"k%03d" % (i % KEYS), value=b"%06d" % i) for i in range(RECORDS)]
            p.flush(timeout=60)
        for f in futures:
            f.result(timeout=0)


def inversions(cluster: MockCluster) -> list[str]:
    """Places where a key's record is stored before one sent earlier (values are the send index)."""
    out = []
    stored = 0
    for p in range(PARTITIONS):
        last: dict[bytes, int] = {}
        for r in cluster.records(TOPIC, p):
            stored += 1
            assert r.key is not None and r.value is not None
            n = int(r.value)
            if last.get(r.key, -1) > n:
                out.append(f"{r.key!r}: #{n} after #{last[r.key]} in partition {p}")
            last[r.key] = max(n, last.get(r.key, -1))
    assert stored == RECORDS, f"{stored} records stored, {RECORDS} sent"
    return out


def test_one_in_flight_keeps_per_key_order_across_leader_moves_without_idempotence(cluster: MockCluster) -> None:
    produce_keyed(cluster, enable_idempotence=False, max_in_flight_requests_per_connection=1)
    assert inversions(cluster) == []


def test_five_in_flight_with_idempotence_keep_per_key_order_across_leader_moves(cluster: MockCluster) -> None:
    produce_keyed(cluster, enable_idempotence=True, max_in_flight_requests_per_connection=5)
    assert inversions(cluster) == []
