"""The sink's exactly-once mode on the MockCluster (its coordinator honours read_committed; Tansu shows aborted
records to every reader): a failed task attempt, a failed job and a replayed micro-batch never show a row twice
or a row of an attempt that failed, read back by confluent-kafka at read_committed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.errors import IllegalStateError
from kafkajet.testing import MockCluster
from tests.helpers.readback import read_topic_confluent

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
 .option("exactlyOnce", "true").option("transactionalIdPrefix", "retry-job").option("kafka.linger.ms", "0")
 .option("kafkajet.test.fail.after.rows", "5000").option("kafkajet.test.fail.marker", marker).save())
spark.stop()
"""


def values(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> Counter[int]:
    return Counter(int(r.value) for r in read_topic_confluent(bootstrap, topic, partitions,  # type: ignore[arg-type]
                                                              expected=expected, isolation_level=isolation))


def test_a_failed_task_attempt_never_becomes_visible(tmp_path: Path) -> None:
    with MockCluster(brokers=3) as cluster:
        cluster.create_topic("eos", partitions=2)
        marker = tmp_path / "failed-once"
        script = tmp_path / "job.py"
        script.write_text(RETRY_JOB)
        # Its own process: local[2,2] (one retry per task) needs a SparkContext of its own.
        out = subprocess.run([sys.executable, str(script), cluster.bootstrap_servers, "eos", str(marker)],
                             capture_output=True, text=True, timeout=300, env={**os.environ})
        assert out.returncode == 0, out.stderr[-3000:]
        assert marker.exists(), "the injected failure never happened"
        committed = values(cluster.bootstrap_servers, "eos", 2, "read_committed", 20000)
        assert committed == Counter(range(20000)), "a row missing or repeated at read_committed"
        everything = values(cluster.bootstrap_servers, "eos", 2, "read_uncommitted", 20000)
        assert sum(everything.values()) > 20000, "the failed attempt wrote nothing: the test tested nothing"
        assert [cluster.transaction_state(f"retry-job-{t}") for t in (0, 1)] == ["CompleteCommit"] * 2


def test_a_failed_job_leaves_nothing_visible_and_nothing_open(spark: Any) -> None:
    from kafkajet.testing.spark_failures import KafkaDataSourceWithTestHooks

    spark.dataSource.register(KafkaDataSourceWithTestHooks)  # takes the kafkajet.test.fail.* options
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("eos-abort", partitions=2)
        df = spark.range(4000, numPartitions=2).selectExpr("cast(cast(id as string) as binary) as value")
        with pytest.raises(Exception, match="injected failure"):
            (df.write.format("kafkajet-test-hooks").mode("append")
             .option("kafka.bootstrap.servers", cluster.bootstrap_servers).option("topic", "eos-abort").option("exactlyOnce", "true").option("transactionalIdPrefix", "job-a")
             .option("kafkajet.test.fail.after.rows", "1500").save())
        assert values(cluster.bootstrap_servers, "eos-abort", 2, "read_committed", 0) == Counter()
        # No transaction of the job is left open to hold back read_committed readers until its timeout.
        assert {cluster.transaction_state(t) for t in ("job-a-0", "job-a-1")} <= {"CompleteAbort", "Empty", None}


def test_an_exactly_once_batch_write_commits_every_row_once(spark: Any) -> None:
    with MockCluster(brokers=3) as cluster:
        cluster.create_topic("eos-ok", partitions=3)
        df = spark.range(30000, numPartitions=3).selectExpr("cast(cast(id as string) as binary) as value",
                                                            "cast(cast(id % 97 as string) as binary) as key")
        (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
         .option("topic", "eos-ok").option("exactlyOnce", "true").save())
        assert values(cluster.bootstrap_servers, "eos-ok", 3, "read_committed", 30000) == Counter(range(30000))
        # kafka-python's read_committed consumer agrees.
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level="read_committed",
                                 enable_auto_commit=False, consumer_timeout_ms=5000)
        parts = [TopicPartition("eos-ok", p) for p in range(3)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        seen = Counter(int(m.value) for m in consumer)
        consumer.close()
        assert seen == Counter(range(30000))


STREAM_JOB = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import kafkajet.spark
bootstrap, source, sink, checkpoint, crash = sys.argv[1:6]  # crash: a marker file for the failure hook
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
kafkajet.spark.register(spark, check_workers=False)
from kafkajet.testing.spark_failures import KafkaDataSourceWithTestHooks
spark.dataSource.register(KafkaDataSourceWithTestHooks)  # takes the kafkajet.test.fail.* options
q = (spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
     .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "1000").load()
     .selectExpr("value").writeStream.format("kafkajet-test-hooks").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", sink).option("exactlyOnce", "true").option("checkpointLocation", checkpoint)
     .option("kafkajet.test.fail.after.commit.marker", crash)
     .trigger(availableNow=True).start())
try:
    q.awaitTermination(240)
