"""Kafka into a DataFrame with PySpark: the kafkajet source against what users write today without it.

    .venv/bin/python benchmarks/spark_source.py              # 2,000,000 rows, medians of 3, interleaved
    .venv/bin/python benchmarks/spark_source.py --rows 500000 --reps 1

local[2], 100-byte values in 4 partitions of one broker (--broker apache, the default: one Apache Kafka node;
--broker tansu: the embedded broker), loaded once by the kafkajet producer. The jobs read every record and sum the
value lengths (so every value crosses into Spark), the same query on the same topic and session:
  kafkajet source             spark.read.format("kafkajet")...load()
  spark-kafka                 spark.read.format("kafka")...load(): Spark's own connector (spark-sql-kafka-0-10,
                              the version jvm/spark-connector/pom.xml names, given to the session as spark.jars)
  mapInArrow confluent-kafka  the hand-written job: one task per Kafka partition, a confluent_kafka.Consumer
                              assigned to its offset range, values handed to Spark as Arrow batches
On --broker tansu the spark-kafka job is given the loaded end offsets as endingOffsets: Spark's connector
resolves "latest" with its Admin client's ListOffsets, which Tansu answered with an end offset of 1 for partitions
holding 10 and 2,500 records, so the default read comes out short. Apache Kafka needs no such help.
Each job must see exactly the rows loaded and the same byte sum, or the run reports FAILED instead of a speed.
The table is printed under the broker, the machine (cores, load average before and after), the date and the build.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from _common import add_broker_option, broker_name, context_line, open_broker, rate_table, timed_read_jobs
from _jvm import spark_connector_jars

PARTITIONS = 4
VALUE = 100


def _confluent_ranges(bootstrap: str, topic: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def read(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import Consumer, TopicPartition

        for rb in batches:
            for partition, start, end in zip(*(rb.column(i).to_pylist() for i in range(3)), strict=True):
                c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                              "fetch.max.bytes": 8 << 20})
                c.assign([TopicPartition(topic, partition, start)])
                offset = start
                while offset < end:
                    msgs = c.consume(min(10_000, end - offset), timeout=10)  # returns once that many are in
                    if not msgs:
                        raise RuntimeError(f"confluent-kafka: nothing after offset {offset} of {topic}-{partition}")
                    values = []
                    for m in msgs:
                        if m.error() is not None:
                            raise RuntimeError(str(m.error()))
                        if m.offset() < end:
                            values.append(m.value())
                        offset = m.offset() + 1
                    yield pa.RecordBatch.from_arrays([pa.array(values, type=pa.binary())], names=["value"])
                c.close()

    return read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=3)
    add_broker_option(ap)
    args = ap.parse_args()
    load_before = os.getloadavg()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

    from kafkajet import Producer
    from kafkajet.admin import Admin
    from kafkajet.fetch import FetchClient
    from kafkajet.spark import register

    with open_broker(args.broker) as broker:
        bootstrap = broker.bootstrap_servers
        topic = "spark-source-bench"
        with Admin(bootstrap) as admin:
            admin.create_topics([topic], num_partitions=PARTITIONS)
        start = time.perf_counter()
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
            values = [b"%012d" % i + b"x" * (VALUE - 12) for i in range(args.rows)]
            p.send_batch(topic, values).result(timeout=600)
        print(f"  loaded {args.rows:,} rows in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
        expected_bytes = args.rows * VALUE
        with FetchClient(bootstrap) as fc:
            ranges = [(p, *fc.offsets(topic, p)) for p in fc.partitions(topic)]

        spark = (SparkSession.builder.master("local[2]").appName("kafkajet-spark-source-bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.jars", ",".join(spark_connector_jars()))  # format("kafka"): Spark's own connector
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark, check_workers=False)  # Spark may have found it already (pyspark_kafkajet)

        def kafkajet_source() -> tuple[int, int]:
            df = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).load())
            row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0]
            return row.n, row.bytes

        def spark_kafka() -> tuple[int, int]:
            reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            if args.broker == "tansu":  # see the docstring: Tansu's ListOffsets misleads the connector's Admin
                reader = reader.option("endingOffsets", json.dumps({topic: {str(p): end for p, _, end in ranges}}))
            df = (reader.option("subscribe", topic).load())
            row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0]
            return row.n, row.bytes

        def confluent_map_in_arrow() -> tuple[int, int]:
            plan = spark.createDataFrame(ranges, "partition int, start long, end long").repartition(PARTITIONS)
            df = plan.mapInArrow(_confluent_ranges(bootstrap, topic), "value binary")
            row = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0]
            return row.n, row.bytes

        jobs: dict[str, Callable[[], tuple[int, int]]] = {
            "kafkajet source": kafkajet_source, "spark-kafka": spark_kafka,
            "mapInArrow confluent-kafka": confluent_map_in_arrow}
        rates = timed_read_jobs(jobs, args.reps, args.rows, expected_bytes, lambda total: f"{total} B", 28)
        spark.stop()

    title = f"{args.rows:,} rows of {VALUE} B in {PARTITIONS} partitions, local[2], median of {args.reps}"
    context = context_line(broker_name(args.broker), load_before)
    sys.exit(0 if rate_table(title, rates, "kafkajet source", context=context) else 1)

if __name__ == "__main__":
    main()
