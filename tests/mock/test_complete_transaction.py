"""Completing another producer's prepared transaction (Admin.complete_transaction), as the exactly-once Spark
sink's driver does, and Producer.prepare_transaction() that leaves it open; read back by read_committed
confluent-kafka consumers on the MockCluster. (Written side by side by a second engineer for another design of
the same sink; ported to this one's API.)"""

from __future__ import annotations

import threading

import pytest

from kafkajet import Admin, PreparedTransaction, Producer
from kafkajet.errors import (
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    UnstableOffsetCommitError,
)
from kafkajet.testing import MockCluster
from tests.helpers.readback import read_topic_confluent

TOPIC = "eos"
pytestmark = [pytest.mark.mock_cluster(brokers=3, topics={TOPIC: 3}), pytest.mark.timeout(120)]


def hand_over(cluster: MockCluster, txn_id: str, n: int = 30) -> PreparedTransaction:
    """A producer writes n records in a transaction, prepares it and closes leaving it open."""
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(n):
            p.send(TOPIC, b"%s-%d" % (txn_id.encode(), i), partition=i % 3)
        return p.prepare_transaction(30)


def values(cluster: MockCluster, isolation: str, expected: int) -> list[bytes | None]:
    return sorted(r.value for r in read_topic_confluent(cluster.bootstrap_servers, TOPIC, 3, expected=expected,
                                                        isolation_level=isolation))


def test_a_handed_over_transaction_stays_open_until_committed_by_id(cluster: MockCluster) -> None:
    prepared = hand_over(cluster, "t-commit")
    assert cluster.transaction_state("t-commit") == "Ongoing"  # close() did not abort it
    assert values(cluster, "read_committed", 0) == []
    with Admin(cluster.bootstrap_servers) as admin:
        admin.complete_transaction(prepared, commit=True)
        # A driver retrying its commit (the first answer lost) succeeds again; the other outcome is refused.
        admin.complete_transaction(prepared, commit=True)
        with pytest.raises(InvalidTxnStateError):
            admin.complete_transaction(prepared, commit=False)
    assert cluster.transaction_state("t-commit") == "CompleteCommit"
    assert values(cluster, "read_committed", 30) == sorted(b"t-commit-%d" % i for i in range(30))


def test_abort_by_id_hides_the_records_that_were_written(cluster: MockCluster) -> None:
    prepared = hand_over(cluster, "t-abort")
    with Admin(cluster.bootstrap_servers) as admin:
        admin.complete_transaction(prepared, commit=False)
    assert cluster.transaction_state("t-abort") == "CompleteAbort"
    assert values(cluster, "read_committed", 0) == []
    assert len(values(cluster, "read_uncommitted", 30)) == 30  # written, then aborted


def test_coordinator_moves_and_busy_coordinators_are_retried(cluster: MockCluster) -> None:
    prepared = hand_over(cluster, "t-move")
    old = cluster.coordinator("txn", "t-move")
    with Admin(cluster.bootstrap_servers) as admin:
        admin.list_topics()  # the admin knows the brokers; its coordinator lookup comes next
        cluster.set_coordinator("txn", "t-move", next(b for b in cluster.broker_ids if b != old))
        cluster.push_request_errors("EndTxn", ["CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS"])
        admin.complete_transaction(prepared, commit=True)
    assert cluster.transaction_state("t-move") == "CompleteCommit"
    assert len(cluster.requests("FindCoordinator")) >= 1
    assert len(cluster.requests("EndTxn")) >= 3
    assert len(values(cluster, "read_committed", 30)) == 30


