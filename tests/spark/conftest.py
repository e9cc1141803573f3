"""The Spark tests' one local session (started once: it costs seconds), their topic helper and a live group member."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pyspark.sql as pyspark_sql  # a test dependency: its absence must fail, not skip
import pytest
from kafka import KafkaConsumer

from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.waiting import wait_for


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers must import kafkajet from this venv
    import kafkajet.spark

    session = (pyspark_sql.SparkSession.builder.master("local[2]").appName("kafkajet-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kafkajet.spark.register(session)  # checks that the workers import kafkajet
    yield session
    session.stop()


def make_topic(broker: EmbeddedBroker, name: str, partitions: int = 4) -> str:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([name], num_partitions=partitions)
    return name


def live_member(broker: EmbeddedBroker, topic: str, group: str) -> KafkaConsumer:
    """A kafka-python consumer that has joined `group` and holds partitions of `topic`: the live member.

    At kafka-python's default 10 s session Tansu assigns a new member's partitions 23 s after it subscribes (every
    time, on a quiet machine); a CI run beside other work saw no assignment within 60 s. With a 6 s session it
    takes 3 s. Set-up, not the behaviour under test, so a member that still does not join is replaced. (A short
    metadata_max_age_ms does not help: on Tansu it kept the member rejoining, never assigned.)"""
    for attempt in range(3):
        member = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                               enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                               heartbeat_interval_ms=1000)

        def joined(member: KafkaConsumer = member) -> bool:
            return member.poll(timeout_ms=100) is not None and bool(member.assignment())

        try:
            wait_for(joined, 30, f"the kafka-python consumer joined its group (attempt {attempt + 1} of 3)")
            return member
        except AssertionError:
            member.close()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
