"""The Spark source reads what Apache Kafka's own Java producer writes (compressed batches, null keys, a null
header value, explicit timestamps), and at read_committed leaves its aborted transactions out."""

from __future__ import annotations

from typing import Any

from kafkajet.admin import Admin
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.java_clients import java_produce


def _read(spark: Any, kafka: ApacheKafka, topic: str, **options: str) -> list[Any]:
    reader = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", topic).option("includeHeaders", "true"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return sorted(reader.load().collect(), key=lambda r: (r.partition, r.offset))


def test_the_spark_source_reads_what_the_java_producer_writes(spark: Any, apache_kafka: ApacheKafka,
                                                               topic_name: str) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=2)
    sent = [{"op": "send", "topic": topic_name, "partition": i % 2, "key": None if i % 3 == 0 else b"k%d" % i,
             "value": b"v%d" % i, "timestamp": 1_700_000_000_000 + i,
             "headers": [("h", b"x%d" % i), ("n", None)] if i % 2 else []} for i in range(60)]
    assert java_produce(apache_kafka, sent, **{"compression.type": "lz4", "linger.ms": 20}) == {"sent": 60, "failed": 0}

    rows = _read(spark, apache_kafka, topic_name)
    expected = sorted(sent, key=lambda c: (c["partition"], c["timestamp"]))
    # A record without headers reads as null, as Spark's own Kafka source gives it.
    assert [(r.partition, r.key, r.value, r.timestamp.timestamp() * 1000,
             None if r.headers is None else [(h.key, h.value) for h in r.headers]) for r in rows] == [
        (c["partition"], c["key"], c["value"], float(c["timestamp"]), [tuple(h) for h in c["headers"]] or None)
        for c in expected]
    assert {r.timestampType for r in rows} == {0}  # CreateTime


def test_read_committed_leaves_out_the_java_producers_aborted_transactions(spark: Any, apache_kafka: ApacheKafka,
                                                                           topic_name: str) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=1)
    commands: list[dict[str, Any]] = [{"op": "init"}]
    for txn in range(4):
        commands.append({"op": "begin"})
        commands += [{"op": "send", "topic": topic_name, "value": f"t{txn}-{i}".encode()} for i in range(5)]
        commands += [{"op": "flush"}, {"op": "commit" if txn % 2 == 0 else "abort"}]
    java_produce(apache_kafka, commands, **{"transactional.id": f"{topic_name}-java"})

    committed = [r.value for r in _read(spark, apache_kafka, topic_name, **{"kafka.isolation.level": "read_committed"})]
    assert committed == [f"t{t}-{i}".encode() for t in (0, 2) for i in range(5)]
    everything = [r.value for r in _read(spark, apache_kafka, topic_name)]
    assert len(everything) == 20  # read_uncommitted: the aborted records are in the log
