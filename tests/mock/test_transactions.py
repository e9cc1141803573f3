"""kafkajet's transactions on the MockCluster (whose coordinator foreign clients refereed first, in
test_mock_transactions.py), read back by independent read_committed consumers.

The Java behaviour each test pins: TransactionManager's state machine, fencing as fatal, a failed record as
an abortable error, EndTxn only after every batch completed, coordinator errors retried, a timed-out commit
resumed by calling it again, close() aborting an open transaction.
"""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkajet import Producer, TopicPartition
from kafkajet.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortedError,
)
from kafkajet.testing import MockCluster
from tests.helpers.readback import read_topic_confluent
from tests.helpers.waiting import wait_for

TOPICS = ("orders", "payments")
pytestmark = [pytest.mark.mock_cluster(brokers=3, topics={t: 6 for t in TOPICS}), pytest.mark.timeout(120)]


def producer(cluster: MockCluster, txn_id: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                     "max.block.ms": 30_000, **extra})


def committed_values(cluster: MockCluster, topic: str, expected: int) -> list[bytes | None]:
    return [r.value for r in read_topic_confluent(cluster.bootstrap_servers, topic, 6, expected=expected,
                                                  isolation_level="read_committed")]


def test_commit_and_abort_across_topics_and_partitions(cluster: MockCluster) -> None:
    sent: dict[tuple[str, int], list[bytes]] = {}
    with producer(cluster, "kj-commit-abort") as p:
        p.init_transactions()
        for round_ in range(6):
            p.begin_transaction()
            futures = []
            for i in range(300):
                topic = TOPICS[i % 2]
                value = b"r%d-%d" % (round_, i)
                fut = p.send(topic, value, key=b"k%d" % (i % 29))
                futures.append((topic, value, fut))
            if round_ % 3 == 2:
                p.abort_transaction()
                # Records not yet sent fail with TransactionAbortedError; the others were appended and are
                # hidden by the abort marker. None is left without an outcome.
                assert all(f.done() for _, _, f in futures)
                assert {type(f.exception()) for _, _, f in futures} <= {type(None), TransactionAbortedError}
            else:
                p.commit_transaction()
                for topic, value, fut in futures:
                    md = fut.result(timeout=0)  # commit returned: every record has its outcome
                    sent.setdefault((topic, md.partition), []).append(value)
        assert cluster.transaction_history("kj-commit-abort").count("CompleteCommit") == 4
    for topic in TOPICS:
        want = Counter(v for (t, _), vs in sent.items() if t == topic for v in vs)
        got = read_topic_confluent(cluster.bootstrap_servers, topic, 6, expected=want.total(),
                                   isolation_level="read_committed")
        assert Counter(r.value for r in got) == want
        for part in range(6):
            in_log = [r.value for r in sorted(got, key=lambda r: r.offset) if r.partition == part]
            assert in_log == sent.get((topic, part), []), f"{topic}-{part} out of send order"
            stored = cluster.batches(topic, part)
            assert all(b.is_transactional for b in stored)
            assert sum(b.is_control for b in stored) >= 1


def test_a_newer_instance_fences_the_older_one_and_nothing_it_sends_later_is_visible(cluster: MockCluster) -> None:
    first = producer(cluster, "kj-fenced")
    first.init_transactions()
    first.begin_transaction()
    first.send("orders", b"zombie-open", partition=0).result(timeout=30)
    with producer(cluster, "kj-fenced") as second:
        second.init_transactions()  # fences the first and aborts its open transaction
        second.begin_transaction()
        second.send("orders", b"fresh", partition=0)
        second.commit_transaction()
    late = first.send("orders", b"zombie-late", partition=0)
    with pytest.raises(ProducerFencedError):
        first.commit_transaction()
    assert late.exception(timeout=30) is not None
    with pytest.raises(IllegalStateError, match="can only be closed"):
        first.send("orders", b"after")
    with pytest.raises(ProducerFencedError):
        first.begin_transaction()
    first.close(5)
    assert committed_values(cluster, "orders", 1) == [b"fresh"]


def test_a_failed_record_makes_the_transaction_abortable_then_the_next_one_commits(cluster: MockCluster) -> None:
    with producer(cluster, "kj-abortable") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("payments", b"ok-1", partition=1).result(timeout=30)
        cluster.push_request_errors("Produce", ["INVALID_RECORD"])  # not retriable
        failed = p.send("payments", b"bad", partition=1)
        assert failed.exception(timeout=30) is not None
        wait_for(lambda: p._txn is not None and p._txn.has_abortable_error, 10, "the abortable error")
        with pytest.raises(IllegalStateError, match="abort_transaction"):
            p.send("payments", b"refused")
        with pytest.raises(KafkaError, match="abort_transaction"):
            p.commit_transaction()
        p.abort_transaction()
        p.begin_transaction()
        p.send("payments", b"ok-2", partition=1)
        p.commit_transaction()
    assert committed_values(cluster, "payments", 1) == [b"ok-2"]


