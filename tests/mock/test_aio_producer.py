"""AIOProducer on the MockCluster: the event loop keeps running while the producer waits for memory behind a slow
broker, completions arrive, cancelled awaits lose no record, and failures reach the awaiting code."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kafkajet import BufferExhaustedError, DeliveryTimeoutError, RecordMetadata
from kafkajet.aio import AIOProducer
from kafkajet.errors import IllegalStateError
from kafkajet.testing import MockCluster
from tests.helpers.futures import on_future_made

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 3}), pytest.mark.timeout(120)]


class Ticker:
    """A task that should run every `period` s; records the longest gap the loop made it wait."""

    def __init__(self, period: float = 0.005) -> None:
        self.period = period
        self.max_gap = 0.0
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.period)
            now = time.monotonic()
            self.max_gap = max(self.max_gap, now - last)
            self.ticks += 1
            last = now

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


def test_the_loop_keeps_ticking_while_200k_records_wait_for_memory_behind_a_slow_broker(
        cluster: MockCluster) -> None:
    # Every Produce answer takes 1 s and the buffer holds 2 MiB (about 18,000 records): send() must wait for
    # memory over and over, and must await it rather than block the loop in the pool.
    cluster.set_rtt(cluster.broker_ids[0], 1000)
    n = 200_000

    async def main() -> tuple[Ticker, list[RecordMetadata], int, float]:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers, buffer_memory=2 * 1024 * 1024,
                               batch_size=16 * 1024, linger_ms=5) as p:
            await p.send_and_wait("t", b"warm-up")
            chunks: list[asyncio.Future[list[RecordMetadata]]] = []
            with Ticker() as ticker:
                for start in range(0, n, 10_000):
                    futs = [await p.send("t", b"%06d" % i + b"x" * 94) for i in range(start, start + 10_000)]
                    chunks.append(asyncio.gather(*futs))  # while they are pending: completions trickle in
                mds = [md for chunk in await asyncio.wait_for(asyncio.gather(*chunks), 90) for md in chunk]
            return ticker, mds, p.memory_waits, p.metrics()["bufferpool-wait-time-total"]

    ticker, mds, awaited, blocked_s = asyncio.run(main())
    assert len(mds) == n and all(isinstance(md, RecordMetadata) for md in mds)
    assert cluster.record_count("t") == n + 1
    assert ticker.ticks > 100  # the run took seconds: the ticker ran throughout, not only at the end
    # The check: send() awaited memory many times, and no thread ever blocked in the pool for it. The ticker's
    # longest gap is not asserted: it measured scheduling, not this. A send() planted to block in the pool
    # left gaps of at most 0.64 s (each block ends when one batch's memory comes back), while a loaded 2-core
    # machine stalled the loop of the correct one for 0.95 s.
    assert awaited > 5 and blocked_s == 0.0, (awaited, blocked_s)


def test_a_cancelled_await_does_not_recall_its_record(cluster: MockCluster) -> None:
    cluster.set_rtt(cluster.broker_ids[0], 200)

    async def main() -> tuple[int, int, int]:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers) as p:
            await p.send_and_wait("t", b"warm-up")
            futs = [await p.send("t", b"r%d" % i) for i in range(1000)]  # all queued

            async def wait_for_it(fut: asyncio.Future[RecordMetadata]) -> RecordMetadata:
                return await fut

            tasks = [asyncio.create_task(wait_for_it(f)) for f in futs]
            await asyncio.sleep(0)
            for t in tasks[::2]:
                t.cancel()  # cancels the future it awaits too
            done = await asyncio.gather(*tasks, return_exceptions=True)
            await p.flush(30)
        cancelled = sum(isinstance(r, asyncio.CancelledError) for r in done)
        delivered = sum(isinstance(r, RecordMetadata) for r in done)
        return cancelled, delivered, sum(f.cancelled() for f in futs)

    cancelled, delivered, futures_cancelled = asyncio.run(main())
    assert cancelled == 500 and delivered == 500 and futures_cancelled == 500
    # Every record was still written, the cancelled ones too, each once.
    values = sorted(r.value for r in cluster.records("t", 0) + cluster.records("t", 1) + cluster.records("t", 2))
    assert values == sorted([b"warm-up"] + [b"r%d" % i for i in range(1000)])


def test_cancelling_a_send_that_waits_for_memory_takes_no_record(cluster: MockCluster) -> None:
    cluster.set_rtt(cluster.broker_ids[0], 1000)

    async def main() -> tuple[int, object]:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers, buffer_memory=64 * 1024,
                               batch_size=16 * 1024, max_block_ms=30_000) as p:
            await p.send_and_wait("t", b"warm-up")
            taken = 0

            async def fill() -> None:
                nonlocal taken
                while True:
                    await p.send("t", b"x" * 1000)
                    taken += 1

            task = asyncio.create_task(fill())
            while p.producer._pool.on_release is None:  # waiting for memory now
                await asyncio.sleep(0.001)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            hook = p.producer._pool.on_release
            await p.flush(30)
            return taken, hook

    taken, hook = asyncio.run(main())
    assert hook is None  # the wait cleaned up after itself
    assert cluster.record_count("t") == taken + 1  # what send() returned for was written; the cancelled one not


def test_memory_that_never_frees_ends_in_buffer_exhausted_after_max_block_ms(cluster: MockCluster) -> None:
    async def main() -> tuple[BufferExhaustedError, Ticker, float]:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers, buffer_memory=64 * 1024,
                               batch_size=16 * 1024, max_block_ms=1000, delivery_timeout_ms=60_000) as p:
            await p.send_and_wait("t", b"warm-up")
            cluster.broker_down(cluster.broker_ids[0])
            with Ticker() as ticker:
                start = time.monotonic()
                with pytest.raises(BufferExhaustedError) as err:
                    for _ in range(10_000):
                        await p.send("t", b"x" * 1000, partition=0)
                elapsed = time.monotonic() - start
            await p.stop(0)
            return err.value, ticker, elapsed

    err, ticker, elapsed = asyncio.run(main())
    assert 0.9 <= elapsed < 10, elapsed  # it waited max.block.ms (1 s) for memory, then gave up
    # Without holding the loop: one that blocked for the wait would stand still for all of max.block.ms (1 s)
    # and tick a few times at most. The gap bound leaves room for a loaded machine's stalls (0.1-0.6 s seen).
    assert ticker.max_gap < 0.5 and ticker.ticks > 20, (ticker.max_gap, ticker.ticks)
    assert "max.block.ms" in str(err) and "cannot be delivered" in str(err)  # the broker's absence is named


def test_a_failed_record_raises_from_its_future(cluster: MockCluster) -> None:
    async def main() -> BaseException | None:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers, delivery_timeout_ms=1500,
                               request_timeout_ms=1000, linger_ms=0) as p:
            await p.send_and_wait("t", b"warm-up")
            cluster.broker_down(cluster.broker_ids[0])
            fut = await p.send("t", b"lost", partition=0)
            try:
                await asyncio.wait_for(fut, 30)
            except DeliveryTimeoutError as e:
                return e
            return None

    assert isinstance(asyncio.run(main()), DeliveryTimeoutError)


def test_using_it_before_start_says_how() -> None:
    async def main() -> None:
        p = AIOProducer(bootstrap_servers="127.0.0.1:1")
        with pytest.raises(IllegalStateError, match="async with AIOProducer"):
            await p.send("t", b"v")

    asyncio.run(main())


def test_its_records_build_no_thread_future_unless_send_is_wrapped(cluster: MockCluster,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each record's asyncio future is its outcome: a RecordFuture beside it would be built and thrown away. A
    wrapped send() (as opentelemetry wraps it) still gets every record, futures and all."""
    built: list[None] = []
    on_future_made(monkeypatch, lambda: built.append(None))
    wrapped_saw: list[str] = []

    async def main() -> list[RecordMetadata]:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as p:
            plain = [await (await p.send("t", b"v%d" % i, partition=i % 3)) for i in range(30)]
            assert len(built) == 0
            send = p.producer.send

            def wrapper(topic: str, *args: Any, **kwargs: Any) -> Any:
                wrapped_saw.append(topic)
                return send(topic, *args, **kwargs)

            p.producer.send = wrapper  # type: ignore[method-assign]
            return plain + [await (await p.send("t", b"w%d" % i)) for i in range(5)]

    mds = asyncio.run(main())
    assert [md.topic for md in mds] == ["t"] * 35 and all(md.offset >= 0 for md in mds)
    assert len({(md.partition, md.offset) for md in mds}) == 35
    assert wrapped_saw == ["t"] * 5 and len(built) == 5
