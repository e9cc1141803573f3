"""The per-record future and the metadata it resolves to.

A record's future does not own a lock or a condition: it points at its batch, and the batch owns one
Event for all of its records (Java's FutureRecordMetadata over ProduceRequestResult). Creating one per
send() therefore costs a few attribute stores, and completing a batch costs O(1) unless someone attached
a callback or is waiting through concurrent.futures.wait(). The batch does not point back (only listeners
are registered with it), so a future the caller drops is freed at once instead of living as long as its
record is queued.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from kafkajet.errors import KafkaError, KafkaTimeoutError
from kafkajet.last_resort import log_even_unconfigured

log = logging.getLogger("kafkajet.producer.futures")



def callback_failed(subject: str) -> None:
    """Log the exception being handled, raised by a callback (send()'s or a future's) for `subject`, as
    concurrent.futures does: "exception calling callback for ...", with the traceback, never raised; on stderr
    even without logging set up, as a plain Future prints it (last_resort.py)."""
    log_even_unconfigured(log, logging.ERROR, "exception calling callback for %s", subject, exc_info=True)


_PENDING = "PENDING"
_FINISHED = "FINISHED"


class RecordMetadata(NamedTuple):
    """Where a record was written, as a send()'s future resolves (Java's RecordMetadata); a tuple, so
    `topic, partition, offset, *_ = md` works too. A failed record's callback gets one with the topic and
    partition and -1 elsewhere."""

    topic: str
    """The topic the record went to."""
    partition: int
    """The partition the record went to."""
    offset: int
    """The record's offset in the partition; -1 when unknown (acks=0, or a duplicate the broker answered
    without an offset)."""
    timestamp: int
    """The record's timestamp in milliseconds since the epoch: the one sent (CreateTime), or the broker's
    when the topic uses LogAppendTime."""
    serialized_key_size: int
    """The key's size in bytes after serialization; -1 for a null key."""
    serialized_value_size: int
    """The value's size in bytes after serialization; -1 for a null value."""


DeliveryCallback = Callable[[RecordMetadata, "BaseException | None"], object]
"""send(callback=fn): fn(metadata, exception) once per record, on the sender thread. On failure `metadata` has
the topic and partition and -1 elsewhere, as Java's."""

class BatchView(Protocol):
    """What a future needs of the batch that holds its record (batch.ProducerBatch provides it). Futures see
    batches only through this, so this module imports nothing of batch.py, which imports it."""

    topic: str
    partition: int
    completed: bool  # the outcome is known, or the records moved (is_split)
    done: bool  # and the delivery callbacks have run: waiters may go (Java's produceFuture.done())
    is_split: bool
    error: KafkaError | None
    base_offset: int
    log_append_time: int

    def locate(self, index: int) -> tuple[BatchView, int]: ...

    def register(self, fut: RecordFuture, index: int, callback: Callable[[Any], object] | None = None) -> bool: ...

    def settled(self) -> bool: ...

    def wait_done(self, timeout: float | None) -> bool: ...


_MATERIALISE_LOCK = threading.Lock()  # two threads waiting on one future at once must build one condition


class RecordFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    """A concurrent.futures.Future for one record; works with wait(), as_completed() and asyncio.wrap_future()."""

    # Future.__init__ is skipped on purpose (it builds a Condition per record); the attributes that
    # concurrent.futures.wait() reaches for (_condition, _state, _waiters) are provided lazily below.
    # Set only on the few futures somebody waits on or attaches a callback to; None (here) for the rest.
    # One callback as itself, a list from the second: a list per record fed the garbage collector.
    _callbacks: Callable[[Any], object] | list[Callable[[Any], object]] | None = None
    _cond: threading.Condition | None = None
    _wait_list: list[Any] | None = None
    _notified = False  # batch_completed() has told this future's waiters (only tracked once _cond exists)

    def __init__(self, batch: BatchView, index: int, timestamp: int, key_size: int, value_size: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def locate(self) -> tuple[BatchView, int]:
        """The batch that holds the record now, and its index there: a split (MESSAGE_TOO_LARGE) moves
        records, and the split batch says where. The future itself never changes, so no thread sees it half
        re-pointed."""
        return self._batch.locate(self._index)

    def _listen(self, callback: Callable[[Any], object] | None) -> bool:
        """Register with the record's batch; False if the record's outcome is already known."""
        while True:
            batch, index = self.locate()
            if batch.register(self, index, callback):
                return True
            if not batch.is_split:
                return False
            # Split between locate() and register(): follow the record again.

    # --- concurrent.futures internals, materialised on demand -----------------------------------

    @property  # type: ignore[override]
    def _state(self) -> str:  # type: ignore[override]
        if self._cond is None:
            return _FINISHED if self.done() else _PENDING
        # Once waited on, the state flips only under the condition, when the waiters are told: wait() counts
        # the pending futures while holding every condition, and a flip in between would be counted twice.
        return _FINISHED if self._notified else _PENDING

    @property  # type: ignore[override]
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        if self._cond is None:
            with _MATERIALISE_LOCK:
                if self._cond is None:
                    self._cond = threading.Condition()
                    if not self._listen(None):
                        self._notified = True  # already complete: nobody will call batch_completed()
        return self._cond

    @property  # type: ignore[override]
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        if self._wait_list is None:
            self._condition  # noqa: B018  (listening starts with the condition)
            self._wait_list = []
        return self._wait_list

    # --- public Future API ---------------------------------------------------------------------

    def done(self) -> bool:
        """Whether the record's outcome is known (delivered or failed)."""
        batch = self._batch
        # settled(), not done: a delivery callback sees its own batch's records as done, as result() does.
        return batch.settled() and (not batch.is_split or self.locate()[0].settled())

    def running(self) -> bool:
        return not self.done()

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """Always False: a record handed to the producer cannot be recalled, as in Java."""
        return False

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            batch = self.locate()[0]
            if batch.settled():
                return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise KafkaTimeoutError(
                    f"record for {batch.topic}-{batch.partition} not acknowledged within {timeout} s "
                    "(still pending; the producer keeps trying until delivery.timeout.ms)"
                )
            batch.wait_done(remaining)  # a split wakes it too: the loop then follows the record

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's RecordMetadata once the broker acknowledged it, or its error raised (DeliveryTimeoutError
        after delivery.timeout.ms, with the last cause). KafkaTimeoutError if `timeout` seconds pass first: the
        record is still pending, and the producer keeps trying."""
        self._wait(timeout)
        batch, index = self.locate()
        if batch.error is not None:
            raise batch.error
        return self._metadata(batch, index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The record's error, or None once it was delivered; waits as result() does."""
        self._wait(timeout)
        return self.locate()[0].error

    def _metadata(self, batch: BatchView, index: int) -> RecordMetadata:
        offset = batch.base_offset + index if batch.base_offset >= 0 else -1
        ts = batch.log_append_time if batch.log_append_time >= 0 else self._timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, ts, self._key_size, self._value_size)

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        """Call fn(future) once the outcome is known: on the producer's thread, or at once on the caller's if
        it is known already. An exception fn raises is logged (on stderr even without logging set up), as
        concurrent.futures does, never raised."""
        if not self._listen(fn):
            self._run_callback(fn)

    def _run_callback(self, fn: Callable[[Any], object]) -> None:
        try:
            fn(self)
        except Exception:
            callback_failed(repr(self))

    def keep_callback(self, fn: Callable[[Any], object]) -> None:
        """For the batch: hold `fn` until batch_completed(). Called under the batch's lock, so a callback is
        either kept here and run at completion or refused (register() False) and run by the caller, never both."""
        kept = self._callbacks
        if kept is None:
            self._callbacks = fn
        elif isinstance(kept, list):
            kept.append(fn)
        else:
            self._callbacks = [kept, fn]

    def batch_completed(self) -> None:
        """Called once by the batch (on the sender thread) when this record's outcome is known."""
        callbacks, self._callbacks = self._callbacks, None
        if self._cond is not None:
            failed = self.locate()[0].error is not None
            with self._cond:
                self._notified = True
                waiters = self._wait_list or []
                for waiter in waiters:
                    if not failed:
                        waiter.add_result(self)
                    else:
                        waiter.add_exception(self)
                self._cond.notify_all()
        if isinstance(callbacks, list):
            for fn in callbacks:
                self._run_callback(fn)
        elif callbacks is not None:
            self._run_callback(callbacks)

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def set_result(self, result: object) -> None:
        raise RuntimeError("a record's future is completed by the producer, not by callers")

    set_exception = set_result  # type: ignore[assignment]

    def __repr__(self) -> str:
        b, index = self.locate()
        state = "pending" if not b.done else (f"failed {type(b.error).__name__}" if b.error else "done")
        return f"<RecordFuture {b.topic}-{b.partition} #{index} {state}>"


# A run of send_batch() records that went into one batch: the batch, the index of the run's first record in
# it, and the records' positions in the caller's input.
Segment = tuple[BatchView, int, Sequence[int]]


class BatchFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    """The outcome of Producer.send_batch(), awaited together; a concurrent.futures.Future, so wait(),
    as_completed(), add_done_callback() and asyncio.wrap_future() work on it.

    result() returns every record's RecordMetadata in input order, or raises the first failure (with the
    index of the record in its message); errors() lists every failed record for callers that want them all.

    It holds segments, not a future per record: creating a million futures was the largest cost of the batch
    path. A record's outcome is its batch's; if the batch was split (MESSAGE_TOO_LARGE), the split batch's
    forwarding table says where each record went. It keeps the records' sizes, not the records: the caller's
    keys and values are free to go once send_batch() returned.
    """

    def __init__(self, n: int, segments: list[Segment], timestamps: Sequence[int],
                 key_sizes: Sequence[int] | None, value_sizes: Sequence[int],
                 futures: Sequence[RecordFuture] | None = None) -> None:
        self._n = n
        self._segments = segments
        self._timestamps = timestamps
        self._key_sizes = key_sizes  # -1 for a null key; None: every key null
        self._value_sizes = value_sizes  # -1 for a null value
        self._futures = futures  # per-record futures, when the records went through send()
        super().__init__()
        self._scan = 0  # segments before this one are known complete
        self._arm()

    # --- the Future machinery: one record watched at a time --------------------------------------------

    def _first_pending(self) -> tuple[BatchView, int] | None:
        """A record whose outcome is not known yet, or None when all are. settled(), not done: on the thread
        running a batch's callbacks its listeners refuse to register, and this would look at it forever."""
        segments = self._segments
        while self._scan < len(segments):
            batch, first, idx = segments[self._scan]
            if not batch.settled():
                return batch, first
            if batch.is_split:
                for place in self._located(batch, first, len(idx)):
                    if not place[0].settled():
                        return place
            self._scan += 1
        return None

    def _arm(self, _: object = None) -> None:
        """Listen on one pending record; when it completes (on the sender thread) look for the next. A watch
        per call, not per record, keeps send_batch() cheap; when none is pending the Future completes."""
        while True:
            pending = self._first_pending()
            if pending is None:
                self._finish()
                return
            if RecordFuture(pending[0], pending[1], 0, 0, 0)._listen(self._arm):
                return

    def _finish(self) -> None:
        failed = self._first_error()
        if failed is None:
            concurrent.futures.Future.set_result(self, None)  # result() builds the list itself, on demand
        else:
            concurrent.futures.Future.set_exception(self, failed)

    def _first_error(self) -> BaseException | None:
        errors = self.errors(0)
        return errors[0][1] if errors else None

    def cancel(self) -> bool:
        """Always False: records handed to the producer cannot be recalled, as in Java."""
        return False

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The first failed record's error (by input order), or None when every record was delivered; waits
        as wait() does."""
        self.wait(timeout)
        return self._first_error()

    def set_result(self, result: object) -> None:
        raise RuntimeError("a send_batch() future is completed by the producer, not by callers")

    set_exception = set_result  # type: ignore[assignment]

    @classmethod
    def of(cls, futures: Sequence[RecordFuture]) -> BatchFuture:
        """From per-record futures (the path interceptors need); every record then has its future."""
        return cls(len(futures), [(f._batch, f._index, (i,)) for i, f in enumerate(futures)], (), None, (), futures)

    def __len__(self) -> int:
        return self._n

    @staticmethod
    def _located(batch: BatchView, first: int, count: int) -> list[tuple[BatchView, int]]:
        """Where the records first..first+count-1 of a split batch are now."""
        return [batch.locate(index) for index in range(first, first + count)]

    def done(self) -> bool:
        """Whether every record's outcome is known."""
        for batch, first, idx in self._segments:
            if not batch.settled():
                return False
            if batch.is_split and not all(b.settled() for b, _ in self._located(batch, first, len(idx))):
                return False
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Return once every record's outcome is known; KafkaTimeoutError if `timeout` seconds pass first (the
        records still pending, the producer still trying)."""
        self._wait_until(None if timeout is None else time.monotonic() + timeout, timeout)

    def _wait_until(self, deadline: float | None, timeout: float | None) -> None:
        """wait() against a monotonic deadline; `timeout` is what the caller asked for, for the message."""
        pending = [(batch, first, len(idx)) for batch, first, idx in reversed(self._segments)]
        while pending:
            batch, first, count = pending.pop()
            if not batch.done:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.wait_done(remaining):
                    # Records of the call that already failed are the likelier story than the wait: say so.
                    failed, cause = self._failures_so_far()
                    raise KafkaTimeoutError(
                        f"records for {batch.topic}-{batch.partition} not acknowledged within {timeout} s "
                        "(still pending; the producer keeps trying until delivery.timeout.ms)"
                        + (f"; {failed} records already failed, the first so" if failed else ""),
                        cause)
            if batch.is_split:
                pending.extend((b, i, 1) for b, i in self._located(batch, first, count))

    def errors(self, timeout: float | None = None) -> list[tuple[int, BaseException]]:
        """Every failed record as (its index in the input, its error), in input order; empty when all were
        delivered. Waits as wait() does."""
        self.wait(timeout)
        out: list[tuple[int, BaseException]] = []
        for batch, first, idx in self._segments:
            if batch.is_split:
                out.extend((i, b.error) for i, (b, _) in zip(idx, self._located(batch, first, len(idx)), strict=True)
                           if b.error is not None)
            elif batch.error is not None:
                out.extend((i, batch.error) for i in idx)
        out.sort(key=lambda e: e[0])
        return out

    def _failures_so_far(self) -> tuple[int, BaseException | None]:
        """How many records are known to have failed, and the error of the first one met, without waiting: one
        look per segment (per record only in a split batch)."""
        failed, error = 0, None
        for batch, first, idx in self._segments:
            if batch.is_split:
                errors = [b.error for b, _ in self._located(batch, first, len(idx)) if b.error is not None]
                failed += len(errors)
                error = error or (errors[0] if errors else None)
            elif batch.error is not None:
                failed += len(idx)
                error = error or batch.error
        return failed, error

    def __repr__(self) -> str:
        failed = self._failures_so_far()[0]
        state = ("failed" if failed else "done") if self.done() else "pending"
        return f"<{type(self).__name__} records={self._n} {state} failed={failed}>"

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Every record's RecordMetadata in input order, or the first failure raised (errors() lists them
        all). Waits as wait() does."""
        failed = self.errors(timeout)
        if failed:
            log.debug("record %d of a send_batch() call failed", failed[0][0])
            raise failed[0][1]
        if self._futures is not None:
            return [f._metadata(*f.locate()) for f in self._futures]
        out: list[RecordMetadata | None] = [None] * self._n
        ts, key_sizes, value_sizes = self._timestamps, self._key_sizes, self._value_sizes
        for batch, first, idx in self._segments:
            places = self._located(batch, first, len(idx)) if batch.is_split else None
            topic, partition = batch.topic, batch.partition
            base = batch.base_offset
            log_append = batch.log_append_time
            for j, i in enumerate(idx):
                offset = first + j
                if places is not None:
                    b, offset = places[j]
                    topic, partition, base, log_append = b.topic, b.partition, b.base_offset, b.log_append_time
                out[i] = RecordMetadata(topic, partition, base + offset if base >= 0 else -1,
                                        log_append if log_append >= 0 else ts[i],
                                        -1 if key_sizes is None else key_sizes[i], value_sizes[i])
        return out  # type: ignore[return-value]


