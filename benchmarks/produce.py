"""Produce throughput: kafkajet vs kafka-python, aiokafka and confluent-kafka against one embedded broker.

    .venv/bin/python benchmarks/produce.py            # every workload, medians of 3, interleaved
    .venv/bin/python benchmarks/produce.py --quick    # one repetition, smaller counts
    .venv/bin/python benchmarks/produce.py --clients kafkajet,confluent-kafka --workloads acks-all

Each run is its own process (CPU seconds and peak RSS are that process's own), produces to a fresh
6-partition topic, and counts acknowledged records: a run that loses records reports FAILED, not a speed.
Every client runs a fire-and-forget loop (compare.py's send-100B row says each one's); confluent-kafka's is
produce() with no delivery callback at librdkafka's defaults. The table is printed under the broker, the machine
(cores, load average before and after), the date and kafkajet's build.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from _common import broker_name, context_line, create_topic, preload, report, spawn

WORKLOADS: dict[str, dict[str, Any]] = {
    "acks-1": {"records": 500_000, "size": 100, "acks": 1, "compression": "none", "key": False},
    "acks-all": {"records": 500_000, "size": 100, "acks": -1, "compression": "none", "key": False},
    "lz4": {"records": 500_000, "size": 100, "acks": -1, "compression": "lz4", "key": False},
    "keyed-16B": {"records": 500_000, "size": 100, "acks": -1, "compression": "none", "key": True},
    "1KiB": {"records": 200_000, "size": 1024, "acks": -1, "compression": "none", "key": False},
}
CLIENTS = ["kafkajet", "kafka-python", "aiokafka", "confluent-kafka"]


def _keys(n: int) -> list[bytes]:
    return [f"key-{i % 100_000:011d}".encode() for i in range(n)]


def run_kafkajet(bootstrap: str, topic: str, w: dict[str, Any], api: str = "send") -> int:
    """send(topic, value[, key]) as a fire-and-forget user writes it; with api="produce", the same producer and
    records through produce(), which makes no future (compare.py's "kafkajet produce()" row)."""
    from kafkajet import Producer

    value = b"x" * w["size"]
    keys = _keys(w["records"]) if w["key"] else None
    extra = {"batch_size": w["batch_size"]} if w.get("batch_size") else {}
    with Producer(bootstrap_servers=bootstrap, acks=str(w["acks"]) if w["acks"] != -1 else "all",
                  compression_type=w["compression"], linger_ms=5, **extra) as p:
        # Fire and forget, then the producer's own count of acknowledged records, as confluent-kafka's runner
        # counts its delivery reports: keeping 500,000 futures would measure the caller's list, not the
        # producer (about 150 bytes a future).
        send = p.produce if api == "produce" else p.send
        if keys:
            for i in range(w["records"]):
                send(topic, value, keys[i])
        else:
            for _ in range(w["records"]):
                send(topic, value)
        p.flush()
        acked = int(p.metrics()["record-send-total"])  # failed records count in record-error-total instead
    return acked


def run_kafka_python(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from kafka import KafkaProducer

    value = b"x" * w["size"]
    keys = _keys(w["records"]) if w["key"] else [None] * w["records"]
    extra = {"batch_size": w["batch_size"]} if w.get("batch_size") else {}
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all" if w["acks"] == -1 else w["acks"],
                      compression_type=None if w["compression"] == "none" else w["compression"], linger_ms=5,
                      **extra)
    futs = [p.send(topic, value=value, key=k) for k in keys]
    p.flush()
    acked = sum(1 for f in futs if f.succeeded())
    p.close()
    return acked


def run_aiokafka(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    from aiokafka import AIOKafkaProducer

    async def go() -> int:
        value = b"x" * w["size"]
        keys = _keys(w["records"]) if w["key"] else [None] * w["records"]
        extra = {"max_batch_size": w["batch_size"]} if w.get("batch_size") else {}
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all" if w["acks"] == -1 else w["acks"],
                             compression_type=None if w["compression"] == "none" else w["compression"],
                             linger_ms=5, **extra)
        await p.start()
        try:
            futs = [await p.send(topic, value=value, key=k) for k in keys]
            results = await asyncio.gather(*futs, return_exceptions=True)
        finally:
            await p.stop()
        return sum(1 for r in results if not isinstance(r, BaseException))

    return asyncio.run(go())


def run_confluent(bootstrap: str, topic: str, w: dict[str, Any]) -> int:
    """What a fire-and-forget confluent-kafka user writes, at librdkafka's defaults (queue.buffering.max.messages
    100,000): produce(topic, value) with no delivery callback and poll(0) after each, poll(0.1) and retry when the
    queue is full (BufferError), then flush(). With no per-record callback the records acknowledged are counted
    as kafkajet's runner counts its own: everything, if flush() left nothing in the queue (len(p) == 0) and
    error_cb saw no error; otherwise the records still queued are lost. (A record librdkafka gives up on without
    error_cb leaves the queue too: compare.py's parent checks each run's count against the topic's offsets.)"""
    from confluent_kafka import Producer as CProducer

    value = b"x" * w["size"]
    # No list of a million Nones for keyless workloads: the runs of several million records keep memory flat.
    keys = _keys(w["records"]) if w["key"] else itertools.repeat(None, w["records"])
    errors: list[Any] = []
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": w["acks"], "compression.type": w["compression"],
                            "linger.ms": 5, "error_cb": errors.append}
    if w.get("batch_size"):
        conf["batch.size"] = w["batch_size"]
    p = CProducer(conf)
    produce, poll = p.produce, p.poll
    for k in keys:
        while True:
            try:
                produce(topic, value, k)
                break
            except BufferError:  # librdkafka's queue is full: let it send, then try again
                poll(0.1)
        poll(0)
    left = p.flush(120)
    if errors:
        print(f"confluent-kafka error_cb: {errors[:3]}", file=sys.stderr)
    return 0 if errors else w["records"] - max(left, len(p))


