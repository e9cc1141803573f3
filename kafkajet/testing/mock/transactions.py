"""Transactions as a Kafka broker keeps them: the coordinator's state per transactional id, and each partition's
view (ongoing transactions and the aborted-transaction index).

Coordinator side (Kafka's TransactionCoordinator / TransactionMetadata): a transactional id owns one producer id
and epoch. InitProducerId bumps the epoch, which fences every older producer of the id. A transaction goes
Empty -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn) -> PrepareCommit|PrepareAbort (EndTxn) ->
CompleteCommit|CompleteAbort once a marker is written to every partition in it. Markers are written at once, in
the EndTxn handling, unless MockConfig.txn_marker_delay_ms holds the transaction in Prepare* for a while (then
requests meanwhile get CONCURRENT_TRANSACTIONS, as from a broker whose marker writes are slow).

Partition side (ProducerStateManager and the transaction index): the first offset of each ongoing transaction,
which bounds the last stable offset, and (producer id, first offset, marker offset) of each aborted one, which
a read_committed Fetch hands out so consumers can drop the aborted records.

Errors come back as names; "PRODUCER_FENCED" is what the coordinator says of a stale epoch, and the handlers
turn it into INVALID_PRODUCER_EPOCH for request versions older than KIP-588's, as Kafka's KafkaApis does.
"""

from __future__ import annotations

import bisect
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from kafkajet.cluster import TopicPartitionKey

log = logging.getLogger("kafkajet.testing.mock")

# Kafka's transaction.max.timeout.ms default: a longer transaction_timeout_ms is refused.
MAX_TRANSACTION_TIMEOUT_MS = 900_000
# TransactionMetadata.isEpochExhausted: the last epoch is kept back for fencing, so at 32766 a new producer id.
_EPOCH_EXHAUSTED = 32767 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TxnState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


_PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    # The epoch before the last bump: a KIP-360 InitProducerId naming it is a retry of that bump, answered
    # with the current epoch instead of being fenced.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartitionKey] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    start_ms: float = -1.0
    # When the markers of a transaction in Prepare* are all written (only with txn_marker_delay_ms).
    complete_at_ms: float = 0.0
    # Every state entered, oldest first (bounded), for tests to see the path a transaction took.
    history: deque[TxnState] = field(default_factory=lambda: deque([TxnState.EMPTY], maxlen=1000))

    def transition(self, state: TxnState) -> None:
        self.state = state
        self.history.append(state)


