"""RecordAccumulator: one deque of ProducerBatches per partition, between send() and the sender thread.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkajet.backoff import ExponentialBackoff
from kafkajet.clock import Clock, now_ms
from kafkajet.cluster import TopicPartitionKey
from kafkajet.errors import DeliveryTimeoutError, KafkaError, KafkaTimeoutError, ProducerClosedError
from kafkajet.producer.batch import Columns, Headers, ProducerBatch, record_future
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.futures import DeliveryCallback, RecordFuture, Segment
from kafkajet.producer.idempotence import IdempotenceManager
from kafkajet.producer.metadata import Cluster
from kafkajet.producer.partitioner import StickyPartitioner
from kafkajet.records import BATCH_HEADER_SIZE, record_size_upper_bound


class _TopicLoad:
    """One topic's partitions as ready() weighs them for adaptive partitioning (Java's partitionReady arrays)."""

    def __init__(self) -> None:
        self.queues = 0  # partitions of the topic with a deque, leader or not
        self.sizes: list[int] = []
        self.partitions: list[int] = []
        self.racks: list[str | None] = []  # filled only when rack-aware


class NodeLatency:
    """Java's NodeLatencyStats: when a node last had a batch ready, and when it last could take one."""

    def __init__(self, now: float) -> None:
        self.ready_ms = now
        self.drain_ms = now


