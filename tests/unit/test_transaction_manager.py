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


# --- every coordinator answer, API by API (Java's TransactionManagerTest error cases) -----------------------

from kafkajet.errors import (  # noqa: E402
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    OperationNotAttemptedError,
    RequestTimedOutError,
    StaleMemberEpochError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
)
from kafkajet.errors import KafkaConnectionError as _ConnectionError  # noqa: E402

MOVED = [NotCoordinatorError, CoordinatorNotAvailableError]
BUSY = [CoordinatorLoadInProgressError, ConcurrentTransactionsError]
FENCED = [ProducerFencedError, InvalidProducerEpochError]


def in_transaction(*tps: tuple[str, int]) -> TransactionManager:
    tm = initialized()
    tm.begin()
    for tp in tps:
        tm.maybe_add_partition(tp)
    if tps:
        add_partitions_ok(tm, *tps)
    return tm


def add_partitions_answer(tm: TransactionManager, codes: dict[tuple[str, int], int], now: float = NOW,
                          top: int = 0) -> TxnRequest:
    req = next_req(tm, now=now)
    assert req.api == ApiKey.ADD_PARTITIONS_TO_TXN
    topics: dict[str, list[dict[str, int]]] = {}
    for (t, p), c in codes.items():
        topics.setdefault(t, []).append({"partition_index": p, "partition_error_code": c})
    answer(tm, req, now=now, error_code=top, results_by_topic_v3_and_below=[
        {"name": t, "results_by_partition": ps} for t, ps in topics.items()])
    return req


@pytest.mark.parametrize("error", MOVED)
def test_find_coordinator_then_init_after_a_moved_coordinator_on_init(error: type[KafkaError]) -> None:
    tm = manager()
    result = tm.initialize()
    find_coordinator(tm, node=1)
    req = next_req(tm)
    answer(tm, req, error_code=error.code)  # type: ignore[attr-defined]
    assert tm.coordinator_node(req) is None and not result.is_done
    assert tm.next_request(False, NOW + 99) == (None, 1.0)
    assert next_req(tm, now=NOW + 100).api == ApiKey.FIND_COORDINATOR


def test_a_retriable_find_coordinator_error_is_retried_and_a_fatal_one_ends_init() -> None:
    tm = manager()
    result = tm.initialize()
    req = next_req(tm)
    answer(tm, req, error_code=CoordinatorNotAvailableError.code)
    assert next_req(tm, now=NOW + 100).api == ApiKey.FIND_COORDINATOR
    tm2 = manager()
    result = tm2.initialize()
    answer(tm2, next_req(tm2), error_code=TransactionalIdAuthorizationFailedError.code)
    assert tm2.state is State.FATAL_ERROR and isinstance(result.error, TransactionalIdAuthorizationFailedError)
    assert "FIND_COORDINATOR for transactional.id 'tx'" in str(result.error)


def test_the_coordinator_address_is_remembered_for_the_sender() -> None:
    tm = manager()
    tm.initialize()
    req = next_req(tm)
    assert req.build() == {"key": "tx", "key_type": 1}
    answer(tm, req, error_code=0, node_id=4, host="broker-4", port=9094)
    assert tm.coordinator_addresses == {4: ("broker-4", 9094)} and tm.coordinators == {("txn", "tx"): 4}


@pytest.mark.parametrize("error", BUSY)
def test_init_producer_id_busy_is_retried_after_the_backoff(error: type[KafkaError]) -> None:
    tm = manager()
    result = tm.initialize()
    find_coordinator(tm)
    answer(tm, next_req(tm), error_code=error.code)  # type: ignore[attr-defined]
    assert tm.state is State.INITIALIZING and not result.is_done
    assert tm.next_request(False, NOW + 99) == (None, 1.0)
    req = next_req(tm, now=NOW + 100)
    assert req.api == ApiKey.INIT_PRODUCER_ID and req.attempts == 2


@pytest.mark.parametrize("error", [TransactionalIdAuthorizationFailedError, InvalidTxnStateError, *FENCED])
def test_init_producer_id_refused_is_fatal(error: type[KafkaError]) -> None:
    tm = manager()
    result = tm.initialize()
    find_coordinator(tm)
    answer(tm, next_req(tm), error_code=error.code)  # type: ignore[attr-defined]
    assert tm.state is State.FATAL_ERROR
    assert isinstance(result.error, ProducerFencedError if error in FENCED else error)
    assert tm.next_request(False, NOW + 10_000) == (None, float("inf"))


