"""A transactional producer fenced by a newer one with the same transactional.id, on a real broker (issue 39).

Apache Kafka answers the fenced producer's EndTxn with PRODUCER_FENCED. Tansu 0.6 aborts the old transaction
when the new producer initializes, as Kafka does, but answers that EndTxn by closing the connection: every
retry of it is closed again. Either way the fenced producer must end: its commit fails (ProducerFencedError on
Kafka), send() says the producer can only be closed, close() without a timeout returns within
transaction.timeout.ms with every record's outcome known, and the retries are not logged one line apiece.
Short timeouts keep the Tansu path (bounded by transaction.timeout.ms) quick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.errors import (
    ApplicationRecoverableError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
)
from kafkajet.testing import EmbeddedBroker
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

TXN_TIMEOUT_S = 3.0
# What the fenced producer may take beyond transaction.timeout.ms: a retry backoff, the pass that notices.
SLACK_S = 5.0


def settings(bootstrap: str, txn_id: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "transactional.id": txn_id,
            "transaction.timeout.ms": int(TXN_TIMEOUT_S * 1000), "delivery.timeout.ms": 3000,
            "request.timeout.ms": 2000, "max.block.ms": 3000, "linger.ms": 0, **extra}


@pytest.fixture
def fenced(broker: Any, topic_name: str) -> Iterator[tuple[Producer, Producer, str]]:
    """Producer A inside a transaction with one record acknowledged, then fenced by B's init_transactions()."""
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=1)
    txn_id = f"fenced-{topic_name}"
    a = Producer(settings(broker.bootstrap_servers, txn_id, **{"linger.ms": 1000}))
    b = Producer(settings(broker.bootstrap_servers, txn_id))
    try:
        a.init_transactions(timeout=30)
        a.begin_transaction()
        a.send(topic_name, b"a1")
        a.flush(timeout=30)  # the coordinator has the partition in A's transaction, the record is appended
        b.init_transactions(timeout=30)
        yield a, b, topic_name
    finally:
        a.close(timeout=0)
        b.close(timeout=10)


def close_returns(producer: Producer, within_s: float) -> float:
    """close() without a timeout, on a thread of its own so that a hang fails the test; how long it took."""
    started = time.monotonic()
    closer = threading.Thread(target=producer.close, daemon=True)
    closer.start()
    wait_for(lambda: not closer.is_alive(), within_s, "close() of the fenced producer to return")
    return time.monotonic() - started


def no_answer_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "kafkajet.producer.transactions" and "got no answer" in r.getMessage()]


def test_a_fenced_producer_fails_its_commit_says_to_close_and_closes(
        broker: Any, fenced: tuple[Producer, Producer, str], caplog: pytest.LogCaptureFixture) -> None:
    a, b, topic = fenced
    caplog.set_level(logging.INFO, logger="kafkajet.producer.transactions")
    started = time.monotonic()
    with pytest.raises(KafkaError) as failed:
        a.commit_transaction(timeout=60)
    # The commit's own outcome, not the caller giving up on waiting (a KafkaTimeoutError says "call it again").
    assert not isinstance(failed.value, KafkaTimeoutError), failed.value
    # On every broker what the application does next is the same: close, and create a new producer.
    assert isinstance(failed.value, ApplicationRecoverableError), failed.value
    if not isinstance(broker, EmbeddedBroker):  # a broker that answers the fenced EndTxn
        assert isinstance(failed.value, ProducerFencedError), failed.value
    assert time.monotonic() - started < TXN_TIMEOUT_S + SLACK_S
    with pytest.raises(IllegalStateError) as refused:
        a.send(topic, b"a2")
    assert "can only be closed" in str(refused.value) and "begin_transaction" not in str(refused.value)
    with pytest.raises(KafkaError):
        a.abort_transaction(timeout=10)  # nothing to abort with: the error again
    assert close_returns(a, SLACK_S) < SLACK_S
    # The broker answered nothing for seconds, one attempt every retry.backoff.ms: one line, not one an attempt.
    assert len(no_answer_lines(caplog)) <= 1, no_answer_lines(caplog)
    # The producer that fenced it goes on.
    b.begin_transaction()
    b.send(topic, b"b1").result(timeout=30)
    b.commit_transaction(timeout=30)


def test_close_of_a_fenced_producer_with_an_open_transaction_returns_with_every_outcome(
        fenced: tuple[Producer, Producer, str]) -> None:
    a, _, topic = fenced
    # Waits out linger.ms in the accumulator: close() aborts the transaction before it is sent.
    queued = a.send(topic, b"a2")
    assert close_returns(a, TXN_TIMEOUT_S + SLACK_S) < TXN_TIMEOUT_S + SLACK_S
    assert queued.done() and queued.exception() is not None  # TransactionAbortedError, or the fencing itself
