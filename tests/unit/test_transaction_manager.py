"""The TransactionManager without I/O or clock: requests in Java's order, answers driving the state machine,
as Java's TransactionManagerTest drives its manager (the sender's part is in tests/mock/test_transactions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkajet.errors import (
    ConcurrentTransactionsError,
    IllegalStateError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
)
from kafkajet.producer.idempotence import IdempotenceManager
from kafkajet.producer.transactions import State, TransactionManager, TxnRequest
from kafkajet.protocol import ApiKey

NOW = 1_000.0


def manager() -> TransactionManager:
    return TransactionManager("tx", 60_000, IdempotenceManager(), retry_backoff_ms=100)


def next_req(tm: TransactionManager, now: float = NOW, incomplete: bool = False) -> TxnRequest:
    req, _ = tm.next_request(incomplete, now)
    assert req is not None
    return req


def answer(tm: TransactionManager, req: TxnRequest, now: float = NOW, **body: Any) -> None:
    tm.handle_response(req, body, None, now)


def find_coordinator(tm: TransactionManager, node: int = 1) -> None:
    req = next_req(tm)
    assert req.api == ApiKey.FIND_COORDINATOR
    answer(tm, req, error_code=0, node_id=node, host="h", port=9092)


def initialized(epoch: int = 0) -> TransactionManager:
    tm = manager()
    result = tm.initialize()
    find_coordinator(tm)
    req = next_req(tm)
    assert req.api == ApiKey.INIT_PRODUCER_ID and req.build()["transactional_id"] == "tx"
    answer(tm, req, error_code=0, producer_id=7, producer_epoch=epoch)
    assert result.is_done and result.error is None and tm.state is State.READY
    return tm


def add_partitions_ok(tm: TransactionManager, *tps: tuple[str, int]) -> None:
    req = next_req(tm)
    assert req.api == ApiKey.ADD_PARTITIONS_TO_TXN
    topics: dict[str, list[int]] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(p)
    answer(tm, req, results_by_topic_v3_and_below=[
        {"name": t, "results_by_partition": [{"partition_index": p, "partition_error_code": 0} for p in ps]}
        for t, ps in topics.items()])


def test_init_asks_for_the_coordinator_first_and_then_a_producer_id_with_no_id_and_epoch() -> None:
    tm = manager()
    tm.initialize()
    assert tm.state is State.INITIALIZING
    find_coordinator(tm, node=3)
    req = next_req(tm)
    assert tm.coordinator_node(req) == 3
    body = req.build()
    assert (body["producer_id"], body["producer_epoch"], body["transaction_timeout_ms"]) == (-1, -1, 60_000)


def test_a_partition_is_sent_to_only_after_the_coordinator_added_it() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    assert not tm.is_send_allowed(("t", 0))
    req = next_req(tm)
    assert req.build()["v3_and_below_topics"] == [{"name": "t", "partitions": [0]}]
    assert tm.next_request(False, NOW) == (None, float("inf")), "one coordinator request at a time"
    answer(tm, req, results_by_topic_v3_and_below=[
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}])
    assert tm.is_send_allowed(("t", 0))
    tm.maybe_add_partition(("t", 0))
    assert tm.next_request(False, NOW) == (None, float("inf")), "an added partition is not added again"


def test_commit_waits_for_the_batches_then_ends_the_transaction() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_ok(tm, ("t", 0))
    result = tm.begin_commit()
    assert tm.state is State.COMMITTING and tm.is_completing
    assert tm.next_request(True, NOW)[0] is None, "EndTxn waits while batches are incomplete"
    req = next_req(tm, incomplete=False)
    assert req.api == ApiKey.END_TXN and req.build()["committed"] is True
    answer(tm, req, error_code=0)
    assert result.is_done and result.error is None and tm.state is State.READY
    assert not tm.is_send_allowed(("t", 0)), "the next transaction adds its partitions again"


def test_a_transaction_the_coordinator_never_heard_of_ends_without_end_txn() -> None:
    tm = initialized()
    tm.begin()
    result = tm.begin_commit()
    assert tm.next_request(False, NOW)[0] is None
    assert result.is_done and tm.state is State.READY


def test_retriable_and_moved_coordinator_answers_are_retried_after_the_backoff() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_ok(tm, ("t", 0))
    tm.begin_commit()
    req = next_req(tm)
    answer(tm, req, error_code=ConcurrentTransactionsError.code)
    assert tm.next_request(False, NOW + 50) == (None, 50.0)
    req = next_req(tm, now=NOW + 100)
    answer(tm, req, now=NOW + 100, error_code=NotCoordinatorError.code)
    # The coordinator is looked up again before the EndTxn is resent.
    assert next_req(tm, now=NOW + 200).api == ApiKey.FIND_COORDINATOR


def test_a_failed_batch_makes_the_transaction_abortable_and_fails_a_pending_commit() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_ok(tm, ("t", 0))
    result = tm.begin_commit()
    tm.on_batch_failed(TopicAuthorizationFailedError("t-0"))
    assert tm.state is State.ABORTABLE_ERROR
    assert isinstance(result.error, KafkaError) and "abort_transaction" in str(result.error)
    with pytest.raises(KafkaError, match="abort_transaction"):
        tm.begin_commit()
    with pytest.raises(IllegalStateError, match="abort_transaction"):
        raise tm.send_refusal()
    abort = tm.begin_abort()
    req = next_req(tm)
    assert req.api == ApiKey.END_TXN and req.build()["committed"] is False
    answer(tm, req, error_code=0)
    assert abort.is_done and abort.error is None and tm.state is State.READY


def test_fencing_is_fatal_and_ends_every_waiting_call() -> None:
    tm = initialized()
    fatal: list[KafkaError] = []
    tm.on_fatal = fatal.append
    tm.begin()
    offsets = tm.send_offsets({("in", 0): (5, None)}, "g")
    tm.maybe_add_partition(("t", 0))
    req = next_req(tm)
    answer(tm, req, results_by_topic_v3_and_below=[
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code":
                                                ProducerFencedError.code}]}])
    assert tm.state is State.FATAL_ERROR and isinstance(fatal[0], ProducerFencedError)
    assert isinstance(offsets.error, ProducerFencedError)
    for call in (tm.begin, tm.begin_commit, tm.begin_abort):
        with pytest.raises(ProducerFencedError):
            call()


def test_a_timed_out_commit_is_the_same_commit_when_called_again() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_ok(tm, ("t", 0))
    first = tm.begin_commit()
    with pytest.raises(KafkaTimeoutError, match="calling it again"):
        first.wait(0.0)
    assert tm.begin_commit() is first


def test_calls_out_of_order_are_refused_with_what_to_do() -> None:
    tm = manager()
    with pytest.raises(IllegalStateError, match="init_transactions"):
        tm.begin()
    with pytest.raises(IllegalStateError, match="init_transactions"):
        raise tm.send_refusal()
    tm = initialized()
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        tm.maybe_add_partition(("t", 0))
    with pytest.raises(IllegalStateError, match="no transaction to commit"):
        tm.begin_commit()
    with pytest.raises(IllegalStateError, match="once"):
        tm.initialize()
    tm.begin()
    with pytest.raises(IllegalStateError, match="already in progress"):
        tm.begin()


def test_an_abort_after_sequences_were_lost_bumps_the_epoch_with_the_same_producer_id() -> None:
    tm = initialized(epoch=4)
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_ok(tm, ("t", 0))
    tm.idempotence.request_epoch_bump("a batch with sequence numbers was aborted")
    result = tm.begin_abort()
    answer(tm, next_req(tm), error_code=0)
    assert tm.state is State.INITIALIZING and not result.is_done
    req = next_req(tm)
    assert req.api == ApiKey.INIT_PRODUCER_ID
    assert (req.build()["producer_id"], req.build()["producer_epoch"]) == (7, 4)  # KIP-360: bump this one
    answer(tm, req, error_code=0, producer_id=7, producer_epoch=5)
    assert result.is_done and tm.state is State.READY and tm.idempotence.producer_epoch == 5


def test_end_txn_refused_as_invalid_state_is_fatal() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_ok(tm, ("t", 0))
    result = tm.begin_commit()
    answer(tm, next_req(tm), error_code=InvalidTxnStateError.code)
    assert tm.state is State.FATAL_ERROR and isinstance(result.error, InvalidTxnStateError)
