"""What the benchmark scripts share: one run per child process, and what that process reports about itself.

A run happens in a fresh interpreter so that its CPU seconds and peak RSS (getrusage of the child itself)
belong to one client and one workload only. The child prints one JSON line last; the parent reads it.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

# What each client imports: loaded before the clock starts, so a run measures producing, not importing.
# pyarrow only where the run uses it: it adds about 35 MB to a process's RSS.
CLIENT_MODULES = {"kafkajet": ("kafkajet.producer.producer",),
                  "kafkajet send_arrow": ("kafkajet.producer.producer", "kafkajet.producer.arrow", "pyarrow"),
                  "kafkajet AIOProducer": ("kafkajet.producer.producer", "kafkajet.aio"),
                  "kafka-python": ("kafka",), "aiokafka": ("aiokafka",), "confluent-kafka": ("confluent_kafka",),
                  "broker ceiling": ("ceiling",)}


def preload(client: str) -> None:
    import importlib

    modules = CLIENT_MODULES.get(client) or CLIENT_MODULES[client.split()[0]]
    for module in modules:
        importlib.import_module(module)
    if "pyarrow" in modules:
        import pyarrow as pa

        # pyarrow imports pandas (when installed) the first time it builds an array: 0.5 s that belongs to
        # neither the client nor the workload.
        pa.array([b"x"], pa.binary())


def report(acked: int, wall: float, **extra: Any) -> None:
    """Print the child's result line: records acknowledged, wall seconds, its CPU seconds and peak RSS."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"acked": acked, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                      "rss_mb": ru.ru_maxrss / 1024, **extra}), flush=True)


def spawn(argv: list[str], label: str, timeout_s: float = 900, *, cwd: str | None = None,
          env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Run `python argv...` and return its result line, or None (with its stderr shown) if it crashed."""
    return run_child([sys.executable, *argv], label, timeout_s, cwd=cwd, env=env)


def run_child(cmd: list[str], label: str, timeout_s: float = 900, *, cwd: str | None = None,
              env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Run any command that prints its result as a JSON line last (a Python child, the Java producer); None,
    with its stderr shown, if it crashed or overran."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        print(f"  {label} did not finish within {timeout_s} s", file=sys.stderr)
        return None
    if out.returncode != 0:
        print(f"  {label} crashed:\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def paired_loop_args(doc: str, extra: Callable[[argparse.ArgumentParser], object] | None = None) -> argparse.Namespace:
    """The options of the scripts that time one send() loop in several forms, interleaved, each run in a
    child: records per run, repetitions, and (given only to the child) the worker's three arguments; `extra`
    adds a script's own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--worker", nargs=3)
    if extra is not None:
        extra(ap)
    return ap.parse_args()


def create_topic(bootstrap: str, topic: str, partitions: int = 6) -> None:
    from kafkajet.admin import Admin

    with Admin(bootstrap) as admin:
        admin.create_topics([topic], num_partitions=partitions)


def timed_read_jobs(jobs: dict[str, Callable[[], tuple[int, int]]], reps: int, rows: int, expected: int,
                    what: Callable[[int], str], width: int) -> dict[str, list[float | None]]:
    """Each job's rows/s per rep (None for a rep that returned the wrong count or `expected` total), after one
    warm-up run each: the first task of a Spark session forks its Python worker. A job returns (rows, total);
    `what(total)` words a wrong total."""
    rates: dict[str, list[float | None]] = {j: [] for j in jobs}
    for job, fn in jobs.items():
        t = time.perf_counter()
        fn()
        print(f"  warm-up {job:{width}s} {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    for rep in range(reps):
        for job, fn in jobs.items():  # interleaved, so drift in the machine hits every job alike
            t = time.perf_counter()
            n, total = fn()
            wall = time.perf_counter() - t
            ok = n == rows and total == expected
            rates[job].append(rows / wall if ok else None)
            detail = f"{rows / wall:,.0f} rows/s ({wall:.1f} s)" if ok else f"FAILED: {n:,} rows, {what(total)}"
            print(f"  rep {rep + 1}/{reps} {job:{width}s} {detail}", file=sys.stderr, flush=True)
    return rates


def rate_table(title: str, rates: dict[str, list[float | None]], baseline: str,
               ratio: Callable[[str, float, float], str] | None = None, context: str = "") -> bool:
    """Print the Markdown table of each job's median rows/s (a job with any failed rep reads FAILED) and its
    ratio against `baseline` (`ratio(job, baseline_median, job_median)` may word it differently), under the title
    and `context` (context_line()'s broker, machine, date and build); True if every job succeeded."""
    def median(job: str) -> float | None:
        got = rates[job]
        return statistics.median(got) if got and all(v is not None for v in got) else None  # type: ignore[type-var]

    base = median(baseline) if baseline in rates else None
    print(f"\n{title}\n" + (f"\n{context}\n" if context else ""))
    print(f"| job | rows/s | {baseline} ratio |\n| --- | ---: | ---: |")
    ok = True
    for job in rates:
        m = median(job)
        ok &= m is not None
        text = ""
        if base and m and job != baseline:
            text = ratio(job, base, m) if ratio is not None else f"{base / m:.2f}x"
        print(f"| {job} | {'FAILED' if m is None else f'{m:,.0f}'} | {text} |")
    return ok


# --- the broker a benchmark runs against, and the line every results table is printed under -------------------

BROKERS = ("apache", "tansu")


def add_broker_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--broker", choices=BROKERS, default="apache",
                    help="apache: one Apache Kafka node (kafkajet.testing.ApacheKafka, the jars `make kafka` "
                         "fetched); tansu: the embedded broker (default: apache)")


def broker_name(kind: str, bootstrap: str | None = None) -> str:
    """The broker as a results table names it."""
    if bootstrap is not None:
        return f"the cluster at {bootstrap}"
    if kind == "apache":
        from kafkajet.testing.apache_kafka import kafka_version

        return f"Apache Kafka {kafka_version()} (1 KRaft node, JVM, loopback)"
    return "Tansu (kafkajet.testing.EmbeddedBroker, loopback)"


def open_broker(kind: str) -> Any:
    """A started broker of that kind, as a context manager (its bootstrap_servers is the address)."""
    if kind == "apache":
        from kafkajet.testing.apache_kafka import ApacheKafka

        return ApacheKafka(brokers=1)
    from kafkajet.testing import EmbeddedBroker

    return EmbeddedBroker()


def context_line(broker: str, load_before: tuple[float, ...]) -> str:
    """What a results table was measured on: broker, machine (cores, load average before and after), date and
    kafkajet's build. Printed above every table, so a figure never travels without it."""
    import os
    import platform
    from importlib.metadata import version

    from kafkajet._build import describe

    def load(values: tuple[float, ...]) -> str:
        return "/".join(f"{v:.2f}" for v in values)

    # The build a fresh interpreter gets now, as the runs' children (Spark's Python workers) got it: this
    # process's was fixed at its import, and a source edited during the run makes the children run pure Python.
    fresh = subprocess.run([sys.executable, "-c", "from kafkajet._build import describe; print(describe())"],
                           capture_output=True, text=True, check=False).stdout.strip() or "unknown"
    build = describe() if fresh == describe() else f"{describe()} in this process, {fresh} in a fresh interpreter"
    return (f"broker: {broker}; machine: {platform.machine()}, {os.cpu_count()} cores, load average (1/5/15 min) "
            f"{load(load_before)} before, {load(os.getloadavg())} after; date: {time.strftime('%Y-%m-%d %H:%M %Z')}; "
            f"build: kafkajet {version('kafkajet')}, {build}, Python {platform.python_version()}")
