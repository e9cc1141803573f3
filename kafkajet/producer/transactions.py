"""The transactional half of Java's TransactionManager: the transaction's state machine, the queue of
coordinator requests the sender sends before any produce data, and the rules for each answer.

User threads call the public methods (initialize, begin, maybe_add_partition, send_offsets, begin_commit,
begin_abort); the sender thread calls next_request / handle_response / on_batch_failed. One lock guards the
state between them. The manager does no I/O and reads no clock: the sender passes `now`.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkajet.cluster import TopicPartitionKey
from kafkajet.errors import (
    NO_ERROR,
    ApplicationRecoverableError,
    BrokerError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    RequestTimedOutError,
    StaleMemberEpochError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    make_error,
)
from kafkajet.network.versions import TRANSACTION_VERSION, FinalizedFeatures
from kafkajet.producer.idempotence import IdempotenceManager
from kafkajet.protocol import ApiKey
from kafkajet.transaction import GROUP_COORDINATOR, TXN_COORDINATOR
from kafkajet.transaction import (
    PreparedTransaction as PreparedTransaction,  # its old home: old pickles name it
)

log = logging.getLogger("kafkajet.producer.transactions")

_KEY_TYPE = {"txn": TXN_COORDINATOR, "group": GROUP_COORDINATOR}

# Answers that mean "ask again": the coordinator moved or is not ready, or another step of this
# transactional id is still completing.
_COORDINATOR_MOVED = (NotCoordinatorError.code, CoordinatorNotAvailableError.code)
_RETRY = (CoordinatorLoadInProgressError.code, ConcurrentTransactionsError.code)
# The producer has been replaced by a newer instance with the same transactional.id: it can only be closed.
_FENCED = (ProducerFencedError.code, InvalidProducerEpochError.code)
# The broker lost our producer id: the transaction can be aborted, and the epoch is bumped after the abort.
_LOST_ID = (UnknownProducerIdError.code, InvalidProducerIdMappingError.code)
# TxnOffsetCommit answers after which the transaction can still be aborted (Java 4.4's TxnOffsetCommitHandler).
_OFFSETS_ABORTABLE = frozenset({
    GroupAuthorizationFailedError.code, FencedInstanceIdError.code, TransactionAbortableError.code,
    UnknownMemberIdError.code, IllegalGenerationError.code, GroupIdNotFoundError.code, StaleMemberEpochError.code})
# The requests of a transaction, each retried only until transaction.timeout.ms has passed since its first
# attempt: by then the coordinator has decided the transaction's outcome on its own (it aborts a transaction
# open that long), so retrying could only learn the outcome, and a broker that never answers (Tansu closes the
# connection on the EndTxn of a fenced producer) would keep commit_transaction() and close() waiting forever.
# FindCoordinator and InitProducerId are not bounded: they belong to no transaction, init_transactions() is
# resumed by calling it again, and close() waits for neither.
_BOUNDED = frozenset({ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.TXN_OFFSET_COMMIT,
                      ApiKey.END_TXN})
# A request that gets no answer is retried every retry.backoff.ms: the first miss is a warning, the repeats at
# most one line this often, with their count.
NO_ANSWER_LOG_INTERVAL_MS = 10_000.0


class State(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"
    # KIP-939's name: everything is sent and the transaction is left open for another party to complete.
    PREPARED = "PREPARED_TRANSACTION"


# Java's TransactionManager.State.isTransitionValid, as a table: where each state may go next.
_TRANSITIONS: dict[State, frozenset[State]] = {
    State.UNINITIALIZED: frozenset({State.INITIALIZING}),
    State.INITIALIZING: frozenset({State.READY}),
    State.READY: frozenset({State.IN_TRANSACTION, State.INITIALIZING}),
    State.IN_TRANSACTION: frozenset({State.COMMITTING, State.ABORTING, State.ABORTABLE_ERROR, State.PREPARED}),
    State.COMMITTING: frozenset({State.READY, State.ABORTABLE_ERROR}),
    State.ABORTING: frozenset({State.READY, State.INITIALIZING}),
    State.ABORTABLE_ERROR: frozenset({State.ABORTING, State.ABORTABLE_ERROR}),
    State.FATAL_ERROR: frozenset(),
    State.PREPARED: frozenset(),  # the producer is done: only close() (which leaves the transaction open)
}


class _AbortableRefusal(IllegalStateError, TransactionAbortableError):
    """send() refused in a transaction that must be aborted."""


class _RecoverableRefusal(IllegalStateError, ApplicationRecoverableError):
    """send() refused by a producer that was fenced: close it and create a new one."""


class TransactionalResult:
    """What a user thread waits on for one transactional step (Java's TransactionalRequestResult)."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._done = threading.Event()
        self.error: KafkaError | None = None

    def done(self, error: KafkaError | None = None) -> None:
        if not self._done.is_set():
            self.error = error
            self._done.set()

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float) -> None:
        if not self._done.wait(timeout_s):
            raise KafkaTimeoutError(
                f"Timeout expired after {timeout_s * 1000:.0f} ms while awaiting {self.operation}; calling it "
                "again resumes waiting for the same request")
        if self.error is not None:
            raise self.error


