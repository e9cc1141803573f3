"""A log whose start has moved past 0 (retention, or DeleteRecords as here through Kafka's own tool): the fetch
client and the Spark source begin at the log start instead of failing with OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.fetch import FetchClient
from kafkajet.testing.apache_kafka import ApacheKafka


def _delete_records_before(kafka: ApacheKafka, topic: str, offset: int, tmp_path: Path) -> None:
    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": offset}]}))
    done = kafka.run_tool("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server",
                          kafka.bootstrap_servers, "--offset-json-file", str(plan))
    assert done.returncode == 0, done.stderr.decode(errors="replace") + done.stdout.decode(errors="replace")


def test_readers_start_at_a_log_start_past_zero(spark: Any, apache_kafka: ApacheKafka, topic_name: str,
                                                tmp_path: Path) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=1)
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers) as p:
        for i in range(10):
            p.send(topic_name, value=f"v{i}".encode(), partition=0)
    _delete_records_before(apache_kafka, topic_name, 6, tmp_path)

    with FetchClient(apache_kafka.bootstrap_servers) as reader:
        assert reader.offsets(topic_name, 0) == (6, 10)
        assert [r.value for r in reader.fetch_range(topic_name, 0, 6, 10)] == [b"v6", b"v7", b"v8", b"v9"]
    rows = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", apache_kafka.bootstrap_servers)
            .option("subscribe", topic_name).load().collect())
    assert sorted((r.offset, r.value) for r in rows) == [(i, f"v{i}".encode()) for i in range(6, 10)]
