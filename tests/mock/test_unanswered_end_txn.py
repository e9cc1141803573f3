"""A coordinator that closes the connection on every EndTxn, unanswered (what Tansu does for the EndTxn of a
fenced producer, tests/integration/test_fenced_transaction.py), on the MockCluster so that it holds whatever
Tansu does next: the EndTxn is retried until transaction.timeout.ms, then the producer fails fatally, and
close() without a timeout returns with every record's outcome known."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.errors import IllegalStateError, KafkaError, KafkaTimeoutError, TransactionAbortedError
from kafkajet.testing import MockCluster
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"orders": 2}), pytest.mark.timeout(60)]

TXN_TIMEOUT_S = 2.0
SLACK_S = 4.0  # beyond transaction.timeout.ms: a retry backoff, a reconnect, the pass that notices


def dropping_every_end_txn(cluster: MockCluster, txn_id: str, **extra: Any) -> Producer:
    cluster.control("EndTxn", lambda header, body, broker_id: "drop")
    return Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                     "transaction.timeout.ms": int(TXN_TIMEOUT_S * 1000), "max.block.ms": 30_000, **extra})


def close_returns(producer: Producer, within_s: float) -> None:
    closer = threading.Thread(target=producer.close, daemon=True)  # close() without a timeout: a hang fails here
    closer.start()
    wait_for(lambda: not closer.is_alive(), within_s, "close() to return")


def test_a_commit_never_answered_fails_after_transaction_timeout_and_the_producer_closes(
        cluster: MockCluster) -> None:
    p = dropping_every_end_txn(cluster, "kj-unanswered-commit")
    try:
        p.init_transactions()
        p.begin_transaction()
        delivered = p.send("orders", b"a", partition=0)
        delivered.result(timeout=30)
        started = time.monotonic()
        with pytest.raises(KafkaError, match="outcome of the transaction is unknown") as failed:
            p.commit_transaction()  # max.block.ms is 30 s: the commit's own bound ends it first
        assert not isinstance(failed.value, KafkaTimeoutError)
        assert TXN_TIMEOUT_S <= time.monotonic() - started < TXN_TIMEOUT_S + SLACK_S
        assert "END_TXN(commit)" in str(failed.value)
        with pytest.raises(IllegalStateError, match="can only be closed"):
            p.send("orders", b"b")
        close_returns(p, SLACK_S)
        assert delivered.exception() is None
        assert len(cluster.requests("EndTxn")) > 2  # retried, not given up at the first closed connection
    finally:
        p.close(timeout=0)


def test_close_with_an_open_transaction_returns_when_its_abort_is_never_answered(cluster: MockCluster) -> None:
    p = dropping_every_end_txn(cluster, "kj-unanswered-abort", **{"linger.ms": 5000})
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("orders", b"a", partition=0)
        p.flush(timeout=30)  # the coordinator knows the transaction: close() has an EndTxn(abort) to send
        queued = [p.send("orders", b"q%d" % i, partition=i % 2) for i in range(10)]
        close_returns(p, TXN_TIMEOUT_S + SLACK_S)
        assert all(f.done() for f in queued)
        assert {type(f.exception()) for f in queued} <= {type(None), TransactionAbortedError}
    finally:
        p.close(timeout=0)
