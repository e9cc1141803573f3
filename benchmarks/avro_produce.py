"""Registered Avro from a producer: kafkajet's AvroSerializer + send() against confluent-kafka's AvroSerializer +
produce(), the same schema and the same records, both clients at their defaults (issue 29's >= 1.5x target).

    .venv/bin/python benchmarks/avro_produce.py                  # 200,000 records, medians of 3, interleaved
    .venv/bin/python benchmarks/avro_produce.py --records 50000 --reps 1

A flat record of 10 fields (longs, ints, strings, a timestamp-millis, a nullable double, a boolean), given as
dicts. One embedded broker and kafkajet's registry for the whole run; each run is its own process (its CPU
seconds are its own, every thread counted: librdkafka's and kafkajet's sender too), writes a fresh topic, and
counts records/s from the first send to the end of flush. The broker's end offsets must add up to the records
sent, or the run reports FAILED instead of a speed. The "serializer alone" rows time the serializer calls
without a producer: what the serializer costs per record, apart from the client it feeds.

The machine may be shared: CPU microseconds per record (the process's CPU time over the records) say what a
run cost even when the wall clock says how busy the machine was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from typing import Any

from _common import report, spawn

PARTITIONS = 4
SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"}, {"name": "action", "type": "string"},
    {"name": "qty", "type": "int"}, {"name": "amount", "type": "long"}, {"name": "price", "type": "double"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "discount", "type": ["null", "double"], "default": None}, {"name": "country", "type": "string"},
    {"name": "flag", "type": "boolean"}]}
KAFKAJET, CONFLUENT = "kafkajet AvroSerializer + send()", "confluent-kafka AvroSerializer + produce()"
KAFKAJET_ALONE, CONFLUENT_ALONE = "kafkajet AvroSerializer alone", "confluent-kafka AvroSerializer alone"
JOBS = [KAFKAJET, CONFLUENT, KAFKAJET_ALONE, CONFLUENT_ALONE]


def records(n: int) -> list[dict[str, Any]]:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    actions, countries = ("view", "click", "buy"), ("fr", "de", "us", "jp")
    return [{"id": i, "user": f"user-{i % 10000:05d}", "action": actions[i % 3], "qty": i % 7, "amount": i % 997,
             "price": i / 8, "at": t0 + dt.timedelta(milliseconds=i), "discount": None if i % 2 else i / 16,
             "country": countries[i % 4], "flag": i % 5 == 0} for i in range(n)]


def produce_kafkajet(bootstrap: str, registry_url: str, topic: str, rows: list[dict[str, Any]]) -> None:
    from kafkajet import Producer
    from kafkajet.schema_registry import AvroSerializer, SchemaRegistryClient

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA))
    with Producer(bootstrap_servers=bootstrap, value_serializer=serializer) as p:
        send = p.send
        for r in rows:
            send(topic, r)
        p.flush(timeout=600)


def produce_confluent(bootstrap: str, registry_url: str, topic: str, rows: list[dict[str, Any]]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA))
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": bootstrap})
    produce = p.produce
    for r in rows:
        value = serialize(r, ctx)
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # its queue (100,000 records by default) is full: wait for deliveries
                p.poll(0.05)
    if p.flush(600) != 0:
        raise RuntimeError("confluent-kafka: records left unsent")


def serialize_kafkajet(registry_url: str, topic: str, rows: list[dict[str, Any]]) -> None:
    from kafkajet.schema_registry import (
        AvroSerializer,
        MessageField,
        SchemaRegistryClient,
        SerializationContext,
    )

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA))
    ctx = SerializationContext(topic, MessageField.VALUE)
    for r in rows:
        serialize(r, ctx)


def serialize_confluent(registry_url: str, topic: str, rows: list[dict[str, Any]]) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA))
    ctx = SerializationContext(topic, MessageField.VALUE)
    for r in rows:
        serialize(r, ctx)


def worker(job: str, bootstrap: str, registry_url: str, topic: str, n: int) -> None:
    """One timed run in this fresh process; the records are built and the modules imported before the clock."""
    import confluent_kafka.schema_registry.avro  # noqa: F401 - imported before the clock, like kafkajet's
    import fastavro  # noqa: F401

    import kafkajet.producer.producer  # noqa: F401
    import kafkajet.schema_registry.avro  # noqa: F401
    from kafkajet._build import describe

    rows = records(n)
    cpu, wall = time.process_time(), time.perf_counter()
    if job == KAFKAJET:
        produce_kafkajet(bootstrap, registry_url, topic, rows)
    elif job == CONFLUENT:
        produce_confluent(bootstrap, registry_url, topic, rows)
    elif job == KAFKAJET_ALONE:
        serialize_kafkajet(registry_url, topic, rows)
    else:
        serialize_confluent(registry_url, topic, rows)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    report(n, wall, cpu_timed=cpu, build=describe())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        job, bootstrap, url, topic, n = args.worker
        worker(job, bootstrap, url, topic, int(n))
        return

    from kafkajet.admin import Admin
    from kafkajet.fetch import FetchClient
    from kafkajet.testing import EmbeddedBroker, SchemaRegistry

    rates: dict[str, list[float | None]] = {job: [] for job in JOBS}
    cpu_us: dict[str, list[float]] = {job: [] for job in JOBS}
    build = "?"
    with EmbeddedBroker() as broker, SchemaRegistry() as registry:
        bootstrap = broker.bootstrap_servers
        for rep in range(args.reps):
            for i, job in enumerate(JOBS):  # interleaved, so drift in the machine's load hits every job alike
                topic = f"avro-produce-{rep}-{i}"
                with Admin(bootstrap) as admin:
                    admin.create_topics([topic], num_partitions=PARTITIONS)
                r = spawn([__file__, "--worker", job, bootstrap, registry.url, topic, str(args.records)], job)
                sent = None
                if r is not None and job in (KAFKAJET, CONFLUENT):
                    with FetchClient(bootstrap) as fc:
                        sent = sum(fc.offsets(topic, p)[1] for p in fc.partitions(topic))
                ok = r is not None and (sent is None or sent == args.records)
                rates[job].append(args.records / r["wall"] if ok and r is not None else None)
                if r is not None:
                    cpu_us[job].append(r["cpu_timed"] / args.records * 1e6)
                    build = r["build"]
                detail = (f"{args.records / r['wall']:>9,.0f} records/s ({r['wall']:.2f} s), "
                          f"{r['cpu_timed'] / args.records * 1e6:.2f} us CPU/record" if ok and r is not None
                          else f"FAILED ({sent} records on the broker)")
                print(f"  rep {rep + 1}/{args.reps} {job:44s} {detail}", file=sys.stderr, flush=True)

    def median(job: str) -> float | None:
        got = rates[job]
        return statistics.median(got) if got and all(v is not None for v in got) else None  # type: ignore[type-var]

    print(f"\nProducers: {args.records:,} flat Avro records (10 fields), {PARTITIONS} partitions, both clients at "
          f"defaults, median of {args.reps}; kafkajet build: {build}; load average {os.getloadavg()[0]:.1f}\n")
    print("| job | records/s | CPU us/record | kafkajet ratio |\n| --- | ---: | ---: | ---: |")
    ok = True
    for job in JOBS:
        m = median(job)
        ok &= m is not None
        cpu = f"{statistics.median(cpu_us[job]):.2f}" if cpu_us[job] else ""
        ratio = ""
        mine = median(KAFKAJET if job == CONFLUENT else KAFKAJET_ALONE)
        if m and mine and job in (CONFLUENT, CONFLUENT_ALONE):
            ratio = f"{mine / m:.2f}x"
        print(f"| {job} | {'FAILED' if m is None else f'{m:,.0f}'} | {cpu} | {ratio} |")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
