"""Apache Kafka for one test or fixture: started, and stopped however the test ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet.testing.apache_kafka import ApacheKafka, ApacheKafkaUnavailable


@contextlib.contextmanager
def running_apache_kafka(**kwargs: Any) -> Iterator[ApacheKafka]:
    """ApacheKafka(**kwargs), started; missing jars or Java fail the test with the one line that says what to
    run (never a skip: a missing dependency must not hide tests)."""
    kafka = ApacheKafka(**kwargs)
    try:
        kafka.start()
    except ApacheKafkaUnavailable as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield kafka
    finally:
        kafka.stop(timeout_s=5)
