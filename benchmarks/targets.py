"""The speed targets in one table: kafkajet's compiled and pure-Python builds side by side with the client each
target names, from one run of compare.py's workloads on Apache Kafka (one node, warmed up), then the per-record
CPU (send_cost.py) of both builds and confluent-kafka; with --spark, the three Spark scripts' kafkajet rows
against Spark's own Kafka connector. Prints Markdown for docs/benchmarks.md.

    .venv/bin/python benchmarks/targets.py            # medians of 3 (about 15 minutes on a quiet 2-CPU machine)
    .venv/bin/python benchmarks/targets.py --spark    # and the Spark source, sink and registered Avro (+10 min)
    .venv/bin/python benchmarks/targets.py --quick    # one repetition, a fifth of the records: checks it works
    .venv/bin/python benchmarks/targets.py --broker tansu   # on the embedded broker instead

Every client at its defaults, acks=all and linger.ms=5 (compare.py's workloads); fire-and-forget rows compare
with clients called without a per-record callback. The load average before and after the run is printed with
the tables: figures from a loaded machine are not the ones to quote.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402
import send_cost  # noqa: E402
from compare import CEILING, PURE, WORKLOADS, Summary  # noqa: E402

BUFFER_MEMORY_MB = 32 * 1024 * 1024 / 1e6  # kafkajet's buffer.memory default (Java's), in compare.py's MB
# Only the clients the targets name, so the run stays short.
CLIENTS = {
    "send-100B": ["kafkajet", "kafkajet produce()", "confluent-kafka", "java"],
    "callback-100B": ["kafkajet", "confluent-kafka"],
    "asyncio-100B": ["kafkajet AIOProducer", "aiokafka"],
    "send-1KiB": ["kafkajet", "confluent-kafka", "java"],
    "send-1KiB-256K": ["kafkajet", "confluent-kafka"],
    "batch-100B-5M": ["kafkajet send_batch", "kafkajet send_arrow", "aiokafka batch", "confluent-kafka", CEILING],
    "latency-20k": ["kafkajet", "confluent-kafka"],
}
COST_CLIENTS = ["kafkajet", "kafkajet callback", "kafkajet AIOProducer", "confluent-kafka"]
COST_LABELS = {"kafkajet": "send()", "kafkajet callback": "send(callback=)", "kafkajet AIOProducer": "AIOProducer",
               "confluent-kafka": "confluent-kafka produce(on_delivery=) + poll(0)"}


@dataclass
class Target:
    what: str
    workload: str
    ours: str  # the kafkajet client, without the build suffix
    theirs: str
    attr: str  # the Summary median compared: rps or mbps, higher wins
    goal: float  # ours / theirs at least


TARGETS = [
    Target("produce(), 100 B, vs confluent-kafka produce() + poll(0), no callback", "send-100B",
           "kafkajet produce()", "confluent-kafka", "rps", 1.3),
    Target("send() fire-and-forget, 100 B, vs confluent-kafka produce() without a callback", "send-100B",
           "kafkajet", "confluent-kafka", "rps", 1.1),
    Target("send() fire-and-forget, 100 B, vs the Java producer's send()", "send-100B", "kafkajet", "java", "rps",
           1.0),
    Target("send(callback=), 100 B, vs confluent-kafka on_delivery + poll(0)", "callback-100B", "kafkajet",
           "confluent-kafka", "rps", 1.3),
    Target("AIOProducer, gather shape, vs aiokafka send()", "asyncio-100B", "kafkajet AIOProducer", "aiokafka",
           "rps", 3.5),
    Target("1 KiB values, MB/s, vs confluent-kafka, each at its default batch size", "send-1KiB", "kafkajet",
           "confluent-kafka", "mbps", 1.1),
    Target("1 KiB values, MB/s, vs confluent-kafka, both at batch.size 256 KiB", "send-1KiB-256K", "kafkajet",
           "confluent-kafka", "mbps", 1.1),
    Target("1 KiB values, MB/s, vs the Java producer", "send-1KiB", "kafkajet", "java", "mbps", 1.0),
    *(Target(f"{api}, 100 B x 5 M, vs {ref}", "batch-100B-5M", f"kafkajet {api.removesuffix('()')}", theirs,
             "rps", goal)
      for api in ("send_batch()", "send_arrow()")
      for ref, theirs, goal in (("aiokafka's batch API", "aiokafka batch", 2.0),
                                ("confluent-kafka", "confluent-kafka", 3.0),
                                ("the broker's ceiling at 1 MiB batches", CEILING, 0.7))),
]
# --spark: each script's kafkajet job against Spark's own connector (its "spark-kafka" job), rows/s.
SPARK_TARGETS = [
    ("the Spark source vs Spark's Kafka source", "spark_source.py", ["--rows", "2000000"], "kafkajet source",
     "spark-kafka", 1.5),
    ("the Spark sink vs Spark's Kafka sink", "spark_sink.py", ["--rows", "2000000", "--jobs", "kafkajet sink,spark-kafka"],
     "kafkajet sink", "spark-kafka", 2.0),
    ("registered Avro through the source vs spark-kafka + from_avro", "spark_avro.py", ["--rows", "1000000"],
     "kafkajet source (valueFormat=avro)", "spark-kafka from_avro", 1.5),
]


def _cell(s: Summary | None, attr: str, fmt: Callable[[float], str]) -> str:
    if s is None:
        return "-"
    value = s.median(attr) if s.ok else None
    return "FAILED" if value is None else fmt(value)


def _rate(attr: str) -> Callable[[float], str]:
    return (lambda v: f"{v:,.1f} MB/s") if attr == "mbps" else (lambda v: f"{v:,.0f}/s")


def target_table(summaries: dict[str, dict[str, Summary]]) -> str:
    rows = ["| target | kafkajet compiled | kafkajet pure | reference | goal | met: compiled, pure "
            "| compiled's ratio per rep |",
            "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for t in TARGETS:
        by_client = summaries.get(t.workload, {})
        theirs = by_client.get(t.theirs)
        cells, met = [], []
        for build in ("", PURE):
            ours = by_client.get(t.ours + build)
            mine = ours.median(t.attr) if ours is not None and ours.ok else None
            ref = theirs.median(t.attr) if theirs is not None and theirs.ok else None
            if mine is None or not ref:
                cells.append(_cell(ours, t.attr, _rate(t.attr)))
                met.append("-")
                continue
            cells.append(f"{_rate(t.attr)(mine)} = {mine / ref:.2f}x")
            met.append("yes" if mine / ref >= t.goal else "no")
        rows.append(f"| {t.what} | {cells[0]} | {cells[1]} | {_cell(theirs, t.attr, _rate(t.attr))} "
                    f"| >= {t.goal}x | {', '.join(met)} | {_spread(by_client.get(t.ours), theirs, t.attr)} |")
    lat = summaries.get("latency-20k", {})
    conf = lat.get("confluent-kafka")
    p99s = [lat.get("kafkajet" + b) for b in ("", PURE)]
    rows.append("| p99 send-to-ack at 20,000 records/s, linger.ms 5 (confluent-kafka as reference) | "
                + " | ".join(_cell(s, "p99_ms", lambda v: f"{v:.1f} ms") for s in p99s)
                + f" | {_cell(conf, 'p99_ms', lambda v: f'{v:.1f} ms')} | < 10 ms | "
                + ", ".join("-" if s is None or not s.ok or s.median("p99_ms") is None
                            else "yes" if (s.median("p99_ms") or 0) < 10 else "no" for s in p99s) + " | - |")
    conf_rss = conf.median("rss") if conf is not None and conf.ok else None
    limit = None if conf_rss is None else 1.5 * conf_rss + BUFFER_MEMORY_MB
    rows.append("| peak RSS in that run, vs 1.5x confluent-kafka's + buffer.memory (32 MiB) | "
                + " | ".join(_cell(s, "rss", lambda v: f"{v:.0f} MB") for s in p99s)
                + f" | {_cell(conf, 'rss', lambda v: f'{v:.0f} MB')} | "
                + ("-" if limit is None else f"<= {limit:.0f} MB") + " | "
                + ", ".join("-" if s is None or not s.ok or limit is None
                            else "yes" if (s.median("rss") or 0) <= limit else "no" for s in p99s) + " | - |")
    return "\n".join(rows)


def _spread(ours: Summary | None, theirs: Summary | None, attr: str) -> str:
    """Each repetition's ratio (the clients run interleaved, rep by rep), lowest to highest: how far one run's
    figure can be from the median's."""
    if ours is None or theirs is None:
        return "-"
    ratios = sorted(a / b for r, q in zip(ours.runs, theirs.runs, strict=False)
                    if r.ok and q.ok and (a := getattr(r, attr)) is not None and (b := getattr(q, attr)))
    return ", ".join(f"{x:.2f}x" for x in ratios) or "-"


