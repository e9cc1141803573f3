"""kafka.opentelemetry.enable in the Spark sink: the trace context the driver runs in reaches the records written
by the executors' tasks (through Spark's local properties), so a consumer continues the driver's trace."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace

from kafkajet.spark.trace_context import spark_trace_context
from kafkajet.testing import EmbeddedBroker
from tests.helpers.otel import sdk
from tests.helpers.readback import read_topic
from tests.spark.conftest import make_topic


def test_the_sink_continues_the_trace_the_driver_runs_in(spark: Any, broker: EmbeddedBroker, topic_name: str) -> None:
    sdk()
    topic = make_topic(broker, topic_name, partitions=2)
    df = spark.range(40).selectExpr("cast(cast(id as string) as binary) as value")
    with trace.get_tracer("test").start_as_current_span("nightly export") as driver_span, spark_trace_context(spark):
        (df.repartition(2).write.format("kafkajet").mode("append")
           .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", topic)
           .option("kafka.opentelemetry.enable", "true").save())
    assert spark.sparkContext.getLocalProperty("kafkajet.otel.traceparent") is None  # the driver's thread restored
    trace_id = f"{driver_span.get_span_context().trace_id:032x}"
    records = read_topic(broker.bootstrap_servers, topic, 40)
    # The workers have no tracer provider: their send spans do not record, but the records still carry the
    # driver's trace; with an SDK configured in the workers, their spans would be the driver span's children.
    parents = {dict(r.headers)["traceparent"].decode().split("-")[1] for r in records}
    assert parents == {trace_id}


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's sink option, which no broker changes"))
def test_without_the_setting_the_sink_writes_no_trace_headers(spark: Any, broker: EmbeddedBroker,
                                                              topic_name: str) -> None:
    sdk()
    topic = make_topic(broker, topic_name, partitions=1)
    with trace.get_tracer("test").start_as_current_span("export"), spark_trace_context(spark):
        (spark.range(3).selectExpr("cast(cast(id as string) as binary) as value").write.format("kafkajet")
           .mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", topic).save())
    assert all(r.headers == () for r in read_topic(broker.bootstrap_servers, topic, 3))
