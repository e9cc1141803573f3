"""BufferPool: a bounded amount of memory for batches (Java's BufferPool).

Buffers of the standard size (batch.size) are recycled; other sizes are only accounted. A caller that
cannot get memory waits its turn (first come, first served) up to its deadline, then gets
BufferExhaustedError. Accounting stays exact across timeouts and close.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from kafkajet.errors import BufferExhaustedError, ProducerClosedError, RecordTooLargeError


class BufferPool:
    def __init__(self, total_memory: int, poolable_size: int, clock: Callable[[], float] = time.monotonic,
                 on_block: Callable[[], None] | None = None) -> None:
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self._clock = clock
        self._lock = threading.Lock()
        self._free: deque[bytearray] = deque()
        self._non_pooled_available = total_memory  # memory not held by any buffer, free or in use
        self._waiters: deque[threading.Condition] = deque()
        self._closed = False
        self.wait_time_total_s = 0.0
        # Called when a caller has to wait: the sender should drain now (memory exhausted) rather than
        # sleep out its linger timer while callers queue up.
        self.on_block = on_block
        # Called (outside the lock, on the thread that freed it) after memory comes back, while set: how a
        # waiter that must not block a thread (AIOProducer's event loop) learns it can try again.
        self.on_release: Callable[[], object] | None = None
        # Metrics hooks (Java's bufferpool-wait-ratio and buffer-exhausted-*): told each wait's seconds, and
        # each allocation that ran out of time.
        self.on_waited: Callable[[float], object] | None = None
        self.on_exhausted: Callable[[], object] | None = None

    def allocate(self, size: int, max_time_ms: float) -> bytearray:
        """A buffer of `size` bytes capacity (empty, for the caller to fill); blocks up to max_time_ms."""
        if size > self.total_memory:
            raise RecordTooLargeError(
                f"Attempt to allocate {size} bytes, but there is a hard limit of {self.total_memory} on memory "
                "allocations (buffer.memory); raise buffer.memory or send smaller records")
        with self._lock:
            if self._closed:
                raise ProducerClosedError("producer closed while allocating buffer memory")
            if size == self.poolable_size and self._free and not self._waiters:
                return self._free.popleft()
            if not self._waiters and self._available() >= size:
                self._reserve(size)
                return bytearray()
            return self._wait_for(size, max_time_ms)

    def try_reserve(self, size: int) -> bool:
        """Account `size` more bytes without waiting, for a batch that grows: only when nobody is queued for
        memory (first come, first served) and the bytes are free. Given back with deallocate(buf, total)."""
        with self._lock:
            if self._closed or self._waiters or self._available() < size:
                return False
            self._reserve(size)
            return True

    def _available(self) -> int:
        return self._non_pooled_available + len(self._free) * self.poolable_size

    def _reserve(self, size: int) -> None:
        # Release free pooled buffers until the non-pooled memory covers the request.
        while self._non_pooled_available < size and self._free:
            self._free.pop()
            self._non_pooled_available += self.poolable_size
        self._non_pooled_available -= size

    def _wait_for(self, size: int, max_time_ms: float) -> bytearray:
        cond = threading.Condition(self._lock)
        self._waiters.append(cond)
        start = self._clock()
        deadline = start + max_time_ms / 1000.0
        try:
            while True:
                is_first = self._waiters[0] is cond
                if is_first and size == self.poolable_size and self._free:
                    return self._free.popleft()
                if is_first and self._available() >= size:
                    self._reserve(size)
                    return bytearray()
                remaining = deadline - self._clock()
                if remaining <= 0:
                    raise self.exhausted(size, max_time_ms, self._available())
                if self.on_block is not None:
                    self.on_block()
                cond.wait(remaining)
                if self._closed:
                    raise ProducerClosedError("producer closed while allocating buffer memory")
        finally:
            waited = self._clock() - start
            self.wait_time_total_s += waited
            if self.on_waited is not None:
                self.on_waited(waited)
            self._waiters.remove(cond)
            if self._waiters and self._available() > 0:
                # We may have left memory that the next waiter can use.
                self._waiters[0].notify()

    def deallocate(self, buf: bytearray, size: int | None = None) -> None:
        size = len(buf) if size is None else size
        with self._lock:
            if size == self.poolable_size and _emptied(buf):
                self._free.append(buf)
            else:
                self._non_pooled_available += size
            if self._waiters:
                self._waiters[0].notify()
        on_release = self.on_release
        if on_release is not None:
            on_release()

    def exhausted(self, size: int, max_time_ms: float, available: int) -> BufferExhaustedError:
        """The error for `size` bytes not found within max_time_ms, whoever waited (a thread here, or an event
        loop in AIOProducer)."""
        facts = (f"Failed to allocate {size} bytes within {int(max_time_ms)} ms (max.block.ms). Total memory: "
                 f"{self.total_memory} bytes. Available memory: {available} bytes. Poolable size: "
                 f"{self.poolable_size} bytes")
        if self.on_exhausted is not None:
            self.on_exhausted()
        err = BufferExhaustedError(f"{facts}. The producer is sending slower than records arrive: check the "
                                   "broker connection, or raise buffer.memory / max.block.ms")
        err.facts = facts
        return err

    def available_memory(self) -> int:
        with self._lock:
            return self._available()

    def queued(self) -> int:
        return len(self._waiters)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for cond in self._waiters:
                cond.notify_all()


def _emptied(buf: bytearray) -> bool:
    """Empty buf for its next batch; False if it cannot be: a view of it (a batch's bytes still queued on a
    connection that closed before writing them) keeps it alive, so it is left to the garbage collector."""
    try:
        del buf[:]
    except BufferError:
        return False
    return True