@dataclass
class ReadyCheck:
    nodes: set[int] = field(default_factory=set)
    next_check_ms: float = float("inf")
    unknown_leaders: bool = False


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        compression: int,
        linger_ms: float,
        retry_backoff_ms: float,
        retry_backoff_max_ms: float,
        delivery_timeout_ms: float,
        pool: BufferPool,
        max_block_ms: float = 60000.0,
        idempotence: IdempotenceManager | None = None,
        clock: Clock | None = None,
        guarantee_order: bool = False,
        batch_max_size: int = 0,
        compression_level: int | None = None,
    ) -> None:
        self.batch_size = batch_size
        # How far a batch may grow while it waits in its deque (batch.max.size); at most batch_size: no growth.
        self.batch_max_size = batch_max_size
        self.compression = compression
        self.compression_level = compression_level
        self.linger_ms = linger_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_block_ms = max_block_ms
        self.pool = pool
        self.idempotence = idempotence
        # Transactions: a partition's batches go only once the coordinator added it to the transaction.
        self.send_allowed: Callable[[tuple[str, int]], bool] | None = None
        self.transactional = False
        self._clock = clock or now_ms
        # Java's RecordAccumulator: ExponentialBackoff(retryBackoffMs, 2, retryBackoffMaxMs, 0.2), attempts - 1.
        self._retry_backoff = ExponentialBackoff(retry_backoff_ms, 2, retry_backoff_max_ms, 0.2)
        self._lock = threading.Lock()
        # append()'s fast path takes the lock through these: compiled, `with self._lock` looks up and binds
        # __enter__ and __exit__ per record, a fifth of an append's cost.
        self._acquire: Callable[[], object] = self._lock.acquire
        self._release: Callable[[], object] = self._lock.release
        self._queues: dict[TopicPartitionKey, deque[ProducerBatch]] = {}
        # append()'s last partition and its deque (a deque, once made, stays in _queues): the sticky partitioner
        # sends run after run of records to one partition, and the (topic, partition) key and its lookup cost as
        # much as the rest of an append's bookkeeping. -1: no partition yet.
        self._last_topic = ""
        self._last_partition = -1
        self._last_queue: deque[ProducerBatch] = deque()
        self._incomplete: set[ProducerBatch] = set()
        # _incomplete's own lock (taken inside _lock where both are needed): a completing batch leaves it without
        # waiting for a send_batch() call that holds _lock while it encodes a whole chunk of records.
        self._incomplete_lock = threading.Lock()
        self._drain_index: dict[int, int] = {}
        self._flushes = 0
        self.closed = False
        self._appends_in_progress = 0
        self._batch_order = itertools.count()
        self.on_new_batch: Callable[[], None] | None = None
        # Told of a failed batch that holds records produce() queued without a callback (ProducerBatch.unheard),
        # once per batch: their only outcome is what this says (the producer logs and counts them).
        self.on_unheard_failure: Callable[[ProducerBatch, KafkaError], None] | None = None
        # When the oldest queued batch can first expire; lowered whenever an older batch is queued.
        self._expiry_due = float("inf")
        # max.in.flight.requests.per.connection=1 (Java's guaranteeMessageOrder): a partition with a batch in
        # flight is muted, so no later batch of it leaves (not even to a new leader) before that one resolves.
        self.guarantee_order = guarantee_order
        self._muted: set[TopicPartitionKey] = set()
        # partitioner.adaptive.partitioning.enable with the default partitioner: ready() gives it each topic's
        # queue sizes, and partitioner.availability.timeout.ms (> 0) leaves out the partitions of a leader that
        # has not been able to take a batch for that long (Java's RecordAccumulator.partitionReady).
        self.adaptive: StickyPartitioner | None = None
        self.availability_timeout_ms = 0.0
        self._node_latency: dict[int, NodeLatency] = {}

    # --- caller threads ---------------------------------------------------------------------------

    def append(
        self, topic: str, partition: int, timestamp: int, key: bytes | None, value: bytes | None,
        headers: Headers, deadline_ms: float | None, callback: DeliveryCallback | None = None,
        want_future: bool = True,
    ) -> tuple[RecordFuture | None, bool]:
        """Append a record; returns its future (None unless `want_future`) and whether the sender should be woken
        (a batch filled or began). `callback` is attached to the record in the same lock hold, so it always runs
        at completion. A record with neither a future nor a callback is counted in its batch (unheard) in that
        lock hold too, before the sender can complete the batch."""
        unheard = callback is None and not want_future
        added: ProducerBatch | None = None
        index = -1
        wake = False
        self._acquire()
        try:
            if partition == self._last_partition and topic == self._last_topic:
                dq = self._last_queue
            else:
                tp = (topic, partition)
                found = self._queues.get(tp)
                if found is None:
                    found = self._queues[tp] = deque()
                dq = found
                self._last_topic, self._last_partition, self._last_queue = topic, partition, dq
            if dq:
                last = dq[-1]
                if not last.full:
                    before = len(last.buf)
                    index = last.try_add(timestamp, key, value, headers, callback)
                    if index >= 0:
                        added = last
                        if unheard:
                            last.unheard += 1
                        # Only news wakes the sender: this batch just became ready (reached batch.size) or
                        # closed. Waking for each append while the sender waits for in-flight room was a
                        # wake-up (and a GIL hand-over) per record.
                        wake = last.full or before < self.batch_size <= len(last.buf)
            if added is None:
                self._appends_in_progress += 1
        finally:
            self._release()
        if added is None:
            try:
                size = self._capacity_for(key, value, headers)
                buf = self._allocate(size, deadline_ms)
                with self._lock:
                    self._refuse_if_closed(buf, size)
                    if dq and not dq[-1].full:
                        index = dq[-1].try_add(timestamp, key, value, headers, callback)
                        if index >= 0:
                            # Another thread opened a batch while we waited for memory.
                            added = dq[-1]
                            if unheard:
                                added.unheard += 1
                            self.pool.deallocate(buf, size)
                            wake = self._sendable(added)
                    if added is None:
                        added = self._new_batch(topic, partition, dq, buf, size)
                        index = added.try_add(timestamp, key, value, headers, callback)
                        assert index >= 0  # the first record of an empty batch always goes in
                        if unheard:
                            added.unheard += 1
                        wake = True
            finally:
                with self._lock:
                    self._appends_in_progress -= 1
        # Outside the lock: see ProducerBatch.try_add().
        return (record_future(added, index, timestamp, key, value) if want_future else None), wake

    def _sendable(self, batch: ProducerBatch) -> bool:
        """Whether a batch may go without waiting out linger.ms: closed, or at batch.size (Java's meaning of
        full), though it keeps growing until the sender takes it."""
        return batch.full or len(batch.buf) >= self.batch_size

    def _grow(self, batch: ProducerBatch, end: int) -> bool:
        """Reserve memory for `batch` (the open tail of its deque, under the lock) to reach `end` bytes: in steps
        of batch.size, without waiting, only if nobody waits for memory. False: the batch closes instead."""
        steps = max(1, -(-(end - batch.capacity) // self.batch_size))
        target = min(batch.max_limit, batch.capacity + steps * self.batch_size)
        if target <= batch.capacity or not self.pool.try_reserve(target - batch.capacity):
            return False
        batch.capacity = batch.limit = target
        return True

    def _capacity_for(self, key: bytes | None, value: bytes | None, headers: Headers) -> int:
        """A new batch's size: batch.size, or more if the record that opens it needs more."""
        return max(self.batch_size, BATCH_HEADER_SIZE + record_size_upper_bound(
            -1 if key is None else len(key), -1 if value is None else len(value), headers))

    def _allocate(self, size: int, deadline_ms: float | None) -> bytearray:
        # Allocation may block (buffer full), so it happens outside the lock, as in Java; callers count
        # themselves in _appends_in_progress first, so a flush waits for them.
        now = self._clock()
        return self.pool.allocate(size, self.max_block_ms if deadline_ms is None else max(0.0, deadline_ms - now))

    def _refuse_if_closed(self, buf: bytearray, size: int) -> None:
        if self.closed:
            self.pool.deallocate(buf, size)
            raise ProducerClosedError("producer closed while the record was being appended")

    def _new_batch(self, topic: str, partition: int, dq: deque[ProducerBatch], buf: bytearray,
                   size: int) -> ProducerBatch:
        """Open a batch in `buf` at the end of the partition's deque (under the lock); the caller appends to it
        in the same hold, so its first record always goes in."""
        grows = self.batch_max_size > size
        batch = ProducerBatch(topic, partition, buf, size, self._clock(), self.batch_max_size if grows else 0,
                              self._grow if grows else None)
        batch.order = (next(self._batch_order),)
        dq.append(batch)
        with self._incomplete_lock:
            self._incomplete.add(batch)
        self._expiry_due = min(self._expiry_due, batch.created_ms + self.delivery_timeout_ms)
        return batch

    def append_many(
        self, topic: str, partition: int, indices: list[int], timestamps: list[int], keys: list[bytes | None],
        values: list[bytes | None], headers: list[Headers] | None, deadline_ms: float | None,
        segments: list[Segment], columns: Columns | None = None,
    ) -> bool:
        """Append many records to one partition under one lock hold per batch.

        No future per record: each run of records that went into one batch becomes a segment (batch, index
        of its first record there, their input indices) in `segments`. Returns whether the sender should be
        woken. Order within the partition follows `indices`. `columns` (one timestamp for every record,
        lengths precomputed) lets each batch encode its share column-wise.
        """
        tp = (topic, partition)
        wake = False
        pos = 0
        n = len(indices)

        def fill(batch: ProducerBatch, pos: int) -> int:
            first = batch.count
            end = pos
            while True:
                if columns is None:
                    end = batch.append_run(indices, end, timestamps, keys, values, headers)
                else:
                    end = batch.append_columns(indices, end, columns, timestamps, keys, values, headers)
                # Out of room but still waiting in its deque: grow it by a step and go on, as send() does.
                if end == n or not batch.grow_to(min(len(batch.buf) + self.batch_size, batch.max_limit)):
                    break
                batch.full = False
            if end > pos:
                segments.append((batch, first, indices[pos:end]))
            return end

        while pos < n:
            with self._lock:
                dq = self._queues.get(tp)
                if dq is None:
                    dq = self._queues[tp] = deque()
                if dq and not dq[-1].full:
                    pos = fill(dq[-1], pos)
                    if self._sendable(dq[-1]):
                        wake = True
                    if pos == n:
                        return wake
                self._appends_in_progress += 1
            try:
                i = indices[pos]
                size = self._capacity_for(keys[i], values[i], headers[i] if headers else None)
                buf = self._allocate(size, deadline_ms)
                with self._lock:
                    self._refuse_if_closed(buf, size)
                    # Another thread may have opened a batch while we waited for memory: fill that first.
                    moved = fill(dq[-1], pos) if dq and not dq[-1].full else pos
                    if moved > pos:
                        self.pool.deallocate(buf, size)
                        pos = moved
                    else:
                        pos = fill(self._new_batch(topic, partition, dq, buf, size), pos)
            finally:
                with self._lock:
                    self._appends_in_progress -= 1
            wake = True
            if self.on_new_batch is not None:
                self.on_new_batch()  # a full batch is waiting: let the sender take it while we go on
        return wake

    # --- flush / close ----------------------------------------------------------------------------

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1

    def incomplete_batches(self) -> list[ProducerBatch]:
        with self._incomplete_lock:
            return list(self._incomplete)

    def await_completion(self, batches: Iterable[ProducerBatch], deadline: float | None) -> None:
        """Wait (monotonic-seconds deadline) until each batch, or the batches it split into, completed."""
        pending = list(batches)
        while pending:
            batch = pending.pop()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not batch.wait_done(remaining):
                raise KafkaTimeoutError(f"flush timed out with {len(pending) + 1} batches still in progress")
            if batch.is_split:
                pending.extend(batch.parts())

    def has_incomplete(self) -> bool:
        with self._lock, self._incomplete_lock:
            return bool(self._incomplete) or self._appends_in_progress > 0

    # --- sender thread ------------------------------------------------------------------------------

    def ready(self, cluster: Cluster, now: float) -> ReadyCheck:
        """Which leaders have a batch that may go now, and when to look again (Java's ready()).

        Runs on the sender thread without the accumulator lock: only this thread removes batches, and
        what other threads do meanwhile (append a record, open a batch) can only make a partition
        readier, which they announce with a wake-up, so a stale read costs at most one more pass.
        """
        result = ReadyCheck()
        exhausted = self.pool.queued() > 0
        flushing = self._flushes > 0 or self.closed
        adaptive = self.adaptive
        loads: dict[str, _TopicLoad] | None = None if adaptive is None else {}
        rack_aware = adaptive is not None and adaptive.rack is not None
        unit = max(1, self.batch_size)
        timeout = self.availability_timeout_ms
        load = _TopicLoad()
        load_topic = ""
        for tp, dq in list(self._queues.items()):  # a C-level copy: safe while send() adds partitions
            if loads is None:
                if not dq or tp in self._muted:
                    continue
                leader = cluster.leader_for(tp[0], tp[1])
            else:
                # Adaptive partitioning weighs every partition with a deque, empty or muted (Java's partitionReady).
                leader = cluster.leader_for(tp[0], tp[1])
                if tp[0] != load_topic:
                    load_topic = tp[0]
                    found = loads.get(load_topic)
                    if found is None:
                        found = loads[load_topic] = _TopicLoad()
                    load = found
                load.queues += 1
                if leader is not None:
                    # Inline for the usual deque of one batch: this runs for every partition on every pass.
                    n = len(dq)
                    size = (len(dq[0].buf) // unit or 1) if n == 1 and timeout <= 0 else \
                        self._queue_size(dq, leader, unit) if n else 0
                    if size >= 0:
                        load.sizes.append(size)
                        load.partitions.append(tp[1])
                        if rack_aware:
                            node = cluster.nodes.get(leader)
                            load.racks.append(None if node is None else node.rack)
                if not dq or tp in self._muted:
                    continue
            if leader is None:
                result.unknown_leaders = True
                continue
            if leader in result.nodes:
                continue
            first = dq[0]
            # A first attempt never backs off, and drain() notes its leader epoch: the lookup is for retries only.
            if first.attempts and first.backing_off(cluster.leader_epoch_for(tp[0], tp[1]), now):
                result.next_check_ms = min(result.next_check_ms, first.retry_at_ms - now)
                continue
            waited = now - first.created_ms
            full = len(dq) > 1 or self._sendable(first)
            if full or waited >= self.linger_ms or exhausted or flushing or first.attempts > 0:
                result.nodes.add(leader)
            else:
                result.next_check_ms = min(result.next_check_ms, self.linger_ms - waited)
        if loads is not None and self.adaptive is not None:
            for topic, load in loads.items():
                # As Java, only once every partition of the topic has had a batch: a partition without a deque
                # would be missing from the table and never chosen again.
                weighed = load.queues >= (cluster.partition_count(topic) or 0)
                self.adaptive.update_load_stats(topic, load.sizes if weighed else None, load.partitions,
                                                load.racks, load.queues)
        return result

    def _queue_size(self, dq: deque[ProducerBatch], leader: int, unit: int) -> int:
        """A non-empty queue's size for adaptive partitioning, or -1 when partitioner.availability.timeout.ms
        leaves it out (its leader has not been able to take a batch for that long).

        The size is in whole batch.size units (`unit`), at least one a batch: a batch that cannot leave keeps
        growing here (up to batch.max.size) where Java would queue another, so the deque's length would hide a
        slow broker's backlog. With fixed batches (batch.max.size = batch.size) it is the deque's length, as
        Java's."""
        if self.availability_timeout_ms > 0:
            latency = self._node_latency.get(leader)
            if latency is not None and latency.ready_ms - latency.drain_ms > self.availability_timeout_ms:
                return -1
        size = 0
        for batch in list(dq):
            size += len(batch.buf) // unit or 1
        return size

    def update_node_latency(self, node: int, now: float, can_drain: bool) -> None:
        """The sender found `node` with a batch ready, and could (or could not) send to it now: Java's
        updateNodeLatencyStats, what partitioner.availability.timeout.ms is measured with."""
        if self.availability_timeout_ms <= 0:
            return
        latency = self._node_latency.get(node)
        if latency is None:
            latency = self._node_latency[node] = NodeLatency(now)
        # drain first: a reader between the two writes must not see a gap that is not there.
        if can_drain:
            latency.drain_ms = now
        latency.ready_ms = now

    def drain(self, cluster: Cluster, nodes: Iterable[int], max_size: int, now: float) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, up to max_size bytes per request."""
        out: dict[int, list[ProducerBatch]] = {}
        idem = self.idempotence
        with self._lock:
            for node in nodes:
                parts = cluster.partitions_for_node(node)
                if not parts:
                    continue
                start = self._drain_index.get(node, 0) % len(parts)
                taken: list[ProducerBatch] = []
                size = 0
                for i in range(len(parts)):
                    p = parts[(start + i) % len(parts)]
                    dq = self._queues.get((p.topic, p.partition))
                    if not dq or (p.topic, p.partition) in self._muted:
                        continue
                    first = dq[0]
                    if first.backing_off(p.leader_epoch, now):
                        continue
                    if size + first.size_in_bytes > max_size and taken:
                        # Remember where we stopped so the next request starts with the starved partition.
                        self._drain_index[node] = (start + i) % len(parts)
                        break
                    if self.send_allowed is not None and not self.send_allowed(first.tp):
                        continue
                    if idem is not None and not idem.may_drain(first):
                        continue
                    dq.popleft()
                    if idem is not None:
                        first.base_sequence = first.base_sequence if first.has_sequence else idem.assign(first)
                        idem.add_in_flight(first)
                    first.full = True
                    first.in_flight = True
                    if self.guarantee_order:
                        self._muted.add(first.tp)
                    first.last_attempt_ms = now
                    size += first.size_in_bytes
                    taken.append(first)
                else:
                    self._drain_index[node] = start + 1
                if taken:
                    out[node] = taken
        # Sealing (compression, CRC) happens outside the lock so send() threads are not held up by it;
        # drained batches are out of their deques and marked full, so nothing else touches them.
        for batches in out.values():
            for b in batches:
                # A partition's numbers run under its own id and epoch: after a bump, the old one until the
                # batches it has out are done.
                pid, epoch = idem.identity(b.tp) if idem is not None else (-1, -1)
                b.seal(self.compression, pid, epoch, b.base_sequence, self.transactional, self.compression_level)
        return out

    def reenqueue(self, batch: ProducerBatch, error: KafkaError, now: float) -> None:
        """Put a batch back at the head of its deque for a retry, after an exponential, jittered backoff."""
        self._unmute(batch)
        batch.attempts += 1
        batch.in_flight = False
        batch.last_error = error
        batch.retry_at_ms = now + self._retry_backoff.backoff(batch.attempts - 1)
        with self._lock:
            dq = self._queues.setdefault(batch.tp, deque())
            self._insert_in_order(dq, batch)
            self._expiry_due = min(self._expiry_due, batch.created_ms + self.delivery_timeout_ms)

    @staticmethod
    def _insert_in_order(dq: deque[ProducerBatch], batch: ProducerBatch) -> None:
        """Back to its place in send order: ahead of younger batches, behind older retried ones."""
        i = 0
        while i < len(dq) and dq[i].order < batch.order:
            i += 1
        dq.insert(i, batch)

    def split_and_reenqueue(self, batch: ProducerBatch, now: float) -> int:
        """Split a batch the broker found too large; returns how many batches it became."""
        # Halve what the broker refused: re-packing into batch.size would rebuild the same batch when the
        # broker's limit is below batch.size.
        target = min(self.batch_size, BATCH_HEADER_SIZE + (len(batch.buf) - BATCH_HEADER_SIZE) // 2)
        parts = batch.split(target, now)
        self._unmute(batch)
        with self._lock, self._incomplete_lock:
            dq = self._queues.setdefault(batch.tp, deque())
            for part in parts:
                # By send order, like a retry: an older batch may already be back in the deque.
                self._insert_in_order(dq, part)
                self._incomplete.add(part)
            self._expiry_due = min(self._expiry_due, batch.created_ms + self.delivery_timeout_ms)
            self._incomplete.discard(batch)
        batch.mark_split()
        batch.wire = None  # futures keep following this batch to its parts: only its forwarding table stays
        if batch.pooled:
            self.pool.deallocate(batch.buf, batch.capacity)
        # A part split again is not pooled, and the futures hold the chain of splits: its records live on in
        # its parts, so its buffer goes now rather than with the last future.
        batch.buf = bytearray()
        return len(parts)

    def _unmute(self, batch: ProducerBatch) -> None:
        # Only the batch that muted its partition (the one in flight) may unmute it.
        if batch.in_flight and self.guarantee_order:
            self._muted.discard(batch.tp)

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int, error: KafkaError | None) -> None:
        if batch.complete(base_offset, log_append_time, error, self.on_unheard_failure if batch.unheard else None):
            self._unmute(batch)
            with self._incomplete_lock:
                self._incomplete.discard(batch)
            batch.wire = None  # may be a view of the buffer, which goes back to the pool now
            if batch.pooled:
                self.pool.deallocate(batch.buf, batch.capacity)
                batch.buf = bytearray()  # the pooled buffer is another batch's from now on

    def expire(self, now: float, cause_for: Callable[[ProducerBatch], KafkaError | None]) -> list[ProducerBatch]:
        """Fail queued batches older than delivery.timeout.ms; in-flight ones wait for their request."""
        if now < self._expiry_due:
            return []  # nothing can have expired yet: skip the walk over every queue (and its lock)
        expired: list[ProducerBatch] = []
        with self._lock:
            oldest = float("inf")
            for dq in self._queues.values():
                while dq and now - dq[0].created_ms >= self.delivery_timeout_ms:
                    expired.append(dq.popleft())
                if dq:
                    oldest = min(oldest, dq[0].created_ms)
            self._expiry_due = oldest + self.delivery_timeout_ms
        for batch in expired:
            cause = batch.last_error or cause_for(batch)
            self.complete(batch, -1, -1, DeliveryTimeoutError(
                f"Expiring {batch.count} record(s) for {batch.topic}-{batch.partition}: "
                f"{int(now - batch.created_ms)} ms has passed since batch creation "
                f"(delivery.timeout.ms={int(self.delivery_timeout_ms)})", cause))
        return expired

    def next_expiry_ms(self, now: float) -> float:
        return max(0.0, self._expiry_due - now)

    def abort_all(self, error: KafkaError) -> int:
        """Fail every incomplete batch, queued or in flight (close(0), fatal errors)."""
        with self._lock:
            for dq in self._queues.values():
                dq.clear()
            # In send order within each partition, so delivery callbacks keep it (split parts sort after
            # their parent's place and before the batches that followed it).
            with self._incomplete_lock:
                batches = sorted(self._incomplete, key=lambda b: b.order)
        for batch in batches:
            self.complete(batch, -1, -1, error)
        return len(batches)

    def abort_undrained(self, error: KafkaError) -> int:
        with self._lock:
            batches = [b for dq in self._queues.values() for b in dq]
            for dq in self._queues.values():
                dq.clear()
        for batch in batches:
            self.complete(batch, -1, -1, error)
        return len(batches)

    def reset_sequences(self, partitions: set[TopicPartitionKey] | None = None) -> None:
        """After an epoch bump the queued batches of `partitions` (all when None) are renumbered when next
        drained."""
        with self._lock:
            for tp, dq in self._queues.items():
                if partitions is not None and tp not in partitions:
                    continue
                for batch in dq:
                    batch.reset_sequence()
                # Renumbered batches must keep their send order: they are already in deque order.
