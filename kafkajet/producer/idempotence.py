"""Producer id, epoch and per-partition sequence numbers (the idempotent half of Java's TransactionManager).

Only the sender thread touches this object, so it needs no lock.
"""

from __future__ import annotations

import logging
from collections import deque
from enum import IntEnum

from kafkajet.cluster import TopicPartitionKey
from kafkajet.errors import (
    BrokerError,
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
)
from kafkajet.producer.batch import ProducerBatch

log = logging.getLogger("kafkajet.producer.idempotence")

MAX_SEQUENCE = 2**31 - 1
MAX_EPOCH = 2**15 - 1  # the epoch is an int16: past it only a new producer id helps
MAX_IN_FLIGHT = 5  # batches of one partition the broker keeps sequence state for (Java's limit)

# The broker's answers that speak of the producer's identity or sequence numbers.
_SEQUENCE_CODES = (OutOfOrderSequenceNumberError.code, UnknownProducerIdError.code, InvalidProducerEpochError.code)
_FENCED_CODES = (ProducerFencedError.code, InvalidProducerEpochError.code)


class Verdict(IntEnum):
    """What becomes of a batch the broker refused, as far as its sequence numbers decide (the end of Java's
    Sender.canRetry, transactionManager.canRetry)."""

    NOT_SEQUENCE = 0  # not about sequences: the sender's rules for retriable errors decide
    RETRY_IN_ORDER = 1  # an earlier batch of the partition is unresolved: this one is retried behind it
    BUMP_AND_RETRY = 2  # the broker lost the producer's state: retried under a new epoch (requested here)
    FAIL = 3  # the batch fails (the sender closes the gap it leaves with an epoch bump)


