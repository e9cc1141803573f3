"""The mock cluster's transaction coordinator and group offsets, as a Kafka broker keeps them.

Per transactional id: producer id and epoch (InitProducerId fences older instances by bumping the epoch), the
transaction state machine (Empty, Ongoing, PrepareCommit/PrepareAbort, CompleteCommit/CompleteAbort), the
partitions and groups in the transaction, and offsets staged by TxnOffsetCommit. EndTxn writes a commit or
abort marker (a control batch) to every partition of the transaction; per partition the first offset of each
open transaction gives the last stable offset, and the aborted ranges answer read_committed Fetches. The
markers are written synchronously, so PrepareCommit/PrepareAbort are passed through inside one EndTxn.
"""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass, field
from typing import Any

from kafkajet.clock import now_ms

MAX_EPOCH = 2**15 - 1
TXN_KEY_TYPE = 1

Body = dict[str, Any]
TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    staged_offsets: dict[str, dict[TopicPartition, tuple[int, str | None]]] = field(default_factory=dict)
    started_ms: float = 0.0
    history: list[TxnState] = field(default_factory=list)  # every state passed through, for tests

    def go(self, state: TxnState) -> None:
        self.state = state
        self.history.append(state)


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


@dataclass
class PartitionTxns:
    """One partition's view: open transactions' first offsets and the aborted ranges (Kafka's producer state
    and transaction index)."""

    ongoing: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)

    def last_stable_offset(self, log_end_offset: int) -> int:
        return min(self.ongoing.values(), default=log_end_offset)

    def aborted_between(self, start: int, end: int) -> list[Body]:
        """Aborted transactions overlapping offsets [start, end), as Fetch answers them."""
        return [{"producer_id": a.producer_id, "first_offset": a.first_offset} for a in self.aborted
                if a.last_offset >= start and a.first_offset < end]


class Coordinators:
    """Which broker coordinates a transactional id or a group: a hash over the brokers unless a test moved it."""

    def __init__(self, broker_ids: list[int]) -> None:
        self.broker_ids = broker_ids
        self.moved: dict[tuple[int, str], int] = {}

    def for_key(self, key_type: int, key: str) -> int:
        found = self.moved.get((key_type, key))
        if found is not None:
            return found
        return self.broker_ids[zlib.crc32(key.encode()) % len(self.broker_ids)]


class TransactionCoordinator:
    """All transactional ids and group offsets of the cluster. The cluster's lock guards it."""

    def __init__(self, broker_ids: list[int]) -> None:
        self.coordinators = Coordinators(broker_ids)
        self.transactions: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, TxnMetadata] = {}
        self.committed: dict[str, dict[TopicPartition, tuple[int, str | None]]] = {}
        self.clock = now_ms

    def expire(self, write_marker: Any) -> list[str]:
        """Abort transactions open longer than their timeout, bumping the epoch so the late producer is
        fenced, as Kafka's coordinator does."""
        now = self.clock()
        expired = [m for m in self.transactions.values()
                   if m.state is TxnState.ONGOING and now - m.started_ms > m.timeout_ms]
        for meta in expired:
            self.end(meta, commit=False, write_marker=write_marker)
            self._bump(meta)
        return [m.transactional_id for m in expired]

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, epoch: int, version: int,
                         new_producer_id: Any, write_marker: Any) -> tuple[str | None, int, int]:
        meta = self.transactions.get(txn_id)
        if meta is None:
            if producer_id >= 0:
                return "INVALID_PRODUCER_ID_MAPPING", -1, -1
            meta = self.transactions[txn_id] = TxnMetadata(txn_id, new_producer_id(), 0, timeout_ms)
            meta.history.append(TxnState.EMPTY)
            self.by_producer[meta.producer_id] = meta
            return None, meta.producer_id, 0
        if producer_id >= 0 and (producer_id != meta.producer_id or epoch != meta.producer_epoch):
            # KIP-360: only the current instance may ask for its own next epoch.
            return ("PRODUCER_FENCED" if version >= 4 else "INVALID_PRODUCER_EPOCH"), -1, -1
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return "CONCURRENT_TRANSACTIONS", -1, -1
        if meta.state is TxnState.ONGOING:
            # A new instance (or a retry after a failure) ends what the previous one left open.
            self.end(meta, commit=False, write_marker=write_marker)
        meta.timeout_ms = timeout_ms
        self._bump(meta, new_producer_id)
        return None, meta.producer_id, meta.producer_epoch

    def _bump(self, meta: TxnMetadata, new_producer_id: Any = None) -> None:
        if meta.producer_epoch >= MAX_EPOCH - 1 and new_producer_id is not None:
            del self.by_producer[meta.producer_id]
            meta.producer_id, meta.producer_epoch = new_producer_id(), 0
            self.by_producer[meta.producer_id] = meta
        else:
            meta.producer_epoch += 1

    def check(self, txn_id: str, producer_id: int, epoch: int) -> tuple[TxnMetadata | None, str | None]:
        """The transaction a request names, or the error a broker answers."""
        meta = self.transactions.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return None, "INVALID_PRODUCER_ID_MAPPING"
        if epoch < meta.producer_epoch:
            return None, "PRODUCER_FENCED"
        if epoch > meta.producer_epoch:
            return None, "INVALID_PRODUCER_EPOCH"
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return None, "CONCURRENT_TRANSACTIONS"
        return meta, None

    def begin_if_needed(self, meta: TxnMetadata) -> None:
        if meta.state is not TxnState.ONGOING:
            meta.partitions.clear()
            meta.groups.clear()
            meta.staged_offsets.clear()
            meta.started_ms = self.clock()
            meta.go(TxnState.ONGOING)

    def end(self, meta: TxnMetadata, *, commit: bool, write_marker: Any) -> None:
        meta.go(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        for tp in sorted(meta.partitions):
            write_marker(tp, meta.producer_id, meta.producer_epoch, commit)
        if commit:
            for group, offsets in meta.staged_offsets.items():
                self.committed.setdefault(group, {}).update(offsets)
        meta.staged_offsets.clear()
        meta.go(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
