"""What the transaction API raises, sorted by Java's KIP-1050 categories: one `except` per recovery action.

- fenced (ProducerFencedError, InvalidProducerEpochError) and a commit whose outcome only a new producer can
  learn: ApplicationRecoverableError, close and create a new producer;
- a transaction that cannot commit (a failed record, TRANSACTION_ABORTABLE, a request given up on):
  TransactionAbortableError, abort and go on;
- send() refused in either state stays an IllegalStateError, and is of the category too.

TRANSACTION_ABORTABLE on EndTxn as Java 4.4's EndTxnHandler: abortable for a commit, fatal for an abort.
No I/O and no clock, as the rest of the manager's unit tests.
"""

from __future__ import annotations

import pytest

from kafkajet.errors import (
    ApplicationRecoverableError,
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaConnectionError,
    KafkaError,
    MessageTooLargeError,
    ProducerFencedError,
    TransactionAbortableError,
)
from kafkajet.producer.transactions import State
from kafkajet.protocol import ApiKey
from tests.unit.test_transaction_bounds import (
    BACKOFF_MS,
    T0,
    TIMEOUT_MS,
    answer_until,
    in_transaction,
    next_of,
)


def test_a_failed_record_makes_commit_send_and_offsets_raise_the_abortable_category() -> None:
    tm = in_transaction()
    commit = tm.begin_commit()
    cause = MessageTooLargeError("t-0")
    tm.on_batch_failed(cause)
    assert tm.state is State.ABORTABLE_ERROR
    assert isinstance(commit.error, TransactionAbortableError) and commit.error.__cause__ is cause
    with pytest.raises(TransactionAbortableError, match="abort_transaction") as again:
        tm.begin_commit()
    assert again.value.__cause__ is cause
    with pytest.raises(TransactionAbortableError):
        tm.send_offsets({("in", 0): (1, None)}, "g")
    refusal = tm.send_refusal()
    assert isinstance(refusal, IllegalStateError) and isinstance(refusal, TransactionAbortableError)
    assert not isinstance(refusal, ApplicationRecoverableError)
    abort = tm.begin_abort()
    answer_until(tm, ApiKey.END_TXN, T0, error_code=0)
    assert abort.is_done and abort.error is None and tm.state is State.READY


@pytest.mark.parametrize("code", [ProducerFencedError.code, InvalidProducerEpochError.code])
def test_fencing_raises_the_application_recoverable_category_everywhere(code: int) -> None:
    tm = in_transaction()
    commit = tm.begin_commit()
    answer_until(tm, ApiKey.END_TXN, T0, error_code=code)
    assert tm.state is State.FATAL_ERROR
    assert isinstance(commit.error, ProducerFencedError) and isinstance(commit.error, ApplicationRecoverableError)
    for call in (tm.begin, tm.begin_commit, tm.begin_abort):
        with pytest.raises(ApplicationRecoverableError):
            call()
    refusal = tm.send_refusal()
    assert isinstance(refusal, IllegalStateError) and isinstance(refusal, ApplicationRecoverableError)
    assert not isinstance(refusal, TransactionAbortableError) and "can only be closed" in str(refusal)


def test_transaction_abortable_on_a_commit_makes_the_transaction_abortable_and_the_abort_works() -> None:
    tm = in_transaction()
    commit = tm.begin_commit()
    answer_until(tm, ApiKey.END_TXN, T0, error_code=TransactionAbortableError.code)
    assert tm.state is State.ABORTABLE_ERROR
    assert isinstance(commit.error, TransactionAbortableError)
    assert isinstance(commit.error.__cause__, TransactionAbortableError)  # the coordinator's own answer
    abort = tm.begin_abort()
    req = next_of(tm, T0 + 1)
    assert req.api == ApiKey.END_TXN and req.build()["committed"] is False
    tm.handle_response(req, {"error_code": 0}, None, T0 + 1)
    assert abort.is_done and abort.error is None and tm.state is State.READY
    tm.begin()  # the producer lives


def test_transaction_abortable_on_an_abort_is_fatal_as_in_java() -> None:
    tm = in_transaction()
    tm.on_batch_failed(MessageTooLargeError("t-0"))
    abort = tm.begin_abort()
    answer_until(tm, ApiKey.END_TXN, T0, error_code=TransactionAbortableError.code)
    assert tm.state is State.FATAL_ERROR
    assert isinstance(abort.error, KafkaError) and "Failed to abort transaction" in str(abort.error)
    assert isinstance(abort.error.__cause__, TransactionAbortableError)


def test_requests_given_up_on_are_abortable_and_an_unknown_commit_outcome_application_recoverable() -> None:
    tm = in_transaction()
    offsets = tm.send_offsets({("in", 0): (5, None)}, "g")
    now = T0
    while now < T0 + TIMEOUT_MS:
        req = next_of(tm, now)
        tm.handle_response(req, None, KafkaConnectionError("closed"), now)
        now += BACKOFF_MS
    tm.next_request(False, now)
    assert isinstance(offsets.error, TransactionAbortableError) and tm.state is State.ABORTABLE_ERROR

    tm = in_transaction()
    commit = tm.begin_commit()
    now = T0
    while now < T0 + TIMEOUT_MS:
        req = next_of(tm, now)
        tm.handle_response(req, None, KafkaConnectionError("closed"), now)
        now += BACKOFF_MS
    tm.next_request(False, now)
    assert tm.state is State.FATAL_ERROR
    assert isinstance(commit.error, ApplicationRecoverableError) and "can only be closed" in str(commit.error)