def test_no_answer_forgets_the_coordinator_and_retries() -> None:
    tm = manager()
    tm.initialize()
    find_coordinator(tm, node=2)
    req = next_req(tm)
    tm.handle_response(req, None, _ConnectionError("dropped"), NOW)
    assert tm.coordinators == {}
    assert tm.next_request(False, NOW + 50) == (None, 50.0)
    assert next_req(tm, now=NOW + 100).api == ApiKey.FIND_COORDINATOR
    assert tm.in_flight is not None


def test_request_not_sent_waits_and_may_forget_the_coordinator() -> None:
    tm = manager()
    tm.initialize()
    find_coordinator(tm, node=2)
    req = next_req(tm)
    tm.request_not_sent(req, NOW, forget_coordinator=False)
    assert tm.in_flight is None and tm.coordinators == {("txn", "tx"): 2}
    again = next_req(tm, now=NOW + 100)
    assert again is req
    tm.request_not_sent(again, NOW + 100, forget_coordinator=True)
    assert tm.coordinators == {}


def test_add_partitions_sends_each_new_partition_once_grouped_by_topic() -> None:
    tm = initialized()
    tm.begin()
    for tp in (("b", 1), ("a", 2), ("a", 0)):
        tm.maybe_add_partition(tp)
    req = next_req(tm)
    body = req.build()
    assert body["v3_and_below_topics"] == [{"name": "a", "partitions": [0, 2]}, {"name": "b", "partitions": [1]}]
    assert (body["v3_and_below_producer_id"], body["v3_and_below_producer_epoch"]) == (7, 0)
    assert body["transactions"][0]["topics"] == body["v3_and_below_topics"]
    tm.maybe_add_partition(("a", 0))  # in flight: not asked for twice
    answer(tm, req, results_by_topic_v3_and_below=[
        {"name": "a", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0},
                                               {"partition_index": 2, "partition_error_code": 0}]},
        {"name": "b", "results_by_partition": [{"partition_index": 1, "partition_error_code": 0}]}])
    assert all(tm.is_send_allowed(tp) for tp in (("a", 0), ("a", 2), ("b", 1)))
    assert tm.next_request(False, NOW)[0] is None and tm.transaction_started


def test_add_partitions_v4_answers_are_read_too() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    req = next_req(tm)
    answer(tm, req, results_by_transaction=[{"transactional_id": "tx", "topic_results": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}]}])
    assert tm.is_send_allowed(("t", 0))


@pytest.mark.parametrize("error", [*MOVED, *BUSY, UnknownTopicOrPartitionError])
def test_add_partitions_retriable_asks_again_after_the_backoff(error: type[KafkaError]) -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    tm.maybe_add_partition(("t", 1))
    add_partitions_answer(tm, {("t", 0): 0, ("t", 1): error.code})  # type: ignore[attr-defined]
    assert tm.is_send_allowed(("t", 0)) and not tm.is_send_allowed(("t", 1))
    assert tm.state is State.IN_TRANSACTION
    assert (("txn", "tx") in tm.coordinators) == (error not in MOVED)
    req, wait = tm.next_request(False, NOW + 40)
    assert req is None and wait == 60.0
    again = next_req(tm, now=NOW + 100)
    if error in MOVED:
        assert again.api == ApiKey.FIND_COORDINATOR
    else:
        assert again.api == ApiKey.ADD_PARTITIONS_TO_TXN
        assert again.build()["v3_and_below_topics"] == [{"name": "t", "partitions": [1]}]


def test_add_partitions_not_attempted_partitions_are_asked_for_again_at_once() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    tm.maybe_add_partition(("t", 1))
    add_partitions_answer(tm, {("t", 0): 0, ("t", 1): OperationNotAttemptedError.code})
    again = next_req(tm)
    assert again.build()["v3_and_below_topics"] == [{"name": "t", "partitions": [1]}]


def test_a_top_level_add_partitions_error_applies_to_every_partition() -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_answer(tm, {("t", 0): 0}, top=TopicAuthorizationFailedError.code)
    assert tm.state is State.ABORTABLE_ERROR and not tm.is_send_allowed(("t", 0))


