"""One in-memory OpenTelemetry SDK for the test process: the global tracer and meter providers can be set once,
so every test shares these and clears them first."""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_state: dict[str, Any] = {}


def sdk() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The process's span exporter (cleared) and metric reader; spans are exported as they end."""
    if not _state:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _state.update(exporter=exporter, reader=reader)
    _state["exporter"].clear()
    return _state["exporter"], _state["reader"]


def spans_named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def traceparent(span: ReadableSpan) -> bytes:
    """The W3C traceparent header a record carries for `span`."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}".encode()


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """Every data point of the metric `name` (cumulative since the provider started)."""
    data = reader.get_metrics_data()
    out: list[Any] = []
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == name:
                    out.extend(m.data.data_points)
    return out
