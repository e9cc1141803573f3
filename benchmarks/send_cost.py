"""Where a record's time goes: CPU microseconds per record on the caller's thread and on the client's own
threads, for kafkajet's send() (plain, with a callback, from AIOProducer) and confluent-kafka's produce().

    .venv/bin/python benchmarks/send_cost.py [--records 300000]
    .venv/bin/python benchmarks/send_cost.py --clients "kafkajet,kafkajet otel,kafkajet otel no-sdk"
    .venv/bin/python benchmarks/send_cost.py --records 100000 --clients "kafka-python,kafka-python otel"

"aiokafka" is AIOKafkaProducer in compare.py's asyncio gather shape, beside "kafkajet AIOProducer";
`--value-size 1024` measures the send-1KiB workload's records.

"kafkajet otel" is send() with opentelemetry.enable and the OpenTelemetry SDK configured (a span per record
through a BatchSpanProcessor to an exporter that drops them, so the export's own cost is left out, and the
metrics aggregated in memory); "otel unsampled" the same with a sampler that drops every span; "otel traces" has no MeterProvider (spans only, as the wrapper); "otel no-sdk" has the setting on but no SDK and no trace context (each send takes the plain path). "kafka-python
otel" is kafka-python's producer wrapped by the contrib instrumentation (its span ends at the enqueue), for the
per-record cost of the usual wrapper approach: compare its difference to plain kafka-python.
    .venv/bin/python benchmarks/send_cost.py --builds compiled,pure

Every kafkajet client runs on both builds (issue 30): as installed (compiled where hatch_build.py built it) and
as "<client> [pure]" with KAFKAJET_NO_EXTENSIONS=1.

A 2-core machine runs the caller, the client's thread(s) and the broker: a client's speed is bounded by the
sum of its per-record CPU on both threads (they share one GIL in Python). This prints that sum beside the
records/s it allowed, so a target can be checked against what the per-record work makes possible.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

from _common import create_topic, spawn


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _otel_sdk(sample: bool = True, metered: bool = True) -> None:
    """The SDK as a service would configure it, minus the export (spans dropped when their batch is handed over)."""
    from collections.abc import Sequence

    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

    provider = TracerProvider(sampler=ALWAYS_ON if sample else ALWAYS_OFF)
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    if metered:
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def run(client: str, bootstrap: str, topic: str, n: int, size: int = 100) -> dict[str, float]:
    value = b"x" * size
    ok = 0
    if client in ("kafkajet otel", "kafka-python otel", "kafkajet otel unsampled", "kafkajet otel traces"):
        _otel_sdk(sample=client != "kafkajet otel unsampled", metered=client != "kafkajet otel traces")

    def cb(md: Any, exc: Any) -> None:
        nonlocal ok
        ok += exc is None

    if client.startswith("kafkajet"):
        from kafkajet import Producer
        from kafkajet.aio import AIOProducer

        if client == "kafkajet AIOProducer":
            async def go() -> tuple[float, float, float]:
                async with AIOProducer(bootstrap_servers=bootstrap) as p:
                    await p.send_and_wait(topic, b"warm-up")
                    t0, c0, m0 = time.perf_counter(), _cpu(), time.thread_time()
                    for start in range(0, n, 1000):
                        futs = [await p.send(topic, value) for _ in range(min(1000, n - start))]
                        await asyncio.gather(*futs)
                    return time.perf_counter() - t0, _cpu() - c0, time.thread_time() - m0
            wall, cpu, main = asyncio.run(go())
            ok = n
        else:
            with Producer(bootstrap_servers=bootstrap, opentelemetry_enable="otel" in client) as p:
                p.send(topic, b"warm-up").result(30)
                send = p.send
                t0, c0, m0 = time.perf_counter(), _cpu(), time.thread_time()
                if client == "kafkajet callback":
                    for _ in range(n):
                        send(topic, value, callback=cb)
                else:
                    for _ in range(n):
                        send(topic, value)
                p.flush()
                wall, cpu, main = time.perf_counter() - t0, _cpu() - c0, time.thread_time() - m0
                # The sender counts a batch just after completing it, so the last batch's count can trail
                # flush() by the time its callbacks take (long with tracing on): wait for it, briefly.
                deadline = time.monotonic() + 5
                while p.metrics()["record-send-total"] < n + 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
                ok = int(p.metrics()["record-send-total"]) - 1
    elif client == "aiokafka":
        # The gather shape of compare.py's asyncio workload, against which AIOProducer's target is set.
        from aiokafka import AIOKafkaProducer

        async def go_aiokafka() -> tuple[float, float, float]:
            ap = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
            await ap.start()
            try:
                await (await ap.send(topic, b"warm-up"))
                t0, c0, m0 = time.perf_counter(), _cpu(), time.thread_time()
                for start in range(0, n, 1000):
                    futs = [await ap.send(topic, value) for _ in range(min(1000, n - start))]
                    await asyncio.gather(*futs)
                return time.perf_counter() - t0, _cpu() - c0, time.thread_time() - m0
            finally:
                await ap.stop()
        wall, cpu, main = asyncio.run(go_aiokafka())
        ok = n
    elif client.startswith("kafka-python"):
        from kafka import KafkaProducer

        if client == "kafka-python otel":
            from opentelemetry.instrumentation.kafka import KafkaInstrumentor

            KafkaInstrumentor().instrument()
        kp = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
        kp.send(topic, b"warm-up").get(30)
        ksend = kp.send
        t0, c0, m0 = time.perf_counter(), _cpu(), time.thread_time()
        for _ in range(n):
            ksend(topic, value)
        kp.flush()
        wall, cpu, main = time.perf_counter() - t0, _cpu() - c0, time.thread_time() - m0
        kp.close()
        ok = n
    else:
        from confluent_kafka import Producer as CProducer

        p = CProducer({"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 2_000_000})
        p.produce(topic, b"warm-up")
        p.flush(30)
        produce, poll = p.produce, p.poll
        t0, c0, m0 = time.perf_counter(), _cpu(), time.thread_time()
        def delivered(err: Any, msg: Any) -> None:
            cb(msg, err)

        for _ in range(n):
            produce(topic, value, on_delivery=delivered)
            poll(0)
        p.flush(60)
        wall, cpu, main = time.perf_counter() - t0, _cpu() - c0, time.thread_time() - m0
    return {"ok": ok, "wall": wall, "cpu": cpu, "main": main}


@dataclass
class Cost:
    rps: float
    caller_us: float  # CPU per record on the caller's thread
    threads_us: float  # on the client's own threads
    sum_us: float


def measure(clients: list[str], builds: list[str], records: int, size: int = 100) -> dict[str, Cost | None]:
    """Each client's per-record CPU, kafkajet's on each of `builds` (labelled "<client> [pure]" for the pure
    build), one child process each against one embedded broker; None for a run that lost records or crashed."""
    from kafkajet.testing import EmbeddedBroker

    labels = [c + suffix for c in clients
              for build, suffix in (("compiled", ""), ("pure", " [pure]"))
              if ((build in builds) if c.startswith("kafkajet") else not suffix)]
    out: dict[str, Cost | None] = {}
    with EmbeddedBroker() as broker:
        for client in labels:
            topic = f"cost-{client.replace(' [pure]', '-pure').replace(' ', '-')}-{os.getpid()}"
            create_topic(broker.bootstrap_servers, topic)
            env = {k: v for k, v in os.environ.items() if k != "KAFKAJET_NO_EXTENSIONS"}
            if client.endswith(" [pure]"):
                env["KAFKAJET_NO_EXTENSIONS"] = "1"
            r = spawn([__file__, "--records", str(records), "--value-size", str(size),
                       "--worker", client.removesuffix(" [pure]"),
                       broker.bootstrap_servers, topic], client, env=env)
            if r is not None and client.startswith("kafkajet") and r["build"].startswith("pure") != (
                    "[pure]" in client):
                sys.exit(f"{client}: ran {r['build']!r}, not the build its label names")
            if r is None or r["acked"] != records:
                print(f"  {client}: FAILED ({r})", file=sys.stderr)
                out[client] = None
                continue
            per = 1e6 / records
            out[client] = Cost(records / r["wall"], r["main"] * per, (r["cpu"] - r["main"]) * per, r["cpu"] * per)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--worker", nargs=3)
    ap.add_argument("--value-size", type=int, default=100, help="bytes per value (1024: the send-1KiB workload)")
    ap.add_argument("--clients", default="kafkajet,kafkajet callback,kafkajet AIOProducer,confluent-kafka")
    ap.add_argument("--builds", default="compiled,pure", help="kafkajet's builds: compiled, pure or both")
    args = ap.parse_args()
    if args.worker:
        client, bootstrap, topic = args.worker
        r = run(client, bootstrap, topic, args.records, args.value_size)
        from kafkajet._build import describe

        print(json.dumps({"acked": r["ok"], "build": describe(), **r}), flush=True)
        return
    print(f"{'client':22s} {'records/s':>10s} {'caller us/rec':>14s} {'client threads us/rec':>22s} "
          f"{'sum us/rec':>11s}")
    for client, c in measure(args.clients.split(","), args.builds.split(","), args.records,
                             args.value_size).items():
        if c is None:
            print(f"{client:22s} FAILED")
            continue
        print(f"{client:22s} {c.rps:>10,.0f} {c.caller_us:>14.2f} {c.threads_us:>22.2f} {c.sum_us:>11.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