RUNNERS = {"kafkajet": run_kafkajet, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka,
           "confluent-kafka": run_confluent}


def worker(client: str, workload_json: str, bootstrap: str, topic: str) -> None:
    w = json.loads(workload_json)
    preload(client)
    start = time.perf_counter()
    acked = RUNNERS[client](bootstrap, topic, w)
    report(acked, time.perf_counter() - start)


@dataclass
class Result:
    rps: float
    mbps: float
    cpu: float
    rss: float
    ok: bool


def one_run(client: str, workload: str, bootstrap: str, n: int) -> Result:
    topic = f"bench-{workload}-{client}-{n}-{os.getpid()}"
    create_topic(bootstrap, topic)
    w = WORKLOADS[workload]
    r = spawn([__file__, "--worker", client, json.dumps(w), bootstrap, topic], f"{client} {workload}")
    if r is None:
        return Result(0, 0, 0, 0, False)
    ok = r["acked"] == w["records"]
    rps = w["records"] / r["wall"]
    return Result(rps, rps * w["size"] / 1e6, r["cpu"], r["rss_mb"], ok)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=4, metavar=("CLIENT", "WORKLOAD", "BOOTSTRAP", "TOPIC"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    clients = args.clients.split(",")
    workloads = args.workloads.split(",")
    reps = 1 if args.quick else args.reps
    if args.quick:
        for w in WORKLOADS.values():
            w["records"] //= 5

    from kafkajet.testing import EmbeddedBroker

    load_before = os.getloadavg()
    with EmbeddedBroker() as broker:
        bootstrap = args.bootstrap_servers or broker.bootstrap_servers
        results: dict[tuple[str, str], list[Result]] = {}
        for rep in range(reps):
            for workload in workloads:
                for client in clients:  # interleaved: drift in the machine hits every client alike
                    res = one_run(client, workload, bootstrap, rep)
                    results.setdefault((workload, client), []).append(res)
                    print(f"  rep {rep + 1} {workload:10s} {client:16s} {res.rps:>10,.0f} rec/s"
                          f"{'' if res.ok else '  FAILED: records lost'}", file=sys.stderr, flush=True)
    print("\n" + context_line(broker_name("tansu", args.bootstrap_servers), load_before)
          + (" — QUICK run (a fifth of the records, one rep)" if args.quick else ""))
    print(f"\n{'workload':10s} {'client':16s} {'records/s':>11s} {'MB/s':>7s} {'CPU s':>6s} {'RSS MB':>7s}  "
          "kafkajet ratio")
    for workload in workloads:
        med: dict[str, Result] = {}
        for client in clients:
            rs = results[(workload, client)]
            med[client] = Result(statistics.median(r.rps for r in rs), statistics.median(r.mbps for r in rs),
                                 statistics.median(r.cpu for r in rs), max(r.rss for r in rs), all(r.ok for r in rs))
        base = med.get("kafkajet")
        for client, r in med.items():
            ratio = f"{base.rps / r.rps:5.2f}x" if base and r.rps and client != "kafkajet" else ""
            status = "" if r.ok else "  FAILED (lost records)"
            print(f"{workload:10s} {client:16s} {r.rps:>11,.0f} {r.mbps:>7.1f} {r.cpu:>6.1f} {r.rss:>7.0f}  "
                  f"{ratio}{status}")


if __name__ == "__main__":
    main()