@pytest.mark.parametrize("api,error", [
    ("FindCoordinator", "COORDINATOR_NOT_AVAILABLE"), ("InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS"),
    ("InitProducerId", "CONCURRENT_TRANSACTIONS"), ("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS"),
    ("AddPartitionsToTxn", "NOT_COORDINATOR"), ("AddOffsetsToTxn", "COORDINATOR_LOAD_IN_PROGRESS"),
    ("TxnOffsetCommit", "NOT_COORDINATOR"), ("EndTxn", "CONCURRENT_TRANSACTIONS"), ("EndTxn", "NOT_COORDINATOR"),
])
def test_coordinator_errors_are_retried_through_to_the_commit(cluster: MockCluster, api: str, error: str) -> None:
    cluster.push_request_errors(api, [error, error])
    with producer(cluster, f"kj-retry-{api}-{error}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("orders", b"once", partition=2)
        p.send_offsets_to_transaction({TopicPartition("payments", 0): 5}, "etl-retry")
        p.commit_transaction()
    assert cluster.pending_faults(api) == 0
    assert committed_values(cluster, "orders", 1) == [b"once"]
    assert cluster.committed_offsets("etl-retry") == {("payments", 0): 5}


def test_the_coordinator_moving_mid_transaction_is_followed(cluster: MockCluster) -> None:
    with producer(cluster, "kj-moved") as p:
        p.init_transactions()
        old = cluster.coordinator("txn", "kj-moved")
        p.begin_transaction()
        p.send("orders", b"a", partition=0).result(timeout=30)
        cluster.set_coordinator("txn", "kj-moved", next(b for b in cluster.broker_ids if b != old))
        p.send("orders", b"b", partition=1)  # a new partition: AddPartitionsToTxn meets NOT_COORDINATOR
        p.commit_transaction()
    assert sorted(v for v in committed_values(cluster, "orders", 2) if v) == [b"a", b"b"]


def test_a_timed_out_commit_is_resumed_by_calling_commit_again(cluster: MockCluster) -> None:
    with producer(cluster, "kj-slow-commit") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("orders", b"slow", partition=3).result(timeout=30)
        cluster.set_rtt(cluster.coordinator("txn", "kj-slow-commit"), 1500)
        with pytest.raises(KafkaTimeoutError, match="calling it again"):
            p.commit_transaction(timeout=0.2)
        p.commit_transaction(timeout=30)
        assert cluster.transaction_state("kj-slow-commit") == "CompleteCommit"
    assert committed_values(cluster, "orders", 1) == [b"slow"]


def test_a_transaction_open_past_its_timeout_is_aborted_and_the_producer_fenced(cluster: MockCluster) -> None:
    with producer(cluster, "kj-timeout", transaction_timeout_ms=1000) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("orders", b"too-late", partition=4).result(timeout=30)
        wait_for(lambda: cluster.transaction_state("kj-timeout") == "CompleteAbort", 15, "the coordinator's abort")
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()
    assert committed_values(cluster, "orders", 0) == []


def test_close_aborts_an_open_transaction(cluster: MockCluster) -> None:
    p = producer(cluster, "kj-close")
    p.init_transactions()
    p.begin_transaction()
    p.send("payments", b"first", partition=0).result(timeout=30)  # the coordinator knows the transaction
    futs = [p.send("payments", b"v%d" % i, partition=i % 6) for i in range(100)]
    p.close(timeout=30)
    assert all(f.done() for f in futs)
    assert cluster.transaction_state("kj-close") == "CompleteAbort"
    assert committed_values(cluster, "payments", 0) == []


def test_offsets_are_committed_with_the_transaction_only(cluster: MockCluster) -> None:
    with producer(cluster, "kj-offsets") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("orders", b"out-1")
        p.send_offsets_to_transaction({TopicPartition("payments", 2): 17}, "etl")
        p.abort_transaction()
        assert cluster.committed_offsets("etl") == {}
        p.begin_transaction()
        p.send("orders", b"out-2")
        p.send_offsets_to_transaction({("payments", 2): (42, "batch-7")}, {"group_id": "etl", "generation_id": -1,
                                                                           "member_id": ""})
        p.commit_transaction()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "etl", "log_level": 3})
    try:
        (got,) = consumer.committed([CkTopicPartition("payments", 2)], timeout=10)
        assert (got.offset, got.metadata) == (42, "batch-7")
    finally:
        consumer.close()


def test_misuse_gets_a_clear_error(cluster: MockCluster) -> None:
    with producer(cluster, "kj-misuse") as p:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.send("orders", b"x")
        p.init_transactions()
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send_offsets_to_transaction({("payments", 0): 1}, "g")
        p.begin_transaction()
        with pytest.raises(ValueError, match="offset"):
            p.send_offsets_to_transaction({("payments", 0): -1}, "g")
        with pytest.raises(TypeError, match="group"):
            p.send_offsets_to_transaction({("payments", 0): 1}, 42)
        p.abort_transaction()
