"""The Spark sink's OpenTelemetry trace context (the `kafkajet[otel]` extra), carried from the driver to the tasks
as Spark local properties. The producer's own instrumentation (spans, trace context in
the record headers, metrics) is kafkajet.producer.telemetry, which knows nothing of Spark.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from kafkajet.errors import ConfigError

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate
except ImportError as e:  # pragma: no cover - the extra's absence is tested in a subprocess
    raise ConfigError("opentelemetry.enable=true needs the OpenTelemetry API: pip install 'kafkajet[otel]' "
                      f"(importing it failed: {e})") from None

_SPARK_PROPERTY_PREFIX = "kafkajet.otel."


@contextlib.contextmanager
def spark_trace_context(spark: Any) -> Iterator[None]:
    """Make the current trace context the parent of the kafkajet sink's spans in the Spark jobs started inside
    (a write, or a streaming query started here: its thread inherits the properties).

    Spark sends a thread's local properties with every task of the jobs the thread submits; the sink reads them
    back in the task. Needs a classic SparkSession (Spark Connect has no SparkContext)."""
    sc = spark.sparkContext
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    before = {k: sc.getLocalProperty(_SPARK_PROPERTY_PREFIX + k) for k in carrier}
    for k, v in carrier.items():
        sc.setLocalProperty(_SPARK_PROPERTY_PREFIX + k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            sc.setLocalProperty(_SPARK_PROPERTY_PREFIX + k, v)


@contextlib.contextmanager
def task_trace_context(names: Sequence[str] = ("traceparent", "tracestate", "baggage")) -> Iterator[None]:
    """In a Spark task: the trace context spark_trace_context() left in the task's local properties, attached
    while the block runs (nothing when there is none)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    carrier = {}
    if ctx is not None:
        for name in names:
            value = ctx.getLocalProperty(_SPARK_PROPERTY_PREFIX + name)
            if value:
                carrier[name] = value
    if not carrier:
        yield
        return
    token = otel_context.attach(propagate.extract(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)
