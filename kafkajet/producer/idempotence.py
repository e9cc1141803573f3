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


class _Partition:
    """One partition's sequence state (Java's TxnPartitionEntry): the producer id and epoch its sequences run
    under, which may lag the producer's own after a bump until its batches of the old epoch are done."""

    __slots__ = ("producer_id", "epoch", "next_sequence", "last_acked", "in_flight")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.next_sequence = 0
        self.last_acked = -1
        # Drained and not yet completed or failed, retries waiting in their deque included (Java's
        # inflightBatchesBySequence): oldest sequence first, so the head is the one batch a retry may be.
        self.in_flight: deque[ProducerBatch] = deque()


class IdempotenceManager:
    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self._partitions: dict[TopicPartitionKey, _Partition] = {}
        # Partitions whose sequences start again under the next epoch (Java's partitionsToRewriteSequences);
        # None for all of them (a gap whose partition is not known, a new producer id).
        self._rewrite: set[TopicPartitionKey] | None = set()
        # Partitions with a batch that expired after it was sent: whether the broker wrote it is unknown until
        # the partition's other batches answer (Java's partitionsWithUnresolvedSequences: the next sequence).
        self._unresolved: dict[TopicPartitionKey, int] = {}
        self.bump_requested = False
        self.bump_reason = ""
        self.init_in_progress = False
        self.fatal_error: KafkaError | None = None

    @property
    def has_producer_id(self) -> bool:
        """An id to number batches with; False while a bump of every partition waits (or a new id)."""
        return self.producer_id >= 0 and not (self.bump_requested and self._rewrite is None)

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """A new identity from the broker (InitProducerId, or EndTxn v5): every partition starts at 0."""
        if producer_id != self.producer_id or epoch != self.producer_epoch:
            log.info("producer id %d epoch %d (was %d/%d)", producer_id, epoch, self.producer_id, self.producer_epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self._partitions.clear()
        self._unresolved.clear()
        self._rewrite = set()
        self.bump_requested = False

    def request_epoch_bump(self, reason: str, tp: TopicPartitionKey | None = None) -> None:
        """Ask for a new epoch under which `tp` (every partition when None) starts its sequences again. The
        other partitions finish the batches they have under the old epoch, then follow (KIP-360)."""
        if not self.bump_requested:
            log.warning("bumping the producer epoch: %s", reason)
        self.bump_requested = True
        self.bump_reason = reason
        if tp is None or self._rewrite is None:
            self._rewrite = None
        else:
            self._rewrite.add(tp)

    def partitions_to_rewrite(self) -> set[TopicPartitionKey] | None:
        """The partitions whose queued batches the coming bump renumbers (None: all)."""
        return None if self._rewrite is None else set(self._rewrite)

    def bump_epoch(self) -> bool:
        """Apply a requested bump locally, as Java's bumpIdempotentProducerEpoch does for a producer without
        transactional.id: same id, epoch + 1; the partitions asked for start again at sequence 0 now, the others
        once their batches of the old epoch are done. The broker accepts the higher epoch on the next Produce
        (KIP-360), so no InitProducerId is needed. Returns False when the epoch is exhausted: the id is then
        dropped and the caller must ask for a new one."""
        if self.producer_id < 0 or self.producer_epoch >= MAX_EPOCH:
            log.info("producer id %d epoch %d cannot be bumped: asking for a new producer id",
                     self.producer_id, self.producer_epoch)
            self.set_producer_id(-1, -1)
            return False
        rewrite = self._rewrite
        self.producer_epoch += 1
        log.info("producer id %d epoch %d (was %d/%d)", self.producer_id, self.producer_epoch, self.producer_id,
                 self.producer_epoch - 1)
        if rewrite is None:
            self._partitions.clear()
            self._unresolved.clear()
        else:
            for tp in rewrite:
                # can_bump_now() saw none of its batches on the wire: those left wait in the deque, and are
                # renumbered from 0 when next drained.
                self._partitions[tp] = _Partition(self.producer_id, self.producer_epoch)
                self._unresolved.pop(tp, None)
        self._rewrite = set()
        self.bump_requested = False
        return True

    def can_bump_now(self) -> bool:
        """The partitions a bump renumbers must have no batch on the wire: its answer would speak of numbers
        that no longer exist. The others need not wait (Java bumps per partition)."""
        if self._rewrite is None or self.producer_epoch >= MAX_EPOCH:
            parts: list[_Partition] = list(self._partitions.values())
        else:
            parts = [p for tp in self._rewrite if (p := self._partitions.get(tp)) is not None]
        return not any(b.in_flight for p in parts for b in p.in_flight)

    # --- sequences --------------------------------------------------------------------------------

    def _partition(self, tp: TopicPartitionKey) -> _Partition:
        p = self._partitions.get(tp)
        if p is None:
            p = self._partitions[tp] = _Partition(self.producer_id, self.producer_epoch)
        return p

    def next_sequence(self, tp: TopicPartitionKey) -> int:
        p = self._partitions.get(tp)
        return 0 if p is None else p.next_sequence

    def identity(self, tp: TopicPartitionKey) -> tuple[int, int]:
        """The producer id and epoch the partition's batches are numbered under (they lag after a bump)."""
        p = self._partitions.get(tp)
        return (self.producer_id, self.producer_epoch) if p is None else (p.producer_id, p.epoch)

    def may_drain(self, batch: ProducerBatch) -> bool:
        """Whether the head of a partition's deque may be sent now (Java's shouldStopDrainBatchesForPartition,
        with kafkajet's first-acknowledgement rule in may_pipeline)."""
        if not self.has_producer_id:
            return False
        tp = batch.tp
        if self._rewrite is not None and tp in self._rewrite:
            return False  # renumbered by the coming bump
        p = self._partitions.get(tp)
        if batch.has_sequence:
            # A retry goes only as the oldest unresolved batch: otherwise it could land after a later sequence.
            return p is None or not p.in_flight or p.in_flight[0].base_sequence == batch.base_sequence
        if tp in self._unresolved:
            return False  # whether an expired batch was written is not yet known
        if p is not None and p.in_flight and (p.producer_id, p.epoch) != (self.producer_id, self.producer_epoch):
            return False  # batches of the old epoch still out: the new epoch starts once they are done
        return self.may_pipeline(tp)

    def assign(self, batch: ProducerBatch) -> int:
        p = self._partition(batch.tp)
        if (p.producer_id, p.epoch) != (self.producer_id, self.producer_epoch) and not p.in_flight:
            # Its batches of the old epoch are done: the partition starts again at 0 (Java's
            # maybeUpdateProducerIdAndEpoch).
            p = self._partitions[batch.tp] = _Partition(self.producer_id, self.producer_epoch)
        seq = p.next_sequence
        p.next_sequence = (seq + batch.count) % (MAX_SEQUENCE + 1)
        return seq

    def first_in_flight_sequence(self, tp: TopicPartitionKey) -> int | None:
        p = self._partitions.get(tp)
        return p.in_flight[0].base_sequence if p is not None and p.in_flight else None

    def add_in_flight(self, batch: ProducerBatch) -> None:
        q = self._partition(batch.tp).in_flight
        if any(b is batch for b in q):
            return  # a retry: it never left
        # Batches re-numbered after a bump re-enter in sequence order so the head is always the oldest.
        if q and q[-1].base_sequence > batch.base_sequence:
            items = sorted([*q, batch], key=lambda b: b.base_sequence)
            q.clear()
            q.extend(items)
        else:
            q.append(batch)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        p = self._partitions.get(batch.tp)
        if p is not None:
            try:
                p.in_flight.remove(batch)
            except ValueError:
                pass

    def acknowledged(self, batch: ProducerBatch) -> None:
        p = self._partitions.get(batch.tp)
        if p is None or not batch.has_sequence or batch.producer_epoch != p.epoch:
            return
        last = (batch.base_sequence + batch.count - 1) % (MAX_SEQUENCE + 1)
        # Only forward (Java's maybeUpdateLastAckedSequence): a retried batch answered as a duplicate after the
        # batches behind it must not move the mark back. Sequences wrap, so "forward" is modulo 2^31.
        if p.last_acked < 0 or 0 < (last - p.last_acked) % (MAX_SEQUENCE + 1) < (MAX_SEQUENCE + 1) // 2:
            p.last_acked = last

    def expired(self, batch: ProducerBatch) -> None:
        """A numbered batch failed by delivery.timeout.ms in its deque: it was sent, and may have been written.
        Its partition sends nothing new until its other batches answer; then maybe_resolve() decides."""
        self.remove_in_flight(batch)
        nxt = (batch.base_sequence + batch.count) % (MAX_SEQUENCE + 1)
        known = self._unresolved.get(batch.tp)
        self._unresolved[batch.tp] = nxt if known is None else max(known, nxt)

    def maybe_resolve(self) -> None:
        """Java's maybeResolveSequences: a partition whose batches are all done is resolved when the broker
        acknowledged every sequence handed out (the expired batch was written after all); otherwise the gap
        it left needs a new epoch for that partition."""
        if not self._unresolved:
            return
        for tp in list(self._unresolved):
            p = self._partitions.get(tp)
            if p is not None and p.in_flight:
                continue
            del self._unresolved[tp]
            if p is not None and not self._is_next(p, p.next_sequence):
                self.request_epoch_bump(f"a batch for {tp[0]}-{tp[1]} expired and was not acknowledged", tp)

    def verdict(self, batch: ProducerBatch, error: BrokerError, transactional: bool) -> Verdict:
        """Whether a batch the broker refused with `error` is retried (behind an unresolved batch, or under a
        new epoch, whose bump this requests) or fails; NOT_SEQUENCE for the errors sequences have no say in."""
        code = error.code
        if transactional and code in _FENCED_CODES:
            # A transactional producer whose epoch is refused has been fenced by a newer instance (Java).
            return Verdict.FAIL
        if code not in _SEQUENCE_CODES:
            return Verdict.NOT_SEQUENCE
        tp = batch.tp
        if self._rewrite is None or tp in self._rewrite:
            return Verdict.RETRY_IN_ORDER  # the coming bump renumbers it
        unresolved = self._unresolved.get(tp)
        if unresolved is not None:
            if batch.base_sequence != unresolved:
                return Verdict.RETRY_IN_ORDER  # wait and see whether the expired batch was written
            # The batch right after the expired one is refused: the broker never wrote that one.
            self.request_epoch_bump(f"{error.name} on {batch.topic}-{batch.partition} after an expired batch", tp)
            return Verdict.BUMP_AND_RETRY
        if not self.is_next_expected(batch):
            # An earlier batch of this partition is unresolved; this one follows it in order.
            return Verdict.RETRY_IN_ORDER
        self.request_epoch_bump(f"{error.name} on {batch.topic}-{batch.partition}", tp)
        if code == UnknownProducerIdError.code:
            # The broker forgot us (retention); nothing of this batch was appended: renumber and retry.
            return Verdict.BUMP_AND_RETRY
        return Verdict.FAIL

    def batch_split(self, batch: ProducerBatch, error: BrokerError) -> None:
        """A batch refused as too large is split: its parts are numbered afresh under a new epoch, ahead of the
        batches sent behind it (which the broker refuses as out of order, and which are retried in order)."""
        self.remove_in_flight(batch)
        self.request_epoch_bump(f"batch for {batch.topic}-{batch.partition} split after {error.name}", batch.tp)

    @staticmethod
    def _is_next(p: _Partition, sequence: int) -> bool:
        return sequence == (p.last_acked + 1) % (MAX_SEQUENCE + 1)

    def is_next_expected(self, batch: ProducerBatch) -> bool:
        """Whether the broker should accept this batch next: every earlier sequence was acknowledged.

        A sequence error on a batch that is not next only means an earlier batch is still unresolved
        (being retried), so it is retried after it: Java's lastAckedSequence rule.
        """
        p = self._partitions.get(batch.tp)
        return batch.base_sequence == 0 if p is None else self._is_next(p, batch.base_sequence)

    def is_first_in_flight(self, batch: ProducerBatch) -> bool:
        p = self._partitions.get(batch.tp)
        return p is not None and bool(p.in_flight) and p.in_flight[0] is batch

    def may_pipeline(self, tp: TopicPartitionKey) -> bool:
        """Whether a new batch of `tp` may go while others of it are in flight: up to MAX_IN_FLIGHT, and only
        once the broker acknowledged a sequence of this partition under the current producer id and epoch.

        Until then the broker may hold no state for this producer on the partition, and Apache Kafka takes a
        batch whose first sequence is not 0 from such a producer as a new start (KIP-360): were the first batch
        refused (NOT_LEADER_OR_FOLLOWER from a leader not yet ready on a topic just created, MESSAGE_TOO_LARGE
        before a split), the batches pipelined behind it would be appended ahead of it, and every retry of it
        then refused as out of order until delivery.timeout.ms. Costs one round trip per partition and epoch.
        """
        p = self._partitions.get(tp)
        if p is None or not p.in_flight:
            return True
        return len(p.in_flight) < MAX_IN_FLIGHT and p.last_acked >= 0

    def in_flight_count(self, tp: TopicPartitionKey) -> int:
        p = self._partitions.get(tp)
        return len(p.in_flight) if p is not None else 0
