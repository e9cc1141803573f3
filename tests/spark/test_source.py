"""The source's options and its streaming reader through Spark, against the real broker, read back exactly."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.testing import EmbeddedBroker, MockCluster
from tests.helpers.waiting import wait_for
from tests.spark.conftest import make_topic


def produce(broker: EmbeddedBroker, topic: str, values: list[bytes], partitions: int,
            timestamps: list[int] | None = None) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5) as p:
        futures = [p.send(topic, v, partition=i % partitions,
                          timestamp_ms=None if timestamps is None else timestamps[i])
                   for i, v in enumerate(values)]
        p.flush(timeout=60)
        for f in futures:
            f.result(timeout=0)


def source(spark: Any, broker: EmbeddedBroker, **options: str) -> Any:
    reader = spark.read.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def values(df: Any) -> Counter[bytes]:
    return Counter(bytes(r.value) for r in df.select("value").collect())


def test_subscribe_reads_every_listed_topic_and_a_pattern_only_matching_ones(
    spark: Any, broker: EmbeddedBroker, topic_name: str
) -> None:
    a, b, c = (make_topic(broker, f"{topic_name}-{x}", 2) for x in ("a", "b", "c"))
    for t in (a, b, c):
        produce(broker, t, [f"{t[-1]}{i}".encode() for i in range(100)], 2)
    both = values(source(spark, broker, subscribe=f"{a},{b}"))
    assert both == Counter({f"{x}{i}".encode(): 1 for x in "ab" for i in range(100)})
    pattern = values(source(spark, broker, subscribePattern=f"{topic_name}-[ac]"))
    assert pattern == Counter({f"{x}{i}".encode(): 1 for x in "ac" for i in range(100)})
    df = source(spark, broker, subscribe=a, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def test_starting_by_timestamp_uses_the_brokers_time_index(spark: Any) -> None:
    # On the MockCluster: Tansu answers ListOffsets by timestamp with offset 0 whatever the time.
    base = 1_700_000_000_000
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("ts", partitions=2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0, batch_size=512) as p:
            for i in range(200):
                p.send("ts", b"%d" % i, partition=i % 2, timestamp_ms=base + i * 1000)
            p.flush(timeout=60)

        def read(**options: str) -> Any:
            reader = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                      .option("subscribe", "ts"))
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load()

        assert values(read(startingTimestamp=str(base + 150_000))) == Counter({b"%d" % i: 1 for i in range(150, 200)})
        per_partition = values(read(startingOffsetsByTimestamp=f'{{"ts": {{"0": {base + 190_000}, "1": {base}}}}}'))
        # Partition 0 holds the even records, 1 the odd ones.
        assert per_partition == Counter({b"%d" % i: 1 for i in range(200) if i % 2 or i >= 190})
        with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy=latest"):
            read(startingTimestamp=str(base + 10**9)).collect()
        assert read(startingTimestamp=str(base + 10**9), startingOffsetsByTimestampStrategy="latest").count() == 0


def test_a_starting_timestamp_in_the_future_follows_the_strategy_on_the_real_broker(
    spark: Any, broker: EmbeddedBroker, topic_name: str
) -> None:
    # Tansu says "no record that late" as offset 0 with timestamp -1. Spark's rule for a start with no offset:
    # startingOffsetsByTimestampStrategy, default error; latest starts at the end. An end with none is the end.
    make_topic(broker, topic_name, 2)
    produce(broker, topic_name, [b"%d" % i for i in range(20)], 2)
    future = str(int(time.time() * 1000) + 86_400_000)
    with pytest.raises(Exception, match="no record at or after timestamp"):
        source(spark, broker, subscribe=topic_name, startingTimestamp=future).collect()
    assert source(spark, broker, subscribe=topic_name, startingTimestamp=future,
                  startingOffsetsByTimestampStrategy="latest").count() == 0
    assert source(spark, broker, subscribe=topic_name, endingTimestamp=future).count() == 20


def test_ranges_are_split_across_tasks_without_losing_or_repeating_a_record(
    spark: Any, broker: EmbeddedBroker, topic_name: str
) -> None:
    make_topic(broker, topic_name, 2)
    produce(broker, topic_name, [b"%d" % i for i in range(3000)], 2)
    df = source(spark, broker, subscribe=topic_name, maxRecordsPerPartition="400")
    assert df.rdd.getNumPartitions() == 8  # 1500 per Kafka partition in ranges of at most 400
    assert values(df) == Counter({b"%d" % i: 1 for i in range(3000)})
    df = source(spark, broker, subscribe=topic_name, minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    assert values(df) == Counter({b"%d" % i: 1 for i in range(3000)})


def test_offsets_past_the_end_fail_unless_fail_on_data_loss_is_false(
    spark: Any, broker: EmbeddedBroker, topic_name: str
) -> None:
    make_topic(broker, topic_name, 1)
    produce(broker, topic_name, [b"x"] * 10, 1)
    past = f'{{"{topic_name}": {{"0": 50}}}}'
    with pytest.raises(Exception, match=r"offset 50 is past the end of the log \(10\).*failOnDataLoss"):
        source(spark, broker, subscribe=topic_name, startingOffsets=past).collect()
    assert source(spark, broker, subscribe=topic_name, startingOffsets=past, failOnDataLoss="false").count() == 0


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's planning errors and their wording, raised before any task"))
def test_planning_errors_reach_the_user_before_any_task(spark: Any, broker: EmbeddedBroker, topic_name: str) -> None:
    with pytest.raises(Exception, match="does not exist"):
        source(spark, broker, subscribe=topic_name + "-missing").collect()
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        source(spark, broker, subscribe="a", subscribePattern="a.*").collect()
    with pytest.raises(Exception, match="unknown option 'kafka.max.poll.records'"):
        source(spark, broker, subscribe="a", **{"kafka.max.poll.records": "5"}).collect()
    with pytest.raises(Exception, match="unknown option 'startingoffset' for the kafkajet source; did you mean "
                                        "'startingOffsets'"):
        source(spark, broker, subscribe="a", startingOffset="earliest").collect()


class Collector:
    """foreachBatch target: each micro-batch's values by batch id, in the driver. foreachBatch is at least
    once (a batch cut off by stop() runs again after a restart), so a replay must bring the very same records:
    the source's offsets are in the checkpoint."""

    def __init__(self) -> None:
        self.by_batch: dict[int, list[bytes]] = {}
        self.replays: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        got = sorted(bytes(r.value) for r in df.select("value").collect())
        with self.lock:
            if batch_id in self.by_batch:
                assert self.by_batch[batch_id] == got, f"micro-batch {batch_id} replayed with other records"
                self.replays.append(batch_id)
            self.by_batch[batch_id] = got

    @property
    def rows(self) -> list[bytes]:
        with self.lock:
            return [v for rows in self.by_batch.values() for v in rows]

    @property
    def batches(self) -> list[int]:
        with self.lock:
            return [len(rows) for rows in self.by_batch.values()]

    def count(self) -> int:
        return len(self.rows)