class IdempotenceManager:
    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self._next_sequence: dict[TopicPartitionKey, int] = {}
        self._in_flight: dict[TopicPartitionKey, deque[ProducerBatch]] = {}
        self._last_acked: dict[TopicPartitionKey, int] = {}
        self.bump_requested = False
        self.bump_reason = ""
        self.init_in_progress = False
        self.fatal_error: KafkaError | None = None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0 and not self.bump_requested

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        if producer_id != self.producer_id or epoch != self.producer_epoch:
            log.info("producer id %d epoch %d (was %d/%d)", producer_id, epoch, self.producer_id, self.producer_epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        # A new epoch starts every partition's sequence at 0 (KIP-360).
        self._next_sequence.clear()
        self._last_acked.clear()
        self.bump_requested = False

    def request_epoch_bump(self, reason: str) -> None:
        if not self.bump_requested:
            log.warning("bumping the producer epoch: %s", reason)
        self.bump_requested = True
        self.bump_reason = reason

    def bump_epoch(self) -> bool:
        """Apply a requested bump locally, as Java's bumpIdempotentProducerEpoch does for a producer without
        transactional.id: same id, epoch + 1, sequences from 0. The broker accepts the higher epoch on the next
        Produce (KIP-360), so no InitProducerId is needed. Returns False when the epoch is exhausted: the id is
        then dropped and the caller must ask for a new one."""
        if self.producer_id < 0 or self.producer_epoch >= MAX_EPOCH:
            log.info("producer id %d epoch %d cannot be bumped: asking for a new producer id",
                     self.producer_id, self.producer_epoch)
            self.set_producer_id(-1, -1)
            return False
        self.set_producer_id(self.producer_id, self.producer_epoch + 1)
        return True

    def can_bump_now(self) -> bool:
        """An epoch bump renumbers everything, so no batch may still be in flight under the old epoch."""
        return not any(self._in_flight.values())

    # --- sequences --------------------------------------------------------------------------------

    def next_sequence(self, tp: TopicPartitionKey) -> int:
        return self._next_sequence.get(tp, 0)

    def assign(self, batch: ProducerBatch) -> int:
        seq = self._next_sequence.get(batch.tp, 0)
        self._next_sequence[batch.tp] = (seq + batch.count) % (MAX_SEQUENCE + 1)
        return seq

    def first_in_flight_sequence(self, tp: TopicPartitionKey) -> int | None:
        q = self._in_flight.get(tp)
        return q[0].base_sequence if q else None

    def add_in_flight(self, batch: ProducerBatch) -> None:
        q = self._in_flight.setdefault(batch.tp, deque())
        # Retried batches re-enter in sequence order so the head is always the oldest unresolved one.
        if q and q[-1].base_sequence > batch.base_sequence:
            items = sorted([*q, batch], key=lambda b: b.base_sequence)
            q.clear()
            q.extend(items)
        else:
            q.append(batch)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        q = self._in_flight.get(batch.tp)
        if q is not None:
            try:
                q.remove(batch)
            except ValueError:
                pass

    def acknowledged(self, batch: ProducerBatch) -> None:
        if batch.has_sequence and batch.producer_epoch == self.producer_epoch:
            self._last_acked[batch.tp] = batch.base_sequence + batch.count - 1

    def verdict(self, batch: ProducerBatch, error: BrokerError, transactional: bool) -> Verdict:
        """Whether a batch the broker refused with `error` is retried (behind an unresolved batch, or under a
        new epoch, whose bump this requests) or fails; NOT_SEQUENCE for the errors sequences have no say in."""
        code = error.code
        if transactional and code in _FENCED_CODES:
            # A transactional producer whose epoch is refused has been fenced by a newer instance (Java).
            return Verdict.FAIL
        if code not in _SEQUENCE_CODES:
            return Verdict.NOT_SEQUENCE
        if self.bump_requested or not self.is_next_expected(batch):
            # An earlier batch of this partition is unresolved; this one follows it in order.
            return Verdict.RETRY_IN_ORDER
        self.request_epoch_bump(f"{error.name} on {batch.topic}-{batch.partition}")
        if code == UnknownProducerIdError.code:
            # The broker forgot us (retention); nothing of this batch was appended: renumber and retry.
            return Verdict.BUMP_AND_RETRY
        return Verdict.FAIL

    def batch_split(self, batch: ProducerBatch, error: BrokerError) -> None:
        """A batch refused as too large is split: its parts are numbered afresh under a new epoch, ahead of the
        batches sent behind it (which the broker refuses as out of order, and which are retried in order)."""
        self.remove_in_flight(batch)
        self.request_epoch_bump(f"batch for {batch.topic}-{batch.partition} split after {error.name}")

    def is_next_expected(self, batch: ProducerBatch) -> bool:
        """Whether the broker should accept this batch next: every earlier sequence was acknowledged.

        A sequence error on a batch that is not next only means an earlier batch is still unresolved
        (being retried), so it is retried after it: Java's lastAckedSequence rule.
        """
        return batch.base_sequence == self._last_acked.get(batch.tp, -1) + 1

    def is_first_in_flight(self, batch: ProducerBatch) -> bool:
        q = self._in_flight.get(batch.tp)
        return bool(q) and q[0] is batch  # type: ignore[index]

    def may_pipeline(self, tp: TopicPartitionKey) -> bool:
        """Whether a new batch of `tp` may go while others of it are in flight: up to MAX_IN_FLIGHT, and only
        once the broker acknowledged a sequence of this partition under the current producer id and epoch.

        Until then the broker may hold no state for this producer on the partition, and Apache Kafka takes a
        batch whose first sequence is not 0 from such a producer as a new start (KIP-360): were the first batch
        refused (NOT_LEADER_OR_FOLLOWER from a leader not yet ready on a topic just created, MESSAGE_TOO_LARGE
        before a split), the batches pipelined behind it would be appended ahead of it, and every retry of it
        then refused as out of order until delivery.timeout.ms. Costs one round trip per partition and epoch.
        """
        n = self.in_flight_count(tp)
        return n == 0 or (n < MAX_IN_FLIGHT and tp in self._last_acked)

    def in_flight_count(self, tp: TopicPartitionKey) -> int:
        q = self._in_flight.get(tp)
        return len(q) if q else 0
