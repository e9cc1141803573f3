"""The Spark tests' one local session (started once: it costs seconds) and their topic helper."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pyspark.sql as pyspark_sql  # a test dependency: its absence must fail, not skip
import pytest

from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker


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
