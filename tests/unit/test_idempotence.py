"""The idempotence manager's numbers: sequences per partition that wrap as Kafka's do, epochs bumped locally."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kafkajet.errors import (
    BrokerError,
    InvalidProducerEpochError,
    InvalidRecordError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
)
from kafkajet.producer.idempotence import MAX_EPOCH, IdempotenceManager, Verdict


@dataclass
class FakeBatch:
    """What the manager reads of a batch: its partition, record count and (once assigned) first sequence."""

    tp: tuple[str, int]
    count: int
    base_sequence: int = -1
    producer_epoch: int = -1
    in_flight: bool = True  # on the wire (a retry waiting in its deque is not)

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence >= 0


def test_sequences_count_records_per_partition() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    assert idem.assign(FakeBatch(("t", 0), 3)) == 0  # type: ignore[arg-type]
    assert idem.assign(FakeBatch(("t", 0), 2)) == 3  # type: ignore[arg-type]
    assert idem.assign(FakeBatch(("t", 1), 5)) == 0  # type: ignore[arg-type]
    assert idem.next_sequence(("t", 0)) == 5 and idem.next_sequence(("t", 1)) == 5


def test_the_sequence_wraps_after_2_to_the_31_minus_1_to_zero() -> None:
    # Kafka's DefaultRecordBatch.incrementSequence: (sequence + increment) wraps past Integer.MAX_VALUE to 0.
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    idem._partition(("t", 0)).next_sequence = 2**31 - 2
    assert idem.assign(FakeBatch(("t", 0), 3)) == 2**31 - 2  # type: ignore[arg-type]
    # records at 2^31-2, 2^31-1, then 0
    assert idem.next_sequence(("t", 0)) == 1
    idem._partition(("t", 0)).next_sequence = 2**31 - 1
    idem.assign(FakeBatch(("t", 0), 1))  # type: ignore[arg-type]
    assert idem.next_sequence(("t", 0)) == 0


def test_a_local_bump_keeps_the_id_and_starts_sequences_again() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 4)
    idem.assign(FakeBatch(("t", 0), 10))  # type: ignore[arg-type]
    idem.request_epoch_bump("a batch failed")
    assert not idem.has_producer_id and idem.can_bump_now()
    assert idem.bump_epoch()
    assert (idem.producer_id, idem.producer_epoch, idem.has_producer_id) == (7, 5, True)
    assert idem.next_sequence(("t", 0)) == 0


def test_an_exhausted_epoch_drops_the_id_so_a_new_one_is_asked_for() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, MAX_EPOCH)
    idem.request_epoch_bump("a batch failed")
    assert not idem.bump_epoch()
    assert (idem.producer_id, idem.producer_epoch, idem.has_producer_id) == (-1, -1, False)


def test_no_bump_while_a_batch_of_the_old_epoch_is_in_flight() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    b = FakeBatch(("t", 0), 1)
    b.base_sequence = idem.assign(b)  # type: ignore[arg-type]
    idem.add_in_flight(b)  # type: ignore[arg-type]
    idem.request_epoch_bump("another batch failed")
    assert not idem.can_bump_now()
    idem.remove_in_flight(b)  # type: ignore[arg-type]
    assert idem.can_bump_now()


def _sent(idem: IdempotenceManager, tp: tuple[str, int], count: int) -> FakeBatch:
    b = FakeBatch(tp, count, producer_epoch=idem.producer_epoch)
    b.base_sequence = idem.assign(b)  # type: ignore[arg-type]
    idem.add_in_flight(b)  # type: ignore[arg-type]
    return b


def test_a_new_manager_has_no_producer_id_and_asks_for_one() -> None:
    idem = IdempotenceManager()
    assert (idem.producer_id, idem.producer_epoch, idem.has_producer_id) == (-1, -1, False)
    assert not idem.bump_requested and not idem.init_in_progress and idem.fatal_error is None
    # Without an id there is nothing to bump: the caller must send InitProducerId.
    assert not idem.bump_epoch()


def test_producer_id_zero_is_a_real_id_that_can_be_bumped() -> None:
    # Kafka hands out producer id 0 (the first id of a fresh cluster); only -1 means "none".
    idem = IdempotenceManager()
    idem.set_producer_id(0, 0)
    assert idem.has_producer_id
    idem.request_epoch_bump("expired batch")
    assert idem.bump_epoch() and (idem.producer_id, idem.producer_epoch) == (0, 1)


def test_a_bump_request_remembers_the_latest_reason_until_a_new_id_arrives() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    idem.request_epoch_bump("first")
    idem.request_epoch_bump("second")
    assert idem.bump_requested and idem.bump_reason == "second"
    idem.set_producer_id(8, 0)
    assert not idem.bump_requested and idem.has_producer_id


def test_a_new_id_or_epoch_restarts_sequences_and_forgets_acks() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    b = _sent(idem, ("t", 0), 4)
    idem.remove_in_flight(b)  # type: ignore[arg-type]
    idem.acknowledged(b)  # type: ignore[arg-type]
    idem.set_producer_id(7, 1)
    assert idem.next_sequence(("t", 0)) == 0
    assert idem.is_next_expected(FakeBatch(("t", 0), 1, base_sequence=0))  # type: ignore[arg-type]


def test_in_flight_batches_are_kept_oldest_sequence_first_even_when_a_retry_re_enters() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    tp = ("t", 0)
    first, second, third = _sent(idem, tp, 2), _sent(idem, tp, 3), _sent(idem, tp, 1)
    assert (first.base_sequence, second.base_sequence, third.base_sequence) == (0, 2, 5)
    assert idem.in_flight_count(tp) == 3 and idem.first_in_flight_sequence(tp) == 0
    assert idem.is_first_in_flight(first) and not idem.is_first_in_flight(second)  # type: ignore[arg-type]
    # The first batch fails and is retried: it leaves and re-enters behind younger batches.
    idem.remove_in_flight(first)  # type: ignore[arg-type]
    assert idem.first_in_flight_sequence(tp) == 2 and idem.is_first_in_flight(second)  # type: ignore[arg-type]
    idem.add_in_flight(first)  # type: ignore[arg-type]
    assert [b.base_sequence for b in idem._partition(tp).in_flight] == [0, 2, 5]
    assert idem.is_first_in_flight(first) and idem.first_in_flight_sequence(tp) == 0  # type: ignore[arg-type]
    # Removing a batch twice, or one never added, changes nothing.
    idem.remove_in_flight(FakeBatch(tp, 1, base_sequence=99))  # type: ignore[arg-type]
    idem.remove_in_flight(FakeBatch(("other", 0), 1, base_sequence=0))  # type: ignore[arg-type]
    assert idem.in_flight_count(tp) == 3 and idem.in_flight_count(("other", 0)) == 0
    assert idem.first_in_flight_sequence(("other", 0)) is None
    assert not idem.is_first_in_flight(FakeBatch(("other", 0), 1))  # type: ignore[arg-type]


def test_in_flight_queues_are_per_partition() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    a, b = _sent(idem, ("t", 0), 2), _sent(idem, ("t", 1), 2)
    assert idem.is_first_in_flight(a) and idem.is_first_in_flight(b)  # type: ignore[arg-type]
    assert idem.in_flight_count(("t", 0)) == 1 and idem.in_flight_count(("t", 1)) == 1


def test_only_the_batch_after_the_last_acknowledged_sequence_is_next() -> None:
    # Java's lastAckedSequence rule: a sequence error on any other batch means an earlier one is unresolved.
    idem = IdempotenceManager()
    idem.set_producer_id(7, 3)
    tp = ("t", 0)
    first, second, third = _sent(idem, tp, 2), _sent(idem, tp, 3), _sent(idem, tp, 1)
    assert idem.is_next_expected(first) and not idem.is_next_expected(second)  # type: ignore[arg-type]
    idem.acknowledged(first)  # type: ignore[arg-type]
    assert idem.is_next_expected(second) and not idem.is_next_expected(third)  # type: ignore[arg-type]
    assert not idem.is_next_expected(first)  # type: ignore[arg-type]
    idem.acknowledged(second)  # type: ignore[arg-type]
    assert idem.is_next_expected(third)  # type: ignore[arg-type]
    # Another partition has acknowledged nothing.
    assert idem.is_next_expected(FakeBatch(("t", 1), 1, base_sequence=0))  # type: ignore[arg-type]
    assert not idem.is_next_expected(FakeBatch(("t", 1), 1, base_sequence=1))  # type: ignore[arg-type]


def test_an_acknowledgement_from_an_old_epoch_or_of_an_unsequenced_batch_is_ignored() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 3)
    tp = ("t", 0)
    idem.acknowledged(FakeBatch(tp, 5, base_sequence=0, producer_epoch=2))  # type: ignore[arg-type]
    idem.acknowledged(FakeBatch(tp, 5, base_sequence=-1, producer_epoch=3))  # type: ignore[arg-type]
    assert idem.is_next_expected(FakeBatch(tp, 1, base_sequence=0))  # type: ignore[arg-type]


def test_changes_of_identity_are_logged_for_the_operator(caplog) -> None:  # type: ignore[no-untyped-def]
    idem = IdempotenceManager()
    with caplog.at_level("INFO", logger="kafkajet.producer.idempotence"):
        idem.set_producer_id(7, 0)
        idem.set_producer_id(7, 0)  # unchanged: no second line
        idem.request_epoch_bump("batch expired")
        idem.request_epoch_bump("batch expired again")  # already requested: no second warning
        idem.set_producer_id(idem.producer_id, MAX_EPOCH)
        idem.request_epoch_bump("x")
        idem.bump_epoch()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        ("INFO", "producer id 7 epoch 0 (was -1/-1)"),
        ("WARNING", "bumping the producer epoch: batch expired"),
        ("INFO", f"producer id 7 epoch {MAX_EPOCH} (was 7/0)"),
        ("WARNING", "bumping the producer epoch: x"),
        ("INFO", f"producer id 7 epoch {MAX_EPOCH} cannot be bumped: asking for a new producer id"),
        ("INFO", f"producer id -1 epoch -1 (was 7/{MAX_EPOCH})"),
    ]


# --- the verdict on a refused batch (Java's TransactionManager.canRetry) --------------------------------------


@dataclass
class RefusedBatch(FakeBatch):
    topic: str = "t"
    partition: int = 0


def acknowledged_up_to(last: int) -> IdempotenceManager:
    """A manager whose partition t-0 has sequences 0..last acknowledged."""
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    sent = RefusedBatch(("t", 0), last + 1, producer_epoch=0)
    sent.base_sequence = idem.assign(sent)  # type: ignore[arg-type]
    idem.acknowledged(sent)  # type: ignore[arg-type]
    return idem


def refused(idem: IdempotenceManager, base_sequence: int, error: BrokerError, transactional: bool = False) -> Verdict:
    return idem.verdict(RefusedBatch(("t", 0), 2, base_sequence=base_sequence, producer_epoch=0),  # type: ignore[arg-type]
                        error, transactional)


@pytest.mark.parametrize("error", [NotLeaderOrFollowerError(), MessageTooLargeError(), InvalidRecordError(),
                                   ProducerFencedError()])
def test_errors_that_are_not_about_sequences_are_left_to_the_sender(error: BrokerError) -> None:
    idem = acknowledged_up_to(4)
    assert refused(idem, 5, error) is Verdict.NOT_SEQUENCE
    assert not idem.bump_requested


def test_out_of_order_for_the_next_expected_batch_fails_it_and_requests_a_bump() -> None:
    idem = acknowledged_up_to(4)
    assert refused(idem, 5, OutOfOrderSequenceNumberError()) is Verdict.FAIL
    assert idem.bump_requested and idem.bump_reason == "OUT_OF_ORDER_SEQUENCE_NUMBER on t-0"


@pytest.mark.parametrize("error", [OutOfOrderSequenceNumberError(), UnknownProducerIdError(),
                                   InvalidProducerEpochError()])
def test_a_sequence_error_behind_an_unresolved_batch_is_retried_in_order_without_a_bump(error: BrokerError) -> None:
    idem = acknowledged_up_to(4)
    assert refused(idem, 7, error) is Verdict.RETRY_IN_ORDER  # sequences 5 and 6 are still unresolved
    assert not idem.bump_requested


def test_once_a_bump_is_requested_every_sequence_error_waits_for_it() -> None:
    idem = acknowledged_up_to(4)
    idem.request_epoch_bump("an earlier batch failed")
    assert refused(idem, 5, OutOfOrderSequenceNumberError()) is Verdict.RETRY_IN_ORDER
    assert idem.bump_reason == "an earlier batch failed"


def test_unknown_producer_id_for_the_next_expected_batch_retries_it_under_a_new_epoch() -> None:
    idem = acknowledged_up_to(4)
    assert refused(idem, 5, UnknownProducerIdError()) is Verdict.BUMP_AND_RETRY
    assert idem.bump_requested and idem.bump_reason == "UNKNOWN_PRODUCER_ID on t-0"


def test_invalid_epoch_for_the_next_expected_idempotent_batch_fails_it_and_requests_a_bump() -> None:
    idem = acknowledged_up_to(4)
    assert refused(idem, 5, InvalidProducerEpochError()) is Verdict.FAIL
    assert idem.bump_requested


@pytest.mark.parametrize("error", [ProducerFencedError(), InvalidProducerEpochError()])
def test_a_transactional_producer_whose_epoch_is_refused_is_fenced_whatever_the_sequence(error: BrokerError) -> None:
    idem = acknowledged_up_to(4)
    assert refused(idem, 9, error, transactional=True) is Verdict.FAIL
    assert not idem.bump_requested  # fenced: no new epoch of its own can help


def test_the_first_batch_of_a_partition_is_the_next_expected() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    assert refused(idem, 0, OutOfOrderSequenceNumberError()) is Verdict.FAIL
    idem.set_producer_id(7, 1)
    assert refused(idem, 2, OutOfOrderSequenceNumberError()) is Verdict.RETRY_IN_ORDER


def test_a_split_batch_leaves_the_in_flight_list_and_asks_for_a_new_epoch() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    batch = RefusedBatch(("t", 0), 4, base_sequence=0)
    idem.add_in_flight(batch)  # type: ignore[arg-type]
    idem.batch_split(batch, MessageTooLargeError())  # type: ignore[arg-type]
    assert idem.in_flight_count(("t", 0)) == 0
    assert idem.bump_requested and idem.bump_reason == "batch for t-0 split after MESSAGE_TOO_LARGE"


def test_a_late_duplicate_answer_does_not_move_the_acknowledged_sequence_back() -> None:
    # A retried batch answered (as a duplicate) after the batch behind it: Java's maybeUpdateLastAckedSequence.
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    tp = ("t", 0)
    first, second = _sent(idem, tp, 2), _sent(idem, tp, 3)
    idem.acknowledged(second)  # type: ignore[arg-type]
    idem.acknowledged(first)  # type: ignore[arg-type]
    assert idem.is_next_expected(FakeBatch(tp, 1, base_sequence=5))  # type: ignore[arg-type]
    # Across the wrap at 2^31 the mark still only goes forward.
    idem._partition(tp).last_acked = 2**31 - 2
    idem.acknowledged(FakeBatch(tp, 3, base_sequence=2**31 - 1, producer_epoch=0))  # type: ignore[arg-type]
    assert idem.is_next_expected(FakeBatch(tp, 1, base_sequence=2))  # type: ignore[arg-type]
    idem.acknowledged(FakeBatch(tp, 1, base_sequence=2**31 - 3, producer_epoch=0))  # type: ignore[arg-type]
    assert idem.is_next_expected(FakeBatch(tp, 1, base_sequence=2))  # type: ignore[arg-type]
