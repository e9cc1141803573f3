"""AIOProducer's completion hand-off: each record's asyncio future is its own delivery callback, and outcomes
cross from the completing threads to the loop through one flat queue. Every future must get its own record's
outcome, however the completing threads interleave (the sender's, and close()'s when it fails what is left)."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkajet import RecordMetadata
from kafkajet.aio import AIOProducer
from kafkajet.errors import KafkaTimeoutError

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """Threads switch every microsecond: an outcome queued in more than one step gets interleaved."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_each_future_gets_its_own_outcome_when_threads_complete_at_once(tiny_switch_interval: None) -> None:
    threads, per_thread = 4, 5_000

    async def go() -> None:
        aio = AIOProducer(bootstrap_servers="127.0.0.1:1")  # never started: only its completion hand-off runs
        aio._loop = asyncio.get_running_loop()
        make = aio._future_type
        futures = [[make(loop=aio._loop) for _ in range(per_thread)] for _ in range(threads)]
        start = threading.Barrier(threads)

        def complete(t: int) -> None:  # as the sender thread does: callback(metadata, exception)
            start.wait()
            for i, fut in enumerate(futures[t]):
                md = RecordMetadata("t", t, i, 0, -1, 1)
                fut(md, None if i % 7 else KafkaTimeoutError(f"{t}-{i}"))

        workers = [threading.Thread(target=complete, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            await asyncio.get_running_loop().run_in_executor(None, w.join)
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(f for fs in futures for f in fs), return_exceptions=True), 30)
        for t in range(threads):
            for i in range(per_thread):
                got = outcomes[t * per_thread + i]
                if i % 7:
                    assert got == RecordMetadata("t", t, i, 0, -1, 1)
                else:
                    assert isinstance(got, KafkaTimeoutError) and str(got) == f"{t}-{i}"
        assert not aio._completed

    asyncio.run(go())


def test_a_record_future_is_an_asyncio_future_gather_and_wait_accept() -> None:
    async def go() -> None:
        aio = AIOProducer(bootstrap_servers="127.0.0.1:1")
        aio._loop = asyncio.get_running_loop()
        fut = aio._future_type(loop=aio._loop)
        assert isinstance(fut, asyncio.Future) and asyncio.isfuture(fut)
        fut(RecordMetadata("t", 0, 5, 0, -1, 1), None)
        done, _ = await asyncio.wait([fut], timeout=30)
        assert done == {fut} and fut.result().offset == 5

    asyncio.run(go())


# A pending record future keeps its done-callbacks itself and the loop runs a delivered group's in one handle
# (rather than a call_soon each): what asyncio promises about done-callbacks must hold all the same.

MD = RecordMetadata("t", 0, 5, 0, -1, 1)
var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


def _producer_on_this_loop() -> AIOProducer:
    aio = AIOProducer(bootstrap_servers="127.0.0.1:1")  # never started: only its completion hand-off runs
    aio._loop = asyncio.get_running_loop()
    return aio


