"""The main job, the pipeline users build: events loaded into a topic with the kafkajet sink as registered
Avro (the schema derived from the DataFrame, registered in a Schema Registry); a Structured Streaming query
reads them with the kafkajet source, decoded into columns, keeps per-user event counts and amount sums, and writes
them to a second topic with the kafkajet sink; the job then checks the last total per user against totals
computed from the events themselves, and prints rows/s for load, read, stream and verify, and the verdict.

`python -m kafkajet demo` (what `make demo` runs). With --bootstrap-server it uses your cluster (with the
security settings of --command-config / --command-property, as the other commands take them); without, it
starts the embedded broker; with --schema-registry it uses your registry, without it starts kafkajet's own
in this process (its schemas kept in the embedded broker's _schemas topic, or in memory with your cluster).
--input sends a CSV, JSON lines or Parquet file's rows instead of synthetic events (as Avro records of the
file's columns, keyed by the first column).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from typing import Any

from kafkajet.cli.client_options import CliError, add_bootstrap_option, add_config_options, client_config
from kafkajet.cli.signals import SignalFlag

PARTITIONS = 6
# Starts of the streaming query when it fails only because Spark's Python worker connected back too late.
STREAM_STARTS = 3
CONNECT_BACK = "Python worker failed to connect back"
INPUT_FORMATS = ".parquet (Parquet), .csv (CSV with a header line), anything else JSON lines"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    d: argparse.ArgumentParser = sub.add_parser(
        "demo", help="the Spark pipeline: load events with the kafkajet sink, stream per-user totals, verify them",
        description="The job users build on Spark (local[2]): events are loaded into a topic with the kafkajet "
                    "sink and read back with the kafkajet source; a Structured Streaming query keeps per-user "
                    "counts and sums and writes them to a second topic; the totals read back are checked "
                    "against the events. Exits 0 when they match, 1 when they do not.")
    add_bootstrap_option(d, help="your cluster (default: start an embedded broker)")
    d.add_argument("--input", default=None,
                   help=f"a file of events to send instead of synthetic ones: {INPUT_FORMATS}")
    d.add_argument("--records", type=int, default=1_000_000, help="synthetic events to generate")
    d.add_argument("--topic", default=None, help="topic to write (default: a fresh one)")
    d.add_argument("--schema-registry", default=None, metavar="URL",
                   help="your Schema Registry (default: start kafkajet's own in this process)")
    add_config_options(d)
    d.set_defaults(func=run, parser=d)
    return d


def check_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The client settings of the run, checked before anything starts; CliError (exit 2) otherwise."""
    from kafkajet.config import ADMIN, parse_client_config

    if args.input is not None and not os.path.isfile(args.input):
        raise CliError(f"--input {args.input!r}: no such file", 2)
    if args.records < 1:
        raise CliError("--records must be at least 1", 2)
    config = client_config(args)
    if not args.bootstrap_server:
        if len(config) > 1:
            raise CliError("--command-config / --command-property are for your cluster: give --bootstrap-server "
                           "too (the embedded broker takes no security settings)", 2)
        return config
    # The settings go to the admin client and to the Spark sink and source: the keys all clients share.
    parse_client_config(ADMIN, config)
    return config


def run(args: argparse.Namespace) -> int:
    config = check_arguments(args)  # before PySpark, a broker and Spark start: a typo should cost nothing
    check_extras(embedded=not args.bootstrap_server)
    check_java()
    try:
        return run_demo(args, config)
    except KeyboardInterrupt:
        print("demo: interrupted; Spark and the broker stopped", file=sys.stderr, flush=True)
        return 130