class MarkerWriter(Protocol):
    """What completing a transaction needs from the rest of the cluster."""

    def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int) -> None: ...

    def complete_txn_offsets(self, group: str, producer_id: int, commit: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class InitResult:
    error: str | None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    """Every transactional id's state. Not thread-safe: the cluster's lock guards it."""

    def __init__(self, next_producer_id: Callable[[], int], writer: MarkerWriter) -> None:
        self._next_producer_id = next_producer_id
        self._writer = writer
        self.transactions: dict[str, TransactionMetadata] = {}
        # Kafka's coordinator epoch is the leader epoch of the __transaction_state partition; bumped here each
        # time a test moves a coordinator, and stamped into the markers.
        self.coordinator_epoch = 0
        self.marker_delay_ms = 0

    # --- InitProducerId -------------------------------------------------------------------------------

    def init_producer_id(self, txn_id: str, timeout_ms: int, expected_pid: int, expected_epoch: int,
                         now_ms: float) -> InitResult:
        """TransactionCoordinator.handleInitProducerId with a transactional id; expected_* are -1 before v3."""
        if not txn_id:
            return InitResult("INVALID_REQUEST")
        if not 0 < timeout_ms <= MAX_TRANSACTION_TIMEOUT_MS:
            return InitResult("INVALID_TRANSACTION_TIMEOUT")
        self.complete_due(now_ms)
        expected = expected_pid >= 0 and expected_epoch >= 0
        meta = self.transactions.get(txn_id)
        if meta is None:
            meta = self.transactions[txn_id] = TransactionMetadata(txn_id, self._next_producer_id(),
                                                                   NO_PRODUCER_EPOCH, timeout_ms)
        elif expected and expected_pid != meta.producer_id:
            # A producer naming an id this transactional id no longer has was replaced by another.
            return InitResult("PRODUCER_FENCED")
        if meta.state in _PREPARING:
            return InitResult("CONCURRENT_TRANSACTIONS")
        if meta.state is TxnState.ONGOING:
            # Kafka fences the current producer (epoch + 1), aborts its transaction with that epoch and answers
            # CONCURRENT_TRANSACTIONS: the client retries and then gets the epoch bumped once more.
            self._fence_epoch(meta)
            self._end(meta, commit=False, now_ms=now_ms)
            return InitResult("CONCURRENT_TRANSACTIONS")
        if meta.producer_epoch >= _EPOCH_EXHAUSTED and (not expected or expected_epoch == meta.producer_epoch):
            meta.producer_id = self._next_producer_id()
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
            meta.producer_epoch = 0
        elif not expected or meta.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            meta.last_producer_epoch = meta.producer_epoch
            meta.producer_epoch += 1
        elif expected_epoch != meta.last_producer_epoch:
            return InitResult("PRODUCER_FENCED")
        # else: a retry of the bump that already happened; the same epoch again.
        meta.timeout_ms = timeout_ms
        meta.transition(TxnState.EMPTY)
        meta.partitions.clear()
        meta.groups.clear()
        log.info("transactional id %r: producer id %d epoch %d", txn_id, meta.producer_id, meta.producer_epoch)
        return InitResult(None, meta.producer_id, meta.producer_epoch)

    def _fence_epoch(self, meta: TransactionMetadata) -> None:
        # TransactionMetadata.prepareFenceProducerEpoch: the bumped epoch is never handed to a client.
        meta.producer_epoch = min(meta.producer_epoch + 1, 32767)

    # --- adding to a transaction ------------------------------------------------------------------------

    def _check_producer(self, txn_id: str, pid: int, epoch: int,
                        now_ms: float) -> tuple[TransactionMetadata | None, str | None]:
        self.complete_due(now_ms)
        meta = self.transactions.get(txn_id)
        if meta is None or meta.producer_id != pid:
            return meta, "INVALID_PRODUCER_ID_MAPPING"
        if meta.producer_epoch != epoch:
            return meta, "PRODUCER_FENCED"
        return meta, None

    def _addable(self, txn_id: str, pid: int, epoch: int,
                 now_ms: float) -> tuple[TransactionMetadata | None, str | None]:
        """The producer's transaction, if it may take partitions or groups now: its own, at its epoch, and not
        finishing a previous transaction (CONCURRENT_TRANSACTIONS until the markers are written)."""
        meta, error = self._check_producer(txn_id, pid, epoch, now_ms)
        if error is None and meta is not None and meta.state in _PREPARING:
            error = "CONCURRENT_TRANSACTIONS"
        return meta, error

    def add_partitions(self, txn_id: str, pid: int, epoch: int, partitions: Iterable[TopicPartitionKey],
                       now_ms: float) -> str | None:
        meta, error = self._addable(txn_id, pid, epoch, now_ms)
        if error is not None or meta is None:
            return error
        self._begin(meta, now_ms)
        meta.partitions.update(partitions)
        return None

    def verify_partitions(self, txn_id: str, pid: int, epoch: int, partitions: Iterable[TopicPartitionKey],
                          now_ms: float) -> dict[TopicPartitionKey, str | None]:
        """AddPartitionsToTxn v4+ verify_only (what a leader asks before a transactional append)."""
        wanted = list(partitions)
        meta, error = self._addable(txn_id, pid, epoch, now_ms)
        if error is not None or meta is None:
            return dict.fromkeys(wanted, error)
        ongoing = meta.state is TxnState.ONGOING
        return {tp: None if ongoing and tp in meta.partitions else "INVALID_TXN_STATE" for tp in wanted}

    def add_offsets(self, txn_id: str, pid: int, epoch: int, group: str, now_ms: float) -> str | None:
        meta, error = self._addable(txn_id, pid, epoch, now_ms)
        if error is not None or meta is None:
            return error
        self._begin(meta, now_ms)
        meta.groups.add(group)
        return None

    def _begin(self, meta: TransactionMetadata, now_ms: float) -> None:
        if meta.state is not TxnState.ONGOING:
            meta.partitions.clear()
            meta.groups.clear()
            meta.start_ms = now_ms
            meta.transition(TxnState.ONGOING)

    def check_txn_offset_commit(self, txn_id: str, pid: int, epoch: int, group: str, now_ms: float) -> str | None:
        """TxnOffsetCommit reaches the group coordinator, which only stages offsets of a live transaction that
        added the group (what Kafka's verification checks)."""
        meta, error = self._check_producer(txn_id, pid, epoch, now_ms)
        if error == "PRODUCER_FENCED":
            return "INVALID_PRODUCER_EPOCH"  # the group coordinator's answer to a stale epoch
        if error is not None or meta is None:
            return error
        if meta.state is not TxnState.ONGOING or group not in meta.groups:
            return "INVALID_TXN_STATE"
        return None

    def check_produce(self, txn_id: str | None, pid: int, epoch: int, tp: TopicPartitionKey,
                      now_ms: float) -> str | None:
        """A transactional batch must belong to an ongoing transaction holding the partition. Kafka (3.6+,
        transaction.partition.verification.enable) asks the coordinator before appending and maps its answer
        as AddPartitionsToTxnManager does: fenced -> INVALID_PRODUCER_EPOCH, coordinator busy ->
        NOT_ENOUGH_REPLICAS (retriable), partition not in the transaction -> INVALID_TXN_STATE."""
        meta = self.transactions.get(txn_id) if txn_id else None
        if meta is None:
            return "INVALID_PRODUCER_ID_MAPPING"
        result = self.verify_partitions(meta.transactional_id, pid, epoch, [tp], now_ms)[tp]
        if result == "PRODUCER_FENCED":
            return "INVALID_PRODUCER_EPOCH"
        if result == "CONCURRENT_TRANSACTIONS":
            return "NOT_ENOUGH_REPLICAS"
        return result

    # --- ending a transaction ---------------------------------------------------------------------------

    def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool, now_ms: float) -> str | None:
        """TransactionCoordinator.handleEndTransaction from a client."""
        meta, error = self._check_producer(txn_id, pid, epoch, now_ms)
        if error is not None or meta is None:
            return error
        state = meta.state
        if state is TxnState.ONGOING:
            self._end(meta, commit, now_ms)
            return None
        if state in _PREPARING:
            # A retry while the markers are being written; the other kind cannot be had any more.
            same = (state is TxnState.PREPARE_COMMIT) == commit
            return "CONCURRENT_TRANSACTIONS" if same else "INVALID_TXN_STATE"
        if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            # A retried EndTxn of a completed transaction (its answer was lost) succeeds again.
            same = (state is TxnState.COMPLETE_COMMIT) == commit
            return None if same else "INVALID_TXN_STATE"
        return "INVALID_TXN_STATE"  # Empty: no transaction to end

    def _end(self, meta: TransactionMetadata, commit: bool, now_ms: float) -> None:
        meta.transition(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        meta.complete_at_ms = now_ms + self.marker_delay_ms
        if self.marker_delay_ms <= 0:
            self._complete(meta)

    def _complete(self, meta: TransactionMetadata) -> None:
        commit = meta.state is TxnState.PREPARE_COMMIT
        for topic, partition in sorted(meta.partitions):
            self._writer.write_txn_marker(topic, partition, meta.producer_id, meta.producer_epoch, commit,
                                          self.coordinator_epoch)
        for group in sorted(meta.groups):
            self._writer.complete_txn_offsets(group, meta.producer_id, commit)
        log.info("transactional id %r: %s %d partitions, %d groups", meta.transactional_id,
                 "committed" if commit else "aborted", len(meta.partitions), len(meta.groups))
        meta.partitions.clear()
        meta.groups.clear()
        meta.start_ms = -1.0
        meta.transition(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)

    def complete_due(self, now_ms: float) -> bool:
        """Finish the transactions whose (delayed) markers are due; True if any was."""
        done = False
        for meta in self.transactions.values():
            if meta.state in _PREPARING and meta.complete_at_ms <= now_ms:
                self._complete(meta)
                done = True
        return done

    def abort_timed_out(self, now_ms: float) -> list[str]:
        """Kafka's abortTimedOutTransactions: an Ongoing transaction older than its timeout is aborted with the
        epoch bumped (prepareFenceProducerEpoch), so the producer that let it time out is fenced."""
        aborted = []
        for meta in self.transactions.values():
            if meta.state is TxnState.ONGOING and now_ms - meta.start_ms > meta.timeout_ms:
                log.info("transactional id %r: timed out after %d ms; aborting", meta.transactional_id,
                         meta.timeout_ms)
                self._fence_epoch(meta)
                self._end(meta, commit=False, now_ms=now_ms)
                aborted.append(meta.transactional_id)
        return aborted

    def tick(self, now_ms: float) -> bool:
        """Timeouts and delayed completions; True if any partition may have got a marker."""
        aborted = self.abort_timed_out(now_ms)
        return self.complete_due(now_ms) or bool(aborted)


# --- the partition side --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class PartitionTransactions:
    """One partition's transactions: what bounds its last stable offset and what read_committed must skip."""

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its ongoing transaction
        self.aborted: list[AbortedTxn] = []  # in marker (so last offset) order

    def on_append(self, producer_id: int, base_offset: int) -> None:
        self.ongoing.setdefault(producer_id, base_offset)

    def on_marker(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        first = self.ongoing.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset))

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.ongoing.values(), default=high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, end), as LocalLog.collectAbortedTransactions picks them."""
        lasts = [a.last_offset for a in self.aborted]
        return [a for a in self.aborted[bisect.bisect_left(lasts, start):] if a.first_offset < end]
