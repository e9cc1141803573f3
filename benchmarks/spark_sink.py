"""A DataFrame into Kafka from PySpark: the kafkajet sink against what users write today without it.

    .venv/bin/python benchmarks/spark_sink.py              # 2,000,000 rows, medians of 3, interleaved
    .venv/bin/python benchmarks/spark_sink.py --rows 200000 --reps 1

local[2], 100-byte values, 6 partitions, acks=all, linger.ms=5, against one broker (--broker apache, the
default: one Apache Kafka node; --broker tansu: the embedded broker). The jobs, on the same DataFrame and session:
  kafkajet sink              df.write.format("kafkajet")...save()
  spark-kafka                df.write.format("kafka")...save(): Spark's own connector (jvm/spark-connector/, given
                             to the session as spark.jars), with kafka.acks=all and kafka.linger.ms=5 (its
                             kafka-clients 3.9 lingers 0 ms by default)
  kafkajet sink exactlyOnce  the same with .option("exactlyOnce", "true"): a transaction per task, committed by
                             the driver (rows are counted as the topic's high watermarks, markers included)
  foreachPartition kafka-python     the usual hand-written job: one KafkaProducer per partition
  foreachPartition confluent-kafka  the same with confluent_kafka.Producer
Each job writes to a fresh topic; the rows the topic then holds (its high watermarks) must equal the rows
written, or the run reports FAILED instead of a speed. The DataFrame is cached and counted first, so the timing
is the write alone. The table is printed under the broker, the machine (cores, load average before and after),
the date and the build.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from _common import add_broker_option, broker_name, context_line, open_broker, rate_table
from _jvm import spark_connector_jars

PARTITIONS = 6


def _kafka_python_partition(bootstrap: str, topic: str) -> Callable[[Iterator[Any]], None]:
    def write(rows: Iterator[Any]) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        for row in rows:
            p.send(topic, value=row.value)
        p.flush(timeout=300)
        p.close(timeout=60)

    return write


def _confluent_partition(bootstrap: str, topic: str) -> Callable[[Iterator[Any]], None]:
    def write(rows: Iterator[Any]) -> None:
        from confluent_kafka import Producer

        errors: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        for row in rows:
            while True:
                try:
                    p.produce(topic, value=row.value, on_delivery=delivered)
                    break
                except BufferError:  # librdkafka's queue is full: serve callbacks, then try again
                    p.poll(0.05)
            p.poll(0)
        left = p.flush(300)
        if left or errors:
            raise RuntimeError(f"confluent-kafka: {left} undelivered, {len(errors)} failed: {errors[:3]}")

    return write


def rows_in(bootstrap: str, topic: str) -> int:
    """Data records in the topic: transaction markers take offsets too, so batches are counted, not offsets."""
    from kafkajet.fetch import FetchClient

    with FetchClient(bootstrap) as fc:
        total = 0
        for p in fc.partitions(topic):
            start, end = fc.offsets(topic, p)
            for batches in fc.fetch_batches(topic, p, start, end, decode=False):
                total += sum(b.records_count for b in batches)
        return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", default="kafkajet sink,kafkajet sink exactlyOnce,spark-kafka,"
                    "foreachPartition kafka-python,foreachPartition confluent-kafka")
    add_broker_option(ap)
    args = ap.parse_args()
    load_before = os.getloadavg()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafkajet.admin import Admin
    from kafkajet.spark import register

    with open_broker(args.broker) as broker:
        bootstrap = broker.bootstrap_servers
        spark = (SparkSession.builder.master("local[2]").appName("kafkajet-spark-sink-bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.jars", ",".join(spark_connector_jars()))  # format("kafka"): Spark's own connector
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark, check_workers=False)  # Spark may have found it already (pyspark_kafkajet)
        df = spark.range(args.rows, numPartitions=4).selectExpr(
            "cast(concat(lpad(cast(id as string), 12, '0'), repeat('x', 88)) as binary) as value").cache()
        assert df.count() == args.rows

        def sink(topic: str, exactly_once: bool = False) -> None:
            (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("exactlyOnce", str(exactly_once).lower()).save())

        def spark_kafka(frame: Any, topic: str) -> None:
            (frame.write.format("kafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("kafka.acks", "all").option("kafka.linger.ms", "5").save())

        jobs: dict[str, Callable[[str], None]] = {
            "kafkajet sink": sink,
            "kafkajet sink exactlyOnce": lambda t: sink(t, exactly_once=True),
            "spark-kafka": lambda t: spark_kafka(df, t),
            "foreachPartition kafka-python": lambda t: df.foreachPartition(_kafka_python_partition(bootstrap, t)),
            "foreachPartition confluent-kafka": lambda t: df.foreachPartition(_confluent_partition(bootstrap, t)),
        }
        chosen = [j for j in args.jobs.split(",") if j]
        rates: dict[str, list[float | None]] = {j: [] for j in chosen}
        # Warm up every job once on a small slice: the first Python task of a Spark session forks its worker
        # and imports pyarrow and the client (seconds), which a long-running pipeline pays once, not per write.
        small = df.limit(10_000)
        warm = {"kafkajet sink": lambda t: small.write.format("kafkajet").mode("append")
                .option("kafka.bootstrap.servers", bootstrap).option("topic", t).save(),
                "kafkajet sink exactlyOnce": lambda t: small.write.format("kafkajet").mode("append")
                .option("kafka.bootstrap.servers", bootstrap).option("topic", t).option("exactlyOnce", "true").save(),
                "spark-kafka": lambda t: spark_kafka(small, t),
                "foreachPartition kafka-python": lambda t: small.foreachPartition(_kafka_python_partition(bootstrap, t)),
                "foreachPartition confluent-kafka": lambda t: small.foreachPartition(_confluent_partition(bootstrap, t))}
        for job in chosen:
            topic = f"spark-warmup-{uuid.uuid4().hex[:8]}"
            with Admin(bootstrap) as admin:
                admin.create_topics([topic], num_partitions=PARTITIONS)
            start = time.perf_counter()
            warm[job](topic)
            print(f"  warm-up {job:34s} {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        for rep in range(args.reps):
            for job in chosen:  # interleaved, so drift in the machine hits every job alike
                topic = f"spark-bench-{uuid.uuid4().hex[:8]}"
                with Admin(bootstrap) as admin:
                    admin.create_topics([topic], num_partitions=PARTITIONS)
                start = time.perf_counter()
                jobs[job](topic)
                wall = time.perf_counter() - start
                got = rows_in(bootstrap, topic)
                rate = args.rows / wall if got == args.rows else None
                rates[job].append(rate)
                detail = f"{rate:,.0f} rows/s ({wall:.1f} s)" if rate else f"FAILED: topic holds {got:,} rows"
                print(f"  rep {rep + 1}/{args.reps} {job:34s} {detail}", file=sys.stderr, flush=True)
        spark.stop()

    def ratio(job: str, base: float, m: float) -> str:
        if job == "kafkajet sink exactlyOnce":
            return f"(exactlyOnce / at-least-once: {m / base:.2f}x)"
        return f"{base / m:.2f}x"

    title = f"{args.rows:,} rows of 100 B, local[2], median of {args.reps}"
    context = context_line(broker_name(args.broker), load_before)
    sys.exit(0 if rate_table(title, {job: rates[job] for job in chosen}, "kafkajet sink", ratio, context=context)
             else 1)

if __name__ == "__main__":
    main()
