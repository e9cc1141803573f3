"""The main job, the pipeline users build: events loaded into a topic with the kafkajet sink; a Structured
Streaming query reads them with the kafkajet source, keeps per-user event counts and amount sums, and writes
them to a second topic with the kafkajet sink; the job then checks the last total per user against totals
computed from the events themselves, and prints rows/s for load, read, stream and verify, and the verdict.

`python -m kafkajet demo` (what `make demo` runs). With --bootstrap-servers it uses your cluster; without,
it starts the embedded broker. --input sends a CSV, JSON lines or Parquet file's rows instead of synthetic
events (as JSON values, keyed by the first column).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
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

    import kafkajet.spark
    from kafkajet.admin import Admin
    from kafkajet.testing import EmbeddedBroker

    with ExitStack() as stack:
        bootstrap = args.bootstrap_servers
        if not bootstrap:
            broker = stack.enter_context(EmbeddedBroker())
            bootstrap = broker.bootstrap_servers
            print(f"embedded broker on {bootstrap}", flush=True)
        topic = args.topic or f"demo-events-{uuid.uuid4().hex[:8]}"
        totals_topic = f"{topic}-per-user"
        with Admin(bootstrap) as admin:
            admin.create_topics([topic, totals_topic], num_partitions=PARTITIONS, if_not_exists=True)
        spark = (SparkSession.builder.master("local[2]").appName("kafkajet-demo")
                 .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        kafkajet.spark.register(spark)

        # 1. Load: events into the input topic through the kafkajet sink (a batch write).
        events = _events(spark, args).cache()
        sent = events.count()  # materialise first, so the write is timed alone
        start = time.perf_counter()
        (events.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("kafka.linger.ms", "20").option("kafka.compression.type", "lz4").save())
        load_s = time.perf_counter() - start
        print(f"load:   {sent:,} events into {topic} in {load_s:.2f} s = {sent / load_s:,.0f} rows/s", flush=True)

        # 2. Read: the events back with the kafkajet source as a batch query, every value into Spark; twice,
        # because the session's first read also pays for starting the source's Python workers and Spark's code
        # paths for it, and a pipeline that keeps running sees the second figure.
        for attempt in ("first read of the session", "again, warm"):
            start = time.perf_counter()
            back = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).load()
                    .selectExpr("count(*) as n", "sum(length(value)) as bytes").collect()[0])
            read_s = time.perf_counter() - start
            print(f"read:   {back.n:,} events ({back.bytes / 1e6:.1f} MB of values) back from {topic} in {read_s:.2f} s "
                  f"= {back.n / read_s:,.0f} rows/s ({attempt})", flush=True)

        # 3. Stream: a Structured Streaming query reads the topic with the kafkajet source, keeps per-user
        # totals, and writes them to a second topic with the kafkajet sink, a few micro-batches in all.
        per_trigger = max(1, sent // 4)
        totals = (spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", str(per_trigger)).load()
                  .selectExpr("cast(key as string) as user", "cast(value as string) as json")
                  .selectExpr("user", "get_json_object(json, '$.action') as action",
                              "cast(get_json_object(json, '$.amount') as long) as amount")
                  .groupBy("user")
                  .agg({"*": "count", "amount": "sum"})
                  .selectExpr("user as key", "to_json(named_struct('events', `count(1)`, "
                              "'amount', `sum(amount)`)) as value"))
        checkpoint = stack.enter_context(tempfile.TemporaryDirectory(prefix="kafkajet-demo-"))
        start = time.perf_counter()
        query = (totals.writeStream.format("kafkajet").outputMode("complete")
                 .option("kafka.bootstrap.servers", bootstrap).option("topic", totals_topic)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        seen = 0
        while query.isActive:
            query.awaitTermination(1)
            for progress in query.recentProgress[seen:]:
                print(f"stream: micro-batch {progress['batchId']} read {progress['numInputRows']:,} events",
                      flush=True)
            seen = len(query.recentProgress)
        if query.exception() is not None:
            print(f"verdict: FAILED - the streaming query failed: {query.exception()}")
            return 1
        stream_s = time.perf_counter() - start
        print(f"stream: {sent:,} events in {stream_s:.2f} s = {sent / stream_s:,.0f} rows/s "
              f"({len(query.recentProgress)} micro-batches, per-user totals into {totals_topic})", flush=True)

        # 4. Verify: the last total per user in the output topic against totals computed from the input
        # DataFrame, independently of Kafka and of the stream.
        start = time.perf_counter()
        expected = {r.user: (r.events, r.amount) for r in events.selectExpr(
            "key as user", "cast(get_json_object(value, '$.amount') as long) as amount").groupBy("user").agg(
            {"*": "count", "amount": "sum"}).selectExpr("user", "`count(1)` as events", "`sum(amount)` as amount"
                                                        ).collect()}
        out = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", totals_topic).load())
        written = out.count()
        latest = out.selectExpr("cast(key as string) as user", "offset", "cast(value as string) as json") \
            .groupBy("user").agg({"offset": "max"}).withColumnRenamed("max(offset)", "offset") \
            .join(out.selectExpr("cast(key as string) as user", "offset", "cast(value as string) as json"),
                  ["user", "offset"]) \
            .selectExpr("user", "cast(get_json_object(json, '$.events') as long) as events",
                        "cast(get_json_object(json, '$.amount') as long) as amount").collect()
        actual = {r.user: (r.events, r.amount) for r in latest}
        verify_s = time.perf_counter() - start
        # The rate counts the events verified: each one is re-aggregated from the input to check the totals.
        print(f"verify: {sent:,} events re-aggregated and {written:,} totals read back from {totals_topic} in "
              f"{verify_s:.2f} s = {sent / verify_s:,.0f} rows/s", flush=True)
        wrong = [u for u in expected if actual.get(u) != expected[u]] + [u for u in actual if u not in expected]
        ok = not wrong and sum(e for e, _ in actual.values()) == sent
        print(f"verdict: {'OK' if ok else 'FAILED'} - {len(expected):,} users, per-user event counts and sums "
              f"{'match' if ok else 'DIFFER'} for {sent:,} events"
              + (f" (first differences: {sorted(wrong)[:3]})" if wrong else ""))
        return 0 if ok else 1
