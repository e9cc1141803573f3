"""Reliability of transactions under faults (make reliability): 100 transactions of 1,000 records,
alternately committed and aborted, while partition leaders move, connections drop after the append and the
transaction coordinator moves. A read_committed reader (librdkafka) must see exactly the 50,000 committed
records, each once, in send order per partition.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kafkajet import Producer
from kafkajet.testing import MockCluster
from tests.helpers.readback import read_topic_confluent

TOPIC = "txn-reliability"
PARTITIONS = 6
TRANSACTIONS = 100
PER_TRANSACTION = 1000
pytestmark = [pytest.mark.reliability, pytest.mark.timeout(300),
              pytest.mark.mock_cluster(brokers=3, topics={TOPIC: PARTITIONS})]


def _disrupt(cluster: MockCluster, rng: random.Random, counts: Counter[str]) -> None:
    """Mid-transaction faults, each met once by the traffic that follows: a leader move, a connection dropped
    after the next Produce was appended, a coordinator move."""
    brokers = cluster.broker_ids
    for fault in rng.sample(("leader", "drop", "coordinator"), rng.randint(1, 3)):
        if fault == "leader":
            p = rng.randrange(PARTITIONS)
            cluster.set_leader(TOPIC, p, rng.choice([b for b in brokers if b != cluster.leader(TOPIC, p)]))
        elif fault == "drop":
            cluster.drop_after_append("Produce", 1)
        else:
            current = cluster.coordinator("txn", "reliability")
            cluster.set_coordinator("txn", "reliability", rng.choice([b for b in brokers if b != current]))
        counts[fault] += 1


def test_alternating_commits_and_aborts_under_faults(cluster: MockCluster) -> None:
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    faults: Counter[str] = Counter()
    rng = random.Random(20261125)  # a fixed schedule of faults, so a failure can be replayed
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "reliability",
                   "linger.ms": 2, "batch.size": 4096, "max.block.ms": 60_000}) as p:
        p.init_transactions()
        for t in range(TRANSACTIONS):
            p.begin_transaction()
            futures = []
            for i in range(PER_TRANSACTION):
                if i == PER_TRANSACTION // 2:
                    _disrupt(cluster, rng, faults)
                value = b"t%03d-%04d" % (t, i)
                futures.append((value, p.send(TOPIC, value, key=b"k%d" % (i % 50))))
            if t % 2 == 0:
                p.commit_transaction()
                for value, fut in futures:
                    expected[fut.result(timeout=0).partition].append(value)
            else:
                p.abort_transaction()
                assert all(f.done() for _, f in futures)
    assert min(faults.values()) > 0 and len(faults) == 3, faults
    got = read_topic_confluent(cluster.bootstrap_servers, TOPIC, PARTITIONS, timeout_s=120,
                               expected=TRANSACTIONS // 2 * PER_TRANSACTION, isolation_level="read_committed")
    values = Counter(r.value for r in got)
    assert sum(values.values()) == TRANSACTIONS // 2 * PER_TRANSACTION
    assert max(values.values()) == 1, "a committed record was read twice"
    for part in range(PARTITIONS):
        in_log = [r.value for r in sorted(got, key=lambda r: r.offset) if r.partition == part]
        assert in_log == expected[part], f"partition {part}: committed records out of send order"
    print(f"\n100 transactions x 1000 records under faults {dict(faults)}: "
          f"{sum(values.values())} committed records read once each, in order")