@dataclass
class TxnRequest:
    """One coordinator request waiting to be sent, and what its answer completes."""

    api: ApiKey
    build: Callable[[], dict[str, Any]]
    coordinator: str | None  # "txn" or "group" (FindCoordinator goes to any broker)
    key: str
    result: TransactionalResult | None = None
    retry_at: float = 0.0
    attempts: int = 0
    first_due: float | None = None  # when it was first due to be sent (ms): its transaction.timeout.ms counts from here
    last_error: KafkaError | None = None  # why its last attempt was retried
    no_answer_logged_at: float | None = None  # when its missing answer was last logged (ms)
    no_answer_unlogged: int = 0  # missing answers since then, not logged
    extra: dict[str, Any] = field(default_factory=dict)
    transaction_version: int | None = None  # for EndTxn and TxnOffsetCommit: the transaction version (1 or 2) it is sent under

    @property
    def priority(self) -> int:
        # Java's order: coordinator look-ups, then InitProducerId, AddPartitions, AddOffsets, TxnOffsetCommit, EndTxn.
        return _PRIORITY[self.api]


_PRIORITY = {ApiKey.FIND_COORDINATOR: 0, ApiKey.INIT_PRODUCER_ID: 1, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
             ApiKey.ADD_OFFSETS_TO_TXN: 3, ApiKey.TXN_OFFSET_COMMIT: 4, ApiKey.END_TXN: 5}


