"""Idempotent-producer checks as a Kafka broker makes them, per partition.

Kafka keeps, per producer id and partition, the current epoch and the sequence/offset ranges of the last five
batches (ProducerStateManager). A batch repeating one of those ranges is a retry of something already written:
it is answered with the original offsets and not written again. Anything else must continue the sequence.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: also why producers cap in-flight batches at 5.
BATCHES_RETAINED = 5
_SEQ_MODULUS = 1 << 31


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap from 2**31 - 1 to 0."""
    return (base_sequence + last_offset_delta) % _SEQ_MODULUS


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == (last_seq + 1) % _SEQ_MODULUS


@dataclass(frozen=True, slots=True)
class BatchSequence:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """error is None to append; duplicate_of is set when the batch is a retry of one already stored."""

    error: str | None = None
    duplicate_of: BatchSequence | None = None
    message: str | None = None


_ACCEPT = Verdict()


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    batches: deque[BatchSequence]


class SequenceChecker:
    """One partition's producer state. Not thread-safe: the cluster's lock guards it.

    duplicate_error: None answers a retried batch with no error and its original offsets (Apache Kafka);
        "DUPLICATE_SEQUENCE_NUMBER" answers that error instead, with base offset -1 (what Tansu does).
    stale_epoch_error: Kafka answers INVALID_PRODUCER_EPOCH to a Produce with an older epoch (since 2.7 it
        reserves PRODUCER_FENCED for the transaction coordinator); "PRODUCER_FENCED" is accepted to mimic others.
    unknown_producer_error: what a producer id this partition never saw gets when it does not start at
        sequence 0. Kafka before 2.5 answered UNKNOWN_PRODUCER_ID; newer ones accept it (None).
    """

    def __init__(self, *, duplicate_error: str | None = None, stale_epoch_error: str = "INVALID_PRODUCER_EPOCH",
                 unknown_producer_error: str | None = "UNKNOWN_PRODUCER_ID") -> None:
        self.duplicate_error = duplicate_error
        self.stale_epoch_error = stale_epoch_error
        self.unknown_producer_error = unknown_producer_error
        self._producers: dict[int, _ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Verdict:
        if producer_id < 0:
            return _ACCEPT
        entry = self._producers.get(producer_id)
        if entry is None:
            if first_seq != 0 and self.unknown_producer_error is not None:
                return Verdict(self.unknown_producer_error,
                               message=f"producer {producer_id} is unknown here and starts at sequence {first_seq}")
            return _ACCEPT
        if epoch == entry.epoch:
            # Duplicates are looked for before anything else, as Kafka does, so a retry is never an error.
            for stored in entry.batches:
                if stored.first_seq == first_seq and stored.last_seq == last_seq:
                    return Verdict(self.duplicate_error, duplicate_of=stored)
        if epoch < entry.epoch:
            return Verdict(self.stale_epoch_error,
                           message=f"producer {producer_id} epoch {epoch} is older than the current {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                return Verdict("OUT_OF_ORDER_SEQUENCE_NUMBER",
                               message=f"producer {producer_id} new epoch {epoch} starts at sequence {first_seq}, not 0")
            return _ACCEPT
        # No batch yet at this epoch (a transaction marker set it): the producer starts again at sequence 0.
        expected_after = entry.batches[-1].last_seq if entry.batches else -1
        if not in_sequence(expected_after, first_seq):
            return Verdict("OUT_OF_ORDER_SEQUENCE_NUMBER",
                           message=f"producer {producer_id} epoch {epoch}: sequence {first_seq} does not follow "
                                   f"{expected_after}")
        return _ACCEPT

    def record(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, base_offset: int,
               last_offset: int) -> None:
        """Remember an appended batch (call only after check() accepted it)."""
        if producer_id < 0:
            return
        entry = self._producers.get(producer_id)
        if entry is None or entry.epoch != epoch:
            entry = self._producers[producer_id] = _ProducerEntry(epoch, deque(maxlen=BATCHES_RETAINED))
        entry.batches.append(BatchSequence(first_seq, last_seq, base_offset, last_offset))

    def on_marker(self, producer_id: int, epoch: int) -> None:
        """A transaction marker with this epoch was written: an older epoch is fenced from now on, and a newer
        one forgets the old batches (ProducerStateManager's appendEndTxnMarker -> maybeUpdateProducerEpoch)."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            self._producers[producer_id] = _ProducerEntry(epoch, deque(maxlen=BATCHES_RETAINED))
