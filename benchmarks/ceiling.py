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


def one_batch(size: int, batch_size: int, now_ms: int) -> tuple[bytes, int]:
    """A batch of `size`-byte values filled the way a producer fills it: records while under batch.size."""
    records = bytearray()
    value = b"x" * size
    count = 0
    while count == 0 or 61 + len(records) + size + 8 <= batch_size:
        append_record(records, count, 0, None, value, None)
        count += 1
    return build_batch(records, count, base_timestamp=now_ms, max_timestamp=now_ms), count


def broker_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(bootstrap: str, broker_pid: int | None, size: int, batch_size: int, records: int) -> dict[str, float]:
    topic = f"ceiling-{size}-{batch_size}-{os.getpid()}-{time.monotonic_ns()}"
    create_topic(bootstrap, topic, PARTITIONS)
    host, port = bootstrap.rsplit(":", 1)
    batch, per_batch = one_batch(size, batch_size, int(time.time() * 1000))
    requests = -(-records // (per_batch * PARTITIONS))
    with BlockingConnection(host, int(port), timeout_s=30) as conn:
        version = conn.api_version(ApiKey.PRODUCE)
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}
                                                                  for p in range(PARTITIONS)]}]}
        conn.request(ApiKey.PRODUCE, body, version=version)  # leaders known, log segments open
        frames = [encode_request(ApiKey.PRODUCE, version, c, "ceiling", body) for c in range(1, requests + 1)]
        sock = conn._sock
        assert sock is not None
        sock.settimeout(30)
        framing = Connection(64 * 1024 * 1024)
        failed = sent = answered = 0
        cpu0 = broker_cpu(broker_pid) if broker_pid else 0.0
        start = time.perf_counter()
        while answered < requests:
            while sent < requests and sent - answered < IN_FLIGHT:
                sent += 1
                framing.send_request(frames[sent - 1], correlation_id=sent, api_key=int(ApiKey.PRODUCE),
                                     api_version=version, now=0.0)
                sock.sendall(frames[sent - 1])
                framing.bytes_sent(len(frames[sent - 1]))
            data = sock.recv(1 << 20)
            if not data:
                raise SystemExit("the broker closed the connection")
            for _, payload in framing.receive_data(data):
                answered += 1
                _, response = decode_response(ApiKey.PRODUCE, version, payload)
                failed += sum(p["error_code"] != 0 for t in response["responses"]
                              for p in t["partition_responses"])
        wall = time.perf_counter() - start
        cpu = broker_cpu(broker_pid) - cpu0 if broker_pid else float("nan")
    total = requests * PARTITIONS * per_batch
    return {"records": total, "per_batch": per_batch, "rps": total / wall, "mbps": total * size / wall / 1e6,
            "broker_cpu_per_m": cpu / total * 1e6, "failed": failed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, action="append", help="value size in bytes (repeatable)")
    ap.add_argument("--batch-size", type=int, action="append", help="batch.size in bytes (repeatable)")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per cell; the median is shown (default 3)")
    ap.add_argument("--bootstrap-server", help="an existing broker (default: a fresh embedded one per run)")
    args = ap.parse_args()
    from kafkajet.testing import EmbeddedBroker

    print("| value | batch.size | records/batch | records/s | MB/s | broker CPU s per 1M records |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for size in args.size or [100, 1024]:
        for batch_size in args.batch_size or [16384, 65536, 262144, 1_000_000]:
            runs = []
            for _ in range(args.repeat):
                if args.bootstrap_server:
                    runs.append(run(args.bootstrap_server, None, size, batch_size, args.records))
                else:
                    with EmbeddedBroker() as broker:
                        assert broker._proc is not None
                        runs.append(run(broker.bootstrap_servers, broker._proc.pid, size, batch_size, args.records))
            failed = sum(r["failed"] for r in runs)
            if failed:
                print(f"| {size} | {batch_size:,} | FAILED: {failed} batches refused |")
                continue
            r = sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]
            print(f"| {size} | {batch_size:,} | {r['per_batch']:,} | {r['rps']:,.0f} | {r['mbps']:,.1f} | "
                  f"{r['broker_cpu_per_m']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
