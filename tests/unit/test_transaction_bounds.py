"""The TransactionManager when the coordinator does not answer: a transaction's requests are retried
until transaction.timeout.ms has passed since their first attempt, the misses are logged once and then at
most every NO_ANSWER_LOG_INTERVAL_MS, and calls made while a commit or abort is under way say what to do.
No I/O and no clock: `now` is passed in, as the sender does."""

from __future__ import annotations

import logging

import pytest

from kafkajet.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
)
from kafkajet.producer.idempotence import IdempotenceManager
from kafkajet.producer.transactions import NO_ANSWER_LOG_INTERVAL_MS, State, TransactionManager, TxnRequest
from kafkajet.protocol import ApiKey

T0 = 1_000.0
TIMEOUT_MS = 3_000
BACKOFF_MS = 100


def closed() -> KafkaConnectionError:
    return KafkaConnectionError("connection to node 1 (h:9092) was closed by the broker")


def in_transaction(now: float = T0) -> TransactionManager:
    """Initialized, in a transaction the coordinator knows of (one partition added)."""
    tm = TransactionManager("tx", TIMEOUT_MS, IdempotenceManager(), retry_backoff_ms=BACKOFF_MS)
    tm.initialize()
    answer_until(tm, ApiKey.INIT_PRODUCER_ID, now, error_code=0, producer_id=7, producer_epoch=0)
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    answer_until(tm, ApiKey.ADD_PARTITIONS_TO_TXN, now, results_by_topic_v3_and_below=[
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}])
    return tm


def next_of(tm: TransactionManager, now: float) -> TxnRequest:
    """The next request to send at `now`, answering the coordinator look-ups that come first."""
    while True:
        req, _ = tm.next_request(False, now)
        assert req is not None, f"nothing to send at {now} in state {tm.state}"
        if req.api != ApiKey.FIND_COORDINATOR:
            return req
        tm.handle_response(req, {"error_code": 0, "node_id": 1, "host": "h", "port": 9092}, None, now)


def answer_until(tm: TransactionManager, api: ApiKey, now: float, **body: object) -> None:
    req = next_of(tm, now)
    assert req.api == api
    tm.handle_response(req, dict(body), None, now)


def unanswered(tm: TransactionManager, api: ApiKey, start: float, until: float) -> float:
    """Send `api` every retry.backoff.ms from `start`, each attempt's connection closed unanswered, while
    `now` < until; returns the time of the last attempt."""
    now = start
    last = start
    while now < until:
        req = next_of(tm, now)
        assert req.api == api
        tm.handle_response(req, None, closed(), now)
        last = now
        now += BACKOFF_MS
    return last


def test_an_end_txn_never_answered_is_retried_until_transaction_timeout_then_fails_fatally() -> None:
    tm = in_transaction()
    fatal: list[KafkaError] = []
    tm.on_fatal = fatal.append
    commit = tm.begin_commit()
    last = unanswered(tm, ApiKey.END_TXN, T0, T0 + TIMEOUT_MS)
    assert last >= T0 + TIMEOUT_MS - BACKOFF_MS and tm.state is State.COMMITTING and not commit.is_done
    req, wait = tm.next_request(False, T0 + TIMEOUT_MS)
    assert req is None and wait == 0.0  # the sender acts at once (close() must not sleep out a poll)
    assert tm.state is State.FATAL_ERROR and commit.is_done and fatal == [commit.error]
    err = commit.error
    assert isinstance(err, KafkaError) and not isinstance(err, (KafkaTimeoutError, ProducerFencedError))
    assert "END_TXN(commit)" in str(err) and "transaction.timeout.ms (3000 ms)" in str(err)
    assert "outcome of the transaction is unknown" in str(err) and "can only be closed" in str(err)
    assert isinstance(err.__cause__, KafkaConnectionError)
    with pytest.raises(KafkaError, match="outcome of the transaction is unknown"):
        tm.begin_abort()
    assert "can only be closed" in str(tm.send_refusal())


def test_an_end_txn_answered_before_the_timeout_completes_the_commit() -> None:
    tm = in_transaction()
    commit = tm.begin_commit()
    unanswered(tm, ApiKey.END_TXN, T0, T0 + TIMEOUT_MS - BACKOFF_MS)
    answer_until(tm, ApiKey.END_TXN, T0 + TIMEOUT_MS - 1, error_code=0)  # the last attempt, 1 ms before the bound
    assert commit.is_done and commit.error is None and tm.state is State.READY


def test_the_timeout_counts_from_when_the_end_txn_may_go_not_from_the_commit_call() -> None:
    tm = in_transaction()
    commit = tm.begin_commit()
    # Batches still in flight for longer than transaction.timeout.ms (bounded by delivery.timeout.ms): the
    # EndTxn waits for them, and its own time has not started.
    assert tm.next_request(True, T0 + 2 * TIMEOUT_MS)[0] is None
    start = T0 + 2 * TIMEOUT_MS
    req = next_of(tm, start)
    assert req.api == ApiKey.END_TXN
    tm.handle_response(req, None, closed(), start)
    answer_until(tm, ApiKey.END_TXN, start + TIMEOUT_MS - 1, error_code=0)
    assert commit.error is None and tm.state is State.READY


