"""The PySpark source and sink against the embedded broker, checked with kafka-python."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest
from kafka import KafkaProducer

from kafkajet.errors import ConfigError
from kafkajet.fetch import FetchClient
from kafkajet.producer.partitioner import partition_for_key
from kafkajet.testing import EmbeddedBroker
from kafkajet.testing.apache_kafka import C1_ONLY
from tests.helpers.ports import refusing_port
from tests.helpers.readback import read_topic
from tests.helpers.waiting import wait_for
from tests.spark.conftest import make_topic  # noqa: E402


def test_every_column_variant_written_and_read_back_by_kafka_python(
    spark: Any, broker: EmbeddedBroker, topic_name: str
) -> None:
    a, b = make_topic(broker, topic_name + "-a"), make_topic(broker, topic_name + "-b")
    n = 200_000
    df = spark.range(n).selectExpr(
        f"if(id % 2 = 0, '{a}', '{b}') as topic",
        "if(id % 3 = 0, null, concat('k', cast(id % 1000 as string))) as key",
        "cast(concat('value-', cast(id as string)) as binary) as value",
        "if(id % 5 = 1, cast(id % 4 as int), null) as partition",
        "if(id % 7 = 0, array(named_struct('key', 'h', 'value', cast(cast(id as string) as binary))),"
        " cast(array() as array<struct<key:string,value:binary>>)) as headers",
    )
    (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
       .option("kafka.linger.ms", "10").save())
    expected: dict[bytes, tuple[str, bytes | None, int | None, tuple[tuple[str, bytes], ...]]] = {}
    for i in range(n):
        key = None if i % 3 == 0 else f"k{i % 1000}".encode()
        headers = (("h", str(i).encode()),) if i % 7 == 0 else ()
        expected[f"value-{i}".encode()] = (a if i % 2 == 0 else b, key, i % 4 if i % 5 == 1 else None, headers)
    got = {}
    for topic in (a, b):
        for r in read_topic(broker.bootstrap_servers, topic, n // 2, timeout_s=180):
            assert r.value not in got, "duplicate"
            got[r.value] = (topic, r.key, r.partition, r.headers)
    assert len(got) == n
    for value, (topic, key, partition, headers) in expected.items():
        g_topic, g_key, g_partition, g_headers = got[value]
        assert (g_topic, g_key, g_headers) == (topic, key, headers)
        if partition is not None:
            assert g_partition == partition
        elif key is not None:
            assert g_partition == partition_for_key(key, 4)


def test_reader_returns_exactly_what_kafka_python_produced(
    spark: Any, broker: EmbeddedBroker, topic_name: str
) -> None:
    make_topic(broker, topic_name, 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    sent = []
    for i in range(3000):
        md = producer.send(topic_name, value=f"v{i}".encode(), key=None if i % 2 else f"k{i}".encode(),
                           headers=[("n", str(i).encode())], partition=i % 3, timestamp_ms=1_700_000_000_000 + i
                           ).get(timeout=30)
        sent.append((md.partition, md.offset, None if i % 2 else f"k{i}".encode(), f"v{i}".encode(),
                     [("n", str(i).encode())], 1_700_000_000_000 + i))
    producer.close()
    rows = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic_name).option("startingOffsets", "earliest").option("includeHeaders", "true")
            .option("endingOffsets", "latest").load().collect())
    got = sorted((r.partition, r.offset, r.key and bytes(r.key), bytes(r.value),
                  [(h.key, bytes(h.value)) for h in r.headers], int(r.timestamp.timestamp() * 1000))
                 for r in rows)
    assert got == sorted(sent)
    assert {r.topic for r in rows} == {topic_name}
    # One assigned partition, between two JSON offsets.
    sliced = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("assign", f'{{"{topic_name}": [0]}}')
              .option("startingOffsets", f'{{"{topic_name}": {{"0": 10}}}}')
              .option("endingOffsets", f'{{"{topic_name}": {{"0": 20}}}}').load().collect())
    assert sorted((r.partition, r.offset) for r in sliced) == [(0, o) for o in range(10, 20)]
    assert "headers" not in sliced[0].asDict()  # Spark's default: no headers column


def test_streaming_from_the_rate_source_loses_nothing(
    spark: Any, broker: EmbeddedBroker, topic_name: str, tmp_path: Any
) -> None:
    make_topic(broker, topic_name, 2)
    stream = (spark.readStream.format("rate").option("rowsPerSecond", 2000).load()
              .selectExpr("cast(cast(value as string) as binary) as value"))
    query = (stream.writeStream.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("topic", topic_name).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while len([p for p in query.recentProgress if p["numInputRows"] > 0]) < 3:
            assert time.monotonic() < deadline, "fewer than 3 non-empty micro-batches in 120 s"
            assert query.exception() is None, query.exception()
            query.awaitTermination(0.5)
    finally:
        query.stop()
    written = sum(p["numInputRows"] for p in query.recentProgress)
    records = read_topic(broker.bootstrap_servers, topic_name, written, timeout_s=60)
    values = {int(r.value) for r in records}  # type: ignore[arg-type]
    # The rate source numbers its rows 0, 1, 2... across micro-batches, and recentProgress holds the committed
    # ones: all of their rows must be there. The micro-batch that query.stop() aborted may have written part of
    # its rows (at-least-once, as Spark's Kafka sink: a restart writes it again), so rows past them may have gaps.
    lost = set(range(written)) - values
    assert not lost, f"{len(lost)} rows of committed micro-batches were lost, the first {min(lost)}"


def test_a_failing_task_fails_the_job_with_the_kafka_cause(spark: Any, broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name, 2)
    df = spark.range(100).selectExpr("cast(cast(id as string) as binary) as value", "cast(7 as int) as partition")
    with pytest.raises(Exception, match="Invalid partition 7 for record 0 of topic"):
        (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
           .option("topic", topic_name).save())


def test_a_broker_that_dies_mid_write_fails_the_job_naming_the_connection(spark: Any, topic_name: str) -> None:
    # The user's trip from the issue: the broker killed during a large write failed after max.block.ms with
    # "raise buffer.memory" advice only. The error must say the records cannot be delivered and why.
    with EmbeddedBroker() as own:
        make_topic(own, topic_name, 2)
        df = spark.range(3_000_000, numPartitions=1).selectExpr("cast(repeat('x', 100) as binary) as value")
        stopped = threading.Event()

        def kill_once_rows_arrive() -> None:  # the write runs on this thread (Spark wants the caller's)
            with FetchClient(own.bootstrap_servers) as fc:
                wait_for(lambda: fc.offsets(topic_name, 0)[1] + fc.offsets(topic_name, 1)[1] > 10_000, 120,
                         "the write to start")
            own.stop()
            stopped.set()

        killer = threading.Thread(target=kill_once_rows_arrive)
        killer.start()
        try:
            with pytest.raises(Exception) as failure:
                (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", own.bootstrap_servers)
                 .option("topic", topic_name).option("kafka.buffer.memory", str(1 << 20))
                 .option("kafka.max.block.ms", "3000").save())
        finally:
            killer.join(130)
        assert stopped.is_set(), "the broker was never stopped: the test tested nothing"
    # One task, whose producer was sending when the broker went: its records cannot be delivered, and the
    # error says so with the connection's failure, instead of advising a bigger buffer.
    text = str(failure.value)
    assert "cannot be delivered" in text and "connection to node" in text, text[-2000:]
    assert "raise buffer.memory" not in text, text[-2000:]


@pytest.mark.parametrize("options,columns,match", [
    ({}, "cast('v' as binary) as value", "kafka.bootstrap.servers is required"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1"}, "cast('v' as binary) as value", "no topic"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}, "1 as value", "column 'value' is int"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "kafka.value.serializer": "x"},
     "cast('v' as binary) as value", "kafka.value.serializer is not supported"),
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "kafka.linger.msec": "5"},
     "cast('v' as binary) as value", "did you mean 'kafka.linger.ms'"),
    # A misspelt exactlyOnce wrote at-least-once without a word; the name comes back as documented, not as
    # Spark lower-cased it.
    ({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "exactlyOnse": "true"},
     "cast('v' as binary) as value", "unknown option 'exactlyonse' for the kafkajet sink; did you mean 'exactlyOnce'"),
])
def test_planning_errors_are_clear(spark: Any, options: dict[str, str], columns: str, match: str) -> None:
    writer = spark.range(1).selectExpr(columns).write.format("kafkajet").mode("append")
    for k, v in options.items():
        writer = writer.option(k, v)
    with pytest.raises(Exception, match=match):
        writer.save()


def test_overwrite_mode_and_unreachable_broker_are_refused(spark: Any, topic_name: str) -> None:
    df = spark.range(1).selectExpr("cast('v' as binary) as value")
    with pytest.raises(Exception, match="overwrite is not supported"):
        df.write.format("kafkajet").mode("overwrite").option("kafka.bootstrap.servers", "127.0.0.1:1") \
            .option("topic", "t").save()
    with pytest.raises(Exception, match="127.0.0.1:1"):
        (spark.read.format("kafkajet").option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("subscribe", topic_name).option("kafkajet.timeout.ms", "2000")
         # how long a wrong address is waited for (60 s by default): the subject is the message, not the wait
         .option("kafka.default.api.timeout.ms", "3000").load().collect())


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
def test_the_sink_names_a_refusing_address_at_once_and_once(spark: Any, streaming: bool, tmp_path: Any) -> None:
    with refusing_port() as port:
        start = time.monotonic()
        with pytest.raises(Exception) as raised:
            if streaming:
                query = (spark.readStream.format("rate").option("rowsPerSecond", "1").load()
                         .selectExpr("cast(value as string) as value").writeStream.format("kafkajet")
                         .option("kafka.bootstrap.servers", f"127.0.0.1:{port}").option("topic", "t")
                         .option("checkpointLocation", str(tmp_path / "ck")).start())
                try:
                    query.awaitTermination(60)
                finally:
                    query.stop()
            else:
                (spark.range(3).selectExpr("cast(id as string) as value").write.format("kafkajet").mode("append")
                 .option("kafka.bootstrap.servers", f"127.0.0.1:{port}").option("topic", "t").save())
        took = time.monotonic() - start
    message = str(raised.value)
    # Before: 68 s, then each task's "Topic 't' not present in metadata after 60000 ms", three times over.
    assert message.count(f"connect to 127.0.0.1:{port} refused") == 1, message
    assert "not present in metadata" not in message
    assert took < 30, took


def test_config_error_is_a_kafkajet_error() -> None:
    from kafkajet.spark.sink_options import producer_config

    with pytest.raises(ConfigError):
        producer_config({"kafka.bootstrap.servers": "h:1", "kafka.key.serializer": "x"})


RETRY_JOB = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import kafkajet.spark
bootstrap, topic, marker = sys.argv[1:4]
spark = (SparkSession.builder.master("local[2,2]").config("spark.ui.enabled", "false")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000").getOrCreate())
kafkajet.spark.register(spark, check_workers=False)
from kafkajet.testing.spark_failures import KafkaDataSourceWithTestHooks
spark.dataSource.register(KafkaDataSourceWithTestHooks)  # takes the kafkajet.test.fail.* options
(spark.range(20000, numPartitions=2).selectExpr("cast(cast(id as string) as binary) as value")
 .write.format("kafkajet-test-hooks").mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
 .option("kafkajet.test.fail.after.rows", "5000").option("kafkajet.test.fail.marker", marker).save())
spark.stop()
"""


