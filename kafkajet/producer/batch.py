"""ProducerBatch: records bound for one partition, encoded as they arrive (Java's ProducerBatch +
MemoryRecordsBuilder). The records region grows in a pooled buffer; the 61-byte header, compression
and CRC are added when the batch is drained, because the sequence number is only known then.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafkajet._build import kernel
from kafkajet.errors import KafkaError
from kafkajet.producer.futures import DeliveryCallback, RecordFuture, RecordMetadata, callback_failed
from kafkajet.producer.metrics import BatchStats
from kafkajet.records import (
    BATCH_HEADER_SIZE,
    TABLE_SIZE,
    Record,
    append_columns,
    append_record,
    append_run,
    decode_records,
    record_size_upper_bound,
    seal_in_place,
)

Headers = Sequence[tuple[str, bytes | None]] | None
_HEADER_ROOM = bytes(BATCH_HEADER_SIZE)

# A batch's delivery callbacks (send(callback=)) are one flat list, five entries a record in send order: the
# record's index in the batch, its callback, and what its RecordMetadata needs beyond the batch's outcome
# (timestamp, serialized key size, serialized value size). Flat, so that holding them allocates nothing the
# garbage collector tracks: a tuple per record (which also kept the record's future alive until the batch
# completed) made the collector a fifth of the caller's time in a send(callback=) loop.
CallbackEntries = list[Any]
_ENTRY: Final = 5

# Final: compiled, a C static rather than a module-dict look-up per record.
_RecordFuture: Final = RecordFuture
_new_object: Final = object.__new__
_new_tuple: Final = tuple.__new__  # builds a RecordMetadata without NamedTuple's keyword-parsing __new__ (a third of the cost)
# The compiled build's kernels (hatch_build.KERNELS), None where the Python below runs: C for the steps the
# compiled Python is slowest at per record, encoding it (record.append_record and, for the batch path,
# columns.append_columns are the references) and making its callback's RecordMetadata (_new_tuple above is the
# reference).
_append_record: Final[Callable[..., int]] = kernel("kafkajet.records.record_kernel", "append_record") or append_record
# Not Final (a look-up per window of records, not per record): tests watch the batch path take it.
_append_columns: Callable[..., int] = kernel("kafkajet.records.record_kernel", "append_columns") or append_columns
_new_metadata: Final[Callable[..., RecordMetadata] | None] = kernel("kafkajet.producer.metadata_kernel", "new_metadata")


def record_future(batch: ProducerBatch, index: int, timestamp: int, key: bytes | None,
                  value: bytes | None) -> RecordFuture:
    """The future of the record try_add() put at `index` of `batch`: RecordFuture(batch, index, ...) without the
    call to its __init__, which runs as Python and was a third of a future's cost in the compiled send() loop
    (the attributes are set from compiled code here; a test checks they are __init__'s)."""
    fut: Any = _new_object(_RecordFuture)
    fut._batch = batch
    fut._index = index
    fut._timestamp = timestamp
    fut._key_size = -1 if key is None else len(key)
    fut._value_size = -1 if value is None else len(value)
    return fut  # type: ignore[no-any-return]


def fire_callbacks(batch: ProducerBatch, callbacks: CallbackEntries) -> None:
    """Run the delivery callbacks of a completed batch's records (CallbackEntries), in send order; one that raises
    is logged and the rest still run."""
    topic, partition, error = batch.topic, batch.partition, batch.error
    if error is not None:
        failed = _new_tuple(RecordMetadata, (topic, partition, -1, -1, -1, -1))
        for i in range(1, len(callbacks), _ENTRY):
            fn = callbacks[i]
            try:
                fn(failed, error)
            except Exception:
                callback_failed(f"{failed!r} (failed: {error!r})")  # pragma: no mutate
        return
    base, append_time = batch.base_offset, batch.log_append_time
    new_metadata = _new_metadata  # a local: the pure build's loop tests it per record
    for i in range(0, len(callbacks), _ENTRY):
        index: int = callbacks[i]
        fn = callbacks[i + 1]
        offset = base + index if base >= 0 else -1
        timestamp = append_time if append_time >= 0 else callbacks[i + 2]
        if new_metadata is not None:
            md = new_metadata(RecordMetadata, topic, partition, offset, timestamp, callbacks[i + 3], callbacks[i + 4])
        else:
            md = _new_tuple(RecordMetadata, (topic, partition, offset, timestamp, callbacks[i + 3], callbacks[i + 4]))
        try:
            fn(md, None)
        except Exception:
            callback_failed(repr(md))  # pragma: no mutate


@dataclass(slots=True, frozen=True)
class Columns:
    """What send_batch() found out about its records that lets a batch encode them column-wise: one
    timestamp for all, no null values, keys all bytes (with klens) or none at all (keys None), header
    sections already encoded (b"\\x00" for none; headers None when no record has any), every length."""
    timestamp: int
    keys: Sequence[bytes] | None
    klens: list[int] | None
    vlens: list[int]
    headers: list[bytes] | None = None
    hlens: list[int] | None = None


class ProducerBatch:
    __slots__ = (
        "topic", "partition", "tp", "buf", "capacity", "limit", "count", "base_timestamp", "max_timestamp",
        "moved", "created_ms", "last_attempt_ms", "retry_at_ms", "attempts", "full", "in_flight",
        "producer_id", "producer_epoch", "base_sequence", "wire", "completed", "error", "base_offset",
        "log_append_time", "_done_event", "last_error", "_lock", "_listeners", "is_split", "order", "done", "_firing",
        "_sealed_sequence", "pooled", "callbacks", "max_limit", "grow", "max_record", "reserved", "unheard",
        "leader_epoch", "attempts_at_leader_change",
    )

    def __init__(self, topic: str, partition: int, buf: bytearray, capacity: int, now_ms: float,
                 max_limit: int = 0, grow: Callable[[ProducerBatch, int], bool] | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.tp = (topic, partition)
        # The batch header's room first, the records after it: sealing writes the header in place, and an
        # uncompressed batch goes to the socket as a view of this buffer, never copied.
        buf += _HEADER_ROOM
        self.buf = buf
        self.capacity = capacity
        self.limit = capacity  # how long buf may grow, header included, with the memory reserved so far
        # How long buf may grow before the bytearray reallocates (_reserve_room), as far as we know.
        self.reserved = 0
        # While the batch waits in its deque it may take records past `capacity` up to max_limit
        # (batch.max.size), each step reserved from the pool by grow(batch, bytes needed) without blocking.
        self.max_limit = max(capacity, max_limit)
        self.max_record = 0  # the largest record send() appended (record-size-max)
        self.grow = grow
        self.count = 0
        self.base_timestamp = 0
        self.max_timestamp = -1
        # The batch does not hold its records' futures: a caller who drops one frees it at once, so queued
        # records cost their bytes only. After a split, moved[i] is where record i went (batch, index), and
        # futures follow it there (RecordFuture.locate).
        self.moved: list[tuple[ProducerBatch, int]] | None = None
        self.created_ms = now_ms
        self.last_attempt_ms = now_ms
        self.retry_at_ms = 0.0
        self.attempts = 0
        # The partition's leader epoch when the batch last looked, and its attempt count then (Java's
        # currentLeaderEpoch and attemptsWhenLeaderLastChanged): a retry to a new leader skips the backoff.
        self.leader_epoch = -1
        self.attempts_at_leader_change = 0
        self.full = False
        self.in_flight = False
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.wire: bytes | memoryview | None = None
        self._sealed_sequence = -1
        self.pooled = True  # whether buf came from the BufferPool and goes back to it
        # Completion has two steps, as Java's (completeFutureAndFireCallbacks, then produceFuture.done()):
        # `completed` when the outcome is known and the delivery callbacks are taken, `done` once they have run.
        # flush(), close() and the futures' waiters wait for done, so none returns before a callback ran.
        self.completed = False
        self.done = False
        self._firing: int | None = None  # the thread running this batch's callbacks, between completed and done
        self.error: KafkaError | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self._done_event: threading.Event | None = None  # made by the first waiter: most batches have none
        self.last_error: KafkaError | None = None  # why the last attempt failed, for the delivery timeout
        self._lock = threading.Lock()
        # Futures to tell and their record's index here, flat (future, index, future, index, ...): a tuple per
        # record lived as long as the batch and fed the garbage collector, which then cost a send() loop with
        # done-callbacks more than the sending (the compiled build's callback-100B "future callback" row).
        self._listeners: list[Any] | None = None
        # send(callback=): CallbackEntries, in send order. Appended only while the batch is open in its deque,
        # under the accumulator's lock, where it cannot complete: no batch lock.
        self.callbacks: CallbackEntries | None = None
        # How many records came from produce() without a callback: nobody hears of their failure but the log
        # and the metrics, so the accumulator reports it per failed batch (a count, not a list: nothing per record).
        self.unheard = 0
        self.is_split = False
        # Send order within the partition; retries re-enter their deque by it, split parts share their parent's.
        self.order: tuple[int, ...] = ()

    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None, headers: Headers,
                   callback: DeliveryCallback | None = None) -> RecordFuture | None:
        """Append one record and make its future, or return None when it does not fit."""
        index = self.try_add(timestamp, key, value, headers, callback)
        return None if index < 0 else record_future(self, index, timestamp, key, value)

    def try_add(self, timestamp: int, key: bytes | None, value: bytes | None, headers: Headers,
                callback: DeliveryCallback | None = None) -> int:
        """Append one record (the hot path: one call per send()): its index in the batch, or -1 when it does not
        fit. The accumulator makes the record's future (record_future()) once it has let go of its lock: the
        future's class is Python (a concurrent.futures.Future, which mypyc cannot compile), and a switch of the
        GIL at its __init__ inside the lock left the sender thread blocked on that lock, a convoy of context
        switches."""
        buf = self.buf
        count = self.count
        if count == 0:
            self.base_timestamp = timestamp
        mark = len(buf)
        end = mark + _append_record(buf, count, timestamp - self.base_timestamp, key, value, headers)
        if end > self.reserved:
            if end > self.limit and count and not self.grow_to(end):
                del buf[mark:]
                self.full = True
                return -1
            self._reserve_room()
        self.count = count + 1
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        if end - mark > self.max_record:
            self.max_record = end - mark
        if end >= self.max_limit:
            self.full = True
        if callback is not None:
            self._keep_callback(count, callback, timestamp, -1 if key is None else len(key),
                                -1 if value is None else len(value))
        return count

    def _reserve_room(self) -> None:
        """Have the bytearray allocate room for the next records, up to 1.875 times its length, so that appends
        stop reallocating it. Left to itself a bytearray grows by an eighth at a time: filling a batch reallocated
        it dozens of times, copying each byte about eight times over (perf: a third of a 1 KiB send()'s
        encoding). Growing to more than twice the length and truncating back would give the memory back
        (CPython shrinks a bytearray below half its allocation), hence the factor; speed only, the bytes are the
        same either way. Room past `limit` is taken from the pool first (grow_to), so that buffer.memory still
        counts every byte the batch holds; without it the room stops at `limit`."""
        buf = self.buf
        n = len(buf)
        target = min(n + (n >> 1) + (n >> 2) + (n >> 3), self.max_limit)
        if target > self.limit and not self.grow_to(target):
            target = self.limit  # reserved then stops at limit: the next try is when a record needs the room
        if target - n >= 256:
            buf += bytes(target - n)
            del buf[n:]
        self.reserved = max(target, n)

    def _keep_callback(self, index: int, fn: DeliveryCallback, timestamp: int, key_size: int,
                       value_size: int) -> None:
        """Hold record `index`'s delivery callback until complete() (CallbackEntries)."""
        callbacks = self.callbacks
        if callbacks is None:
            callbacks = self.callbacks = []
        callbacks.append(index)
        callbacks.append(fn)
        callbacks.append(timestamp)
        callbacks.append(key_size)
        callbacks.append(value_size)

    def grow_to(self, end: int) -> bool:
        """Make room for the buffer to reach `end` bytes, within max_limit and the pool's free memory."""
        grow = self.grow
        return end <= self.max_limit and grow is not None and grow(self, end)

    def _encode(self, timestamp: int, key: bytes | None, value: bytes | None, headers: Headers) -> int | None:
        """try_add() for records that already have a future elsewhere (a split): the offset delta, or None."""
        index = self.try_add(timestamp, key, value, headers)
        return None if index < 0 else index

    def append_run(self, indices: Sequence[int], pos: int, timestamps: Sequence[int],
                   keys: Sequence[bytes | None], values: Sequence[bytes | None],
                   headers: Sequence[Headers] | None) -> int:
        """Append records indices[pos:] until the batch is full, without a future per record; the new pos."""
        if pos >= len(indices):
            return pos
        start = self.count
        if start == 0:
            self.base_timestamp = timestamps[indices[pos]]
        end, count, max_ts = append_run(self.buf, self.limit, start, self.base_timestamp, indices, pos,
                                        timestamps, keys, values, headers)
        self.count = count
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
        if end < len(indices) or len(self.buf) >= self.limit:
            self.full = True
        return end

    def append_columns(self, indices: Sequence[int], pos: int, columns: Columns, timestamps: Sequence[int],
                       keys: Sequence[bytes | None], values: Sequence[bytes | None],
                       headers: Sequence[Headers] | None) -> int:
        """append_run() for records that share one timestamp (send_batch()'s usual case), encoded
        column-wise from `columns`; `keys`, `values` and `headers` are what append_run() takes, for the
        records the tables cannot hold. The new pos."""
        n = len(indices)
        start = self.count
        if start == 0 and pos < n:
            self.base_timestamp = columns.timestamp
        delta = columns.timestamp - self.base_timestamp
        count = start
        buf, limit = self.buf, self.limit
        vlens, klens, hlens = columns.vlens, columns.klens, columns.hlens
        while pos < n:
            if not 0 <= delta < TABLE_SIZE or count >= TABLE_SIZE:
                break  # outside the varint tables: the record loop takes the rest
            # A window a little past what the room left should hold, so the columns are not built for records
            # that cannot go in; the loop comes back if the estimate was short. Speed only: the window never
            # changes the bytes (tests compare them with the record loop's), so mutation leaves it alone.
            first = indices[pos]
            klen_guess = 1 if klens is None else klens[first]  # pragma: no mutate
            hlen_guess = 1 if hlens is None else hlens[first]  # pragma: no mutate
            guess = vlens[first] + klen_guess + hlen_guess + 8  # pragma: no mutate
            w = min(n - pos, TABLE_SIZE - count, (limit - len(buf)) // guess + 4)  # pragma: no mutate
            idx = indices[pos:pos + w]
            a = idx[0]
            if idx[-1] - a != w - 1 and idx[1] - a == 1:
                # A run of consecutive input positions ends inside the window (a sticky run of keyless
                # records, then the next run to this partition): take the run alone, by slices; positions
                # only increase, so where idx[k] - a == k stops holding is found by bisection.
                w = bisect_left(range(w), 1, key=lambda k: idx[k] - a - k)  # type: ignore[arg-type]
                idx = idx[:w]
            contiguous = idx[-1] - a == w - 1  # consecutive input positions: slices, no gather

            def take(column: Any, a: int = a, b: int = a + w, idx: Sequence[int] = idx,
                     contiguous: bool = contiguous) -> Any:
                if column is None:
                    return None
                return column[a:b] if contiguous else [column[i] for i in idx]

            got = _append_columns(buf, limit, count, delta, take(columns.keys), take(values), take(klens),
                                 take(vlens), take(columns.headers), take(hlens))
            pos += got
            count += got
            if got < w:
                self.full = True
                break
        if count > start:
            self.count = count
            if columns.timestamp > self.max_timestamp:
                self.max_timestamp = columns.timestamp
        if len(buf) >= limit:
            self.full = True
        if pos < n and not self.full:
            return self.append_run(indices, pos, timestamps, keys, values, headers)
        return pos

    def stats(self, now_ms: float) -> BatchStats:
        """What the metrics record of this batch as it leaves (sealed: buf holds the uncompressed batch)."""
        records_bytes = len(self.buf) - BATCH_HEADER_SIZE
        return BatchStats(self.topic, self.size_in_bytes, len(self.buf), records_bytes, self.count,
                          self.max_record or records_bytes // max(self.count, 1), now_ms - self.created_ms)

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size on the wire; an upper bound of the compressed size."""
        return len(self.buf) if self.wire is None else len(self.wire)

    # --- drain / retry ----------------------------------------------------------------------------

    def backing_off(self, leader_epoch: int, now: float) -> bool:
        """Whether a retry must still wait: not when the partition's leader changed since the failed attempt
        (KIP-951; Java's RecordAccumulator.shouldBackoff with ProducerBatch.maybeUpdateLeaderEpoch)."""
        if leader_epoch >= 0 and leader_epoch > self.leader_epoch:
            self.leader_epoch = leader_epoch
            self.attempts_at_leader_change = self.attempts
        if self.attempts == 0 or now >= self.retry_at_ms:
            return False
        return self.attempts != self.attempts_at_leader_change

    def seal(self, compression: int, producer_id: int, producer_epoch: int, base_sequence: int,
             transactional: bool = False, compression_level: int | None = None) -> bytes | memoryview:
        """The wire bytes; rebuilt only if the producer identity or sequence changed since last time."""
        if (
            self.wire is None
            or producer_id != self.producer_id
            or producer_epoch != self.producer_epoch
            or base_sequence != self._sealed_sequence
        ):
            self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
            self._sealed_sequence = base_sequence
            self.wire = seal_in_place(
                self.buf, self.count, base_timestamp=self.base_timestamp, max_timestamp=self.max_timestamp,
                compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                base_sequence=base_sequence, transactional=transactional, compression_level=compression_level,
            )
        return self.wire

    def reset_sequence(self) -> None:
        """Forget the sequence (after an epoch bump the batch is renumbered at its next drain)."""
        self.base_sequence = -1
        self.wire = None

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence >= 0

    def records(self) -> list[Record]:
        """The records appended so far, decoded (for a split, or for interceptors; not a hot path)."""
        return decode_records(bytes(memoryview(self.buf)[BATCH_HEADER_SIZE:]), self.count, 0, self.base_timestamp)

    def split(self, batch_size: int, now_ms: float) -> list[ProducerBatch]:
        """Re-encode this batch's records into batches of at most batch_size bytes, and record in `moved`
        where each went. mark_split() then hands the listeners on.

        The parts' memory is not taken from the BufferPool (as Java does): the sender thread must not block
        on memory that only it can free.
        """
        records = self.records()
        out: list[ProducerBatch] = []
        moved: list[tuple[ProducerBatch, int]] = []
        current: ProducerBatch | None = None
        for rec in records:
            headers = rec.headers or None
            index = None if current is None else current._encode(rec.timestamp, rec.key, rec.value, headers)
            if index is None:
                need = BATCH_HEADER_SIZE + record_size_upper_bound(
                    -1 if rec.key is None else len(rec.key), -1 if rec.value is None else len(rec.value), headers
                )
                current = ProducerBatch(self.topic, self.partition, bytearray(), max(batch_size, need), self.created_ms)
                current.pooled = False
                current.attempts = self.attempts
                current.leader_epoch = self.leader_epoch
                current.attempts_at_leader_change = self.attempts_at_leader_change
                current.order = (*self.order, len(out))
                current.last_error = self.last_error
                index = current._encode(rec.timestamp, rec.key, rec.value, headers)
                if index is None:
                    raise AssertionError("a fresh batch sized for the record must accept it")
                out.append(current)
            moved.append((current, index))  # type: ignore[arg-type]
            if len(current.buf) >= batch_size:  # type: ignore[union-attr]
                # A record larger than the split size keeps its part to itself: records after it would fit in
                # the slack of its upper-bound estimate, and a part that holds more than the one record that
                # cannot shrink would be refused and split the same way again until delivery.timeout.ms.
                current = None
        # Which records were unheard is not kept (a count only): the parts take the count in order, so the
        # total stays exact, and a batch of produce() records alone (the usual case) gives each part its own.
        unheard = self.unheard
        for part in out:
            part.unheard = min(unheard, part.count)
            unheard -= part.unheard
        for part in out:
            # Closed for appends, as Java closes split batches: a part can be the last batch of its deque, and
            # records sent after the split would otherwise join it and go out ahead of batches sent before them.
            part.full = True
        self.moved = moved
        return out

    def locate(self, index: int) -> tuple[ProducerBatch, int]:
        """Where record `index` of this batch is now: here, or where a split (and any split of its parts)
        moved it."""
        batch = self
        while batch.is_split:
            batch, index = batch.moved[index]  # type: ignore[index]
        return batch, index

    def parts(self) -> list[ProducerBatch]:
        """The batches a split batch's records went to, in order."""
        return list(dict.fromkeys(b for b, _ in self.moved or ()))

    # --- completion ----------------------------------------------------------------------------------

    def register(self, fut: RecordFuture, index: int, callback: Callable[[Any], object] | None = None) -> bool:
        """Attach a listener for record `index`; False if the batch is done or split (the caller then acts at
        once, or follows the record). Listeners run once the delivery callbacks have run."""
        with self._lock:
            if self.settled():  # on the callbacks' thread too: it would never get to the listeners
                return False
            if callback is not None:
                fut.keep_callback(callback)
            if self._listeners is None:
                self._listeners = []
            self._listeners.append(fut)
            self._listeners.append(index)
            return True

    def adopt_callback(self, index: int, fn: DeliveryCallback, timestamp: int, key_size: int,
                       value_size: int) -> bool:
        """A split part takes over record `index`'s delivery callback; False if the part already completed."""
        with self._lock:
            if self.completed:
                return False
            self._keep_callback(index, fn, timestamp, key_size, value_size)
            return True

    def complete(self, base_offset: int, log_append_time: int, error: KafkaError | None,
                 on_unheard_failure: Callable[[ProducerBatch, KafkaError], None] | None = None) -> bool:
        """Resolve every record of the batch exactly once; False if it was already resolved. As Java: the
        delivery callbacks in send order, then done (waiters go), then the futures' listeners. A failure is
        first told to `on_unheard_failure` (the records produce() queued without a callback have no other
        outcome), once, before done: flush() returns after it."""
        with self._lock:
            if self.completed:
                return False
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.completed = True
            if error is not None and on_unheard_failure is not None:
                on_unheard_failure(self, error)
            callbacks, self.callbacks = self.callbacks, None
            if callbacks is None:
                told = self._set_done()  # nothing to run first: done in the same lock hold
            else:
                self._firing = threading.get_ident()
        if callbacks is None:
            self._tell(*told)
            return True
        try:
            fire_callbacks(self, callbacks)
        finally:  # whatever escapes a callback, waiters must not wait forever
            with self._lock:
                told = self._set_done()
            self._tell(*told)
        return True

    def _set_done(self) -> tuple[list[Any] | None, threading.Event | None]:
        """Under the lock, once the callbacks ran: done, and who is to be told (listeners, the waiters' event)."""
        self.done = True
        self._firing = None
        listeners, self._listeners = self._listeners, None
        return listeners, self._done_event

    @staticmethod
    def _tell(listeners: list[Any] | None, event: threading.Event | None) -> None:
        if event is not None:
            event.set()
        if listeners:
            for fut in dict.fromkeys(listeners[::2]):
                fut.batch_completed()

    def settled(self) -> bool:
        """Done, or the calling thread is the one running the batch's callbacks: a callback that waits on a
        record of its own batch has the outcome already, and would otherwise wait for itself. (No lock: only
        this thread sets _firing to its own ident.)"""
        return self.done or self._firing == threading.get_ident()

    def wait_done(self, timeout: float | None) -> bool:
        """Block until the batch is done (its callbacks ran) or split; False if `timeout` seconds passed first.
        True at once when settled() on the callbacks' thread."""
        if self.done:
            return True
        with self._lock:
            if self.settled():
                return True
            event = self._done_event
            if event is None:
                event = self._done_event = threading.Event()
        return event.wait(timeout)

    def mark_split(self) -> None:
        """The records moved (split() filled `moved`): callbacks and listeners go with them, and waiters wake
        to follow."""
        assert self.moved is not None
        moved = self.moved
        with self._lock:
            self.is_split = True
            self.completed = True
            callbacks, self.callbacks = self.callbacks or [], None
            self._firing = threading.get_ident()
        try:
            for i in range(0, len(callbacks), _ENTRY):
                index: int = callbacks[i]
                fn, timestamp, key_size, value_size = callbacks[i + 1:i + _ENTRY]
                part, where = moved[index]
                if not part.adopt_callback(where, fn, timestamp, key_size, value_size):
                    fire_callbacks(part, [where, fn, timestamp, key_size, value_size])
        finally:
            with self._lock:
                listeners, event = self._set_done()
            if event is not None:
                event.set()
        if listeners:
            for fut, index in zip(listeners[::2], listeners[1::2], strict=True):
                part, where = moved[index]
                if not part.register(fut, where):  # a close() that aborted everything got there first
                    fut.batch_completed()

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic}-{self.partition}, records={self.count}, "
                f"bytes={self.size_in_bytes}, seq={self.base_sequence}, attempts={self.attempts})")