class TransactionManager:
    def __init__(self, transactional_id: str, transaction_timeout_ms: int, idempotence: IdempotenceManager,
                 retry_backoff_ms: float) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.idempotence = idempotence
        self.retry_backoff_ms = retry_backoff_ms
        self.state = State.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self._lock = threading.RLock()
        self._pending: list[TxnRequest] = []
        self.in_flight: TxnRequest | None = None
        self.coordinators: dict[tuple[str, str], int] = {}
        self.coordinator_addresses: dict[int, tuple[str, int]] = {}
        self._next_add_at = 0.0  # after a retriable AddPartitionsToTxn answer
        self._in_txn: set[TopicPartitionKey] = set()  # added at the coordinator: batches may go
        self._new: set[TopicPartitionKey] = set()  # sent to, not yet added
        self._adding: set[TopicPartitionKey] = set()  # in the AddPartitionsToTxn request in flight
        self._results: dict[str, TransactionalResult] = {}  # the step in progress per operation, for retries
        self._open: list[TransactionalResult] = []
        # The coordinator added a partition or a group: the transaction exists there and needs an EndTxn.
        self.transaction_started = False
        self.on_state: Callable[[State], None] | None = None
        self.on_fatal: Callable[[KafkaError], None] | None = None
        self.on_epoch: Callable[[], None] | None = None  # the producer id or epoch changed: renumber batches
        # Transaction version 2 (KIP-890 part 2): the brokers finalize transaction.version >= 2. Produce v12+
        # then adds partitions to the transaction itself, and EndTxn v5 answers a new epoch for every
        # transaction. The sender gives `features` (the network client's latest finalized features).
        self.tv2 = False
        self._features_epoch = -1
        self.features: Callable[[], FinalizedFeatures] | None = None
        self._bump_for_tv2 = False  # TV2 came on between transactions: the epoch is bumped before the next

    # --- user API ---------------------------------------------------------------------------------

    def initialize(self) -> TransactionalResult:
        with self._lock:
            resumed = self._resume("init_transactions", State.INITIALIZING)
            if resumed is not None:
                return resumed
            self._fail_if_fatal()
            if self.state is not State.UNINITIALIZED:
                raise IllegalStateError(
                    f"init_transactions() called in state {self.state.value}: call it once, before the first "
                    "transaction")
            self._transition(State.INITIALIZING)
            result = self._results["init_transactions"] = self._new_result("InitProducerId")
            self._enqueue_init_producer_id(result, bump=False)
            return result

    def maybe_update_tv2(self, on_init: bool) -> None:
        """Java 4.4's TransactionManager.maybeUpdateTransactionV2Enabled: read the brokers' finalized
        transaction.version when their features epoch has grown. Called once init_transactions() is done and when
        a transaction is being completed (after its EndTxn is built), so the version never changes inside a
        transaction. Turned on between transactions, it takes an epoch bump first (InitProducerId), as Java's
        clientSideEpochBumpRequired does."""
        if self.features is None:
            return
        features = self.features()
        if self._features_epoch >= features.epoch:
            return
        self._features_epoch = features.epoch
        was = self.tv2
        self.tv2 = features.levels.get(TRANSACTION_VERSION, 0) >= 2
        log.debug("TransactionalId %s: transaction version 2 %s (finalized features epoch %d)",
                  self.transactional_id, "on" if self.tv2 else "off", features.epoch)
        if not on_init and not was and self.tv2:
            self._bump_for_tv2 = True

    def begin(self) -> None:
        with self._lock:
            self._fail_if_fatal()
            if self.state is State.UNINITIALIZED:
                raise IllegalStateError("begin_transaction() before init_transactions(): call init_transactions() "
                                        "once after creating the Producer")
            if self.state is not State.READY:
                raise IllegalStateError(
                    f"begin_transaction() called in state {self.state.value}: "
                    + ("a transaction is already in progress" if self.state is State.IN_TRANSACTION
                       else self._under_way() or "the previous transaction must be committed or aborted first"))
            self._transition(State.IN_TRANSACTION)

    def maybe_add_partition(self, tp: TopicPartitionKey) -> None:
        """send() calls this for every record: a partition new to the transaction is added before its batches go."""
        if tp in self._in_txn or tp in self._new:
            return
        with self._lock:
            if self.state is not State.IN_TRANSACTION:
                raise self.send_refusal()
            if self.tv2:
                # Produce v12+ adds the partition at the broker: no AddPartitionsToTxn. The transaction counts
                # as started from the first send, as Java's does, since a batch may reach the broker even when
                # its answer is lost.
                self._in_txn.add(tp)
                self.transaction_started = True
            elif tp not in self._in_txn and tp not in self._adding:
                self._new.add(tp)

    def is_send_allowed(self, tp: TopicPartitionKey) -> bool:
        return tp in self._in_txn

    def send_offsets(self, offsets: Mapping[TopicPartitionKey, tuple[int, str | None]], group_id: str,
                     member: Mapping[str, Any] | None = None) -> TransactionalResult:
        with self._lock:
            self._fail_if_error()
            if self.state is not State.IN_TRANSACTION:
                raise IllegalStateError(f"send_offsets_to_transaction() called in state {self.state.value}: "
                                        + (self._under_way() or "call begin_transaction() first"))
            if self.tv2:
                # Java 4.4 under transaction version 2: TxnOffsetCommit v5 adds the group to the transaction at
                # the group coordinator itself, so there is no AddOffsetsToTxn; the transaction counts as
                # started from here, as a commit that reached the coordinator needs an EndTxn.
                result = self._new_result("TxnOffsetCommit")
                self.transaction_started = True
                self._enqueue_txn_offset_commit(result, dict(offsets), group_id, dict(member or {}))
                return result
            result = self._new_result("AddOffsetsToTxn")
            pid, epoch = self.idempotence.producer_id, self.idempotence.producer_epoch
            req = TxnRequest(ApiKey.ADD_OFFSETS_TO_TXN, lambda: {
                "transactional_id": self.transactional_id, "producer_id": pid, "producer_epoch": epoch,
                "group_id": group_id}, "txn", self.transactional_id, result,
                extra={"offsets": dict(offsets), "group_id": group_id, "member": dict(member or {})})
            self._pending.append(req)
            return result

    def begin_commit(self) -> TransactionalResult:
        with self._lock:
            resumed = self._resume("commit_transaction", State.COMMITTING)
            if resumed is not None:
                return resumed
            self._fail_if_error()
            if self.state is not State.IN_TRANSACTION:
                raise IllegalStateError(
                    f"commit_transaction() called in state {self.state.value}: "
                    + (self._under_way() or "there is no transaction to commit (call begin_transaction() first)"))
            self._transition(State.COMMITTING)
            return self._begin_completing(True, "commit_transaction")

    def begin_abort(self) -> TransactionalResult:
        with self._lock:
            resumed = self._resume("abort_transaction", State.ABORTING)
            if resumed is not None:
                return resumed
            self._fail_if_fatal()
            if self.state not in (State.IN_TRANSACTION, State.ABORTABLE_ERROR):
                raise IllegalStateError(
                    f"abort_transaction() called in state {self.state.value}: "
                    + (self._under_way() or "there is no transaction to abort"))
            self._transition(State.ABORTING)
            self._new.clear()  # nothing more will be sent in this transaction
            return self._begin_completing(False, "abort_transaction")

    def prepare(self, has_incomplete_batches: bool) -> PreparedTransaction:
        """Leave the transaction open for another party: everything of it must have been sent (flushed) and
        nothing may have failed. From here the producer can only be closed, and close() does not abort."""
        with self._lock:
            self._fail_if_error()
            if self.state is not State.IN_TRANSACTION:
                raise IllegalStateError(f"prepare_transaction() called in state {self.state.value}: "
                                        + (self._under_way() or "call begin_transaction() and send first"))
            if has_incomplete_batches or self._new or self._adding or self.in_flight is not None or any(
                    r.api != ApiKey.FIND_COORDINATOR for r in self._pending):
                raise IllegalStateError("prepare_transaction() with records or transactional requests still in "
                                        "flight: flush() first")
            self._transition(State.PREPARED)
            return PreparedTransaction(self.transactional_id, self.idempotence.producer_id,
                                       self.idempotence.producer_epoch, 2 if self.tv2 else 1)

    def send_refusal(self) -> KafkaError:
        """Why send() is refused right now, in Java's words where Java has them."""
        if self.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
            # Still an IllegalStateError, and of the category that says what to do (KIP-1050).
            refusal: type[IllegalStateError] = (
                _AbortableRefusal if self.state is State.ABORTABLE_ERROR
                else _RecoverableRefusal if isinstance(self.last_error, ApplicationRecoverableError)
                else IllegalStateError)
            err = refusal(
                "Cannot perform send because at least one previous transactional or idempotent request has failed "
                f"with errors: {self.last_error}. "
                + ("Call abort_transaction() and begin a new transaction." if self.state is State.ABORTABLE_ERROR
                   else "The producer can only be closed; create a new Producer."))
            err.__cause__ = self.last_error
            return err
        if self.state is State.UNINITIALIZED:
            return IllegalStateError("Cannot send before init_transactions(): a Producer with transactional.id "
                                     "must call init_transactions() once, then begin_transaction()")
        under_way = self._under_way()
        if under_way is not None:
            return IllegalStateError(f"Cannot call send in state {self.state.value}: {under_way}")
        return IllegalStateError(f"Cannot call send in state {self.state.value}: call begin_transaction() "
                                 "first; a transactional Producer sends only inside a transaction")

    def _under_way(self) -> str | None:
        """What a call made now has to wait for, when a step of the transaction has not finished (or the producer
        is past its last one), and what to do; None in the other states."""
        if self.state is State.COMMITTING:
            # Java's commitTransaction(): retrying is safe, but no other operation (abortTransaction) is possible
            # since the commit may already be completing; if not retrying, the only option is to close.
            return ("commit_transaction() has not finished: if it timed out, call it again to wait for the outcome "
                    "of the same commit (a commit under way cannot be aborted; the alternative is close()), then "
                    "begin_transaction() for the next transaction")
        if self.state is State.ABORTING:
            return ("abort_transaction() has not finished: if it timed out, call it again to wait for the same "
                    "abort, then begin_transaction() for the next transaction")
        if self.state is State.INITIALIZING:
            return ("the producer id is still being obtained (init_transactions(), or the epoch bump that ends an "
                    "aborted transaction): wait for that call to return, then begin_transaction()")
        if self.state is State.PREPARED:
            return ("the transaction was prepared (prepare_transaction()) for another party to complete: this "
                    "producer can only be closed")
        return None

    @property
    def is_completing(self) -> bool:
        return self.state in (State.COMMITTING, State.ABORTING)

    @property
    def has_abortable_error(self) -> bool:
        return self.state is State.ABORTABLE_ERROR

    # --- sender API -------------------------------------------------------------------------------

    def next_request(self, has_incomplete_batches: bool, now: float) -> tuple[TxnRequest | None, float]:
        """The request to send now, or None and how long until one may be ready (ms)."""
        with self._lock:
            if self.in_flight is not None or self.state is State.FATAL_ERROR:
                return None, float("inf")
            if self._give_up_overdue(now):
                return None, 0.0  # the sender acts on it at once: fails what cannot be sent, or ends close()
            wait = float("inf")
            if self._new and self.state in (State.IN_TRANSACTION, State.COMMITTING):
                if now >= self._next_add_at:
                    self._enqueue_add_partitions()
                else:
                    wait = self._next_add_at - now
            if not self._pending:
                return None, wait
            self._pending.sort(key=lambda r: (r.priority, r.retry_at))
            req = self._pending[0]
            if req.api == ApiKey.END_TXN and has_incomplete_batches:
                return None, wait  # woken by the batches' completion (or the AddPartitionsToTxn retry)
            if req.api == ApiKey.END_TXN and not self.transaction_started:
                # The coordinator never heard of this transaction (Java's nextRequest does the same).
                self._pending.pop(0)
                assert req.result is not None
                self._complete_transaction(req.result)
                return None, 0.0
            if req.first_due is None:
                req.first_due = now
            if now < req.retry_at:
                return None, min(wait, req.retry_at - now)
            if req.coordinator is not None and (req.coordinator, req.key) not in self.coordinators:
                self._lookup_coordinator(req.coordinator, req.key)
                return self.next_request(has_incomplete_batches, now)
            self._pending.pop(0)
            req.attempts += 1
            self.in_flight = req
            return req, 0.0

    def coordinator_node(self, req: TxnRequest) -> int | None:
        if req.coordinator is None:
            return None
        return self.coordinators.get((req.coordinator, req.key))

    def request_not_sent(self, req: TxnRequest, now: float, forget_coordinator: bool,
                         reason: KafkaError | None = None) -> None:
        """The sender could not send `req` (no connection yet): it waits for its turn again. `reason`, why
        its coordinator cannot be reached, is what a request given up on at transaction.timeout.ms names."""
        with self._lock:
            self.in_flight = None
            if reason is not None:
                req.last_error = reason
            if forget_coordinator and req.coordinator is not None:
                self.coordinators.pop((req.coordinator, req.key), None)
            self._retry(req, now)

    def handle_response(self, req: TxnRequest, body: dict[str, Any] | None, error: KafkaError | None,
                        now: float) -> None:
        with self._lock:
            self.in_flight = None
            if body is None:
                # No answer (connection lost, timeout): the coordinator may have moved; look it up again.
                req.last_error = error
                self._log_no_answer(req, error, now)
                if req.coordinator is not None:
                    self.coordinators.pop((req.coordinator, req.key), None)
                self._retry(req, now)
                return
            handler = _HANDLERS[req.api]
            handler(self, req, body, now)

    def on_batch_failed(self, error: KafkaError) -> None:
        """A batch of the transaction failed: the transaction cannot commit (abortable), or, fenced, nothing can."""
        with self._lock:
            if isinstance(error, TransactionAbortedError):
                return
            if getattr(error, "code", None) in _FENCED:
                self._fatal(self._fenced())
                return
            if self.state in (State.IN_TRANSACTION, State.COMMITTING, State.ABORTABLE_ERROR):
                self._abortable(error)

    def fatal(self, error: KafkaError) -> None:
        with self._lock:
            self._fatal(error)

    # --- internals --------------------------------------------------------------------------------

    def _log_no_answer(self, req: TxnRequest, error: KafkaError | None, now: float) -> None:
        """A broker that closes the connection on every attempt gets one retry every retry.backoff.ms: say so
        once per request, then at most once every NO_ANSWER_LOG_INTERVAL_MS with how many attempts went
        unanswered meanwhile."""
        last = req.no_answer_logged_at
        if last is not None and now - last < NO_ANSWER_LOG_INTERVAL_MS:
            req.no_answer_unlogged += 1
            return
        bound = (f" until transaction.timeout.ms ({self.transaction_timeout_ms} ms) has passed since its first "
                 "attempt" if req.api in _BOUNDED else "")
        again = (f" ({req.no_answer_unlogged} more unanswered attempt(s) in the last {(now - last) / 1000:.0f} s)"
                 if last is not None and req.no_answer_unlogged else "")
        log.warning("%s for transactional.id %s got no answer, retrying every %.0f ms%s: %s%s", req.api.name,
                    self.transactional_id, self.retry_backoff_ms, bound, error, again)
        req.no_answer_logged_at = now
        req.no_answer_unlogged = 0

    def _give_up_overdue(self, now: float) -> bool:
        """Fail the requests of the transaction still unanswered transaction.timeout.ms after their first attempt
        (see _BOUNDED): an EndTxn leaves the transaction's outcome unknown, which only a new producer's
        init_transactions() resolves, so that is fatal; anything before it makes the transaction abortable.
        True when it gave up on any."""
        overdue = [r for r in self._pending if r.api in _BOUNDED and r.first_due is not None
                   and now - r.first_due >= self.transaction_timeout_ms]
        for req in overdue:
            self._pending.remove(req)
            what = req.api.name + (f"({'commit' if req.extra['commit'] else 'abort'})" if req.api == ApiKey.END_TXN
                                   else "")
            last = f" (last: {req.last_error})" if req.last_error is not None else ""
            unanswered = (f"{what} for transactional.id {self.transactional_id!r} did not complete within "
                          f"transaction.timeout.ms ({self.transaction_timeout_ms} ms) of its first attempt, after "
                          f"{req.attempts} attempt(s){last}")
            if req.api == ApiKey.END_TXN:
                # Close and create a new producer: what ApplicationRecoverableError asks of the application.
                fatal = ApplicationRecoverableError(
                    f"{unanswered}: the outcome of the transaction is unknown. This producer can only be closed; a "
                    "new producer's init_transactions() with the same transactional.id completes or aborts the "
                    "transaction. (A broker that closes the connection instead of answering PRODUCER_FENCED, as "
                    "Tansu does for the EndTxn of a producer fenced by a newer one, ends this way.)")
                fatal.__cause__ = req.last_error
                self._fatal(fatal)
                return True
            # Java wraps the retriable error it gave up on the same way ("aborted after exhausting retries").
            err = TransactionAbortableError(f"{unanswered}. Call abort_transaction().")
            err.__cause__ = req.last_error
            if req.result is not None:
                req.result.done(err)
            if self.state in (State.IN_TRANSACTION, State.COMMITTING, State.ABORTABLE_ERROR, State.ABORTING):
                self._abortable(err)
        return bool(overdue)

    def _new_result(self, operation: str) -> TransactionalResult:
        # Every result not yet done is kept, so a fatal error ends them all, wherever their request is.
        self._open = [r for r in self._open if not r.is_done]
        result = TransactionalResult(operation)
        self._open.append(result)
        return result

    def _resume(self, operation: str, state: State) -> TransactionalResult | None:
        """A step that timed out for its caller is still under way: calling again waits for the same one."""
        result = self._results.get(operation)
        if result is not None and self.state is state and not result.is_done:
            return result
        return None

    def _fail_if_fatal(self) -> None:
        if self.state is State.FATAL_ERROR:
            assert self.last_error is not None
            raise self.last_error

    def _fail_if_error(self) -> None:
        self._fail_if_fatal()
        if self.state is State.ABORTABLE_ERROR:
            err = TransactionAbortableError("Cannot execute transactional method because we are in an error "
                                            f"state: {self.last_error}. Call abort_transaction().")
            err.__cause__ = self.last_error
            raise err

    def _transition(self, target: State) -> None:
        if target not in _TRANSITIONS[self.state]:
            raise IllegalStateError(f"TransactionalId {self.transactional_id}: invalid transition attempted from "
                                    f"state {self.state.value} to state {target.value}")
        log.debug("TransactionalId %s: %s -> %s", self.transactional_id, self.state.value, target.value)
        self.state = target
        if self.on_state is not None:
            self.on_state(target)

    def _begin_completing(self, commit: bool, operation: str) -> TransactionalResult:
        result = self._results[operation] = self._new_result("EndTxn(commit)" if commit else "EndTxn(abort)")
        # Always through the sender, even when the coordinator never heard of the transaction: the sender
        # first fails what an abort leaves unsent and waits for what is in flight (see next_request).
        pid, epoch = self.idempotence.producer_id, self.idempotence.producer_epoch
        # The version is fixed with the request, as Java's EndTxnRequest.Builder takes isTransactionV2Enabled.
        self._pending.append(TxnRequest(ApiKey.END_TXN, lambda: {
            "transactional_id": self.transactional_id, "producer_id": pid, "producer_epoch": epoch,
            "committed": commit}, "txn", self.transactional_id, result,
            transaction_version=2 if self.tv2 else 1,
            extra={"commit": commit, "tv2": self.tv2}))
        self.maybe_update_tv2(on_init=False)
        return result

    def _complete_transaction(self, result: TransactionalResult) -> None:
        self._in_txn.clear()
        self._new.clear()
        self._adding.clear()
        self.transaction_started = False
        if self._bump_for_tv2:
            self._bump_for_tv2 = False
            self.idempotence.request_epoch_bump("transaction version 2 came on between transactions")
        if self.idempotence.bump_requested:
            # A batch of the aborted transaction failed and left a sequence gap: ask the coordinator for the
            # next epoch of the same producer id (KIP-360) before the next transaction.
            self._transition(State.INITIALIZING)
            self._enqueue_init_producer_id(result, bump=True)
            return
        self.last_error = None
        self._transition(State.READY)
        result.done()

    def _enqueue_init_producer_id(self, result: TransactionalResult, bump: bool) -> None:
        idem = self.idempotence

        def build() -> dict[str, Any]:
            return {"transactional_id": self.transactional_id, "transaction_timeout_ms": self.transaction_timeout_ms,
                    "producer_id": idem.producer_id if bump else -1,
                    "producer_epoch": idem.producer_epoch if bump else -1}

        self._pending.append(TxnRequest(ApiKey.INIT_PRODUCER_ID, build, "txn", self.transactional_id, result))

    def _enqueue_add_partitions(self) -> None:
        parts = sorted(self._new)
        self._adding.update(parts)
        self._new.clear()
        pid, epoch = self.idempotence.producer_id, self.idempotence.producer_epoch
        by_topic: dict[str, list[int]] = {}
        for topic, partition in parts:
            by_topic.setdefault(topic, []).append(partition)
        topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
        self._pending.append(TxnRequest(ApiKey.ADD_PARTITIONS_TO_TXN, lambda: {
            "v3_and_below_transactional_id": self.transactional_id, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics,
            "transactions": [{"transactional_id": self.transactional_id, "producer_id": pid,
                              "producer_epoch": epoch, "verify_only": False, "topics": topics}],
        }, "txn", self.transactional_id, extra={"partitions": parts}))

    def _enqueue_txn_offset_commit(self, result: TransactionalResult,
                                   offsets: Mapping[TopicPartitionKey, tuple[int, str | None]], group_id: str,
                                   member: Mapping[str, Any]) -> None:
        pid, epoch = self.idempotence.producer_id, self.idempotence.producer_epoch
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), (offset, metadata) in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                "committed_metadata": metadata})
        # The version is fixed with the request, as Java's TxnOffsetCommitRequest.Builder takes
        # isTransactionV2Enabled: v5 under version 2 (it adds the group), v4 at most under version 1.
        self._pending.append(TxnRequest(ApiKey.TXN_OFFSET_COMMIT, lambda: {
            "transactional_id": self.transactional_id, "group_id": group_id, "producer_id": pid,
            "producer_epoch": epoch, "generation_id_or_member_epoch": member.get("generation_id", -1),
            "member_id": member.get("member_id", ""), "group_instance_id": member.get("group_instance_id"),
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }, "group", group_id, result, transaction_version=2 if self.tv2 else 1))

    def _lookup_coordinator(self, kind: str, key: str) -> None:
        if any(r.api == ApiKey.FIND_COORDINATOR and r.key == key and r.extra["kind"] == kind for r in self._pending):
            return
        self._pending.append(TxnRequest(ApiKey.FIND_COORDINATOR, lambda: {"key": key, "key_type": _KEY_TYPE[kind]},
                                        None, key, extra={"kind": kind}))

    def _retry(self, req: TxnRequest, now: float) -> None:
        req.retry_at = now + self.retry_backoff_ms
        self._pending.append(req)

    def _coordinator_moved(self, req: TxnRequest, now: float) -> None:
        assert req.coordinator is not None
        self.coordinators.pop((req.coordinator, req.key), None)
        self._retry(req, now)

    def _abortable(self, error: KafkaError) -> None:
        if self.state is State.FATAL_ERROR:
            return
        log.warning("TransactionalId %s: transaction must be aborted: %s", self.transactional_id, error)
        self.last_error = error
        if self.state is State.ABORTING:
            return  # already aborting: the abort goes on
        commit = self._results.get("commit_transaction")
        # A commit under way cannot succeed any more: its caller learns why, then aborts.
        self._pending = [r for r in self._pending if r.api != ApiKey.END_TXN]
        self._transition(State.ABORTABLE_ERROR)
        if commit is not None and not commit.is_done:
            failed = TransactionAbortableError(f"commit_transaction() failed: {error}. Call abort_transaction().")
            failed.__cause__ = error
            commit.done(failed)

    def _fatal(self, error: KafkaError) -> None:
        if self.state is State.FATAL_ERROR:
            return
        log.error("TransactionalId %s: fatal error: %s", self.transactional_id, error)
        self.last_error = error
        self.state = State.FATAL_ERROR
        if self.on_state is not None:
            self.on_state(State.FATAL_ERROR)
        pending, self._pending = self._pending, []
        for r in pending:
            if r.result is not None:
                r.result.done(error)
        for result in [*self._results.values(), *self._open]:
            result.done(error)
        if self.on_fatal is not None:
            self.on_fatal(error)

    def _error_of(self, req: TxnRequest, code: int) -> BrokerError:
        err = make_error(code, f"{req.api.name} for transactional.id {self.transactional_id!r}")
        assert err is not None
        return err

    def _common(self, req: TxnRequest, code: int, now: float) -> bool:
        """The answers every coordinator request treats alike; True when handled."""
        if code in _COORDINATOR_MOVED or code in _RETRY:
            req.last_error = self._error_of(req, code)
        if code in _COORDINATOR_MOVED:
            self._coordinator_moved(req, now)
            return True
        if code in _RETRY:
            self._retry(req, now)
            return True
        if code in _FENCED:
            self._fatal(self._fenced())
            return True
        return False

    def _fenced(self) -> ProducerFencedError:
        # The broker gives one answer for both causes: Apache Kafka's coordinator also bumps the epoch when it
        # aborts a transaction that outlived its timeout, which users meet far more often than a second instance.
        return ProducerFencedError(
            f"There is a newer producer with the same transactional.id {self.transactional_id!r} which fences "
            f"the current one, or the coordinator aborted this producer's transaction after transaction.timeout.ms "
            f"({self.transaction_timeout_ms} ms): this producer can only be closed")

    # --- one handler per API ------------------------------------------------------------------------

    def _on_find_coordinator(self, req: TxnRequest, body: dict[str, Any], now: float) -> None:
        code = body.get("error_code", NO_ERROR)
        if code == NO_ERROR:
            self.coordinators[(req.extra["kind"], req.key)] = body["node_id"]
            self.coordinator_addresses[body["node_id"]] = (body["host"], body["port"])
            return
        err = self._error_of(req, code)
        if err.retriable:
            self._retry(req, now)
        elif req.extra["kind"] == "group":
            self._abortable(err)
        else:
            self._fatal(err)

    def _on_init_producer_id(self, req: TxnRequest, body: dict[str, Any], now: float) -> None:
        code = body.get("error_code", NO_ERROR)
        assert req.result is not None
        if code == NO_ERROR:
            self.idempotence.set_producer_id(body["producer_id"], body["producer_epoch"])
            if self.on_epoch is not None:
                self.on_epoch()
            self.last_error = None
            self._transition(State.READY)
            if req.result is self._results.get("init_transactions"):
                self.maybe_update_tv2(on_init=True)
            req.result.done()
            return
        if self._common(req, code, now):
            return
        self._fatal(self._error_of(req, code))

    def _on_add_partitions(self, req: TxnRequest, body: dict[str, Any], now: float) -> None:
        parts: list[TopicPartitionKey] = req.extra["partitions"]
        top = body.get("error_code", NO_ERROR)
        codes: dict[TopicPartitionKey, int] = {}
        topic_results = body.get("results_by_topic_v3_and_below") or [
            t for r in body.get("results_by_transaction", ()) for t in r.get("topic_results", ())]
        for t in topic_results:
            for p in t.get("results_by_partition", ()):
                codes[(t["name"], p["partition_index"])] = p["partition_error_code"]
        if top != NO_ERROR:
            codes = dict.fromkeys(parts, top)
        failed = {tp: c for tp, c in codes.items() if c not in (NO_ERROR, OperationNotAttemptedError.code)}
        self._adding.difference_update(parts)
        added = [tp for tp in parts if codes.get(tp) == NO_ERROR]
        self._in_txn.update(added)
        if added:
            self.transaction_started = True
        if not failed:
            # Partitions the coordinator did not attempt (or did not mention) are asked for again.
            self._new.update(tp for tp in parts if codes.get(tp) != NO_ERROR)
            return
        code = next(iter(failed.values()))
        if code in _COORDINATOR_MOVED or code in _RETRY or code == UnknownTopicOrPartitionError.code:
            if code in _COORDINATOR_MOVED:
                self.coordinators.pop(("txn", self.transactional_id), None)
            # Everything not yet added is asked for again after the backoff.
            self._new.update(tp for tp in parts if codes.get(tp) != NO_ERROR)
            self._next_add_at = now + self.retry_backoff_ms
            return
        if code in _FENCED:
            self._common(req, code, now)
            return
        err = self._error_of(req, code)
        if code in _LOST_ID:
            self.idempotence.request_epoch_bump(f"{err.name} on AddPartitionsToTxn")
            self._abortable(err)
        elif code in (InvalidTxnStateError.code, TransactionalIdAuthorizationFailedError.code):
            self._fatal(err)
        else:
            self._abortable(err)

    def _on_add_offsets(self, req: TxnRequest, body: dict[str, Any], now: float) -> None:
        code = body.get("error_code", NO_ERROR)
        if code == NO_ERROR:
            self.transaction_started = True
            assert req.result is not None
            self._enqueue_txn_offset_commit(req.result, req.extra["offsets"], req.extra["group_id"],
                                            req.extra["member"])
            return
        if self._common(req, code, now):
            return
        err = self._error_of(req, code)
        assert req.result is not None
        req.result.done(err)
        self._abortable(err)

    def _on_txn_offset_commit(self, req: TxnRequest, body: dict[str, Any], now: float) -> None:
        codes = [p["error_code"] for t in body.get("topics", ()) for p in t.get("partitions", ())]
        bad = [c for c in codes if c != NO_ERROR]
        assert req.result is not None
        if not bad:
            req.result.done()
            return
        code = bad[0]
        if code in _COORDINATOR_MOVED or code in _RETRY or code in (UnknownTopicOrPartitionError.code,
                                                                   RequestTimedOutError.code):
            if code in _COORDINATOR_MOVED:
                self.coordinators.pop(("group", req.key), None)
            log.debug("TransactionalId %s: TxnOffsetCommit for group %s retried after %s", self.transactional_id,
                      req.key, self._error_of(req, code).name)
            self._retry(req, now)
            return
        if self._common(req, code, now):
            return
        err = self._error_of(req, code)
        if err.retriable:
            self._retry(req, now)
            return
        req.result.done(err)
        # Java's TxnOffsetCommitHandler: the group refusing the offsets (a stale member, no access, a fenced
        # instance) or TRANSACTION_ABORTABLE leaves the transaction abortable; anything else, the transactional
        # id's authorization included, is fatal. Under transaction version 2 this request is also the one that
        # adds the group to the transaction, so its unexpected answers weigh as AddOffsetsToTxn's would.
        if code in _OFFSETS_ABORTABLE:
            self._abortable(err)
        else:
            self._fatal(err)

    def _on_end_txn(self, req: TxnRequest, body: dict[str, Any], now: float) -> None:
        code = body.get("error_code", NO_ERROR)
        assert req.result is not None
        if code == NO_ERROR:
            if req.extra.get("tv2") and body.get("producer_id", -1) >= 0:
                # EndTxn v5 ends every transaction with a new epoch (and, when the epoch ran out, a new id):
                # the next transaction's batches start their sequences at 0 under it.
                self.idempotence.set_producer_id(body["producer_id"], body["producer_epoch"])
                if self.on_epoch is not None:
                    self.on_epoch()
            self._complete_transaction(req.result)
            return
        if self._common(req, code, now):
            return
        err = self._error_of(req, code)
        if code == InvalidTxnStateError.code and req.extra.get("tv2"):
            # Under transaction version 2 the coordinator that aborted a transaction on its own (it outlived
            # transaction.timeout.ms) has bumped the epoch, and answers the producer's EndTxn with this, not
            # PRODUCER_FENCED. Fatal, as in Java's EndTxnHandler; the message names the likely cause.
            err = InvalidTxnStateError(
                f"{err}: the coordinator no longer has this transaction open; most likely it aborted it after "
                f"transaction.timeout.ms ({self.transaction_timeout_ms} ms). This producer can only be closed")
        if code in _LOST_ID and not req.extra["commit"]:
            # The coordinator forgot us (the transaction timed out and was aborted): the abort is done.
            self.idempotence.request_epoch_bump(f"{err.name} on EndTxn")
            self._complete_transaction(req.result)
            return
        if code == TransactionAbortableError.code:
            # Java's EndTxnHandler: a commit the coordinator refuses this way can still be aborted; an abort
            # refused so cannot be completed by this producer.
            if req.extra["commit"]:
                self._abortable(err)
                return
            failed = KafkaError(f"Failed to abort transaction: {err}")
            failed.__cause__ = err
            self._fatal(failed)
            return
        self._fatal(err)


_HANDLERS: dict[ApiKey, Callable[[TransactionManager, TxnRequest, dict[str, Any], float], None]] = {
    ApiKey.FIND_COORDINATOR: TransactionManager._on_find_coordinator,
    ApiKey.INIT_PRODUCER_ID: TransactionManager._on_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: TransactionManager._on_add_partitions,
    ApiKey.ADD_OFFSETS_TO_TXN: TransactionManager._on_add_offsets,
    ApiKey.TXN_OFFSET_COMMIT: TransactionManager._on_txn_offset_commit,
    ApiKey.END_TXN: TransactionManager._on_end_txn,
}

