"""Client metrics push (KIP-714) with brokers that do not offer it (the MockCluster, like Tansu and brokers
without a telemetry plugin): nothing is asked, produce is undisturbed, and client_instance_id() says None
as soon as the first connection shows it, instead of waiting out its timeout."""

from __future__ import annotations

import time

from kafkajet import Producer
from kafkajet.testing import MockCluster


def test_a_broker_without_the_apis_leaves_produce_alone(cluster: MockCluster) -> None:
    cluster.create_topic("t", partitions=1)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as producer:
        assert producer.send("t", value=b"v").result(timeout=10).offset == 0
        started = time.monotonic()
        assert producer.client_instance_id(timeout=20) is None
        assert time.monotonic() - started < 5
        assert producer.send("t", value=b"w").result(timeout=10).offset == 1