def test_offsets_never_answered_make_the_transaction_abortable_and_the_abort_goes_on() -> None:
    tm = in_transaction()
    offsets = tm.send_offsets({("in", 0): (5, None)}, "g")
    unanswered(tm, ApiKey.ADD_OFFSETS_TO_TXN, T0, T0 + TIMEOUT_MS)
    assert tm.next_request(False, T0 + TIMEOUT_MS) == (None, 0.0)
    assert tm.state is State.ABORTABLE_ERROR
    assert isinstance(offsets.error, KafkaError) and "ADD_OFFSETS_TO_TXN" in str(offsets.error)
    assert "Call abort_transaction()" in str(offsets.error)
    assert "abort_transaction" in str(tm.send_refusal())
    abort = tm.begin_abort()
    answer_until(tm, ApiKey.END_TXN, T0 + TIMEOUT_MS + 1, error_code=0)
    assert abort.is_done and abort.error is None and tm.state is State.READY


def test_a_commit_waiting_on_unanswered_partitions_fails_and_says_to_abort() -> None:
    tm = in_transaction()
    tm.maybe_add_partition(("t", 1))
    commit = tm.begin_commit()
    unanswered(tm, ApiKey.ADD_PARTITIONS_TO_TXN, T0, T0 + TIMEOUT_MS)
    tm.next_request(False, T0 + TIMEOUT_MS)
    assert tm.state is State.ABORTABLE_ERROR
    assert isinstance(commit.error, KafkaError) and "Call abort_transaction()" in str(commit.error)
    assert not tm.is_send_allowed(("t", 1))


def test_init_transactions_is_not_bounded_it_is_resumed_by_calling_it_again() -> None:
    tm = TransactionManager("tx", TIMEOUT_MS, IdempotenceManager(), retry_backoff_ms=BACKOFF_MS)
    init = tm.initialize()
    unanswered(tm, ApiKey.INIT_PRODUCER_ID, T0, T0 + 2 * TIMEOUT_MS)
    assert tm.state is State.INITIALIZING and not init.is_done
    assert tm.initialize() is init


def test_a_request_without_answer_is_logged_once_then_at_most_every_interval_with_a_count(
        caplog: pytest.LogCaptureFixture) -> None:
    tm = TransactionManager("tx", 600_000, IdempotenceManager(), retry_backoff_ms=BACKOFF_MS)
    tm.initialize()
    answer_until(tm, ApiKey.INIT_PRODUCER_ID, T0, error_code=0, producer_id=7, producer_epoch=0)
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    answer_until(tm, ApiKey.ADD_PARTITIONS_TO_TXN, T0, results_by_topic_v3_and_below=[
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}])
    tm.begin_commit()
    caplog.set_level(logging.DEBUG, logger="kafkajet.producer.transactions")
    span = 2.5 * NO_ANSWER_LOG_INTERVAL_MS
    unanswered(tm, ApiKey.END_TXN, T0, T0 + span)
    lines = [r for r in caplog.records if "got no answer" in r.getMessage()]
    attempts = int(span / BACKOFF_MS)
    assert len(lines) == 3, [r.getMessage() for r in lines]  # at 0, 10 s and 20 s of 25 s
    assert all(r.levelno == logging.WARNING for r in lines)
    first, second = lines[0].getMessage(), lines[1].getMessage()
    assert "END_TXN" in first and "closed by the broker" in first and "more unanswered" not in first
    assert f"({int(NO_ANSWER_LOG_INTERVAL_MS / BACKOFF_MS) - 1} more unanswered attempt(s) in the last 10 s)" \
        in second, second
    assert attempts > 200  # ... against one line an attempt before


def test_calls_while_a_commit_is_under_way_say_to_wait_for_it_not_to_begin_or_abort() -> None:
    tm = in_transaction()
    tm.begin_commit()  # its caller timed out: the commit goes on
    refusal = str(tm.send_refusal())
    assert "commit_transaction() has not finished" in refusal and "call it again" in refusal
    assert "call begin_transaction() first" not in refusal
    with pytest.raises(IllegalStateError, match="cannot be aborted") as aborting:
        tm.begin_abort()
    assert "call it again" in str(aborting.value) and "close()" in str(aborting.value)
    with pytest.raises(IllegalStateError, match="commit_transaction\\(\\) has not finished"):
        tm.begin()
    with pytest.raises(IllegalStateError, match="commit_transaction\\(\\) has not finished"):
        tm.send_offsets({("in", 0): (1, None)}, "g")


def test_calls_while_an_abort_is_under_way_say_to_wait_for_it() -> None:
    tm = in_transaction()
    tm.begin_abort()
    refusal = str(tm.send_refusal())
    assert "abort_transaction() has not finished" in refusal and "call begin_transaction() first" not in refusal
    with pytest.raises(IllegalStateError, match="abort_transaction\\(\\) has not finished"):
        tm.begin_commit()


def test_an_end_txn_that_could_never_be_sent_names_why_when_given_up() -> None:
    # The sender could not reach the coordinator on any attempt: the fatal error says why, not just how often.
    tm = in_transaction()
    commit = tm.begin_commit()
    now = T0
    gone = KafkaConnectionError("coordinator node 1 is no longer in the cluster metadata")
    while not commit.is_done:
        req, _ = tm.next_request(False, now)
        if req is not None:
            assert req.api in (ApiKey.END_TXN, ApiKey.FIND_COORDINATOR)
            if req.api == ApiKey.FIND_COORDINATOR:
                tm.handle_response(req, {"error_code": 0, "node_id": 1, "host": "h", "port": 9092}, None, now)
            else:
                tm.request_not_sent(req, now, forget_coordinator=True, reason=gone)
        now += BACKOFF_MS
    assert commit.error is not None and commit.error.__cause__ is gone
    assert "no longer in the cluster metadata" in str(commit.error)