def start_stream(spark: Any, broker: EmbeddedBroker, sink: Collector, checkpoint: str, *,
                 available_now: bool = False, **options: str) -> Any:
    reader = spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="200 milliseconds")
    return writer.start()


def wait_rows(query: Any, sink: Collector, n: int, timeout: float = 120) -> None:
    def done() -> bool:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        return sink.count() >= n

    wait_for(done, timeout, f"{n} rows through the stream")


def test_a_stream_in_bounded_micro_batches_restarts_from_its_checkpoint(
    spark: Any, broker: EmbeddedBroker, topic_name: str, tmp_path: Any
) -> None:
    make_topic(broker, topic_name, 3)
    produce(broker, topic_name, [b"first-%d" % i for i in range(900)], 3)
    sink = Collector()
    checkpoint = str(tmp_path / "ck")
    query = start_stream(spark, broker, sink, checkpoint, subscribe=topic_name, startingOffsets="earliest",
                         maxOffsetsPerTrigger="200")
    try:
        wait_rows(query, sink, 900)
    finally:
        query.stop()
    assert max(sink.batches) <= 200 and len([b for b in sink.batches if b]) >= 5
    # While the query is down, more arrives; the restarted query goes on from its checkpoint.
    produce(broker, topic_name, [b"second-%d" % i for i in range(300)], 3)
    query = start_stream(spark, broker, sink, checkpoint, subscribe=topic_name, startingOffsets="earliest",
                         maxOffsetsPerTrigger="200")
    try:
        wait_rows(query, sink, 1200)
        produce(broker, topic_name, [b"third-%d" % i for i in range(50)], 3)
        wait_rows(query, sink, 1250)
    finally:
        query.stop()
    expected = [b"first-%d" % i for i in range(900)] + [b"second-%d" % i for i in range(300)] + \
        [b"third-%d" % i for i in range(50)]
    assert Counter(sink.rows) == Counter(expected), "a record lost or read twice across the restart"


