"""kafkajet against kafka-python, aiokafka and confluent-kafka: every client, every workload, one run.

    .venv/bin/python benchmarks/compare.py            # medians of 3, interleaved (a few minutes)
    .venv/bin/python benchmarks/compare.py --quick    # one repetition, a fifth of the records
    .venv/bin/python benchmarks/compare.py --workloads latency-20k --clients kafkajet,confluent-kafka,java
    .venv/bin/python benchmarks/compare.py --broker tansu     # the embedded broker instead of Apache Kafka

--broker apache (the default) runs every workload against one Apache Kafka node (kafkajet.testing.ApacheKafka,
the jars `make kafka` fetched), started once for the whole run and warmed up for 20 s before the first
measured run (warm_up()), a fresh topic per run; --broker tansu against a
fresh embedded broker per run; --bootstrap-servers against an existing cluster.

Workloads (2,000,000 records of 100 bytes or 500,000 of 1 KiB, kafka-python a quarter of them (FEWER_RECORDS),
acks=all, linger.ms=5, 6 partitions unless noted; every client at its own default
batch.size (16 KiB for kafkajet and Java, 1 MB for librdkafka) unless the row names one):
  send-100B    fire and forget, a loop each client's user writes when no record needs its own outcome, then flush:
                 kafkajet      send(topic, value), no callback; acknowledged = the producer's record-send-total
                 kafka-python  send(topic, value=value), the futures kept, then flush(); acknowledged = futures
                               that succeeded (it has no other count)
                 aiokafka      `await send()` each record, then gather() of the delivery futures
                 confluent-kafka  produce(topic, value) with no on_delivery and poll(0) after each, at librdkafka's
                               defaults (poll(0.1) and retry on BufferError), then flush(); acknowledged = every
                               record if len(p) == 0 after flush() and error_cb saw no error
                 java          Apache Kafka's KafkaProducer (jvm/ProducerBench.java): send(record) with no
                               callback, then flush(); acknowledged = its record-send-total metric
  send-1KiB    the same with 1 KiB values
  send-1KiB-16K   1 KiB values with batch.size 16 KiB (Java's default) for every client
  send-1KiB-256K  1 KiB values with batch.size 256 KiB for every client
  batch-100B-5M  each client's batch path over 5,000,000 records: kafkajet send_batch() and send_arrow() (a
               pyarrow RecordBatch) in chunks of 10,000, aiokafka create_batch()/send_batch(), and
               confluent-kafka's produce() loop as the reference, at librdkafka's default queue (produce()
               waits in poll() on BufferError). Long enough (2-3 s for the fastest client) that the producer's
               start and the final flush are a few percent of the run. It replaces the 500,000-record
               batch-100B, which was under 0.3 s and so measured mostly that start and flush (the Spark sink's
               benchmark measures a producer's start per task where it matters)
  callback-100B  a send() loop with a delivery callback per record (it counts successes): kafkajet
               send(callback=) (and a future's add_done_callback() for reference), kafka-python add_callback(),
               aiokafka's future add_done_callback(), confluent-kafka produce(on_delivery=) with poll(0) at
               librdkafka's defaults (poll(0.1) and retry on BufferError)
  asyncio-100B from an event loop: `[await p.send() ...]` in chunks of 1,000, then asyncio.gather() of their
               delivery futures: kafkajet's
               AIOProducer against aiokafka's AIOKafkaProducer (and kafkajet's thread producer through
               asyncio.wrap_future(), the way before AIOProducer)
  latency-20k  20,000 records/s for a fixed time, p50/p99 send-to-acknowledgement latency per record: each
               client's send with its per-record callback that takes the time of the ack (kafkajet
               send(callback=), Java send(record, callback), confluent-kafka on_delivery, kafka-python and aiokafka
               their futures' callbacks; "kafkajet future callback" a done-callback on send()'s future), after one
               record sent and acknowledged outside the clock; Java's with Kafka's own ThroughputThrottler
  "kafkajet produce()", in send-100B: the same loop through produce(), send() without the RecordFuture
               a fire-and-forget caller drops (no callback), against confluent-kafka's produce() + poll(0)
  otel-100B    what OpenTelemetry costs a send() (issue 31), in CPU microseconds per record over the send loop
               (all threads, and the caller's alone), by send_cost.py's loops: kafkajet plain; with
               opentelemetry.enable and no SDK ("otel no-sdk": the cost when tracing is off in the service);
               with the SDK's tracer provider, spans batched to an exporter that drops them ("otel traces");
               and with its metrics too ("otel"); and the contrib kafka-python instrumentation ("kafka-python
               otel", a span ending at the enqueue) beside plain kafka-python. A second table prints each one's
               microseconds per record added over its plain client, the wrapper's being the bar to stay under

Each throughput workload also has a "broker ceiling" row: ceiling.py's client that costs nothing per record
(batches encoded before the clock starts) writing the same records at kafkajet's batch.size for that workload.
It is the most any client could get from this broker at that batch size; kafkajet's ratio to it says how much
of that it reaches. The batch workloads' ceiling writes 1 MiB batches (kafkajet's batch.max.size, to which its
batches grow while requests are in flight), the ceiling issue 30's target is measured against.

Both builds of kafkajet (issue 30): every kafkajet client runs as it installed (compiled where hatch_build.py
built it) and again as "<client> [pure]" with KAFKAJET_NO_EXTENSIONS=1; `--builds compiled` or `--builds pure`
runs one. Each kafkajet run checks that it ran the build its label names.

Each run is its own process; CPU seconds and peak RSS are that process's. The Java client's process is a JVM
running jvm/ProducerBench.java: its clock starts at the first send, after the producer is created and has
fetched the topic's metadata (the Python runners' clock starts before the producer is created, after their
imports), and its CPU seconds are counted from main(), so without the JVM's start and the in-memory compile.
Every run counts acknowledged records: a run that loses any reports FAILED instead of a speed, and so does a
run that claims more records than the topic then holds (its offsets, read after the run).
Every table is printed under a line naming the broker, the machine (cores, load average before and after), the
date and kafkajet's build. The table is
printed as Markdown; results/compare[-quick].json and .png hold the numbers and a chart (a run of a subset of
workloads or clients writes results/compare-partial.*).
"""

