"""How long kafkajet.testing.ApacheKafka takes to start, to be ready, and to stop: one node and three.

    .venv/bin/python benchmarks/apache_kafka_startup.py            # 3 repetitions of each
    .venv/bin/python benchmarks/apache_kafka_startup.py --reps 1 --brokers 1

"Ready" is what start() waits for: every node answers on its listener and the cluster's metadata lists them
all (storage formatting included; the JVMs' own start is most of it). The target is under 20 s for one node on
a quiet 2-core machine; it is reported here, never asserted in a test. Also timed: a first record produced and
acknowledged, and stop(). The table names the machine, its load before and after, the date and the version.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time

from kafkajet import Producer
from kafkajet.testing.apache_kafka import ApacheKafka, kafka_version


def one(brokers: int) -> dict[str, float]:
    started = time.monotonic()
    kafka = ApacheKafka(brokers=brokers)
    kafka.start()
    ready = time.monotonic()
    try:
        with Producer(bootstrap_servers=kafka.bootstrap_servers) as p:
            p.send("startup-probe", value=b"x").result(timeout=60)
        first = time.monotonic()
    finally:
        kafka.stop()
    stopped = time.monotonic()
    return {"ready_s": ready - started, "first_record_s": first - ready, "stop_s": stopped - first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--brokers", type=int, nargs="*", default=[1, 3])
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = {b: [one(b) for _ in range(args.reps)] for b in args.brokers}
    load_after = os.getloadavg()[0]
    print(f"Apache Kafka {kafka_version()} through kafkajet.testing.ApacheKafka, {datetime.date.today()}, "
          f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), load {load_before:.1f} before, "
          f"{load_after:.1f} after; medians of {args.reps}\n")
    print("| nodes | ready (s) | first record acknowledged (s) | stop (s) |")
    print("| --- | --- | --- | --- |")
    for brokers, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {brokers} | {med['ready_s']:.1f} | {med['first_record_s']:.1f} | {med['stop_s']:.1f} |")


if __name__ == "__main__":
    main()