class CombinedBatchFuture(BatchFuture):
    """Several BatchFutures (one per topic of a multi-topic send_arrow()) seen as one, in input order."""

    def __init__(self, n: int, parts: Sequence[tuple[BatchFuture, Sequence[int]]]) -> None:
        self._n = n
        self._parts = parts  # each part, and where its records were in the caller's input
        concurrent.futures.Future.__init__(self)
        self._left = len(parts)
        self._left_lock = threading.Lock()
        if not parts:
            self._finish()
        for part, _ in parts:
            part.add_done_callback(self._part_done)

    def _part_done(self, _: object) -> None:
        with self._left_lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._finish()

    def done(self) -> bool:
        return all(part.done() for part, _ in self._parts)

    def wait(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for part, _ in self._parts:
            part._wait_until(deadline, timeout)

    def errors(self, timeout: float | None = None) -> list[tuple[int, BaseException]]:
        self.wait(timeout)
        out = [(where[i], e) for part, where in self._parts for i, e in part.errors()]
        out.sort(key=lambda e: e[0])
        return out

    def _failures_so_far(self) -> tuple[int, BaseException | None]:
        seen = [part._failures_so_far() for part, _ in self._parts]
        return sum(n for n, _ in seen), next((e for _, e in seen if e is not None), None)

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        failed = self.errors(timeout)
        if failed:
            raise failed[0][1]
        out: list[RecordMetadata | None] = [None] * self._n
        for part, where in self._parts:
            for i, md in enumerate(part.result()):
                out[where[i]] = md
        return out  # type: ignore[return-value]