def test_a_stale_coordinator_answer_makes_the_admin_look_it_up_again(cluster: MockCluster) -> None:
    prepared = hand_over(cluster, "t-stale")
    with Admin(cluster.bootstrap_servers) as admin:
        admin.list_consumer_group_offsets("g", [(TOPIC, 0)])  # unrelated: a warm connection
        found = len(cluster.requests("FindCoordinator"))
        cluster.push_request_errors("EndTxn", ["NOT_COORDINATOR"])
        admin.complete_transaction(prepared, commit=True)
        assert len(cluster.requests("FindCoordinator")) >= found + 2  # first lookup, then again after the move
    assert cluster.transaction_state("t-stale") == "CompleteCommit"


def test_a_fenced_transaction_cannot_be_committed_and_stays_invisible(cluster: MockCluster) -> None:
    prepared = hand_over(cluster, "t-fenced")
    # A retried task attempt with the same transactional id: its init_transactions fences and aborts ours.
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "t-fenced"}) as newer:
        newer.init_transactions(30)
    with Admin(cluster.bootstrap_servers) as admin, pytest.raises(KafkaError) as e:
        admin.complete_transaction(prepared, commit=True, timeout_s=10)
    assert isinstance(e.value, ProducerFencedError) or "EPOCH" in str(e.value)
    assert values(cluster, "read_committed", 0) == []


def test_an_ordinary_close_still_aborts_the_open_transaction(cluster: MockCluster) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "t-close"})
    p.init_transactions(30)
    p.begin_transaction()
    p.send(TOPIC, b"x", partition=0)
    p.flush(30)
    p.close()
    assert cluster.transaction_state("t-close") == "CompleteAbort"


def test_list_consumer_group_offsets_sees_transactional_offsets_once_committed(cluster: MockCluster) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "t-offsets"}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(TOPIC, b"x", partition=0)
        p.send_offsets_to_transaction({(TOPIC, 0): 7}, "batches")
        # Offsets of an open transaction are unstable: the call waits for its outcome rather than guess, and
        # the timeout's cause is the broker's last answer, even when the deadline cut the last attempt short.
        asked = len(cluster.requests("OffsetFetch"))
        with Admin(cluster.bootstrap_servers) as admin, pytest.raises(KafkaTimeoutError) as info:
            admin.list_consumer_group_offsets("batches", [(TOPIC, 0), (TOPIC, 1)], timeout_s=3)
        assert isinstance(info.value.cause, UnstableOffsetCommitError)
        assert len(cluster.requests("OffsetFetch")) - asked >= 2
        p.commit_transaction()
    with Admin(cluster.bootstrap_servers) as admin:
        assert admin.list_consumer_group_offsets("batches", [(TOPIC, 0), (TOPIC, 1)]) == {(TOPIC, 0): 7}  # partition 1 has none


def test_a_timeout_keeps_the_brokers_last_answer_when_the_deadline_cuts_the_last_attempt(
        cluster: MockCluster) -> None:
    """The broker answers UNSTABLE_OFFSET_COMMIT twice, then holds the next OffsetFetch past the caller's
    deadline: the call's request timeout is what is left, so that attempt ends in "request timed out". The
    KafkaTimeoutError keeps UNSTABLE_OFFSET_COMMIT as its cause (why the call never got its offsets) and
    names the cut attempt too."""
    answers = 0
    release = threading.Event()

    def unstable_then_held(header: object, body: object, broker_id: int) -> str | None:
        nonlocal answers
        answers += 1
        if answers <= 2:
            return "UNSTABLE_OFFSET_COMMIT"
        release.wait(30)  # past the deadline; released when the test is done
        return "UNSTABLE_OFFSET_COMMIT"

    cluster.control("OffsetFetch", unstable_then_held)  # type: ignore[arg-type]
    try:
        with Admin(cluster.bootstrap_servers) as admin, pytest.raises(KafkaTimeoutError) as info:
            admin.list_consumer_group_offsets("g", [(TOPIC, 0)], timeout_s=5)
    finally:
        release.set()
    assert answers >= 3  # the third attempt was the one the deadline cut
    assert isinstance(info.value.cause, UnstableOffsetCommitError), repr(info.value)
    assert "timed out" in str(info.value)
