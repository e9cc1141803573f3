"""The idempotence manager's numbers: sequences per partition that wrap as Kafka's do, epochs bumped locally."""

from __future__ import annotations

from dataclasses import dataclass

from kafkajet.producer.idempotence import MAX_EPOCH, IdempotenceManager


@dataclass
class FakeBatch:
    """What the manager reads of a batch: its partition, record count and (once assigned) first sequence."""

    tp: tuple[str, int]
    count: int
    base_sequence: int = -1
    producer_epoch: int = -1

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
    idem._next_sequence[("t", 0)] = 2**31 - 2
    assert idem.assign(FakeBatch(("t", 0), 3)) == 2**31 - 2  # type: ignore[arg-type]
    # records at 2^31-2, 2^31-1, then 0
    assert idem.next_sequence(("t", 0)) == 1
    idem._next_sequence[("t", 0)] = 2**31 - 1
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