from __future__ import annotations

import argparse
import array
import asyncio
import collections
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from _common import (
    add_broker_option,
    broker_name,
    context_line,
    create_topic,
    open_broker,
    preload,
    report,
    run_child,
    spawn,
)
from _jvm import producer_bench_command
from produce import RUNNERS as SEND_RUNNERS
from produce import run_kafkajet as send_kafkajet
from send_cost import run as timed_send_loop

ROOT = Path(__file__).resolve().parent
BATCH_CHUNK = 10_000  # records per send_batch() call: the size of a typical DataFrame/Arrow batch
CEILING = "broker ceiling"
PRODUCE = "kafkajet produce()"

WORKLOADS: dict[str, dict[str, Any]] = {
    "send-100B": {"kind": "send", "records": 2_000_000, "size": 100,
                  "clients": ["kafkajet", PRODUCE, "kafka-python", "aiokafka", "confluent-kafka", "java", CEILING]},
    "send-1KiB": {"kind": "send", "records": 500_000, "size": 1024,
                  "clients": ["kafkajet", "kafka-python", "aiokafka", "confluent-kafka", "java", CEILING]},
    # Every client with the same batch.size: Java's 16 KiB default (confluent-kafka's is 1 MB, so at defaults it
    # sends 60 times fewer batches), and 256 KiB. At 16 KiB a batch holds 15 records of 1 KiB, and five
    # requests in flight per connection bound the rate of every client.
    "send-1KiB-16K": {"kind": "send", "records": 500_000, "size": 1024, "batch_size": 16384,
                      "clients": ["kafkajet", "kafka-python", "aiokafka", "confluent-kafka", "java", CEILING]},
    "send-1KiB-256K": {"kind": "send", "records": 500_000, "size": 1024, "batch_size": 262144,
                       "clients": ["kafkajet", "kafka-python", "aiokafka", "confluent-kafka", "java", CEILING]},
    "batch-100B-5M": {"kind": "batch", "records": 5_000_000, "size": 100, "ceiling_batch_size": 1_048_576,
                      "clients": ["kafkajet send_batch", "kafkajet send_arrow", "aiokafka batch", "confluent-kafka",
                                  CEILING]},
    "callback-100B": {"kind": "callback", "records": 2_000_000, "size": 100,
                      "clients": ["kafkajet", "kafkajet future callback", "kafka-python", "aiokafka",
                                  "confluent-kafka"]},
    "asyncio-100B": {"kind": "asyncio", "records": 500_000, "size": 100,
                     "clients": ["kafkajet AIOProducer", "kafkajet wrap_future", "aiokafka"]},
    "latency-20k": {"kind": "latency", "rate": 20_000, "seconds": 5.0, "size": 100,
                    "clients": ["kafkajet", "kafkajet future callback", "kafka-python", "aiokafka", "confluent-kafka", "java"]},
    "otel-100B": {"kind": "otel", "records": 300_000, "size": 100,
                  "clients": ["kafkajet", "kafkajet otel no-sdk", "kafkajet otel traces", "kafkajet otel",
                              "kafka-python", "kafka-python otel"]},
}
# Runs last 1.5-3 s for the fastest clients: at 500,000 records a run took 0.4 s, and one repetition differed
# from the next by 20-30% (the producers' start, the first metadata and the final flush, and the broker's
# pauses, were a large part of it). kafka-python, 20-50x slower, sends a quarter of a workload's records when it
# has a million or more; its run still lasts longer than anyone else's, and its rate is what is compared.
FEWER_RECORDS = {"kafka-python": 4}
for _w in WORKLOADS.values():
    _w.setdefault("records", int(_w.get("rate", 0) * _w.get("seconds", 0)))
    _w.update(acks=-1, compression="none", key=False)  # what produce.py's runners read
BASELINE = {"send": "kafkajet", "batch": "kafkajet send_batch", "latency": "kafkajet", "callback": "kafkajet",
            "asyncio": "kafkajet AIOProducer", "otel": "kafkajet"}
PURE = " [pure]"  # the label suffix of a kafkajet client run with KAFKAJET_NO_EXTENSIONS=1
ASYNC_CHUNK = 1_000  # sends awaited together with gather(), the shape of an event-loop program's bursts