@pytest.mark.parametrize("error,state", [
    (TopicAuthorizationFailedError, State.ABORTABLE_ERROR),
    (InvalidTxnStateError, State.FATAL_ERROR),
    (TransactionalIdAuthorizationFailedError, State.FATAL_ERROR),
    (ProducerFencedError, State.FATAL_ERROR),
    (InvalidProducerEpochError, State.FATAL_ERROR),
    (UnknownProducerIdError, State.ABORTABLE_ERROR),
    (InvalidProducerIdMappingError, State.ABORTABLE_ERROR),
])
def test_add_partitions_errors_are_classified_as_java_does(error: type[KafkaError], state: State) -> None:
    tm = initialized()
    tm.begin()
    tm.maybe_add_partition(("t", 0))
    add_partitions_answer(tm, {("t", 0): error.code})  # type: ignore[attr-defined]
    assert tm.state is state
    expected = ProducerFencedError if error in FENCED else error
    assert isinstance(tm.last_error, expected)
    # A lost producer id means sequences restart: the next transaction needs the next epoch (KIP-360).
    assert tm.idempotence.bump_requested == (error in (UnknownProducerIdError, InvalidProducerIdMappingError))


def send_offsets_then_add(tm: TransactionManager) -> Any:
    result = tm.send_offsets({("in", 1): (42, "meta"), ("in", 0): (7, None)}, "grp",
                             {"generation_id": 3, "member_id": "m-1", "group_instance_id": "i-1"})
    req = next_req(tm)
    assert req.api == ApiKey.ADD_OFFSETS_TO_TXN
    assert req.build() == {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 0, "group_id": "grp"}
    return result, req


def test_send_offsets_adds_the_group_then_commits_offsets_at_the_group_coordinator() -> None:
    tm = in_transaction()
    result, req = send_offsets_then_add(tm)
    answer(tm, req, error_code=0)
    assert tm.transaction_started and not result.is_done
    find = next_req(tm)
    assert find.api == ApiKey.FIND_COORDINATOR and find.build() == {"key": "grp", "key_type": 0}
    answer(tm, find, error_code=0, node_id=5, host="g", port=1)
    commit = next_req(tm)
    assert commit.api == ApiKey.TXN_OFFSET_COMMIT and tm.coordinator_node(commit) == 5
    body = commit.build()
    assert (body["generation_id_or_member_epoch"], body["member_id"], body["group_instance_id"]) == (3, "m-1", "i-1")
    assert body["topics"] == [{"name": "in", "partitions": [
        {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1, "committed_metadata": None},
        {"partition_index": 1, "committed_offset": 42, "committed_leader_epoch": -1, "committed_metadata": "meta"}]}]
    answer(tm, commit, topics=[{"name": "in", "partitions": [{"partition_index": 0, "error_code": 0},
                                                             {"partition_index": 1, "error_code": 0}]}])
    assert result.is_done and result.error is None


def test_under_transaction_version_2_offsets_go_straight_to_the_group_coordinator() -> None:
    # Java 4.4's sendOffsetsToTransaction: TxnOffsetCommit v5 adds the group itself, no AddOffsetsToTxn; the
    # transaction has started, so even an offsets-only transaction ends with an EndTxn.
    tm = initialized()
    tm.tv2 = True
    tm.begin()
    result = tm.send_offsets({("in", 0): (7, None)}, "grp", {"generation_id": 3, "member_id": "m-1"})
    assert tm.transaction_started
    find = next_req(tm)
    assert find.api == ApiKey.FIND_COORDINATOR and find.build() == {"key": "grp", "key_type": 0}
    answer(tm, find, error_code=0, node_id=5, host="g", port=1)
    commit = next_req(tm)
    assert commit.api == ApiKey.TXN_OFFSET_COMMIT and commit.transaction_version == 2
    assert commit.build()["generation_id_or_member_epoch"] == 3
    answer(tm, commit, topics=[{"name": "in", "partitions": [{"partition_index": 0, "error_code": 0}]}])
    assert result.is_done and result.error is None
    tm.begin_commit()
    assert next_req(tm).api == ApiKey.END_TXN


def test_under_transaction_version_1_offsets_commit_goes_at_version_1() -> None:
    tm = in_transaction()
    _, req = send_offsets_then_add(tm)
    answer(tm, req, error_code=0)
    answer(tm, next_req(tm), error_code=0, node_id=5, host="g", port=1)
    commit = next_req(tm)
    assert commit.api == ApiKey.TXN_OFFSET_COMMIT and commit.transaction_version == 1


