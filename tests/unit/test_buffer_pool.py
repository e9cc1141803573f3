"""BufferPool: recycling, first-come-first-served blocking, exact accounting, timeouts and close."""

from __future__ import annotations

import threading
import time

import pytest

from kafkajet.errors import BufferExhaustedError, ProducerClosedError, RecordTooLargeError
from kafkajet.producer.buffer_pool import BufferPool


def test_standard_buffers_are_recycled() -> None:
    pool = BufferPool(1024, 256)
    buf = pool.allocate(256, 0)
    buf += b"data"
    pool.deallocate(buf, 256)
    again = pool.allocate(256, 0)
    assert again is buf and len(again) == 0
    assert pool.available_memory() == 1024 - 256


def test_odd_sizes_are_accounted_and_released() -> None:
    pool = BufferPool(1024, 256)
    pool.allocate(700, 0)
    assert pool.available_memory() == 324
    with pytest.raises(BufferExhaustedError):
        pool.allocate(400, 0)
    assert pool.available_memory() == 324  # a timed-out request takes nothing


def test_too_large_fails_at_once() -> None:
    with pytest.raises(RecordTooLargeError, match="hard limit of 1024"):
        BufferPool(1024, 256).allocate(2048, 10_000)


def test_blocked_callers_are_served_in_arrival_order() -> None:
    pool = BufferPool(512, 256)
    held = [pool.allocate(256, 0), pool.allocate(256, 0)]
    order: list[int] = []
    started = [threading.Event() for _ in range(3)]

    closed: list[int] = []

    def waiter(i: int) -> None:
        started[i].set()
        try:
            pool.allocate(256, 10_000)
            order.append(i)
        except ProducerClosedError:
            closed.append(i)

    threads = []
    for i in range(3):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        assert started[i].wait(5)
        deadline = time.monotonic() + 5
        while pool.queued() < i + 1:  # each waiter is queued before the next starts
            assert time.monotonic() < deadline
            time.sleep(0.001)
        threads.append(t)
    pool.deallocate(held.pop(), 256)
    pool.deallocate(held.pop(), 256)
    threads[0].join(5)
    threads[1].join(5)
    assert order == [0, 1]
    assert pool.queued() == 1
    pool.close()
    threads[2].join(5)
    assert closed == [2]


def test_timeout_raises_buffer_exhausted_and_keeps_accounting() -> None:
    pool = BufferPool(256, 256)
    pool.allocate(256, 0)
    start = time.monotonic()
    with pytest.raises(BufferExhaustedError, match="within 200 ms"):
        pool.allocate(256, 200)
    assert time.monotonic() - start >= 0.19
    assert pool.available_memory() == 0 and pool.queued() == 0
    assert pool.wait_time_total_s >= 0.19


def test_close_wakes_waiters() -> None:
    pool = BufferPool(256, 256)
    pool.allocate(256, 0)
    result: list[BaseException] = []

    def waiter() -> None:
        try:
            pool.allocate(256, 60_000)
        except BaseException as e:
            result.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    deadline = time.monotonic() + 5
    while pool.queued() == 0:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    pool.close()
    t.join(5)
    assert result and isinstance(result[0], ProducerClosedError)


def test_a_buffer_still_viewed_is_not_pooled_but_its_memory_is_returned() -> None:
    # An uncompressed batch is sent as a view of its buffer; if a connection closed with that view unsent,
    # the buffer cannot be emptied for reuse. Its memory must still come back, and nothing may raise.
    pool = BufferPool(total_memory=4 * 1024, poolable_size=1024)
    buf = pool.allocate(1024, max_time_ms=0)
    buf += b"x" * 1000
    view = memoryview(buf)
    pool.deallocate(buf, 1024)
    assert pool.available_memory() == 4 * 1024
    assert bytes(view[:3]) == b"xxx"  # the holder of the view still reads what it had
    assert len(pool.allocate(1024, max_time_ms=0)) == 0  # a fresh buffer, not the viewed one
