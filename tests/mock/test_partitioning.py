"""Where keyless records go, through the producer and a MockCluster: adaptive partitioning sends fewer to a slow
broker (KIP-794), and partitioner.rack.aware with client.rack keeps them on partitions led in the client's rack
while there are any (KIP-1123)."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import Future

import pytest

from kafkajet import Producer
from kafkajet.testing import MockCluster
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def leaders(cluster: MockCluster, topic: str, partitions: int) -> dict[int, int]:
    return {p: cluster.leader(topic, p) for p in range(partitions)}


def records_per_broker(cluster: MockCluster, topic: str, partitions: int) -> Counter[int]:
    per_broker: Counter[int] = Counter()
    for p, leader in leaders(cluster, topic, partitions).items():
        per_broker[leader] += len(cluster.records(topic, p))
    return per_broker


def slow_broker_share(cluster: MockCluster, topic: str, adaptive: bool) -> float:
    """The share of keyless records broker 1 gets while it answers 200 ms late and the others at once."""
    cluster.create_topic(topic, partitions=6)
    cluster.set_rtt(1, 200)
    n = 0
    with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=1024, linger_ms=5,
                  partitioner_adaptive_partitioning_enable=adaptive) as p:
        p.send(topic, b"warm-up").result(timeout=30)
        # A steady load for about two seconds: the slow broker's queues grow between its answers, the others'
        # stay short. The pauses shape the load; nothing waits on them for an outcome.
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            for _ in range(50):
                p.send(topic, b"." * 100)
                n += 1
            time.sleep(0.002)
        p.flush(60)
    per_broker = records_per_broker(cluster, topic, 6)
    print(f"{topic}: the slow broker got {per_broker[1] / (n + 1):.1%} of {n + 1} records")
    assert sum(per_broker.values()) == n + 1, "every record arrives once"
    return per_broker[1] / (n + 1)


@pytest.mark.mock_cluster(brokers=3)
def test_a_slow_broker_gets_fewer_keyless_records_with_adaptive_partitioning(cluster: MockCluster) -> None:
    uniform = slow_broker_share(cluster, "uniform", adaptive=False)
    adaptive = slow_broker_share(cluster, "adaptive", adaptive=True)
    # Uniform: a third of the records, as each broker leads two of the six partitions. Adaptive: about a tenth on
    # a quiet machine, up to a sixth on a loaded one (the queues the partitioner weighs then grow everywhere);
    # with the setting ignored, a third again.
    assert 0.2 < uniform < 0.45, f"without adaptive partitioning the slow broker got {uniform:.0%}"
    assert adaptive < uniform * 0.7, f"the slow broker got {adaptive:.0%} with adaptive partitioning, " \
                                   f"{uniform:.0%} without"


RACKS = ["r1", "r2", "r3"]


def sent_partitions(p: Producer, topic: str, count: int) -> Counter[int]:
    futures: list[Future] = [p.send(topic, b"." * 100) for _ in range(count)]
    return Counter(f.result(timeout=30).partition for f in futures)


@pytest.mark.mock_cluster(brokers=3, racks=RACKS, topics={"t": 6})
def test_rack_aware_keyless_records_stay_in_the_clients_rack_then_fall_back_to_all(cluster: MockCluster) -> None:
    in_r2 = {p for p, leader in leaders(cluster, "t", 6).items() if leader == 2}
    assert len(in_r2) == 2
    with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=1024, client_rack="r2",
                  partitioner_rack_aware=True) as p:
        got = sent_partitions(p, "t", 3000)  # about 300 sticky switches
        assert set(got) == in_r2, f"keyless records went to {dict(got)}; partitions led in r2: {in_r2}"
        # r2 goes down and its partitions move to r1 and r3: no partition is led in the rack any more.
        cluster.broker_down(2)
        for partition in sorted(in_r2):
            cluster.set_leader("t", partition, 1 if partition % 2 else 3)
        p._metadata.request_update()
        wait_for(lambda: all(p._metadata.cluster.leader_for("t", q) != 2 for q in range(6)), 30,
                 "the producer learns that r2 leads nothing")
        got = sent_partitions(p, "t", 3000)
        assert set(got) == set(range(6)), f"with r2 down keyless records went only to {dict(got)}"


@pytest.mark.mock_cluster(brokers=3, racks=RACKS, topics={"t": 6})
@pytest.mark.parametrize("settings", [{"client_rack": "r2"}, {"partitioner_rack_aware": True}],
                         ids=["rack-aware-off", "no-client-rack"])
def test_without_both_settings_keyless_records_go_to_every_rack(cluster: MockCluster,
                                                                 settings: dict[str, object]) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=1024, **settings) as p:
        got = sent_partitions(p, "t", 3000)
    assert set(got) == set(range(6)), f"keyless records went only to {dict(got)}"


def records_to_a_down_broker(cluster: MockCluster, topic: str, timeout_ms: int) -> tuple[int, int]:
    """Broker 1 down (its leadership kept, as before the cluster notices): how many keyless records of a first
    second, and of the second after it, go to its partitions (counted once it is back and everything arrived)."""
    cluster.create_topic(topic, partitions=6)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=1024, linger_ms=5,
                  partitioner_availability_timeout_ms=timeout_ms) as p:
        p.send(topic, b"warm-up").result(timeout=30)
        cluster.broker_down(1)
        for phase in (b"A", b"B"):
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                for _ in range(50):
                    p.send(topic, phase * 100)
                time.sleep(0.002)  # load shaping, as above
        cluster.broker_up(1)
        p.flush(60)
    on_1 = Counter(r.value[:1] for q, leader in leaders(cluster, topic, 6).items() if leader == 1
                   for r in cluster.records(topic, q))
    return on_1[b"A"], on_1[b"B"]


@pytest.mark.mock_cluster(brokers=3)
def test_a_leader_that_cannot_take_batches_for_the_availability_timeout_gets_no_keyless_records(
        cluster: MockCluster) -> None:
    first, then = records_to_a_down_broker(cluster, "timeout-off", 0)
    assert then > 0, "without the timeout adaptive partitioning only weighs the down broker's queues"
    first, then = records_to_a_down_broker(cluster, "timeout-on", 200)
    assert first > 0, "it had records before the timeout passed"
    assert then == 0, f"{then} records went to a broker that had taken nothing for a second"