@pytest.mark.parametrize("error", [*MOVED, *BUSY])
def test_add_offsets_busy_or_moved_is_retried(error: type[KafkaError]) -> None:
    tm = in_transaction()
    result, req = send_offsets_then_add(tm)
    answer(tm, req, error_code=error.code)  # type: ignore[attr-defined]
    assert not result.is_done and tm.state is State.IN_TRANSACTION
    again = next_req(tm, now=NOW + 100)
    assert again.api == (ApiKey.FIND_COORDINATOR if error in MOVED else ApiKey.ADD_OFFSETS_TO_TXN)


def test_add_offsets_refused_fails_the_call_and_makes_the_transaction_abortable() -> None:
    tm = in_transaction()
    result, req = send_offsets_then_add(tm)
    answer(tm, req, error_code=GroupAuthorizationFailedError.code)
    assert isinstance(result.error, GroupAuthorizationFailedError) and tm.state is State.ABORTABLE_ERROR


def offset_commit(tm: TransactionManager) -> tuple[Any, TxnRequest]:
    result, req = send_offsets_then_add(tm)
    answer(tm, req, error_code=0)
    answer(tm, next_req(tm), error_code=0, node_id=5, host="g", port=1)
    commit = next_req(tm)
    assert commit.api == ApiKey.TXN_OFFSET_COMMIT
    return result, commit


def commit_answer(code: int) -> dict[str, Any]:
    return {"topics": [{"name": "in", "partitions": [{"partition_index": 0, "error_code": 0},
                                                     {"partition_index": 1, "error_code": code}]}]}


@pytest.mark.parametrize("error", [*MOVED, *BUSY, UnknownTopicOrPartitionError, RequestTimedOutError])
def test_txn_offset_commit_retriable_is_retried(error: type[KafkaError]) -> None:
    tm = in_transaction()
    result, commit = offset_commit(tm)
    tm.handle_response(commit, commit_answer(error.code), None, NOW)  # type: ignore[attr-defined]
    assert not result.is_done and tm.state is State.IN_TRANSACTION
    assert (("group", "grp") in tm.coordinators) == (error not in MOVED)
    again = next_req(tm, now=NOW + 100)
    assert again.api == (ApiKey.FIND_COORDINATOR if error in MOVED else ApiKey.TXN_OFFSET_COMMIT)


def test_txn_offset_commit_refused_is_abortable_and_fenced_is_fatal() -> None:
    tm = in_transaction()
    result, commit = offset_commit(tm)
    tm.handle_response(commit, commit_answer(GroupAuthorizationFailedError.code), None, NOW)
    assert isinstance(result.error, GroupAuthorizationFailedError) and tm.state is State.ABORTABLE_ERROR
    tm = in_transaction()
    result, commit = offset_commit(tm)
    tm.handle_response(commit, commit_answer(ProducerFencedError.code), None, NOW)
    assert tm.state is State.FATAL_ERROR and isinstance(result.error, ProducerFencedError)


