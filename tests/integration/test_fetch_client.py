"""The source's FetchClient against the real broker (Tansu): what its answers mean, whatever the broker's dialect."""

from __future__ import annotations

import time

from kafkajet import Admin, Producer
from kafkajet.fetch import FetchClient
from kafkajet.testing import EmbeddedBroker


def test_a_time_after_every_record_has_no_offset(broker: EmbeddedBroker, topic_name: str) -> None:
    # Tansu answers a timestamp past its last record with offset 0 and timestamp -1: read as offset 0, a
    # startingTimestamp in the future would return every row.
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=1)
    now = int(time.time() * 1000)
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0) as p:
        for i in range(5):
            p.send(topic_name, b"%d" % i, partition=0, timestamp_ms=now - 5000 + i).result(timeout=30)
    with FetchClient(broker.bootstrap_servers) as client:
        assert client.offset_for_time(topic_name, 0, now - 60_000) == 0
        assert client.offset_for_time(topic_name, 0, now + 86_400_000) is None
