"""Registered Avro: the kafkajet source decoding it against a hand-written PySpark job. (The producers' Avro
serializers are compared in avro_produce.py, whose records and schema these are.)

    .venv/bin/python benchmarks/spark_avro.py               # 1,000,000 rows, medians of 3, interleaved
    .venv/bin/python benchmarks/spark_avro.py --rows 200000 --reps 1

A flat record of 10 fields (longs, ints, strings, a timestamp-millis, a nullable double, a boolean), one broker
(--broker apache, the default: one Apache Kafka node; --broker tansu: the embedded broker), kafkajet's registry in
this process, local[2]. The Spark jobs decode every record and sum a field (so every value crosses into Spark
decoded), the same query on the same topic and session:
  kafkajet source             spark.read.format("kafkajet").option("valueFormat", "avro")...load()
  spark-kafka from_avro       spark.read.format("kafka")...load() (Spark's own connector, jvm/spark-connector/)
                              and spark-avro's from_avro(substring(value, 6), schema): the registry's 5-byte
                              frame (magic byte, schema id) sliced off, the writer's schema given as JSON, as
                              Spark users do without a registry-aware decoder
  mapInArrow confluent-kafka  one task per Kafka partition: a confluent_kafka.Consumer on its offset range,
                              confluent's AvroDeserializer per record, the dicts handed to Spark as Arrow
On --broker tansu the spark-kafka job is given the loaded end offsets as endingOffsets: Spark's connector
resolves "latest" with its Admin client's ListOffsets, which Tansu answered with an end offset of 1 for partitions
holding 10 and 2,500 records, so the default read comes out short. Apache Kafka needs no such help.
Each job must see exactly the rows loaded and the same sum, or the run reports FAILED instead of a speed.
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
from avro_produce import SCHEMA, records

PARTITIONS = 4
SPARK_COLUMNS = ("id long, user string, action string, qty int, amount long, price double, at timestamp, "
                 "discount double, country string, flag boolean")


def _confluent_ranges(bootstrap: str, registry_url: str, topic: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def read(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import Consumer, TopicPartition
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
        ctx = SerializationContext(topic, MessageField.VALUE)
        arrow = pa.schema([pa.field("id", pa.int64()), pa.field("user", pa.string()),
                           pa.field("action", pa.string()), pa.field("qty", pa.int32()),
                           pa.field("amount", pa.int64()), pa.field("price", pa.float64()),
                           pa.field("at", pa.timestamp("us", tz="UTC")), pa.field("discount", pa.float64()),
                           pa.field("country", pa.string()), pa.field("flag", pa.bool_())])
        for rb in batches:
            for partition, start, end in zip(*(rb.column(i).to_pylist() for i in range(3)), strict=True):
                c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                              "fetch.max.bytes": 8 << 20})
                c.assign([TopicPartition(topic, partition, start)])
                offset = start
                while offset < end:
                    msgs = c.consume(min(10_000, end - offset), timeout=10)
                    if not msgs:
                        raise RuntimeError(f"confluent-kafka: nothing after offset {offset} of {topic}-{partition}")
                    rows = []
                    for m in msgs:
                        if m.error() is not None:
                            raise RuntimeError(str(m.error()))
                        if m.offset() < end:
                            rows.append(deserialize(m.value(), ctx))
                        offset = m.offset() + 1
                    yield pa.RecordBatch.from_pylist(rows, schema=arrow)
                c.close()

    return read


def produce_kafkajet(bootstrap: str, registry_url: str, topic: str, rows: list[dict[str, Any]]) -> None:
    from kafkajet import Producer
    from kafkajet.schema_registry import AvroSerializer, SchemaRegistryClient

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA))
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, value_serializer=serializer) as p:
        for i, r in enumerate(rows):
            p.send(topic, r, partition=i % PARTITIONS)
        p.flush(timeout=600)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    add_broker_option(ap)
    args = ap.parse_args()
    load_before = os.getloadavg()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
    from pyspark.sql.avro.functions import from_avro

    from kafkajet.admin import Admin
    from kafkajet.fetch import FetchClient
    from kafkajet.spark import register
    from kafkajet.testing import SchemaRegistry

    rows = records(args.rows)
    expected_sum = sum(r["amount"] for r in rows)
    with open_broker(args.broker) as broker, SchemaRegistry() as registry:
        bootstrap, url = broker.bootstrap_servers, registry.url
        topic = "spark-avro-bench"
        with Admin(bootstrap) as admin:
            admin.create_topics([topic], num_partitions=PARTITIONS)
        start = time.perf_counter()
        produce_kafkajet(bootstrap, url, topic, rows)
        print(f"  loaded {args.rows:,} rows in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)

        with FetchClient(bootstrap) as fc:
            ranges = [(p, *fc.offsets(topic, p)) for p in fc.partitions(topic)]
        spark = (SparkSession.builder.master("local[2]").appName("kafkajet-spark-avro-bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.jars", ",".join(spark_connector_jars()))  # format("kafka"): Spark's own connector
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark, check_workers=False)

        def kafkajet_source() -> tuple[int, int]:
            df = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("valueFormat", "avro").option("schema.registry.url", url)
                  .option("minPartitions", str(PARTITIONS)).load())
            row = df.agg(F.count("*").alias("n"), F.sum("value.amount").alias("total")).collect()[0]
            return row.n, row.total

        def spark_kafka_from_avro() -> tuple[int, int]:
            reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            if args.broker == "tansu":  # see the docstring: Tansu's ListOffsets misleads the connector's Admin
                reader = reader.option("endingOffsets", json.dumps({topic: {str(p): end for p, _, end in ranges}}))
            df = (reader.option("subscribe", topic).option("minPartitions", str(PARTITIONS)).load()
                  .select(from_avro(F.expr("substring(value, 6)"), json.dumps(SCHEMA)).alias("value")))
            row = df.agg(F.count("*").alias("n"), F.sum("value.amount").alias("total")).collect()[0]
            return row.n, row.total

        def confluent_map_in_arrow() -> tuple[int, int]:
            plan = spark.createDataFrame(ranges, "partition int, start long, end long").repartition(PARTITIONS)
            df = plan.mapInArrow(_confluent_ranges(bootstrap, url, topic), SPARK_COLUMNS)
            row = df.agg(F.count("*").alias("n"), F.sum("amount").alias("total")).collect()[0]
            return row.n, row.total

        jobs: dict[str, Callable[[], tuple[int, int]]] = {
            "kafkajet source (valueFormat=avro)": kafkajet_source,
            "spark-kafka from_avro": spark_kafka_from_avro,
            "mapInArrow confluent-kafka AvroDeserializer": confluent_map_in_arrow}
        rates = timed_read_jobs(jobs, args.reps, args.rows, expected_sum, lambda total: f"sum {total}", 44)
        spark.stop()

    ok = rate_table(f"Spark: {args.rows:,} flat Avro records (10 fields) in {PARTITIONS} partitions, local[2], "
                    f"median of {args.reps}", rates, "kafkajet source (valueFormat=avro)",
                    lambda job, base, m: f"kafkajet {base / m:.2f}x",
                    context=context_line(broker_name(args.broker), load_before))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
