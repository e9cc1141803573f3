"""Apache Kafka for one test or fixture: started, and stopped however the test ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet.testing.apache_kafka import C1_ONLY, ApacheKafka, ApacheKafkaUnavailable


@contextlib.contextmanager
def running_apache_kafka(**kwargs: Any) -> Iterator[ApacheKafka]:
    """ApacheKafka(**kwargs), started; missing jars or Java fail the test with the one line that says what to
    run (never a skip: a missing dependency must not hide tests)."""
    # C1 only: the suite keeps both cores busy and its clusters live minutes. tests/apache/test_faults.py took
    # 150 s of CPU so, 230 s with the default JIT.
    kafka = ApacheKafka(**{"jvm_options": (C1_ONLY,), **kwargs})
    try:
        kafka.start()
    except ApacheKafkaUnavailable as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield kafka
    finally:
        kafka.stop(timeout_s=5)