# --- runners (in the child process) ----------------------------------------------------------------------
# Each returns the number of records acknowledged and, for the latency workload, extra numbers to report.


def _kafkajet_chunks(bootstrap: str, w: dict[str, Any], send: Callable[[Any, int], Any]) -> int:
    """`send(producer, n)` queues the next n records (one chunk) and returns its BatchFuture; the records
    acknowledged. Only the chunks still pending are held (buffer.memory bounds them), so memory stays flat
    however many records the run sends."""
    from kafkajet import Producer

    def acked(f: Any) -> int:
        return len(f) - len(f.errors())

    ok, pending = 0, collections.deque[Any]()
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        for start in range(0, w["records"], BATCH_CHUNK):
            pending.append(send(p, min(BATCH_CHUNK, w["records"] - start)))
            while pending and pending[0].done():
                ok += acked(pending.popleft())
        p.flush()
    return ok + sum(acked(f) for f in pending)


def run_kafkajet_batch(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    chunk = [b"x" * w["size"]] * BATCH_CHUNK  # one chunk, sent over and over: the input costs nothing
    return _kafkajet_chunks(bootstrap, w, lambda p, n: p.send_batch(topic, chunk if n == BATCH_CHUNK else chunk[:n]))


def run_kafkajet_arrow(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    import pyarrow as pa

    chunk = pa.record_batch([pa.array([b"x" * w["size"]] * BATCH_CHUNK, pa.binary())], names=["value"])
    return _kafkajet_chunks(bootstrap, w, lambda p, n: p.send_arrow(topic, chunk.slice(0, n)))


def run_aiokafka_batch(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from aiokafka import AIOKafkaProducer

    async def go() -> int:
        value = b"x" * w["size"]
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await p.start()
        try:
            partitions = sorted(await p.partitions_for(topic))
            # Only the batches still pending are held, as in kafkajet's runner.
            ok, batches, pending = 0, 0, collections.deque[tuple[int, asyncio.Future[Any]]]()

            async def send(batch: Any) -> None:
                nonlocal ok, batches
                # Next partition in turn: aiokafka leaves placement to the caller.
                fut = await p.send_batch(batch, topic, partition=partitions[batches % len(partitions)])
                batches += 1
                pending.append((batch.record_count(), fut))
                while pending and pending[0][1].done():
                    n, done = pending.popleft()
                    ok += n if done.exception() is None else 0

            batch = p.create_batch()
            for _ in range(w["records"]):
                if batch.append(key=None, value=value, timestamp=None) is None:  # full
                    await send(batch)
                    batch = p.create_batch()
                    batch.append(key=None, value=value, timestamp=None)
            if batch.record_count():
                await send(batch)
            outcomes = await asyncio.gather(*(f for _, f in pending), return_exceptions=True)
        finally:
            await p.stop()
        return ok + sum(n for (n, _), o in zip(pending, outcomes, strict=True) if not isinstance(o, BaseException))

    return asyncio.run(go())


class _Counter:
    """A delivery callback per client's signature that counts successes (the callback's work in every runner)."""

    def __init__(self) -> None:
        self.ok = 0

    def md_exc(self, md: Any, exc: Any) -> None:  # kafkajet send(callback=)
        if exc is None:
            self.ok += 1

    def future(self, fut: Any) -> None:  # concurrent.futures / asyncio future callbacks
        if fut.exception() is None:
            self.ok += 1

    def value(self, _md: Any) -> None:  # kafka-python add_callback (successes only)
        self.ok += 1

    def err_msg(self, err: Any, _msg: Any) -> None:  # confluent-kafka on_delivery
        if err is None:
            self.ok += 1


def callback_kafkajet(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from kafkajet import Producer

    value, count = b"x" * w["size"], _Counter()
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        send, cb = p.send, count.md_exc
        for _ in range(w["records"]):
            send(topic, value, callback=cb)
    return count.ok


def callback_kafkajet_future(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from kafkajet import Producer

    value, count = b"x" * w["size"], _Counter()
    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        send, cb = p.send, count.future
        for _ in range(w["records"]):
            send(topic, value).add_done_callback(cb)
    return count.ok


def callback_kafka_python(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from kafka import KafkaProducer

    value, count = b"x" * w["size"], _Counter()
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for _ in range(w["records"]):
        p.send(topic, value=value).add_callback(count.value)
    p.flush()
    p.close()
    return count.ok


def callback_aiokafka(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from aiokafka import AIOKafkaProducer

    async def go() -> int:
        value, count = b"x" * w["size"], _Counter()
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await p.start()
        try:
            for _ in range(w["records"]):
                (await p.send(topic, value=value)).add_done_callback(count.future)
            await p.flush()
        finally:
            await p.stop()
        return count.ok

    return asyncio.run(go())


def callback_confluent(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from confluent_kafka import Producer as CProducer

    value, count = b"x" * w["size"], _Counter()
    # librdkafka's defaults (a queue of 100,000 messages), as its users run it and as the kafkajet runner runs.
    p = CProducer({"bootstrap.servers": bootstrap, "acks": -1, "linger.ms": 5})
    produce, poll, cb = p.produce, p.poll, count.err_msg
    for _ in range(w["records"]):
        while True:
            try:
                produce(topic, value, on_delivery=cb)
                break
            except BufferError:  # the queue is full: serve delivery reports, then try again
                poll(0.1)
        poll(0)
    p.flush(120)
    return count.ok


def asyncio_kafkajet(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from kafkajet.aio import AIOProducer

    async def go() -> int:
        value, ok = b"x" * w["size"], 0
        async with AIOProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
            for start in range(0, w["records"], ASYNC_CHUNK):
                n = min(ASYNC_CHUNK, w["records"] - start)
                futs = [await p.send(topic, value) for _ in range(n)]
                done = await asyncio.gather(*futs, return_exceptions=True)
                ok += sum(1 for r in done if not isinstance(r, BaseException))
        return ok

    return asyncio.run(go())


def asyncio_kafkajet_wrap_future(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from kafkajet import Producer

    async def go() -> int:
        value, ok = b"x" * w["size"], 0
        with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
            for start in range(0, w["records"], ASYNC_CHUNK):
                n = min(ASYNC_CHUNK, w["records"] - start)
                done = await asyncio.gather(*[asyncio.wrap_future(p.send(topic, value)) for _ in range(n)],
                                            return_exceptions=True)
                ok += sum(1 for r in done if not isinstance(r, BaseException))
        return ok

    return asyncio.run(go())


def asyncio_aiokafka(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from aiokafka import AIOKafkaProducer

    async def go() -> int:
        value, ok = b"x" * w["size"], 0
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await p.start()
        try:
            for start in range(0, w["records"], ASYNC_CHUNK):
                n = min(ASYNC_CHUNK, w["records"] - start)
                futs = [await p.send(topic, value=value) for _ in range(n)]
                done = await asyncio.gather(*futs, return_exceptions=True)
                ok += sum(1 for r in done if not isinstance(r, BaseException))
        finally:
            await p.stop()
        return ok

    return asyncio.run(go())


def _percentiles(latencies_us: array.array[int]) -> dict[str, float]:
    if not latencies_us:
        return {"p50_ms": 0.0, "p99_ms": 0.0}
    ordered = sorted(latencies_us)
    return {"p50_ms": ordered[len(ordered) // 2] / 1000, "p99_ms": ordered[int(len(ordered) * 0.99)] / 1000}


def _throttler(rate: float, start: float) -> Any:
    from kafkajet.cli.perf import (
        Throttler,  # the perf tool's throttle (Java's ThroughputThrottler), for everyone
    )

    return Throttler(rate, start, clock=time.perf_counter)


def latency_kafkajet(bootstrap: str, topic: str, w: dict[str, Any], future: bool = False) -> tuple[int, dict[str, Any]]:
    """send(callback=), as Java's row sends with a Callback and confluent-kafka's with on_delivery; with `future`,
    a done-callback on the future send() returns instead (the "kafkajet future callback" row)."""
    from kafkajet import Producer

    value, n, clock = b"x" * w["size"], w["records"], time.perf_counter
    lat: array.array[int] = array.array("i")

    def delivered(start: float, _md: Any, exc: BaseException | None) -> None:  # on the sender thread
        now = clock()
        if exc is None:
            lat.append(int((now - start) * 1e6))

    def done(start: float, fut: Any) -> None:
        delivered(start, None, fut.exception())

    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        p.send(topic, value).result()  # connect and fetch metadata outside the measurement
        t0 = clock()
        throttler = _throttler(w["rate"], t0)
        send = p.send
        for i in range(n):
            start = clock()
            if future:
                send(topic, value).add_done_callback(partial(done, start))
            else:
                send(topic, value, callback=partial(delivered, start))
            if throttler.should_throttle(i + 1, start):
                throttler.throttle()
        p.flush()
        wall = clock() - t0
    return len(lat), {"wall_run": wall, **_percentiles(lat)}


def latency_kafka_python(bootstrap: str, topic: str, w: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from kafka import KafkaProducer

    value, n, clock = b"x" * w["size"], w["records"], time.perf_counter
    lat: array.array[int] = array.array("i")

    def ok(start: float, _md: Any) -> None:
        lat.append(int((clock() - start) * 1e6))

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    p.send(topic, value).get(timeout=60)
    t0 = clock()
    throttler = _throttler(w["rate"], t0)
    for i in range(n):
        start = clock()
        p.send(topic, value=value).add_callback(ok, start)
        if throttler.should_throttle(i + 1, start):
            throttler.throttle()
    p.flush()
    wall = clock() - t0
    p.close()
    return len(lat), {"wall_run": wall, **_percentiles(lat)}


def latency_aiokafka(bootstrap: str, topic: str, w: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from aiokafka import AIOKafkaProducer

    value, n, clock = b"x" * w["size"], w["records"], time.perf_counter
    lat: array.array[int] = array.array("i")

    def done(start: float, fut: asyncio.Future[Any]) -> None:
        now = clock()
        if not fut.cancelled() and fut.exception() is None:
            lat.append(int((now - start) * 1e6))

    async def go() -> float:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await p.start()
        try:
            await p.send_and_wait(topic, value)
            t0 = clock()
            throttler = _throttler(w["rate"], t0)
            futs = []
            for i in range(n):
                start = clock()
                fut = await p.send(topic, value=value)
                fut.add_done_callback(partial(done, start))
                futs.append(fut)
                if throttler.should_throttle(i + 1, start):
                    # Sleeping in the event loop, not time.sleep(): aiokafka's sender runs on this loop.
                    end = clock() + throttler.take_pause()
                    while (remaining := end - clock()) > 0:
                        await asyncio.sleep(remaining)
            await asyncio.gather(*futs, return_exceptions=True)
            await asyncio.sleep(0)  # let the last done-callbacks run
            return clock() - t0
        finally:
            await p.stop()

    wall = asyncio.run(go())
    return len(lat), {"wall_run": wall, **_percentiles(lat)}


def latency_confluent(bootstrap: str, topic: str, w: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from confluent_kafka import Producer as CProducer

    value, n, clock = b"x" * w["size"], w["records"], time.perf_counter
    lat: array.array[int] = array.array("i")

    def delivered(start: float, err: Any, _msg: Any) -> None:
        now = clock()
        if err is None:
            lat.append(int((now - start) * 1e6))

    p = CProducer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    p.produce(topic, value)
    p.flush(60)
    t0 = clock()
    throttler = _throttler(w["rate"], t0)
    for i in range(n):
        start = clock()
        p.produce(topic, value, on_delivery=partial(delivered, start))
        p.poll(0)
        if throttler.should_throttle(i + 1, start):
            throttler.throttle(sleep=p.poll)  # delivery callbacks run inside poll(): wait there, not asleep
    p.flush(120)
    return len(lat), {"wall_run": clock() - t0, **_percentiles(lat)}


def run_broker_ceiling(bootstrap: str, topic: str, w: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from ceiling import blast

    batch_size = w.get("ceiling_batch_size") or w.get("batch_size", 16384)
    acked, wall = blast(bootstrap, topic, w["size"], batch_size, w["records"])
    return acked, {"wall_run": wall}  # the sending alone: the batches were encoded before the clock started


def _send_runner(fn: Callable[[str, str, dict[str, Any]], int]) -> Callable[..., tuple[int, dict[str, Any]]]:
    return lambda bootstrap, topic, w: (fn(bootstrap, topic, w), {})


def _otel_runner(client: str) -> Callable[[str, str, dict[str, Any]], tuple[int, dict[str, Any]]]:
    """send_cost.py's timed loop for `client` (it configures the SDK the label names), per record."""
    def run(bootstrap: str, topic: str, w: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        r = timed_send_loop(client, bootstrap, topic, w["records"])
        per = 1e6 / w["records"]
        return int(r["ok"]), {"wall_run": r["wall"], "us_rec": r["cpu"] * per, "caller_us_rec": r["main"] * per}
    return run


RUNNERS: dict[str, dict[str, Callable[[str, str, dict[str, Any]], tuple[int, dict[str, Any]]]]] = {
    "send": {**{name: _send_runner(fn) for name, fn in SEND_RUNNERS.items()}, CEILING: run_broker_ceiling,
             PRODUCE: _send_runner(partial(send_kafkajet, api="produce"))},
    "batch": {"kafkajet send_batch": _send_runner(run_kafkajet_batch),
              "kafkajet send_arrow": _send_runner(run_kafkajet_arrow),
              "aiokafka batch": _send_runner(run_aiokafka_batch),
              "confluent-kafka": _send_runner(SEND_RUNNERS["confluent-kafka"]), CEILING: run_broker_ceiling},
    "callback": {"kafkajet": _send_runner(callback_kafkajet),
                 "kafkajet future callback": _send_runner(callback_kafkajet_future),
                 "kafka-python": _send_runner(callback_kafka_python), "aiokafka": _send_runner(callback_aiokafka),
                 "confluent-kafka": _send_runner(callback_confluent)},
    "asyncio": {"kafkajet AIOProducer": _send_runner(asyncio_kafkajet),
                "kafkajet wrap_future": _send_runner(asyncio_kafkajet_wrap_future),
                "aiokafka": _send_runner(asyncio_aiokafka)},
    "latency": {"kafkajet": latency_kafkajet, "kafkajet future callback": partial(latency_kafkajet, future=True),
                "kafka-python": latency_kafka_python, "aiokafka": latency_aiokafka,
                "confluent-kafka": latency_confluent},
    "otel": {c: _otel_runner(c) for c in WORKLOADS["otel-100B"]["clients"]},
}


def worker(client: str, workload_json: str, bootstrap: str, topic: str) -> None:
    w = json.loads(workload_json)
    preload(client)
    start = time.perf_counter()
    acked, extra = RUNNERS[w["kind"]][client](bootstrap, topic, w)
    wall = time.perf_counter() - start
    if client.startswith("kafkajet"):
        from kafkajet._build import describe

        extra["build"] = describe()
    report(acked, extra.pop("wall_run", wall), **extra)


# --- the parent: runs, medians, table, files --------------------------------------------------------------


@dataclass
class Run:
    ok: bool
    rps: float = 0.0
    mbps: float = 0.0
    cpu: float = 0.0
    rss: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    acked: int = 0
    us_rec: float | None = None  # CPU microseconds per record over the send loop (the otel workload)
    caller_us_rec: float | None = None  # of which on the caller's thread


@dataclass
class Summary:
    workload: str
    client: str
    runs: list[Run] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(r.ok for r in self.runs)

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.runs if r.ok and getattr(r, attr) is not None]
        if not values:
            return None
        return max(values) if attr == "rss" else statistics.median(values)  # peak RSS: the worst run


def for_client(w: dict[str, Any], client: str) -> dict[str, Any]:
    """The workload as `client` runs it: FEWER_RECORDS for the slow ones, on workloads of a million or more."""
    divisor = FEWER_RECORDS.get(client, 1)
    if divisor == 1 or w["records"] < 1_000_000:
        return w
    return {**w, "records": w["records"] // divisor}


def one_run(client: str, name: str, w: dict[str, Any], bootstrap: str | None, rep: int) -> Run:
    from kafkajet.testing import EmbeddedBroker

    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", client.replace(PURE, "-pure")).strip("-")
    topic = f"compare-{name}-{slug}-{rep}-{os.getpid()}"
    label = f"{client} {name}"
    pure = client.endswith(PURE)
    env = {k: v for k, v in os.environ.items() if k != "KAFKAJET_NO_EXTENSIONS"}
    if pure:
        client, env["KAFKAJET_NO_EXTENSIONS"] = client.removesuffix(PURE), "1"
    w = for_client(w, client)
    argv_tail = [client, json.dumps(w)]

    def run_on(address: str) -> tuple[dict[str, Any] | None, int]:
        create_topic(address, topic)
        if client == "java":
            r = spawn_java(w, address, topic, label)
        else:
            r = spawn([__file__, "--worker", *argv_tail, address, topic], label, env=env)
        return r, records_held(address, topic)

    if bootstrap is None:
        # A fresh broker per run: no client inherits a log that earlier runs grew, or their leftovers.
        with EmbeddedBroker() as broker:
            r, held = run_on(broker.bootstrap_servers)
    else:
        r, held = run_on(bootstrap)
    if r is None:
        return Run(ok=False)
    if "build" in r and r["build"].startswith("pure") != pure:
        sys.exit(f"{label}: ran {r['build']!r}, not the build its label names")
    if held < r["acked"]:
        print(f"  {label} counted {r['acked']:,} records acknowledged but the topic holds {held:,}", file=sys.stderr)
    rps = r["acked"] / r["wall"] if r["wall"] > 0 else 0.0
    return Run(ok=r["acked"] == w["records"] and held >= r["acked"], rps=rps, mbps=rps * w["size"] / 1e6, cpu=r["cpu"], rss=r["rss_mb"],
               p50_ms=r.get("p50_ms"), p99_ms=r.get("p99_ms"), acked=r["acked"], us_rec=r.get("us_rec"),
               caller_us_rec=r.get("caller_us_rec"))


def spawn_java(w: dict[str, Any], bootstrap: str, topic: str, label: str) -> dict[str, Any] | None:
    """jvm/ProducerBench.java on this workload: the same acks and linger.ms, and batch.size where the row names
    one; its result line as spawn() returns a Python child's."""
    settings = ["acks=all", "linger.ms=5", "compression.type=none"]
    settings += [f"batch.size={w['batch_size']}"] if w.get("batch_size") else []
    if w["kind"] == "latency":
        args = ["latency", bootstrap, topic, str(w["rate"]), str(w["seconds"]), str(w["size"])]
    else:
        args = ["send", bootstrap, topic, str(w["records"]), str(w["size"])]
    return run_child(producer_bench_command(*args, *settings), label)


def records_held(bootstrap: str, topic: str) -> int:
    """The records the topic holds (its offsets), read after a run: no client may count more acknowledged."""
    from kafkajet.fetch import FetchClient

    with FetchClient(bootstrap) as fc:
        return sum(end - start for start, end in (fc.offsets(topic, p) for p in fc.partitions(topic)))


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ratio(kind: str, base: Summary | None, s: Summary) -> str:
    """The kafkajet baseline's advantage over s: records/s over records/s, or p99 over p99 for latency."""
    if base is None or not base.ok or base.client == s.client:
        return "-"
    attr = "p99_ms" if kind == "latency" else "rps"
    mine, theirs = base.median(attr), s.median(attr)
    if not mine or not theirs:
        return "-"
    return f"{theirs / mine:.2f}x p99" if kind == "latency" else f"{mine / theirs:.2f}x"


def table(summaries: dict[str, dict[str, Summary]], workloads: dict[str, dict[str, Any]] | None = None) -> str:
    """The Markdown table; `workloads` as run (--quick's counts), for the records a FAILED run should have had."""
    workloads = workloads or WORKLOADS
    rows = ["| workload | client | records/s | MB/s | CPU s | peak RSS MB | p50 ms | p99 ms "
            "| kafkajet ratio: compiled, pure |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, by_client in summaries.items():
        kind = WORKLOADS[name]["kind"]
        compiled, pure = by_client.get(BASELINE[kind]), by_client.get(BASELINE[kind] + PURE)
        for client, s in by_client.items():
            if not s.ok:
                lost = ", ".join(f"{r.acked:,}/{workloads[name]['records']:,}" for r in s.runs)
                rows.append(f"| {name} | {client} | FAILED (acked {lost}) | | | | | | |")
                continue
            ratio = f"{_ratio(kind, compiled, s)}, {_ratio(kind, pure, s)}"
            rows.append(f"| {name} | {client} | {_fmt(s.median('rps'), ',.0f')} | {_fmt(s.median('mbps'), '.1f')} "
                        f"| {_fmt(s.median('cpu'), '.1f')} | {_fmt(s.median('rss'), '.0f')} "
                        f"| {_fmt(s.median('p50_ms'), '.1f')} | {_fmt(s.median('p99_ms'), '.1f')} | {ratio} |")
    return "\n".join(rows)


def _plain(client: str) -> str:
    """The client an instrumented one is measured against: its name without the otel part, same build."""
    pure = client.endswith(PURE)
    base = client.removesuffix(PURE).split(" otel")[0]
    return base + (PURE if pure else "")


def cost_table(summaries: dict[str, dict[str, Summary]]) -> str:
    """The otel workload's CPU per record, and what each instrumented client adds over its plain one."""
    rows = ["| workload | client | µs/record | of which the caller's thread | added over plain |",
            "| --- | --- | ---: | ---: | ---: |"]
    for name, by_client in summaries.items():
        if WORKLOADS[name]["kind"] != "otel":
            continue
        for client, s in by_client.items():
            us, plain = s.median("us_rec"), by_client.get(_plain(client))
            base = plain.median("us_rec") if plain is not None and plain is not s and plain.ok else None
            added = "-" if us is None or base is None else f"{us - base:+.1f}"
            rows.append(f"| {name} | {client} | {_fmt(us, '.1f')} | {_fmt(s.median('caller_us_rec'), '.1f')} "
                        f"| {added} |")
    return "\n".join(rows) if len(rows) > 2 else ""


def chart(summaries: dict[str, dict[str, Summary]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    throughput = [n for n in summaries if WORKLOADS[n]["kind"] != "latency"]
    latency = [n for n in summaries if WORKLOADS[n]["kind"] == "latency"]
    fig, axes = plt.subplots(1, 2 if latency else 1, figsize=(14 if latency else 9, 5.5), squeeze=False,
                             gridspec_kw={"width_ratios": [2, 1]} if latency else None)
    clients = list(dict.fromkeys(c for n in summaries for c in summaries[n]))
    colours = {c: plt.get_cmap("tab10")(i) for i, c in enumerate(clients)}
    ax = axes[0][0]
    width = 0.8 / max(len(summaries[n]) for n in throughput) if throughput else 0.8
    for x, name in enumerate(throughput):
        present = list(summaries[name].values())
        for j, s in enumerate(present):
            pos = x - 0.4 + width * (j + 0.5)
            value = s.median("rps") if s.ok else 0.0
            ax.bar(pos, value or 0.0, width, color=colours[s.client],
                   label=s.client if s.client not in ax.get_legend_handles_labels()[1] else None)
            ax.text(pos, value or 0.0, f"{value / 1000:,.0f}k" if s.ok and value else "FAILED",
                    ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(throughput)), throughput)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v / 1000:,.0f}k"))
    ax.set_ylabel("records/s (median)")
    ax.set_title("throughput")
    if throughput:
        ax.legend(fontsize=8)
    if latency:
        ax2 = axes[0][1]
        name = latency[0]
        present = [s for s in summaries[name].values() if s.ok]
        for j, s in enumerate(present):
            ax2.bar(j - 0.2, s.median("p50_ms") or 0.0, 0.4, color=colours[s.client], alpha=0.55)
            ax2.bar(j + 0.2, s.median("p99_ms") or 0.0, 0.4, color=colours[s.client])
        ax2.set_xticks(range(len(present)), [s.client for s in present], rotation=20, fontsize=8)
        ax2.set_ylabel("ms send -> ack (light: p50, dark: p99)")
        ax2.set_title(f"latency at {WORKLOADS[name]['rate']:,} records/s, linger.ms=5")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "machine": f"{platform.machine()} x {os.cpu_count()} CPUs"}
    for pkg in ("kafkajet", "kafka-python", "aiokafka", "confluent-kafka"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    from kafkajet.testing.apache_kafka import kafka_version

    out["java"] = f"Apache Kafka's KafkaProducer {kafka_version()}"
    return out


def quicken(w: dict[str, Any]) -> None:
    """--quick: a fifth of the records (and of the latency workload's seconds)."""
    w["records"] //= 5
    if "seconds" in w:
        w["seconds"] /= 5


def warm_up(bootstrap: str, seconds: float = 20.0) -> None:
    """Produce to a freshly started JVM broker, unmeasured, until its JIT has compiled the produce path. A cold
    broker answers the first runs up to twice as slowly, and the client that runs first in each repetition paid
    for it (measured on Apache Kafka 4.4.0 here: confluent-kafka 829,041 records/s in its second run, 1,352,179 in
    its fifth). Both batch sizes the workloads use (16 KiB, Java's default, and 1 MiB), until `seconds` pass."""
    from ceiling import blast

    topic = f"compare-warm-up-{os.getpid()}"
    create_topic(bootstrap, topic)
    deadline, written = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        for batch_size in (16384, 1_048_576):
            written += blast(bootstrap, topic, 100, batch_size, 300_000)[0]
    print(f"  warm-up: {written:,} records to the broker, unmeasured, in {seconds:.0f} s", file=sys.stderr)


def measure(workloads: dict[str, dict[str, Any]], builds: list[str], reps: int,
            bootstrap: str | None = None, broker: str = "tansu") -> dict[str, dict[str, Summary]]:
    """Every workload's clients (each kafkajet client on each of `builds`), `reps` times, interleaved. With no
    bootstrap, broker "apache" starts one Apache Kafka node for them all, "tansu" a fresh embedded broker a run."""
    if bootstrap is None and broker == "apache":
        with open_broker("apache") as kafka:
            warm_up(kafka.bootstrap_servers)
            return measure(workloads, builds, reps, kafka.bootstrap_servers)

    def with_builds(clients: list[str]) -> list[str]:
        out: list[str] = []
        for c in clients:
            if not c.startswith("kafkajet"):
                out.append(c)
                continue
            out += [c] if "compiled" in builds else []
            out += [c + PURE] if "pure" in builds else []
        return out

    summaries = {n: {c: Summary(n, c) for c in with_builds(w["clients"])} for n, w in workloads.items()}
    for rep in range(reps):
        for name, w in workloads.items():
            for client, s in summaries[name].items():  # interleaved: drift in the machine hits every client alike
                run = one_run(client, name, w, bootstrap, rep)
                s.runs.append(run)
                detail = (f"{run.rps:>10,.0f} rec/s" + (f"  p50 {run.p50_ms:.1f} ms  p99 {run.p99_ms:.1f} ms"
                                                        if run.p50_ms is not None else "")
                          if run.ok else f"FAILED: {run.acked:,} of {w['records']:,} acknowledged")
                print(f"  rep {rep + 1}/{reps} {name:13s} {client:20s} {detail}", file=sys.stderr, flush=True)
    return summaries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=4, metavar=("CLIENT", "WORKLOAD", "BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="one repetition with a fifth of the records")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 3, or 1 with --quick)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset of workloads")
    ap.add_argument("--clients", default=None, help="comma-separated subset of clients")
    ap.add_argument("--builds", default="compiled,pure",
                    help="kafkajet's builds to run: compiled (as installed), pure (KAFKAJET_NO_EXTENSIONS=1), or both")
    ap.add_argument("--bootstrap-servers", default=None, help="an existing cluster instead of --broker")
    add_broker_option(ap)
    ap.add_argument("--out-dir", default=str(ROOT / "results"), help="where the JSON and PNG go")
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    reps = args.reps or (1 if args.quick else 3)
    names = args.workloads.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    only = set(args.clients.split(",")) if args.clients else None
    workloads = {n: dict(WORKLOADS[n]) for n in names}
    for w in workloads.values():
        if args.quick:
            quicken(w)
        if only is not None:
            w["clients"] = [c for c in w["clients"] if c in only or c.split()[0] in only]
        if args.broker == "tansu" and args.bootstrap_servers is None and "java" in w["clients"]:
            # Tansu closes the connection when Java's client (4.x) sends ApiVersions v5 naming the cluster and
            # node (its second ApiVersions, to the broker Metadata named): the Java producer never produces there.
            w["clients"] = [c for c in w["clients"] if c != "java"]
            print("  java: left out on Tansu (it drops the Java client's ApiVersions v5 connection)", file=sys.stderr)
    builds = args.builds.split(",")
    if not builds or set(builds) - {"compiled", "pure"}:
        ap.error("--builds takes compiled, pure or compiled,pure")
    started, load_before = time.time(), os.getloadavg()
    summaries = measure(workloads, builds, reps, args.bootstrap_servers, args.broker)
    broker = broker_name(args.broker, args.bootstrap_servers)
    context = context_line(broker, load_before) + (" — QUICK run (--quick: a fifth of the records, one rep)"
                                                   if args.quick else "")
    text = context + "\n\n" + table(summaries, workloads)
    costs = cost_table(summaries)
    if costs:
        text += "\n\n" + costs
    print(text)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Only a full run replaces the committed results: a subset goes to compare-partial.
    full = (args.workloads == ",".join(WORKLOADS) and only is None and args.reps is None
            and args.builds == "compiled,pure")
    stem = "compare-quick" if args.quick else "compare" if full else "compare-partial"
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "duration_s": round(time.time() - started),
            "reps": reps, "quick": args.quick, "builds": builds, "broker": broker, "load_avg_before": load_before,
            "load_avg": os.getloadavg(), "context": context, **versions()}
    data = {"meta": meta, "workloads": {
        n: {"spec": {k: v for k, v in workloads[n].items() if k != "clients"},
            "clients": {c: {"runs": [asdict(r) for r in s.runs], "ok": s.ok,
                            "median": {a: s.median(a) for a in ("rps", "mbps", "cpu", "rss", "p50_ms", "p99_ms",
                                                                  "us_rec", "caller_us_rec")}}
                        for c, s in by_client.items()}}
        for n, by_client in summaries.items()}, "table": text}
    (out_dir / f"{stem}.json").write_text(json.dumps(data, indent=2) + "\n")
    chart(summaries, out_dir / f"{stem}.png",
          f"median of {reps} run(s), {broker}, {meta['machine']}, Python {meta['python']}, {meta['date']}")
    print(f"\nwrote {out_dir / (stem + '.json')} and {out_dir / (stem + '.png')}", file=sys.stderr)
    if any(not s.ok for by_client in summaries.values() for s in by_client.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