def test_a_task_failing_mid_write_is_retried_at_least_once(broker: EmbeddedBroker, topic_name: str,
                                                           tmp_path: Any) -> None:
    import subprocess

    make_topic(broker, topic_name, 2)
    marker = tmp_path / "failed-once"
    script = tmp_path / "job.py"
    script.write_text(RETRY_JOB)
    # Its own process: local[2,2] (one retry per task) needs a SparkContext of its own.
    out = subprocess.run([sys.executable, str(script), broker.bootstrap_servers, topic_name, str(marker)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker.exists(), "the injected failure never happened"
    records = read_topic(broker.bootstrap_servers, topic_name, 20000, timeout_s=60)
    values = {int(r.value) for r in records}  # type: ignore[arg-type]
    assert values == set(range(20000))  # at least once: a retried task may have re-sent its first rows


NO_REGISTER_JOB = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
bootstrap, topic = sys.argv[1:3]
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
# No kafkajet.spark.register(spark): Spark finds the format through the installed pyspark_kafkajet module.
(spark.range(10).selectExpr("cast(cast(id as string) as binary) as value").write.format("kafkajet")
 .mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save())
back = spark.read.format("kafkajet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
print("ROWS", back.count())
import kafkajet.spark
kafkajet.spark.register(spark)  # still fine once Spark found it itself
kafkajet.spark.register(spark)  # and again: a notebook cell run twice
print("REGISTERED")
query = (spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
         .option("startingOffsets", "earliest").load().writeStream.format("memory").queryName("streamed")
         .trigger(availableNow=True).start())
query.awaitTermination(120)
print("STREAMED", spark.sql("select count(*) from streamed").collect()[0][0])


def fail(_):
    raise ValueError("probe-" + "failure")  # split: the source line in a trace must not count as the message


try:
    spark.sparkContext.parallelize([0], 1).map(fail).collect()
except Exception:
    print("JOB FAILED")  # the job's exception is the user's to print: not counted below
spark.stop()
"""


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is how Spark finds the format by name in a fresh session (kafkajet's entry point), which "
    "no broker changes"))
def test_the_format_works_without_register_in_a_fresh_session(broker: EmbeddedBroker, topic_name: str,
                                                              tmp_path: Any) -> None:
    # Forgetting register() ended in 156 lines of Py4J ending in ClassNotFoundException: kafkajet.DefaultSource.
    import subprocess

    make_topic(broker, topic_name, 1)
    script = tmp_path / "job.py"
    script.write_text(NO_REGISTER_JOB)
    # Its own process: Spark looks for installed Python data sources once per JVM, before the first use.
    out = subprocess.run([sys.executable, str(script), broker.bootstrap_servers, topic_name],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ROWS 10" in out.stdout and "REGISTERED" in out.stdout, out.stdout + out.stderr[-3000:]
    assert "STREAMED 10" in out.stdout and "JOB FAILED" in out.stdout, out.stdout + out.stderr[-3000:]
    # At Spark's default log level (WARN), noise a user learns to ignore: register() replacing the format Spark
    # found was warned about at each call and again at every stream start; a failed task's trace was logged
    # by the executor and again by the scheduler (local mode: one JVM), before the job's exception.
    assert "DataSourceManager" not in out.stderr, out.stderr[-3000:]
    assert out.stderr.count("ValueError: probe-failure") == 1, out.stderr[-6000:]


def test_read_committed_reads_only_committed_transactions(spark: Any) -> None:
    from kafkajet import Producer
    from kafkajet.testing import MockCluster

    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("txn-spark", partitions=2)
        with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "spark-src"}) as p:
            p.init_transactions()
            for name, commit in (("a", True), ("b", False), ("c", True)):
                p.begin_transaction()
                for i in range(50):
                    p.send("txn-spark", f"{name}{i}".encode(), partition=i % 2)
                p.flush(30)
                p.commit_transaction() if commit else p.abort_transaction()

        def read(isolation: str | None) -> Counter[str]:
            reader = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                      .option("subscribe", "txn-spark"))
            if isolation is not None:
                reader = reader.option("kafka.isolation.level", isolation)
            return Counter(bytes(r.value).decode()[0] for r in reader.load().collect())

        assert read("read_committed") == Counter({"a": 50, "c": 50})
        assert read(None) == Counter({"a": 50, "b": 50, "c": 50})  # Spark's default: read_uncommitted
        with pytest.raises(Exception, match="kafka.isolation.level"):
            read("read_everything")


def test_the_suites_spark_jvms_run_with_c1_only(spark: Any) -> None:
    # tests/conftest.py sets SPARK_SUBMIT_OPTS for every Spark JVM the suite starts, to save the CPU the suite
    # is short of. Should pyspark or Spark stop passing it on, the suite gets minutes slower with no test failing.
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert C1_ONLY in list(runtime.getInputArguments())
