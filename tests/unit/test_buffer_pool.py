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


class SteppedClock:
    """A clock that reads the given instants in turn: a deadline is decided by the readings, not by how fast
    the machine runs. One reading too many fails the test instead of waiting forever."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        assert self.readings, "the pool read the clock more often than expected"
        return self.readings.pop(0)


def wait_until_queued(pool: BufferPool, n: int) -> None:
    deadline = time.monotonic() + 5
    while pool.queued() < n:
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.001)


def test_a_request_for_exactly_the_free_memory_is_served_at_once() -> None:
    pool = BufferPool(1024, 256)
    pool.allocate(1024, 0)
    assert pool.available_memory() == 0


def test_recycled_buffers_count_as_available_memory() -> None:
    pool = BufferPool(1024, 256)
    a, b = pool.allocate(256, 0), pool.allocate(256, 0)
    pool.deallocate(a, 256)
    pool.deallocate(b, 256)
    assert pool.available_memory() == 1024


def test_an_odd_size_request_takes_free_buffers_only_when_unpooled_memory_is_short() -> None:
    pool = BufferPool(1024, 256)
    buf = pool.allocate(256, 0)
    pool.deallocate(buf, 256)
    pool.allocate(100, 0)  # 768 unpooled bytes cover it: the recycled buffer stays pooled
    assert pool.allocate(256, 0) is buf


def test_free_buffers_released_for_an_odd_size_are_accounted_exactly() -> None:
    pool = BufferPool(512, 256)
    a = pool.allocate(256, 0)
    pool.allocate(100, 0)
    pool.deallocate(a, 256)  # 156 unpooled + one free buffer
    pool.allocate(300, 0)  # releases the free buffer: 156 + 256 - 300
    assert pool.available_memory() == 112


def test_deallocate_without_a_size_returns_what_the_buffer_holds() -> None:
    pool = BufferPool(1024, 256)
    buf = pool.allocate(300, 0)
    buf += b"x" * 300
    pool.deallocate(buf)
    assert pool.available_memory() == 1024


def test_a_new_caller_queues_behind_a_waiter_even_when_its_own_request_would_fit() -> None:
    # First come, first served (Java's BufferPool): a small request must not overtake a large one waiting.
    pool = BufferPool(1024, 256)
    pool.allocate(600, 0)
    outcome: list[object] = []
    t = threading.Thread(target=lambda: outcome.append(_allocate_or_error(pool, 512, 2_000)))
    t.start()
    wait_until_queued(pool, 1)
    with pytest.raises(BufferExhaustedError):
        pool.allocate(100, 50)
    pool.close()
    t.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], ProducerClosedError)


def _allocate_or_error(pool: BufferPool, size: int, max_time_ms: float) -> object:
    try:
        return pool.allocate(size, max_time_ms)
    except Exception as e:  # noqa: BLE001 - the test inspects which error it was
        return e


def test_a_waiter_for_a_standard_buffer_gets_the_recycled_one() -> None:
    pool = BufferPool(512, 256)
    a, _ = pool.allocate(256, 0), pool.allocate(256, 0)
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(_allocate_or_error(pool, 256, 5_000)))
    t.start()
    wait_until_queued(pool, 1)
    pool.deallocate(a, 256)
    t.join(5)
    assert got and got[0] is a


def test_a_waiter_for_exactly_the_freed_memory_gets_it() -> None:
    pool = BufferPool(1024, 256)
    pool.allocate(624, 0)
    held = pool.allocate(300, 0)
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(_allocate_or_error(pool, 400, 5_000)))
    t.start()
    wait_until_queued(pool, 1)
    pool.deallocate(held, 300)  # exactly 400 free now
    t.join(5)
    assert got and isinstance(got[0], bytearray)
    assert pool.available_memory() == 0


def test_the_deadline_is_max_block_ms_after_the_first_reading() -> None:
    # Readings: start 0, then 0.9995 s (0.5 ms left: wait), then 1.0 (deadline: fail); the time waited is
    # measured from start to the last reading.
    blocked: list[int] = []
    pool = BufferPool(256, 256, clock=SteppedClock(0.0, 0.9995, 1.0, 2.0), on_block=lambda: blocked.append(1))
    pool.allocate(256, 0)  # served at once: no reading taken
    with pytest.raises(BufferExhaustedError):
        pool.allocate(256, 1000)
    assert blocked == [1]
    assert pool.wait_time_total_s == 2.0


def test_reaching_the_deadline_exactly_fails_without_waiting() -> None:
    blocked: list[int] = []
    pool = BufferPool(256, 256, clock=SteppedClock(5.0, 6.0, 6.0), on_block=lambda: blocked.append(1))
    pool.allocate(256, 0)
    with pytest.raises(BufferExhaustedError):
        pool.allocate(256, 1000)
    assert blocked == []
    assert pool.wait_time_total_s == 1.0


def test_errors_say_what_happened_and_what_to_do() -> None:
    pool = BufferPool(256, 256)
    with pytest.raises(RecordTooLargeError, match=r"allocations \(buffer.memory\); raise buffer.memory or send "
                                                  "smaller records$"):
        pool.allocate(512, 0)
    pool.allocate(256, 0)
    with pytest.raises(BufferExhaustedError, match=r"check the broker connection, or raise buffer.memory / "
                                                   "max.block.ms$"):
        pool.allocate(256, 0)
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(_allocate_or_error(pool, 256, 5_000)))
    t.start()
    wait_until_queued(pool, 1)
    pool.close()
    t.join(5)
    assert isinstance(got[0], ProducerClosedError)
    assert str(got[0]) == "producer closed while allocating buffer memory"
    with pytest.raises(ProducerClosedError) as closed:
        pool.allocate(1, 0)
    assert str(closed.value) == "producer closed while allocating buffer memory"


def test_an_odd_size_equal_to_the_unpooled_memory_leaves_the_free_buffers_pooled() -> None:
    pool = BufferPool(1024, 256)
    buf = pool.allocate(256, 0)
    pool.deallocate(buf, 256)
    pool.allocate(768, 0)  # exactly the unpooled memory
    assert pool.allocate(256, 0) is buf


def test_time_spent_waiting_accumulates() -> None:
    pool = BufferPool(256, 256, clock=SteppedClock(5.0, 6.0, 6.0, 10.0, 11.0, 11.0))
    pool.allocate(256, 0)
    for _ in range(2):
        with pytest.raises(BufferExhaustedError):
            pool.allocate(256, 1000)
    assert pool.wait_time_total_s == 2.0


def test_a_waiter_served_with_memory_to_spare_wakes_the_next_one() -> None:
    # One deallocation notifies only the first waiter; what it leaves (one byte here) must reach the second.
    pool = BufferPool(2, 256)
    held = pool.allocate(2, 0)
    got: list[object] = []
    threads = []
    for i in range(2):
        t = threading.Thread(target=lambda: got.append(_allocate_or_error(pool, 1, 5_000)))
        t.start()
        wait_until_queued(pool, i + 1)
        threads.append(t)
    pool.deallocate(held, 2)
    for t in threads:
        t.join(10)
    assert len(got) == 2 and all(isinstance(g, bytearray) for g in got)


def test_each_wait_and_each_exhaustion_reach_the_metrics() -> None:
    """bufferpool-wait-ratio and buffer-exhausted-* come from these hooks: one call per wait, with its seconds,
    one per allocation that ran out of time; none for an allocation served at once."""
    waits: list[float] = []
    exhausted: list[int] = []
    pool = BufferPool(256, 256, clock=SteppedClock(5.0, 6.0, 6.5, 10.0, 10.25, 12.0))
    pool.on_waited = waits.append
    pool.on_exhausted = lambda: exhausted.append(1)
    pool.allocate(256, 0)  # served at once: no wait, no reading
    assert waits == [] and exhausted == []
    with pytest.raises(BufferExhaustedError):
        pool.allocate(256, 1000)  # start 5.0, deadline 6.0 reached at the first check, waited until 6.5
    assert waits == [1.5] and exhausted == [1]
    waiter = threading.Thread(target=pool.allocate, args=(256, 60_000))  # start 10.0, 10.25: waits
    waiter.start()
    wait_until_queued(pool, 1)
    pool.deallocate(bytearray(), 256)  # served now; the wait ends at the reading 12.0
    waiter.join(5)
    assert not waiter.is_alive()
    assert waits == [1.5, 2.0] and exhausted == [1]
