"""The main job without Spark: synthetic events (or a user's file) into Kafka and back, checked exactly once.

`python -m kafkajet demo` (what `make demo` runs). With --bootstrap-servers it uses your cluster; without,
it starts the embedded broker. --input sends a CSV, JSON lines or Parquet file's rows instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

from kafkajet.admin import Admin
from kafkajet.network.blocking import BlockingConnection
from kafkajet.producer import Producer
from kafkajet.protocol import ApiKey
from kafkajet.records import decode_batches
from kafkajet.testing import EmbeddedBroker

PARTITIONS = 6
CHUNK = 50_000


def synthetic_events(n: int) -> Iterator[tuple[bytes, bytes]]:
    for i in range(n):
        user = f"user-{i % 10_000:05d}"
        yield user.encode(), json.dumps({"event_id": i, "user": user, "action": ("view", "click", "buy")[i % 3],
                                         "amount": i % 997}, separators=(",", ":")).encode()


def file_events(path: str) -> Iterator[tuple[bytes | None, bytes]]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches():
            for row in batch.to_pylist():
                yield None, json.dumps(row, default=str, separators=(",", ":")).encode()
    elif path.endswith(".csv"):
        import csv

        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                yield None, json.dumps(row, separators=(",", ":")).encode()
    else:
        with open(path, "rb") as f:
            for line in f:
                if line.strip():
                    yield None, line.rstrip(b"\r\n")


def _digest(key: bytes | None, value: bytes | None) -> int:
    h = hashlib.blake2b((key or b"") + b"\x00" + (value or b""), digest_size=8).digest()
    return int.from_bytes(h, "big")


def read_back(bootstrap: str, topic: str, expected: int, timeout_s: float = 120.0) -> tuple[int, int, dict[bytes, int]]:
    """(records, checksum, per-key counts) of a topic, read with Fetch through the protocol layer."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    count, checksum = 0, 0
    per_key: dict[bytes, int] = {}
    deadline = time.monotonic() + timeout_s
    with BlockingConnection(host, int(port), client_id="kafkajet-demo", timeout_s=30) as conn:
        for partition in range(PARTITIONS):
            offset = 0
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"read {count} of {expected} records within {timeout_s} s")
                # Fetch v4, whose field names are those of the definition we ship.
                resp = conn.request(ApiKey.FETCH, {
                    "replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 32 << 20,
                    "isolation_level": 0,
                    "topics": [{"name": topic, "fetch_partitions": [
                        {"partition_index": partition, "fetch_offset": offset, "max_bytes": 16 << 20}]}],
                }, version=4)
                (p,) = resp["responses"][0]["partition_responses"]
                if p["error_code"]:
                    raise RuntimeError(f"fetch {topic}-{partition} failed with error {p['error_code']}")
                batches = decode_batches(p["record_set"] or b"", allow_partial_tail=True)
                for b in batches:
                    for r in b.records:
                        if r.offset < offset:
                            continue
                        count += 1
                        checksum ^= _digest(r.key, r.value)
                        if r.key is not None:
                            per_key[r.key] = per_key.get(r.key, 0) + 1
                        offset = r.offset + 1
                if offset >= p["high_watermark"] or not batches:
                    break
    return count, checksum, per_key


def run_demo(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        bootstrap = args.bootstrap_servers
        if not bootstrap:
            broker = stack.enter_context(EmbeddedBroker())
            bootstrap = broker.bootstrap_servers
            print(f"embedded broker on {bootstrap}")
        topic = args.topic or f"demo-events-{uuid.uuid4().hex[:8]}"
        with Admin(bootstrap) as admin:
            admin.create_topics([topic], num_partitions=PARTITIONS, if_not_exists=True)
        events = file_events(args.input) if args.input else synthetic_events(args.records)
        sent, checksum = 0, 0
        per_key: dict[bytes, int] = {}
        header = [("source", b"kafkajet-demo")]
        start = time.perf_counter()
        with Producer(bootstrap_servers=bootstrap, linger_ms=20, compression_type="lz4") as producer:
            pending: list[Any] = []
            keys: list[bytes | None] = []
            values: list[bytes] = []

            def flush_chunk() -> None:
                pending.append(producer.send_batch(topic, values[:], keys=keys[:],
                                                   headers=[header] * len(values)))
                keys.clear()
                values.clear()

            for key, value in events:
                keys.append(key)
                values.append(value)
                sent += 1
                checksum ^= _digest(key, value)
                if key is not None:
                    per_key[key] = per_key.get(key, 0) + 1
                if len(values) >= CHUNK:
                    flush_chunk()
            if values:
                flush_chunk()
            producer.flush()
            failed = sum(len(b.errors()) for b in pending)
        write_s = time.perf_counter() - start
        print(f"write: {sent:,} events in {write_s:.2f} s = {sent / write_s:,.0f} rows/s ({failed} failed)")
        start = time.perf_counter()
        got, got_checksum, got_keys = read_back(bootstrap, topic, sent)
        read_s = time.perf_counter() - start
        print(f"read:  {got:,} events in {read_s:.2f} s = {got / read_s:,.0f} rows/s")
        ok = failed == 0 and got == sent and got_checksum == checksum and got_keys == per_key
        print(f"verdict: {'OK' if ok else 'FAILED'} - {got:,} of {sent:,} events arrived exactly once"
              f" (checksum {'matches' if got_checksum == checksum else 'DIFFERS'}, "
              f"{len(per_key):,} keys {'match' if got_keys == per_key else 'DIFFER'})")
        return 0 if ok else 1