except Exception as e:
    print("QUERY FAILED", e)
    sys.exit(3)
finally:
    spark.stop()
"""


def test_a_micro_batch_replayed_after_a_driver_crash_is_not_written_twice(tmp_path: Path) -> None:
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("in", partitions=2)
        cluster.create_topic("out", partitions=2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            p.send_batch("in", [b"%d" % i for i in range(3000)]).result(timeout=60)
        script = tmp_path / "stream.py"
        script.write_text(STREAM_JOB)
        checkpoint = str(tmp_path / "ck")

        marker = str(tmp_path / "failed-after-commit")

        def run() -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, str(script), cluster.bootstrap_servers, "in", "out", checkpoint,
                                   marker], capture_output=True, text=True, timeout=400)

        first = run()
        assert first.returncode == 3, first.stderr[-3000:]
        after_crash = values(cluster.bootstrap_servers, "out", 2, "read_committed", 1000)
        assert sum(after_crash.values()) == 1000, "the first micro-batch should be committed before the crash"
        second = run()
        assert second.returncode == 0, second.stderr[-3000:]
        got = values(cluster.bootstrap_servers, "out", 2, "read_committed", 3000)
        assert got == Counter(range(3000)), "the replayed micro-batch was written twice, or a row was lost"


def test_exactly_once_refuses_what_it_cannot_honour(spark: Any) -> None:
    df = spark.range(1).selectExpr("cast('x' as binary) as value")
    with pytest.raises(Exception, match="kafka.transactional.id is not supported by the sink"):
        (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("topic", "t").option("kafka.transactional.id", "mine").save())
    with pytest.raises(Exception, match="exactlyOnce='maybe' must be true or false"):
        (df.write.format("kafkajet").mode("append").option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("topic", "t").option("exactlyOnce", "maybe").save())


def test_prepared_transactions_are_completed_by_another_client() -> None:
    # The API the sink stands on: prepare in one producer, commit or abort from an Admin client elsewhere.
    with MockCluster(brokers=3) as cluster:
        cluster.create_topic("p", partitions=2)
        prepared = []
        for name in ("keep", "drop"):
            with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": name}) as p:
                p.init_transactions()
                p.begin_transaction()
                for i in range(10):
                    p.send("p", f"{name}-{i}".encode(), partition=i % 2)
                prepared.append(p.prepare_transaction(30))
                with pytest.raises(Exception, match="state PREPARED_TRANSACTION"):
                    p.send("p", b"late")
            assert cluster.transaction_state(name) == "Ongoing"  # close() left it open
        with Admin(cluster.bootstrap_servers) as admin:
            admin.complete_transaction(prepared[0], commit=True)
            admin.complete_transaction(prepared[0], commit=True)  # a repeated commit is a success
            admin.complete_transaction(prepared[1], commit=False)
        got = Counter(r.value.decode() for r in read_topic_confluent(  # type: ignore[union-attr]
            cluster.bootstrap_servers, "p", 2, expected=10, isolation_level="read_committed"))
        assert got == Counter(f"keep-{i}" for i in range(10))
        with pytest.raises(IllegalStateError, match="no transactional.id"), \
                Producer(bootstrap_servers=cluster.bootstrap_servers) as plain:
            plain.prepare_transaction()


def test_a_speculative_attempt_fences_the_first_so_only_one_attempt_can_ever_commit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Two attempts of task 0 (spark.speculation, or a retry racing a slow first attempt): the later one's
    # init_transactions aborts what the earlier prepared. Whichever message the driver commits, at most one
    # attempt's rows become visible: committing the fenced one fails the write instead of showing its rows.
    import pyarrow as pa

    from kafkajet.errors import KafkaError
    from kafkajet.spark import writer
    from kafkajet.spark.sink_options import SinkOptions

    monkeypatch.setattr(writer, "_task_id", lambda: 0)
    monkeypatch.setattr(writer, "_batch_id", lambda: None)
    with MockCluster(brokers=3) as cluster:
        cluster.create_topic("spec", partitions=2)
        cfg = {"bootstrap.servers": cluster.bootstrap_servers}

        def attempt(tag: str) -> Any:
            rows = pa.record_batch([pa.array([f"{tag}-{i}".encode() for i in range(500)], pa.binary())],
                                   names=["value"])
            return writer.write_prepared(SinkOptions(cfg, "spec", exactly_once=True), iter([rows]), "spec-job")

        first = attempt("first")
        second = attempt("second")  # same transactional id: fences the first attempt
        with pytest.raises(KafkaError):
            writer.complete_all(cfg, [first], True, "spec-job")
        assert writer.complete_all(cfg, [second], True, "spec-job") == 500
        got = Counter(r.value.decode() for r in read_topic_confluent(  # type: ignore[union-attr]
            cluster.bootstrap_servers, "spec", 2, expected=500, isolation_level="read_committed"))
        assert got == Counter(f"second-{i}" for i in range(500))
