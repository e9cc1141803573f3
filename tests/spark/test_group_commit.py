"""The streaming source commits processed offsets to a consumer group that lag monitors read: without it a
stream's consumption shows nowhere in the tools that watch consumer lag (the checkpoint alone holds it).

The referees are other clients reading the real broker: confluent-kafka's and kafka-python's admin clients.
"""

from __future__ import annotations

import time
from typing import Any

from kafka.admin import KafkaAdminClient

from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.waiting import wait_for
from tests.spark.conftest import live_member, make_topic
from tests.spark.test_source import Collector, produce, start_stream, wait_rows

TRIGGER_S = 1.0


def confluent_offsets(broker: EmbeddedBroker, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def kafka_python_offsets(broker: EmbeddedBroker, group: str, topic: str, partitions: int) -> dict[int, int]:
    from kafka import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        found = admin.list_group_offsets({group: [TopicPartition(topic, p) for p in range(partitions)]})[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in found.items() if om.offset >= 0}


def lag(broker: EmbeddedBroker, group: str) -> int | None:
    with Admin(broker.bootstrap_servers) as admin:
        described = admin.describe_consumer_group(group)
    return described.lag if described.partitions else None


def test_a_running_query_commits_what_it_processed_and_its_lag_falls_to_zero_within_a_trigger(
    spark: Any, broker: EmbeddedBroker, topic_name: str, tmp_path: Any
) -> None:
    make_topic(broker, topic_name, 3)
    group = topic_name + "-group"
    produce(broker, topic_name, [b"a-%d" % i for i in range(300)], 3)
    sink = Collector()
    reader = (spark.readStream.format("kafkajet").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic_name).option("startingOffsets", "earliest")
              .option("kafka.group.id", group).load())
    query = (reader.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime=f"{int(TRIGGER_S * 1000)} milliseconds").start())
    try:
        wait_rows(query, sink, 300)
        wait_for(lambda: confluent_offsets(broker, group, topic_name, 3) == {0: 100, 1: 100, 2: 100}, 60,
                 "the processed offsets committed, as confluent-kafka reads them")
        assert kafka_python_offsets(broker, group, topic_name, 3) == {0: 100, 1: 100, 2: 100}
        # More arrives while the query runs; once it has processed it, the next trigger commits the new end
        # (PySpark would call commit(end) only before a further batch, which never comes).
        produce(broker, topic_name, [b"b-%d" % i for i in range(30)], 3)
        wait_for(lambda: lag(broker, group) == 30, 30, "the new records seen as lag")
        wait_rows(query, sink, 330)
        caught_up = time.monotonic()
        # A trigger interval, plus room for a loaded machine: the bug this catches leaves the lag at 30 forever.
        wait_for(lambda: lag(broker, group) == 0, TRIGGER_S + 10, "the lag back to 0 after catching up")
        took = time.monotonic() - caught_up
        assert query.exception() is None
    finally:
        query.stop()
    assert kafka_python_offsets(broker, group, topic_name, 3) == {0: 110, 1: 110, 2: 110}
    print(f"lag reached 0 {took:.2f} s after the query caught up (trigger {TRIGGER_S} s)")


def test_a_query_restarted_from_its_checkpoint_commits_on_from_there(
    spark: Any, broker: EmbeddedBroker, topic_name: str, tmp_path: Any
) -> None:
    make_topic(broker, topic_name, 2)
    prefix = topic_name + "-p"
    checkpoint = str(tmp_path / "ck")
    produce(broker, topic_name, [b"first-%d" % i for i in range(40)], 2)
    first = Collector()
    # Trigger.AvailableNow: the query ends after its last batch; the source commits that batch before it does.
    query = start_stream(spark, broker, first, checkpoint, available_now=True, subscribe=topic_name,
                         startingOffsets="earliest", groupIdPrefix=prefix, maxOffsetsPerTrigger="15")
    assert query.awaitTermination(120) and query.exception() is None
    with Admin(broker.bootstrap_servers) as admin:
        groups = [g.group_id for g in admin.list_consumer_groups() if g.group_id.startswith(prefix + "-")]
    (prefixed,) = [g for g in groups if confluent_offsets(broker, g, topic_name, 2) == {0: 20, 1: 20}]
    # The group is not where the query resumes: the checkpoint is. Move the group back to prove it.
    with Admin(broker.bootstrap_servers) as admin:
        admin.commit_consumer_group_offsets(prefixed, {(topic_name, 0): 0, (topic_name, 1): 0})
    produce(broker, topic_name, [b"second-%d" % i for i in range(10)], 2)
    second = Collector()
    query = start_stream(spark, broker, second, checkpoint, available_now=True, subscribe=topic_name,
                         startingOffsets="earliest", groupIdPrefix=prefix, maxOffsetsPerTrigger="15")
    assert query.awaitTermination(120) and query.exception() is None
    assert sorted(second.rows) == sorted(b"second-%d" % i for i in range(10))
    assert confluent_offsets(broker, prefixed, topic_name, 2) == {0: 25, 1: 25}
    assert kafka_python_offsets(broker, prefixed, topic_name, 2) == {0: 25, 1: 25}


def test_a_group_with_live_members_refuses_the_commits_and_the_query_goes_on(
    spark: Any, broker: EmbeddedBroker, topic_name: str, tmp_path: Any
) -> None:
    make_topic(broker, topic_name, 2)
    group = topic_name + "-group"
    member = live_member(broker, topic_name, group)
    try:
        produce(broker, topic_name, [b"%d" % i for i in range(50)], 2)
        sink = Collector()
        query = start_stream(spark, broker, sink, str(tmp_path / "ck"), available_now=True,
                             subscribe=topic_name, startingOffsets="earliest", **{"kafka.group.id": group})
        assert query.awaitTermination(120) and query.exception() is None
        assert sorted(sink.rows) == sorted(b"%d" % i for i in range(50))
        assert kafka_python_offsets(broker, group, topic_name, 2) == {}, "the live group's offsets are its own"
    finally:
        member.close()