def _importable(module: str) -> bool:
    """Whether `module` imports: one that is there but fails to import is as missing to the demo."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def check_extras(*, embedded: bool) -> None:
    """CliError naming every extra the demo needs and this install lacks, in one pip command: told one at a
    time, a base install took three runs to get going."""
    missing: list[tuple[str, str]] = []  # (extra, what it brings)
    if not (_importable("pyspark") and _importable("pyarrow")):
        missing.append(("spark", "PySpark and pyarrow, for the job"))
    if not _importable("fastavro"):  # else every Spark task fails, 300 lines of traceback each
        missing.append(("avro", "fastavro, for the registered Avro values"))
    if embedded:
        from kafkajet.testing.embedded_broker import BrokerStartError, find_tansu

        try:
            find_tansu()
        except BrokerStartError:
            missing.append(("broker", "the embedded Tansu broker (or give --bootstrap-server)"))
    if missing:
        raise CliError("the demo needs " + "; ".join(f"{why} (kafkajet[{extra}])" for extra, why in missing)
                       + f": pip install 'kafkajet[{','.join(extra for extra, _ in missing)}]'")


JAVA_ADVICE = ("install a JDK or JRE 17 or later (e.g. apt-get install openjdk-17-jre-headless, or "
               "https://adoptium.net) and put its java on PATH or set JAVA_HOME")


def check_java() -> None:
    """CliError unless the java Spark would start (JAVA_HOME's, else PATH's) runs and is 17 or later: without
    one, Spark's gateway fails after a page of traceback ending in [JAVA_GATEWAY_EXITED]."""
    import shutil
    import subprocess

    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    where = f"JAVA_HOME={home}" if home else "PATH"
    if not java or not os.access(java, os.X_OK):
        raise CliError(f"the demo runs Spark, which needs Java 17: no java found ({where}); {JAVA_ADVICE}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CliError(f"the demo runs Spark, which needs Java 17: {java} does not run ({e}); {JAVA_ADVICE}") from None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    major = int(found[1]) if found else None
    if major == 1 and found and found[2]:  # "1.8.0_392": Java 8
        major = int(found[2])
    if out.returncode != 0 or major is None or major < 17:
        said = f"Java {major}" if major is not None else "no version it could tell"
        raise CliError(f"the demo runs Spark, which needs Java 17: {java} ({where}) is {said}; {JAVA_ADVICE}")


class Interruption:
    """Ctrl-C while Spark runs: cancel its jobs from another thread and let the job's call fail, then stop.

    PySpark's own SIGINT handler calls into the JVM from inside the call the main thread is blocked in, a
    reentrant Py4J call that logs four tracebacks; here the handler only records the request. A second
    Ctrl-C interrupts at once, once Spark is up. While it starts, every Ctrl-C waits for it (seconds): PySpark
    waits for its JVM in a loop that a KeyboardInterrupt would leave with the JVM running on, ignoring
    SIGINT, for good."""

    def __init__(self) -> None:
        self.requested = SignalFlag()
        self._spark: Any = None
        self._previous = signal.signal(signal.SIGINT, self._handle)

    def started(self, spark: Any) -> None:
        """Spark is up: a Ctrl-C from now on cancels its jobs (one that came while it started: at check())."""
        self._spark = spark
        signal.signal(signal.SIGINT, self._handle)  # the SparkContext put PySpark's handler in place of ours

    def _handle(self, signum: int, frame: object) -> None:
        if self._spark is None:
            self.requested.set()
            return
        if self.requested.is_set():
            raise KeyboardInterrupt
        self.requested.set()
        threading.Thread(target=self._cancel, name="kafkajet-demo-cancel", daemon=True).start()

    def _cancel(self) -> None:
        try:
            self._spark.sparkContext.cancelAllJobs()
        except Exception:  # Spark already stopping: nothing left to cancel
            pass

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed: between steps, and when a step failed."""
        if self.requested.is_set():
            raise KeyboardInterrupt

    def restore(self) -> None:
        signal.signal(signal.SIGINT, self._previous)


def _events(spark, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    if args.input:
        path = args.input
        reader = spark.read
        if path.endswith(".parquet"):
            df = reader.parquet(path)
        elif path.endswith(".csv"):
            df = reader.option("header", "true").csv(path)
        else:
            df = reader.json(path)
        first = df.columns[0]
        return df.selectExpr(f"cast(`{first}` as string) as key", "struct(*) as value")
    return spark.range(args.records, numPartitions=4).selectExpr(
        "concat('user-', lpad(cast(id % 10000 as string), 5, '0')) as key",
        "named_struct('event_id', id, 'user', concat('user-', lpad(cast(id % 10000 as string), 5, '0')),"
        " 'action', element_at(array('view', 'click', 'buy'), cast(id % 3 as int) + 1),"
        " 'amount', id % 997, 'at', timestamp_millis(1767225600000 + id)) as value",
    )


def _amount(events: Any) -> str:
    """The events' amount column (an input file without one counts events only)."""
    names = events.schema["value"].dataType.fieldNames()
    return "cast(value.amount as long)" if "amount" in names else "cast(null as long)"


def _quiet(registry: Any) -> Any:
    """The registry's start, without its in-memory warning: the demo says where its schemas live itself."""
    import logging

    logger = logging.getLogger("kafkajet.testing.schema_registry")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        registry.start()
    finally:
        logger.setLevel(level)
    return registry


def run_demo(args: argparse.Namespace, config: dict[str, Any]) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors must import kafkajet from this venv
    from pyspark.sql import SparkSession

    from kafkajet.admin import Admin
    from kafkajet.testing import EmbeddedBroker, SchemaRegistry

    with ExitStack() as stack:
        bootstrap = args.bootstrap_server
        embedded = not bootstrap
        if embedded:
            broker = stack.enter_context(EmbeddedBroker())
            bootstrap = config["bootstrap.servers"] = broker.bootstrap_servers
            print(f"embedded broker on {bootstrap}", flush=True)
        registry_url = args.schema_registry
        if not registry_url:
            registry = SchemaRegistry(bootstrap_servers=bootstrap if embedded else None)
            registry_url = stack.enter_context(_quiet(registry)).url
            print(f"schema registry on {registry_url}", flush=True)
        # Every client setting (security too) reaches the sink and the source as Spark's kafka.* options; the
        # values are registered Avro both ways.
        kafka = {f"kafka.{key}": str(value) for key, value in config.items()}
        kafka.update({"valueFormat": "avro", "schema.registry.url": registry_url})
        topic = args.topic or f"demo-events-{uuid.uuid4().hex[:8]}"
        totals_topic = f"{topic}-per-user"
        with Admin(config) as admin:
            admin.create_topics([topic, totals_topic], num_partitions=PARTITIONS, if_not_exists=True)
        interruption = Interruption()  # before Spark starts: see Interruption
        stack.callback(interruption.restore)
        spark = (SparkSession.builder.master("local[2]").appName("kafkajet-demo")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        stack.callback(spark.stop)
        interruption.started(spark)
        interruption.check()
        try:
            return _pipeline(spark, args, kafka, topic, totals_topic, stack, interruption)
        except Exception:
            interruption.check()  # a job cancelled by Ctrl-C fails: report the interruption, not the failure
            raise


def _pipeline(spark: Any, args: argparse.Namespace, kafka: dict[str, str], topic: str, totals_topic: str,
              stack: ExitStack, interruption: Interruption) -> int:
    import kafkajet.spark

    spark.sparkContext.setLogLevel("ERROR")
    kafkajet.spark.register(spark)

    # 1. Load: events into the input topic through the kafkajet sink (a batch write).
    events = _events(spark, args).cache()
    sent = events.count()  # materialise first, so the write is timed alone
    start = time.perf_counter()
    (events.write.format("kafkajet").mode("append").options(**kafka)
     .option("topic", topic).option("kafka.linger.ms", "20").option("kafka.compression.type", "lz4").save())
    load_s = time.perf_counter() - start
    interruption.check()
    print(f"load:   {sent:,} events into {topic} in {load_s:.2f} s = {sent / load_s:,.0f} rows/s", flush=True)

    # 2. Read: the events back with the kafkajet source as a batch query, every value into Spark; twice,
    # because the session's first read also pays for starting the source's Python workers and Spark's code
    # paths for it, and a pipeline that keeps running sees the second figure.
    for attempt in ("first read of the session", "again, warm"):
        start = time.perf_counter()
        back = (spark.read.format("kafkajet").options(**kafka)
                .option("subscribe", topic).load()
                .selectExpr("count(*) as n", "count(value) as decoded").collect()[0])
        read_s = time.perf_counter() - start
        interruption.check()
        print(f"read:   {back.n:,} events ({back.decoded:,} Avro values decoded) back from {topic} in "
              f"{read_s:.2f} s = {back.n / read_s:,.0f} rows/s ({attempt})", flush=True)

    # 3. Stream: a Structured Streaming query reads the topic with the kafkajet source, keeps per-user
    # totals, and writes them to a second topic with the kafkajet sink, a few micro-batches in all.
    from pyspark.errors import StreamingQueryException

    per_trigger = max(1, sent // 4)
    totals = (spark.readStream.format("kafkajet").options(**kafka)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(per_trigger)).load()
              .selectExpr("cast(key as string) as user", f"{_amount(events)} as amount")
              .groupBy("user")
              .agg({"*": "count", "amount": "sum"})
              .selectExpr("user as key", "named_struct('events', `count(1)`, 'amount', `sum(amount)`) as value"))
    checkpoint = stack.enter_context(tempfile.TemporaryDirectory(prefix="kafkajet-demo-"))
    start = time.perf_counter()
    batches = 0
    for attempt_no in range(1, STREAM_STARTS + 1):
        query = (totals.writeStream.format("kafkajet").outputMode("complete")
                 .options(**kafka).option("topic", totals_topic)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        seen = 0
        while query.isActive:
            if interruption.requested.is_set():
                query.stop()
            try:
                query.awaitTermination(1)
            except StreamingQueryException:
                pass  # a failed query raises here: query.exception() below says why, once
            for progress in query.recentProgress[seen:]:
                print(f"stream: micro-batch {progress['batchId']} read {progress['numInputRows']:,} events",
                      flush=True)
            seen = len(query.recentProgress)
        batches += seen
        interruption.check()
        failure = query.exception()
        if failure is None:
            break
        if CONNECT_BACK not in str(failure) or attempt_no == STREAM_STARTS:
            print(f"verdict: FAILED - the streaming query failed: {failure}")
            return 1
        # Spark gives the Python process it starts for the source 10 s to connect back (hard-coded), which a
        # busy machine can miss; the query resumes from its checkpoint (docs/spark.md).
        print(f"stream: Spark's Python worker did not connect back in time (a busy machine); restarting the "
              f"query from its checkpoint ({attempt_no + 1} of {STREAM_STARTS})", flush=True)
    stream_s = time.perf_counter() - start
    print(f"stream: {sent:,} events in {stream_s:.2f} s = {sent / stream_s:,.0f} rows/s "
          f"({batches} micro-batches, per-user totals into {totals_topic})", flush=True)

    # 4. Verify: the last total per user in the output topic against totals computed from the input
    # DataFrame, independently of Kafka and of the stream.
    start = time.perf_counter()
    expected = {r.user: (r.events, r.amount) for r in events.selectExpr(
        "key as user", f"{_amount(events)} as amount").groupBy("user").agg(
        {"*": "count", "amount": "sum"}).selectExpr("user", "`count(1)` as events", "`sum(amount)` as amount"
                                                    ).collect()}
    out = (spark.read.format("kafkajet").options(**kafka)
           .option("subscribe", totals_topic).load())
    written = out.count()
    totals_read = out.selectExpr("cast(key as string) as user", "offset", "value.events as events",
                                 "value.amount as amount")
    latest = totals_read.groupBy("user").agg({"offset": "max"}).withColumnRenamed("max(offset)", "offset") \
        .join(totals_read, ["user", "offset"]).selectExpr("user", "events", "amount").collect()
    actual = {r.user: (r.events, r.amount) for r in latest}
    verify_s = time.perf_counter() - start
    interruption.check()
    # The rate counts the events verified: each one is re-aggregated from the input to check the totals.
    print(f"verify: {sent:,} events re-aggregated and {written:,} totals read back from {totals_topic} in "
          f"{verify_s:.2f} s = {sent / verify_s:,.0f} rows/s", flush=True)
    wrong = [u for u in expected if actual.get(u) != expected[u]] + [u for u in actual if u not in expected]
    ok = not wrong and sum(e for e, _ in actual.values()) == sent
    print(f"verdict: {'OK' if ok else 'FAILED'} - {len(expected):,} users, per-user event counts and sums "
          f"{'match' if ok else 'DIFFER'} for {sent:,} events"
          + (f" (first differences: {sorted(wrong)[:3]})" if wrong else ""))
    return 0 if ok else 1
