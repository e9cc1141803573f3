"""What the broker alone can take: Produce requests encoded before the clock starts, sent as fast as it answers.

    .venv/bin/python benchmarks/ceiling.py                        # 100 B and 1 KiB records, 16 KiB to 1 MB batches
    .venv/bin/python benchmarks/ceiling.py --size 100 --batch-size 16384 --records 2000000

A client that costs nothing per record: every batch is built once, and the run only writes ready request
frames (one batch per partition, six partitions, as every producer's sender drains them) and reads the
answers, up to five requests in flight (Java's max.in.flight.requests.per.connection). The records/s it
reaches at a batch size is the most any client can get from this broker on this machine at that batch size;
the broker's CPU seconds per million records show what each batch costs it. compare.py's clients share the
same two cores with the broker, so read its figures against this ceiling. Every answer is checked: a run whose
broker refused or dropped a batch reports FAILED.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import create_topic  # noqa: E402

from kafkajet.network.blocking import BlockingConnection  # noqa: E402
from kafkajet.network.connection import Connection  # noqa: E402
from kafkajet.protocol.api import ApiKey, decode_response, encode_request  # noqa: E402
from kafkajet.records.batch import build_batch  # noqa: E402
from kafkajet.records.record import append_record  # noqa: E402

PARTITIONS = 6
IN_FLIGHT = 5
BATCH_HEADER = 61


def records_per_batch(size: int, batch_size: int) -> int:
    """How many `size`-byte values a producer puts in one batch: records while a next one still fits by the
    producer's estimate (at least one)."""
    records, count, value = bytearray(), 0, b"x" * size
    while count == 0 or BATCH_HEADER + len(records) + size + 8 <= batch_size:
        append_record(records, count, 0, None, value, None)
        count += 1
    return count


def _records(size: int, count: int) -> bytearray:
    out = bytearray()
    value = b"x" * size
    for i in range(count):
        append_record(out, i, 0, None, value, None)
    return out


def _batch(size: int, count: int, now_ms: int) -> bytes:
    return build_batch(_records(size, count), count, base_timestamp=now_ms, max_timestamp=now_ms)


def blast(bootstrap: str, topic: str, size: int, batch_size: int, records: int) -> tuple[int, float]:
    """Write exactly `records` records of `size` bytes to `topic` (PARTITIONS partitions) in batches as a
    producer with this batch.size would fill them; returns (records the broker acknowledged, seconds)."""
    host, port = bootstrap.rsplit(":", 1)
    per_batch = records_per_batch(size, batch_size)
    now_ms = int(time.time() * 1000)
    full = _batch(size, per_batch, now_ms)
    # Full requests carry one batch per partition; what is left over goes in one last, smaller request.
    whole, left = divmod(records, per_batch * PARTITIONS)
    tail = [(p, _batch(size, min(per_batch, left - p * per_batch), now_ms))
            for p in range(PARTITIONS) if left > p * per_batch]
    with BlockingConnection(host, int(port), timeout_s=30) as conn:
        # At most v12, which names the topic: v13 takes its id alone (KIP-516), and a name there is ignored (every
        # batch refused with UNKNOWN_TOPIC_ID). The producer's v13 differs only in that field.
        version = min(conn.api_version(ApiKey.PRODUCE), 12)

        def frame(batches: list[tuple[int, bytes]]) -> bytearray:
            body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": b}
                                                                      for p, b in batches]}]}
            return bytearray(encode_request(ApiKey.PRODUCE, version, 0, "ceiling", body))

        full_frame = frame([(p, full) for p in range(PARTITIONS)])
        tail_frame = frame(tail) if tail else None
        counts = {p: per_batch for p in range(PARTITIONS)}
        tail_counts = {p: min(per_batch, left - p * per_batch) for p, _ in tail}
        plans_total = whole + (1 if tail else 0)
        sock = conn._sock
        assert sock is not None
        sock.settimeout(30)
        framing = Connection(64 * 1024 * 1024)
        acked = sent = answered = 0
        start = time.perf_counter()
        while answered < plans_total:
            while sent < plans_total and sent - answered < IN_FLIGHT:
                sent += 1
                out = full_frame if sent <= whole else tail_frame
                assert out is not None
                out[8:12] = sent.to_bytes(4, "big")  # the correlation id: one frame reused, not one per request
                framing.send_request(bytes(out), correlation_id=sent, api_key=int(ApiKey.PRODUCE),
                                     api_version=version, now=0.0)
                sock.sendall(out)
                framing.bytes_sent(len(out))
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("the broker closed the connection")
            for request, payload in framing.receive_data(data):
                answered += 1
                _, response = decode_response(ApiKey.PRODUCE, version, payload)
                got = counts if request.correlation_id <= whole else tail_counts
                acked += sum(got[p["index"]] for t in response["responses"] for p in t["partition_responses"]
                             if p["error_code"] == 0)
        return acked, time.perf_counter() - start


def broker_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(bootstrap: str, broker_pid: int, size: int, batch_size: int, records: int) -> dict[str, float]:
    topic = f"ceiling-{size}-{batch_size}-{os.getpid()}-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, PARTITIONS)
    blast(bootstrap, topic, size, batch_size, PARTITIONS * records_per_batch(size, batch_size))  # logs warm
    cpu0 = broker_cpu(broker_pid)
    acked, wall = blast(bootstrap, topic, size, batch_size, records)
    cpu = broker_cpu(broker_pid) - cpu0
    return {"per_batch": records_per_batch(size, batch_size), "rps": acked / wall, "mbps": acked * size / wall / 1e6,
            "broker_cpu_per_m": cpu / acked * 1e6 if acked else float("nan"), "failed": records - acked}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, action="append", help="value size in bytes (repeatable)")
    ap.add_argument("--batch-size", type=int, action="append", help="batch.size in bytes (repeatable)")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per cell; the median is shown (default 3)")
    args = ap.parse_args()
    from kafkajet.testing import EmbeddedBroker

    print("| value | batch.size | records/batch | records/s | MB/s | broker CPU s per 1M records |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in args.size or [100, 1024]:
        for batch_size in args.batch_size or [16384, 65536, 262144, 1_000_000]:
            runs = []
            for _ in range(args.repeat):
                with EmbeddedBroker() as broker:  # fresh each run: no log grown by an earlier one
                    assert broker._proc is not None
                    runs.append(run(broker.bootstrap_servers, broker._proc.pid, size, batch_size, args.records))
            failed = sum(r["failed"] for r in runs)
            if failed:
                print(f"| {size} | {batch_size:,} | FAILED: {failed:,.0f} records not acknowledged |")
                continue
            r = sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]
            print(f"| {size} | {batch_size:,} | {r['per_batch']:,} | {r['rps']:,.0f} | {r['mbps']:,.1f} | "
                  f"{r['broker_cpu_per_m']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
