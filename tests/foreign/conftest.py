"""The foreign tier: unpatched kafkajet against librdkafka's mock cluster, read back with confluent-kafka."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.rdkafka_mock import RdkafkaMockCluster


@pytest.fixture
def rdmock() -> Iterator[RdkafkaMockCluster]:
    """A fresh 3-broker librdkafka mock cluster per test, destroyed (rd_kafka_destroy) when the test ends."""
    with RdkafkaMockCluster(brokers=3) as mock:
        yield mock
