"""The main job: a PySpark pipeline that writes events into Kafka through the kafkajet sink, reads the topic
back through the kafkajet source, and checks that every event arrived exactly once.

`python -m kafkajet demo` (what `make demo` runs). With --bootstrap-servers it uses your cluster; without,
it starts the embedded broker. --input sends a CSV, JSON lines or Parquet file's rows instead of synthetic
events (as JSON values, keyed by the first column).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from contextlib import ExitStack

PARTITIONS = 6


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
        return df.selectExpr(f"cast(`{first}` as string) as key", "to_json(struct(*)) as value")
    return spark.range(args.records, numPartitions=4).selectExpr(
        "concat('user-', lpad(cast(id % 10000 as string), 5, '0')) as key",
        "to_json(named_struct('event_id', id, 'user', concat('user-', lpad(cast(id % 10000 as string), 5, '0')),"
        " 'action', element_at(array('view', 'click', 'buy'), cast(id % 3 as int) + 1),"
        " 'amount', id % 997)) as value",
    )


def run_demo(args: argparse.Namespace) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors must import kafkajet from this venv
    from pyspark.sql import SparkSession

    from kafkajet.admin import Admin
    from kafkajet.spark import KafkaDataSource
    from kafkajet.testing import EmbeddedBroker

    with ExitStack() as stack:
        bootstrap = args.bootstrap_servers
        if not bootstrap:
            broker = stack.enter_context(EmbeddedBroker())
            bootstrap = broker.bootstrap_servers
            print(f"embedded broker on {bootstrap}")
        topic = args.topic or f"demo-events-{uuid.uuid4().hex[:8]}"
        with Admin(bootstrap) as admin:
            admin.create_topics([topic], num_partitions=PARTITIONS, if_not_exists=True)
        spark = (SparkSession.builder.master("local[2]").appName("kafkajet-demo")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(KafkaDataSource)

        events = _events(spark, args).selectExpr(
            "key", "value", "array(named_struct('key', 'source', 'value', cast('kafkajet-demo' as binary))) as headers"
        ).cache()
        sent = events.count()  # materialise first, so the write is timed alone
        # Per key: how many events and an order-free checksum (xor of hashes; the count catches duplicates).
        expected = events.selectExpr("key", "xxhash64(key, value) as h").groupBy("key").agg(
            {"h": "bit_xor", "*": "count"}).collect()
        start = time.perf_counter()
        (events.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("kafka.linger.ms", "20").option("kafka.compression.type", "lz4").save())
        write_s = time.perf_counter() - start
        print(f"write: {sent:,} events in {write_s:.2f} s = {sent / write_s:,.0f} rows/s")

        start = time.perf_counter()
        back = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).load()
                .selectExpr("cast(key as string) as key", "cast(value as string) as value", "headers")
                .cache())
        got = back.count()
        read_s = time.perf_counter() - start
        print(f"read:  {got:,} events in {read_s:.2f} s = {got / read_s:,.0f} rows/s")
        actual = back.selectExpr("key", "xxhash64(key, value) as h").groupBy("key").agg(
            {"h": "bit_xor", "*": "count"}).collect()
        headers_ok = back.where("headers[0].key = 'source'").count() == got
        ok = got == sent and sorted(map(tuple, actual)) == sorted(map(tuple, expected)) and headers_ok
        print(f"verdict: {'OK' if ok else 'FAILED'} - {got:,} of {sent:,} events arrived exactly once "
              f"(per-key counts and checksums {'match' if ok else 'DIFFER'}, {len(expected):,} keys)")
        return 0 if ok else 1