@pytest.mark.parametrize(("error", "state"), [
    *((e, State.ABORTABLE_ERROR) for e in (GroupAuthorizationFailedError, FencedInstanceIdError,
                                           TransactionAbortableError, UnknownMemberIdError, IllegalGenerationError,
                                           GroupIdNotFoundError, StaleMemberEpochError)),
    *((e, State.FATAL_ERROR) for e in (TransactionalIdAuthorizationFailedError, UnsupportedForMessageFormatError,
                                       InvalidTxnStateError, InvalidProducerEpochError)),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_txn_offset_commit_errors_are_classified_as_java_does(error: type[KafkaError], state: State) -> None:
    # Java 4.4's TxnOffsetCommitHandler: the group's refusals leave the transaction abortable, anything it does
    # not expect is fatal.
    tm = in_transaction()
    result, commit = offset_commit(tm)
    tm.handle_response(commit, commit_answer(error.code), None, NOW)  # type: ignore[attr-defined]
    assert tm.state is state and result.is_done and result.error is not None


def test_a_group_coordinator_that_cannot_be_found_makes_the_transaction_abortable() -> None:
    tm = in_transaction()
    result, req = send_offsets_then_add(tm)
    answer(tm, req, error_code=0)
    answer(tm, next_req(tm), error_code=GroupAuthorizationFailedError.code)
    assert tm.state is State.ABORTABLE_ERROR


@pytest.mark.parametrize("error", [*MOVED, *BUSY])
def test_end_txn_busy_or_moved_is_retried_and_then_completes(error: type[KafkaError]) -> None:
    tm = in_transaction(("t", 0))
    result = tm.begin_commit()
    answer(tm, next_req(tm), error_code=error.code)  # type: ignore[attr-defined]
    assert not result.is_done
    req = next_req(tm, now=NOW + 100)
    if req.api == ApiKey.FIND_COORDINATOR:
        answer(tm, req, now=NOW + 100, error_code=0, node_id=1, host="h", port=9092)
        req = next_req(tm, now=NOW + 100)
    assert req.api == ApiKey.END_TXN
    answer(tm, req, now=NOW + 100, error_code=0)
    assert result.is_done and result.error is None and tm.state is State.READY


def test_end_txn_abort_with_a_lost_producer_id_completes_and_bumps_the_epoch() -> None:
    tm = in_transaction(("t", 0))
    result = tm.begin_abort()
    answer(tm, next_req(tm), error_code=UnknownProducerIdError.code)
    assert tm.state is State.INITIALIZING  # the next epoch first (KIP-360)
    req = next_req(tm)
    assert req.api == ApiKey.INIT_PRODUCER_ID and (req.build()["producer_id"], req.build()["producer_epoch"]) == (7, 0)
    answer(tm, req, error_code=0, producer_id=7, producer_epoch=1)
    assert result.is_done and result.error is None and tm.state is State.READY


def test_end_txn_commit_with_a_lost_producer_id_is_fatal() -> None:
    tm = in_transaction(("t", 0))
    result = tm.begin_commit()
    answer(tm, next_req(tm), error_code=UnknownProducerIdError.code)
    assert tm.state is State.FATAL_ERROR and isinstance(result.error, UnknownProducerIdError)


def test_end_txn_carries_the_producer_id_and_epoch() -> None:
    tm = in_transaction(("t", 0))
    tm.begin_abort()
    assert next_req(tm).build() == {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 0,
                                    "committed": False}


def test_batch_failures_are_classified() -> None:
    tm = in_transaction(("t", 0))
    tm.on_batch_failed(TransactionAbortedError("ours"))
    assert tm.state is State.IN_TRANSACTION  # our own abort's echo changes nothing
    tm.on_batch_failed(InvalidProducerEpochError("t-0"))
    assert tm.state is State.FATAL_ERROR and isinstance(tm.last_error, ProducerFencedError)
    tm = initialized()
    tm.on_batch_failed(TopicAuthorizationFailedError("t-0"))  # outside a transaction: nothing to abort
    assert tm.state is State.READY


def test_an_abortable_error_while_aborting_does_not_stop_the_abort() -> None:
    tm = in_transaction(("t", 0))
    result = tm.begin_abort()
    tm.on_batch_failed(TopicAuthorizationFailedError("t-0"))
    assert tm.state is State.ABORTING
    answer(tm, next_req(tm), error_code=0)
    assert result.is_done and result.error is None and tm.state is State.READY


def test_state_changes_are_reported_and_invalid_transitions_refused() -> None:
    tm = manager()
    seen: list[State] = []
    tm.on_state = seen.append
    tm.initialize()
    find_coordinator(tm)
    answer(tm, next_req(tm), error_code=0, producer_id=1, producer_epoch=0)
    tm.begin()
    assert seen == [State.INITIALIZING, State.READY, State.IN_TRANSACTION]
    with pytest.raises(IllegalStateError, match="invalid transition attempted from state .* to state"):
        tm._transition(State.INITIALIZING)


def test_send_refusal_names_the_error_and_what_to_do() -> None:
    tm = in_transaction(("t", 0))
    tm.on_batch_failed(TopicAuthorizationFailedError("t-0 denied"))
    err = tm.send_refusal()
    assert "Cannot perform send because at least one previous transactional or idempotent request has failed" \
        in str(err) and "t-0 denied" in str(err) and "Call abort_transaction()" in str(err)
    assert isinstance(err.__cause__, TopicAuthorizationFailedError)
    tm.fatal(ProducerFencedError("fenced"))
    assert "The producer can only be closed" in str(tm.send_refusal())
    ready = initialized()
    assert "call begin_transaction() first" in str(ready.send_refusal())
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        ready.send_offsets({("in", 0): (1, None)}, "g")