def spark_rows(reps: int, broker: str, quick: bool) -> tuple[list[str], bool]:
    """Run each Spark script (the compiled build, as installed) and read its kafkajet and spark-kafka medians from
    the Markdown table it prints; the rows of the target table, and whether every job ran."""
    rows, ok = [], True
    for what, script, argv, ours, theirs, goal in SPARK_TARGETS:
        if quick:
            argv = [a if not a.isdigit() else str(int(a) // 10) for a in argv]
        done = subprocess.run([sys.executable, str(HERE / script), *argv, "--reps", str(reps), "--broker", broker],
                              capture_output=True, text=True, check=False)
        rates = {cells[0]: cells[1] for line in done.stdout.splitlines()
                 if line.startswith("| ") and len(cells := [c.strip() for c in line.strip("|").split("|")]) > 1}
        mine, ref = _rows_per_s(rates.get(ours)), _rows_per_s(rates.get(theirs))
        if done.returncode != 0 or mine is None or not ref:
            ok = False
            print(f"{script} failed (exit {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
            rows.append(f"| {what} | FAILED | - | - | >= {goal}x | - | - |")
            continue
        rows.append(f"| {what} | {mine:,.0f} rows/s = {mine / ref:.2f}x | - | {ref:,.0f} rows/s | >= {goal}x "
                    f"| {'yes' if mine / ref >= goal else 'no'}, - | - |")
    return rows, ok


def _rows_per_s(cell: str | None) -> float | None:
    try:
        return None if cell is None else float(cell.replace(",", ""))
    except ValueError:
        return None  # FAILED


def cost_table(costs: dict[str, send_cost.Cost | None]) -> str:
    rows = ["| per record, 100 B | build | records/s | caller's thread us | client's threads us | sum us |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    for label, c in costs.items():
        client = label.removesuffix(" [pure]")
        build = "-" if not client.startswith("kafkajet") else "pure" if label.endswith(" [pure]") else "compiled"
        what = COST_LABELS[client]
        if c is None:
            rows.append(f"| {what} | {build} | FAILED | | | |")
            continue
        rows.append(f"| {what} | {build} | {c.rps:,.0f} | {c.caller_us:.2f} | {c.threads_us:.2f} | {c.sum_us:.2f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one repetition with a fifth of the records")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 3, or 1 with --quick)")
    ap.add_argument("--cost-records", type=int, default=300_000, help="records per send_cost.py run")
    ap.add_argument("--spark", action="store_true", help="also the Spark source, sink and registered Avro rows")
    compare.add_broker_option(ap)
    args = ap.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    workloads = {}
    for name, clients in CLIENTS.items():
        w = dict(WORKLOADS[name], clients=clients)
        if args.quick:
            compare.quicken(w)
        workloads[name] = w
    load_before, started = os.getloadavg(), time.time()
    summaries = compare.measure(workloads, ["compiled", "pure"], reps, broker=args.broker)
    spark, spark_ok = spark_rows(reps, args.broker, args.quick) if args.spark else ([], True)
    costs = send_cost.measure(COST_CLIENTS, ["compiled", "pure"],
                              args.cost_records // 5 if args.quick else args.cost_records)
    versions = compare.versions()
    print(compare.context_line(compare.broker_name(args.broker, None), load_before) + "; "
          f"confluent-kafka {versions['confluent-kafka']}, aiokafka {versions['aiokafka']}; medians of {reps}"
          f"{', --quick' if args.quick else ''}; {time.time() - started:.0f} s; send_cost.py's per-record rows on "
          "the embedded broker\n")
    print("\n".join([target_table(summaries), *spark]))
    print()
    print(cost_table(costs))
    if (any(not s.ok for by_client in summaries.values() for s in by_client.values()) or None in costs.values()
            or not spark_ok):
        sys.exit(1)


if __name__ == "__main__":
    main()
