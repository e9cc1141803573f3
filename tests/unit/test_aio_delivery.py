"""AIOProducer's completion hand-off: each record's asyncio future is its own delivery callback, and outcomes
cross from the completing threads to the loop through one flat queue. Every future must get its own record's
outcome, however the completing threads interleave (the sender's, and close()'s when it fails what is left)."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator

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