def test_a_pattern_stream_picks_up_a_new_topic_from_its_beginning(
    spark: Any, broker: EmbeddedBroker, topic_name: str, tmp_path: Any
) -> None:
    make_topic(broker, topic_name + "-1", 2)
    produce(broker, topic_name + "-1", [b"old-%d" % i for i in range(10)], 2)
    sink = Collector()
    query = start_stream(spark, broker, sink, str(tmp_path / "ck"), subscribePattern=topic_name + "-[0-9]")
    try:
        wait_for(lambda: query.lastProgress is not None, 120, "the first micro-batch")
        produce(broker, topic_name + "-1", [b"new-%d" % i for i in range(10)], 2)
        make_topic(broker, topic_name + "-2", 2)
        produce(broker, topic_name + "-2", [b"other-%d" % i for i in range(20)], 2)
        wait_rows(query, sink, 30)
    finally:
        query.stop()
    # startingOffsets=latest skips what was there before; a topic that appears later is read from earliest.
    assert Counter(sink.rows) == Counter([b"new-%d" % i for i in range(10)] + [b"other-%d" % i for i in range(20)])


def test_trigger_available_now_reads_what_is_there_and_stops(
    spark: Any, broker: EmbeddedBroker, topic_name: str, tmp_path: Any
) -> None:
    make_topic(broker, topic_name, 2)
    produce(broker, topic_name, [b"%d" % i for i in range(500)], 2)
    sink = Collector()
    query = start_stream(spark, broker, sink, str(tmp_path / "ck"), available_now=True, subscribe=topic_name,
                         startingOffsets="earliest", maxOffsetsPerTrigger="150")
    assert query.awaitTermination(120), "an availableNow query must stop by itself"
    assert query.exception() is None
    assert Counter(sink.rows) == Counter({b"%d" % i: 1 for i in range(500)})
    assert max(sink.batches) <= 150


def test_workers_without_kafkajet_fail_at_registration_with_what_to_do(tmp_path: Any) -> None:
    # A fresh session whose workers run an interpreter without this venv's packages: the mistake a script run
    # with the venv's python but without an activated venv makes.
    import subprocess
    import sys

    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys\n"
        "os.environ['PYSPARK_PYTHON'] = sys.argv[1]\n"
        "from pyspark.sql import SparkSession\n"
        "import kafkajet.spark\n"
        # The workers inherit the driver's environment: a PYTHONPATH naming a checkout (as in a worktree run)
        # would hand them kafkajet and hide the mistake. The driver has imported its kafkajet by now.
        "os.environ.pop('PYTHONPATH', None)\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "try:\n"
        "    kafkajet.spark.register(spark)\n"
        "except Exception as e:\n"
        "    print('ERROR', type(e).__name__, e)\n"
        "spark.stop()\n")
    bare = "/usr/bin/python3"  # Debian's interpreter: no pyspark, no kafkajet
    # From another directory: a worker started in the checkout would find kafkajet in its working directory.
    out = subprocess.run([sys.executable, str(script), bare], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    line = next((x for x in out.stdout.splitlines() if x.startswith("ERROR")), "")
    assert "ConfigError" in line and "PYSPARK_PYTHON" in line and "--py-files" in line, out.stdout + out.stderr