async def _until(condition: Callable[[], bool], timeout: float = 30) -> bool:
    """Whether `condition` came true within `timeout` s, giving the loop turns meanwhile."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0)
    return True


def test_callbacks_run_in_a_later_turn_in_order_each_in_the_context_it_was_added_in() -> None:
    async def go() -> None:
        aio = _producer_on_this_loop()
        first, second = aio._future_type(loop=aio._loop), aio._future_type(loop=aio._loop)
        seen: list[tuple[str, str]] = []
        elsewhere = contextvars.copy_context()
        elsewhere.run(var.set, "elsewhere")
        first.add_done_callback(lambda f: seen.append(("first-a", var.get())), context=elsewhere)
        var.set("here")  # captured now, by the next add
        first.add_done_callback(lambda f: seen.append(("first-b", var.get())))
        second.add_done_callback(lambda f: seen.append(("second", var.get())))
        var.set("changed")  # after adding: the callbacks must not see it
        first(MD, None)
        second(MD, None)
        aio._deliver()  # as the loop would run it, before anything else
        assert first.done() and second.done() and seen == []  # not from inside set_result's caller
        assert await _until(lambda: len(seen) == 3)
        assert seen == [("first-a", "elsewhere"), ("first-b", "here"), ("second", "here")]
        assert not aio._waiting

    asyncio.run(go())


def test_a_failing_callback_is_reported_to_the_loop_and_the_others_still_run() -> None:
    async def go() -> None:
        aio = _producer_on_this_loop()
        reported: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: reported.append(ctx))
        futs = [aio._future_type(loop=aio._loop) for _ in range(4)]
        ran: list[str] = []

        def fails(f: asyncio.Future[RecordMetadata]) -> None:
            raise ValueError("in a callback")

        futs[0].add_done_callback(fails)  # one of two callbacks
        futs[0].add_done_callback(lambda f: ran.append("0"))
        futs[1].add_done_callback(lambda f: ran.append("1"))
        futs[2].add_done_callback(fails)  # the only one
        futs[3].add_done_callback(lambda f: ran.append("3"))
        for f in futs:
            f(MD, None)
        assert await _until(lambda: len(ran) == 3 and len(reported) == 2)
        assert ran == ["0", "1", "3"]
        assert [type(r["exception"]) for r in reported] == [ValueError, ValueError]

    asyncio.run(go())


def test_a_keyboard_interrupt_in_a_callback_stops_the_loop_and_the_rest_run_when_it_runs_again() -> None:
    loop = asyncio.new_event_loop()
    try:
        async def setup() -> tuple[AIOProducer, list[str]]:
            aio = _producer_on_this_loop()
            ran: list[str] = []

            def interrupts(f: asyncio.Future[RecordMetadata]) -> None:
                raise KeyboardInterrupt

            futs = [aio._future_type(loop=loop) for _ in range(3)]
            futs[0].add_done_callback(interrupts)
            futs[0].add_done_callback(lambda f: ran.append("0"))
            futs[1].add_done_callback(lambda f: ran.append("1"))
            futs[2].add_done_callback(lambda f: ran.append("2"))
            for f in futs:
                f(MD, None)
            return aio, ran

        aio, ran = loop.run_until_complete(setup())
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(_until(lambda: len(ran) == 3))
        assert loop.run_until_complete(_until(lambda: len(ran) == 3, timeout=10))
        assert ran == ["0", "1", "2"]
    finally:
        loop.close()


def test_a_removed_callback_does_not_run_and_wait_with_a_timeout_leaves_none_behind() -> None:
    async def go() -> None:
        aio = _producer_on_this_loop()
        fut = aio._future_type(loop=aio._loop)
        ran: list[str] = []

        def removed(f: asyncio.Future[RecordMetadata]) -> None:
            ran.append("removed")

        fut.add_done_callback(removed)
        fut.add_done_callback(lambda f: ran.append("kept"))
        fut.add_done_callback(removed)
        assert fut.remove_done_callback(removed) == 2
        assert fut.remove_done_callback(removed) == 0
        done, pending = await asyncio.wait([fut], timeout=0.01)  # adds a callback, then removes it
        assert pending == {fut}
        fut(MD, None)
        assert await _until(lambda: bool(ran))  # every callback of the future runs in that one turn
        assert ran == ["kept"] and not aio._waiting

    asyncio.run(go())


def test_cancelling_a_pending_future_wakes_what_awaits_it_and_a_done_one_schedules_at_once() -> None:
    async def go() -> None:
        aio = _producer_on_this_loop()
        cancelled, delivered = aio._future_type(loop=aio._loop), aio._future_type(loop=aio._loop)
        gathered = asyncio.gather(cancelled, delivered, return_exceptions=True)
        waiter = asyncio.create_task(asyncio.wait_for(cancelled, 30))
        await asyncio.sleep(0)
        assert cancelled.cancel() and not cancelled.cancel()
        delivered(MD, None)
        cancelled(MD, None)  # its record is still delivered: nobody hears of it, nothing breaks
        outcome = await asyncio.wait_for(gathered, 30)
        assert isinstance(outcome[0], asyncio.CancelledError) and outcome[1] == MD
        with pytest.raises(asyncio.CancelledError):
            await waiter
        late: list[asyncio.Future[RecordMetadata]] = []
        delivered.add_done_callback(late.append)  # already done: scheduled at once, as asyncio does
        assert await _until(lambda: late == [delivered])
        assert not aio._waiting

    asyncio.run(go())
