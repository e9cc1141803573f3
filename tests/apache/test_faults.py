"""Faults on a real three-node Apache Kafka cluster: brokers killed, restarted and shut down mid-stream.

A topic with replication factor 3 and min.insync.replicas=2, acks=all, idempotence on. While keyed records
stream, the leader of a partition is SIGKILLed, restarted, then another node is stopped with a controlled
shutdown. Everything is read back by an independent client (kafka-python, CRC checks on): nothing lost,
nothing written twice, nothing out of order within a partition. The same with a transactional producer: a
read_committed reader sees every committed transaction whole and no aborted record. With two of three nodes
down, records wait, and each either arrives once a node returns or fails after delivery.timeout.ms naming the
cause; none is lost silently.

Each test has its own cluster: the faults must not leak into other tests.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

from kafkajet import KafkaError, Producer
from kafkajet.admin import Admin
from kafkajet.fetch import FetchClient
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.apache import running_apache_kafka
from tests.helpers.readback import read_topic
from tests.helpers.waiting import wait_for

PARTITIONS = 3


@pytest.fixture
def three() -> Iterator[ApacheKafka]:
    with running_apache_kafka(brokers=3) as kafka:
        yield kafka


def _replicated_topic(kafka: ApacheKafka, name: str) -> str:
    with Admin(kafka.bootstrap_servers) as admin:
        admin.create_topics(name, num_partitions=PARTITIONS, replication_factor=3,
                            configs={"min.insync.replicas": "2"})
    return name


def _faults_while(kafka: ApacheKafka, topic: str, progress: Callable[[], int], total: int) -> list[str]:
    """Kill partition 0's leader, restart it, then stop another node with a controlled shutdown; each step
    once the stream has moved on by a tenth of `total` records, so every fault lands mid-stream."""
    done: list[str] = []

    def after(step: int) -> None:
        mark = progress() + total // 10
        wait_for(lambda: progress() >= mark or progress() >= total, 180, f"the stream to pass {mark} (step {step})")

    after(1)
    leader = kafka.leader_of(topic, 0)
    kafka.kill(leader)
    done.append(f"killed {leader}")
    after(2)
    kafka.restart(leader)
    done.append(f"restarted {leader}")
    after(3)
    other = next(n for n in kafka.node_ids if n != leader)
    kafka.stop_node(other)
    done.append(f"stopped {other}")
    return done


def test_idempotent_stream_survives_a_killed_leader_and_a_controlled_shutdown(three: ApacheKafka,
                                                                               topic_name: str) -> None:
    total = 200_000
    topic = _replicated_topic(three, topic_name)
    acked = [0]
    failures: list[BaseException] = []
    lock = threading.Lock()

    def delivered(_metadata: object, error: BaseException | None) -> None:
        with lock:
            if error is not None:
                failures.append(error)
            acked[0] += 1

    def stream(p: Producer) -> None:
        for i in range(total):
            # Pace the stream so that it outlasts the faults (about 40 s of records at 5,000 a second).
            if i % 500 == 0:
                wait_for(lambda i=i: acked[0] >= i - 5_000, 300, f"acks to catch up with record {i}", interval=0.02)
            p.send(topic, key=f"key-{i % 997}".encode(), value=str(i).encode(), callback=delivered)

    with Producer(bootstrap_servers=three.bootstrap_servers, acks="all", enable_idempotence=True,
                  delivery_timeout_ms=300_000, linger_ms=5) as p:
        sender = threading.Thread(target=stream, args=(p,), daemon=True)
        sender.start()
        steps = _faults_while(three, topic, lambda: acked[0], total)
        sender.join(timeout=600)
        assert not sender.is_alive()
        p.flush(timeout=300)
    assert len(steps) == 3
    assert failures == [], f"{len(failures)} records failed, first: {failures[:3]}"
    assert acked[0] == total

    records = read_topic(three.bootstrap_servers, topic, total, timeout_s=300)
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        by_partition[r.partition].append(int(r.value or b"-1"))
    values = [v for vs in by_partition.values() for v in vs]
    assert len(values) == len(set(values)), f"{len(values) - len(set(values))} records written twice"
    assert set(values) == set(range(total)), f"{total - len(set(values))} records lost"
    for partition, seq in by_partition.items():
        # One thread sent them: within a partition, send order is log order.
        assert seq == sorted(seq), f"partition {partition} is out of order"


@pytest.fixture(params=[2, 1], ids=["tv2", "tv1"])
def three_at_transaction_version(request: pytest.FixtureRequest) -> Iterator[tuple[ApacheKafka, int]]:
    """Three nodes that finalize transaction.version 2 (Kafka 4.4's default) or 1: both protocols must keep a
    transaction whole through the faults (TV2 bumps the epoch at every EndTxn and adds partitions implicitly)."""
    features = {} if request.param == 2 else {"transaction.version": 1}
    with running_apache_kafka(brokers=3, features=features) as kafka:
        yield kafka, request.param


def test_transactions_stay_whole_through_a_killed_leader_and_a_controlled_shutdown(
        three_at_transaction_version: tuple[ApacheKafka, int], topic_name: str) -> None:
    three, version = three_at_transaction_version
    assert three.finalized_features().get("transaction.version", 0) == version
    per_txn, transactions = 1_000, 60
    topic = _replicated_topic(three, topic_name)
    committed: list[int] = []
    aborted: list[int] = []
    progress = [0]

    def run(p: Producer) -> None:
        p.init_transactions(timeout=120)
        txn = 0
        while len(committed) < transactions:
            p.begin_transaction()
            try:
                for i in range(per_txn):
                    p.send(topic, key=f"k{i % 37}".encode(), value=f"{txn}:{i}".encode())
                p.commit_transaction(timeout=120)
                committed.append(txn)
                progress[0] += per_txn
            except KafkaError:
                # An abortable error mid-fault: abort, and the next transaction carries on (with new numbers).
                p.abort_transaction(timeout=120)
                aborted.append(txn)
            txn += 1

    errors: list[BaseException] = []

    def guarded(p: Producer) -> None:
        try:
            run(p)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)

    with Producer(bootstrap_servers=three.bootstrap_servers, transactional_id=f"{topic}-txn",
                  delivery_timeout_ms=120_000, transaction_timeout_ms=120_000) as p:
        worker = threading.Thread(target=guarded, args=(p,), daemon=True)
        worker.start()
        _faults_while(three, topic, lambda: progress[0], transactions * per_txn)
        worker.join(timeout=600)
        assert not worker.is_alive()
    assert errors == []
    with Admin(three.bootstrap_servers) as admin:
        state = admin.describe_topics("__transaction_state")["__transaction_state"]
    assert {len(p.replicas) for p in state.partitions} == {3}, "the coordinator's log must survive a lost node"

    seen: dict[int, list[int]] = defaultdict(list)
    with FetchClient(three.bootstrap_servers, isolation_level="read_committed") as reader:
        for partition in range(PARTITIONS):
            start, end = reader.offsets(topic, partition)
            for r in reader.fetch_range(topic, partition, start, end):
                txn, i = map(int, (r.value or b"").split(b":"))
                seen[txn].append(i)
    assert sorted(seen) == sorted(committed), f"aborted {aborted} visible or committed missing"
    for txn, items in seen.items():
        assert sorted(items) == list(range(per_txn)), f"transaction {txn} is not whole"


def test_with_two_nodes_down_records_wait_and_arrive_when_one_returns(three: ApacheKafka, topic_name: str) -> None:
    topic = _replicated_topic(three, topic_name)
    with Producer(bootstrap_servers=three.bootstrap_servers, acks="all", delivery_timeout_ms=180_000) as p:
        p.send(topic, value=b"before", partition=0).result(timeout=60)
        leader = three.leader_of(topic, 0)
        down = [n for n in three.node_ids if n != leader]
        for node in down:
            three.stop_node(node)
        futures: list[Future[object]] = [p.send(topic, value=f"during-{i}".encode(), partition=0) for i in range(50)]
        pending = [f for f in futures if not f.done()]
        assert pending, "records were acknowledged by a partition below min.insync.replicas"
        three.restart(down[0])
        for f in futures:
            f.result(timeout=180)
    values = [r.value for r in read_topic(three.bootstrap_servers, topic, 51, timeout_s=120)]
    assert sorted(v or b"" for v in values) == sorted([b"before"] + [f"during-{i}".encode() for i in range(50)])


def test_with_two_nodes_down_records_fail_after_the_delivery_timeout_naming_the_cause(three: ApacheKafka,
                                                                                     topic_name: str) -> None:
    topic = _replicated_topic(three, topic_name)
    with Producer(bootstrap_servers=three.bootstrap_servers, acks="all", delivery_timeout_ms=8_000,
                  request_timeout_ms=4_000, linger_ms=0) as p:
        p.send(topic, value=b"before", partition=0).result(timeout=60)
        leader = three.leader_of(topic, 0)
        for node in [n for n in three.node_ids if n != leader]:
            three.stop_node(node)
        futures = [p.send(topic, value=f"doomed-{i}".encode(), partition=0) for i in range(20)]
        outcomes = []
        for f in futures:
            try:
                f.result(timeout=60)
                outcomes.append("delivered")
            except KafkaError as e:
                outcomes.append(f"{type(e).__name__}: {e}")
    assert all(o != "delivered" for o in outcomes), outcomes
    assert any("NOT_ENOUGH_REPLICAS" in o or "NotEnoughReplicas" in o for o in outcomes), outcomes
