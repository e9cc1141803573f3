"""opentelemetry.enable against the real broker: a PRODUCER span per record that ends at the broker's answer and
carries its partition and offset, the trace context in the record's headers, one span per batch call, the
messaging metrics, and a kafka-python consumer instrumented by OpenTelemetry's own contrib package parenting its
receive span on kafkajet's span, read from the header."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from kafka import KafkaConsumer, TopicPartition
from opentelemetry import trace
from opentelemetry.instrumentation.kafka import KafkaInstrumentor
from opentelemetry.trace import SpanKind, StatusCode

from kafkajet import Producer, RecordMetadata
from kafkajet.admin import Admin
from kafkajet.aio import AIOProducer
from kafkajet.producer.producer import Producer as PlainProducer
from kafkajet.testing import EmbeddedBroker
from tests.helpers.otel import metric_points, sdk, spans_named, traceparent
from tests.helpers.readback import read_topic

pytestmark = pytest.mark.timeout(120)


def test_a_span_per_record_ends_at_the_brokers_answer_with_its_partition_and_offset(
        broker: EmbeddedBroker, topic_name: str) -> None:
    exporter, _ = sdk()
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=2)
    tracer = trace.get_tracer("test")
    # linger.ms holds the records in the producer until flush(): a span ended at the enqueue would show now.
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=60_000, opentelemetry_enable=True,
                  client_id="traced", key_serializer="str") as p:
        p.partitions_for(topic_name)
        with tracer.start_as_current_span("web request") as request:
            futs = [p.send(topic_name, b"value-%d" % i, key=f"user-{i}") for i in range(4)]
        assert spans_named(exporter, f"send {topic_name}") == []  # queued, not answered: no span has ended
        p.flush(60)
        mds = [f.result(0) for f in futs]
    spans = spans_named(exporter, f"send {topic_name}")
    assert len(spans) == 4
    by_key = {s.attributes["messaging.kafka.message.key"]: s for s in spans}  # type: ignore[index]
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    for i, md in enumerate(mds):
        span = by_key[f"user-{i}"]
        assert span.kind is SpanKind.PRODUCER
        assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id
        assert span.status.status_code is StatusCode.UNSET
        attrs = dict(span.attributes or {})
        assert attrs == {
            "messaging.system": "kafka", "messaging.operation.type": "send", "messaging.operation.name": "send",
            "messaging.destination.name": topic_name, "messaging.client.id": "traced",
            "messaging.kafka.message.key": f"user-{i}", "messaging.destination.partition.id": str(md.partition),
            "messaging.kafka.offset": md.offset, "messaging.message.body.size": len(b"value-%d" % i),
            "server.address": attrs["server.address"], "server.port": int(port),
        }
        assert attrs["server.address"] in (host, "localhost")
    # The headers a consumer reads carry each record's own span.
    read = {(r.partition, r.offset): dict(r.headers) for r in read_topic(broker.bootstrap_servers, topic_name, 4)}
    for i, md in enumerate(mds):
        assert read[(md.partition, md.offset)]["traceparent"] == traceparent(by_key[f"user-{i}"])


def test_the_callback_sees_the_span_ended_and_the_metrics_count_every_record(
        broker: EmbeddedBroker, topic_name: str) -> None:
    exporter, reader = sdk()
    seen: list[bool] = []

    def ended(key: bytes) -> bool:
        return any(s.attributes.get("messaging.kafka.message.key") == key.decode()  # type: ignore[union-attr]
                   for s in spans_named(exporter, f"send {topic_name}"))

    with Producer(bootstrap_servers=broker.bootstrap_servers, opentelemetry_enable=True) as p:
        for i in range(50):
            key = b"%d" % i
            p.send(topic_name, b"v", key=key, headers=[("app", b"x"), ("traceparent", b"stale")],
                   callback=lambda md, exc, key=key: seen.append(ended(key)))
        p.flush(60)
    assert seen == [True] * 50  # the user's callback runs after the record's span ended
    records = read_topic(broker.bootstrap_servers, topic_name, 50)
    for r in records:
        names = [k for k, _ in r.headers]
        assert names.count("traceparent") == 1 and "app" in names  # the stale context replaced, the rest kept
    sent = [pt for pt in metric_points(reader, "messaging.client.sent.messages")
            if pt.attributes.get("messaging.destination.name") == topic_name]
    assert sum(pt.value for pt in sent) == 50
    assert all("error.type" not in pt.attributes for pt in sent)
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    assert all(pt.attributes["server.port"] == port and "messaging.destination.partition.id" in pt.attributes
               for pt in sent)
    durations = [pt for pt in metric_points(reader, "messaging.client.operation.duration")
                 if pt.attributes.get("messaging.destination.name") == topic_name]
    assert sum(pt.count for pt in durations) == 50 and all(pt.min > 0 for pt in durations)


def test_send_batch_and_send_arrow_make_one_span_whose_context_every_record_carries(
        broker: EmbeddedBroker, topic_name: str) -> None:
    exporter, reader = sdk()
    with Producer(bootstrap_servers=broker.bootstrap_servers, opentelemetry_enable=True) as p:
        p.send_batch(topic_name, [b"a", b"b", b"c"], headers=[None, [("h", b"1")], {"k": b"2"}]).result(60)
        p.send_arrow(topic_name, pa.table({"value": [b"d", b"e"]})).result(60)
    spans = spans_named(exporter, f"send {topic_name}")
    assert sorted(s.attributes["messaging.batch.message_count"] for s in spans) == [2, 3]  # type: ignore[index]
    assert all(s.kind is SpanKind.PRODUCER for s in spans)
    batch_span = next(s for s in spans if s.attributes["messaging.batch.message_count"] == 3)  # type: ignore[index]
    arrow_span = next(s for s in spans if s is not batch_span)
    records = {r.value: dict(r.headers) for r in read_topic(broker.bootstrap_servers, topic_name, 5)}
    for v in (b"a", b"b", b"c"):
        assert records[v]["traceparent"] == traceparent(batch_span)
    assert records[b"b"]["h"] == b"1" and records[b"c"]["k"] == b"2"
    for v in (b"d", b"e"):
        assert records[v]["traceparent"] == traceparent(arrow_span)
    sent = [pt for pt in metric_points(reader, "messaging.client.sent.messages")
            if pt.attributes.get("messaging.destination.name") == topic_name]
    assert sum(pt.value for pt in sent) == 5


def test_an_instrumented_kafka_python_consumer_parents_its_receive_span_on_kafkajets(
        broker: EmbeddedBroker, topic_name: str) -> None:
    exporter, _ = sdk()
    with Producer(bootstrap_servers=broker.bootstrap_servers, opentelemetry_enable=True) as p:
        md = p.send(topic_name, b"order-1", key=b"o1").result(60)
    (produced,) = spans_named(exporter, f"send {topic_name}")
    instrumentor = KafkaInstrumentor()
    instrumentor.instrument()
    try:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=30_000,
                                 enable_auto_commit=False)
        try:
            tp = TopicPartition(topic_name, md.partition)
            consumer.assign([tp])
            consumer.seek(tp, md.offset)
            record = next(consumer)  # the contrib instrumentation wraps __next__
            assert record.value == b"order-1"
        finally:
            consumer.close()
    finally:
        instrumentor.uninstrument()
    received = spans_named(exporter, f"{topic_name} receive") or [
        s for s in exporter.get_finished_spans() if s.kind is SpanKind.CONSUMER]
    assert len(received) == 1, [s.name for s in exporter.get_finished_spans()]
    (receive,) = received
    assert receive.parent is not None
    assert receive.parent.span_id == produced.get_span_context().span_id
    assert receive.context.trace_id == produced.context.trace_id


def test_aioproducer_records_get_their_spans_through_the_wrapped_send(broker: EmbeddedBroker,
                                                                       topic_name: str) -> None:
    """AIOProducer skips the thread future only while send() is the plain one: with the setting on, each of its
    records is traced like a Producer's, its span ended at the broker's answer with the record's offset."""
    exporter, _ = sdk()

    async def main() -> list[RecordMetadata]:
        async with AIOProducer(bootstrap_servers=broker.bootstrap_servers, opentelemetry_enable=True) as p:
            futs = [await p.send(topic_name, b"v%d" % i) for i in range(5)]
            return list(await asyncio.gather(*futs))

    mds = asyncio.run(main())
    spans = {(int(str(attrs["messaging.destination.partition.id"])), attrs["messaging.kafka.offset"]): s
             for s in spans_named(exporter, f"send {topic_name}") for attrs in [dict(s.attributes or {})]}
    assert sorted(spans) == sorted((md.partition, md.offset) for md in mds)
    read = {(r.partition, r.offset): dict(r.headers) for r in read_topic(broker.bootstrap_servers, topic_name, 5)}
    for md in mds:
        assert read[(md.partition, md.offset)]["traceparent"] == traceparent(spans[(md.partition, md.offset)])


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is which send methods kafkajet installs, which no broker changes"))
def test_with_the_setting_off_the_send_methods_are_the_plain_ones(broker: EmbeddedBroker, topic_name: str) -> None:
    exporter, _ = sdk()
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        assert p.send == p._path.send  # the send path itself (compiled or not), no tracing wrapper around it
        assert p.send_batch.__func__ is PlainProducer.send_batch  # type: ignore[attr-defined]
        with trace.get_tracer("test").start_as_current_span("outer"):
            p.send(topic_name, b"v").result(60)
    assert spans_named(exporter, f"send {topic_name}") == []
    (record,) = read_topic(broker.bootstrap_servers, topic_name, 1)
    assert record.headers == ()


# A process of its own: the global tracer provider can be set once, and the other tests' process has one.
_NO_SDK_YET = textwrap.dedent("""
    import json, sys
    from opentelemetry import context, propagate, trace

    from kafkajet import Producer

    bootstrap, topic, incoming = sys.argv[1:]
    span_starts = 0
    no_op_start = trace.NoOpTracer.start_span

    def counted(self, *args, **kwargs):
        global span_starts
        span_starts += 1
        return no_op_start(self, *args, **kwargs)

    trace.NoOpTracer.start_span = counted
    with Producer(bootstrap_servers=bootstrap, opentelemetry_enable=True) as p:
        p.send(topic, b"no context").result(60)
        p.send_batch(topic, [b"batch, no context"]).result(60)
        import pyarrow as pa
        p.send_arrow(topic, pa.table({"value": [b"arrow, no context"]})).result(60)
        starts_without_context = span_starts
        token = context.attach(propagate.extract({"traceparent": incoming}))
        try:
            p.send(topic, b"passed on").result(60)
        finally:
            context.detach(token)
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        md = p.send(topic, b"after the SDK").result(60)
    spans = [{"name": s.name, "offset": s.attributes.get("messaging.kafka.offset"),
              "traceparent": f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-{s.context.trace_flags:02x}"}
             for s in exporter.get_finished_spans()]
    print(json.dumps({"starts_without_context": starts_without_context, "spans": spans, "offset": md.offset}))
""")


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's trace-context handling in the client, which no broker changes"))
def test_without_an_sdk_a_record_passes_on_only_the_current_context_and_an_sdk_set_later_is_used(
        broker: EmbeddedBroker, topic_name: str) -> None:
    """opentelemetry.enable on a service with no SDK yet: a send (send_batch, send_arrow) with no trace context
    current does no span work at all and writes no header; one inside a context it received (an extracted traceparent, no SDK)
    passes that context on; and a tracer provider set after the producer was built traces the next send."""
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=1)
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    child = subprocess.run([sys.executable, "-c", _NO_SDK_YET, broker.bootstrap_servers, topic_name, incoming],
                           capture_output=True, text=True, timeout=100, cwd=Path(__file__).resolve().parents[2])
    assert child.returncode == 0, child.stderr[-3000:]
    out = json.loads(child.stdout.splitlines()[-1])
    assert out["starts_without_context"] == 0  # the no-op tracer was never asked for a span
    (span,) = out["spans"]
    assert span["name"] == f"send {topic_name}" and span["offset"] == out["offset"] == 4
    headers = {r.value: dict(r.headers) for r in read_topic(broker.bootstrap_servers, topic_name, 5)}
    assert headers[b"no context"] == headers[b"batch, no context"] == headers[b"arrow, no context"] == {}
    assert headers[b"passed on"] == {"traceparent": incoming.encode()}
    assert headers[b"after the SDK"]["traceparent"] == span["traceparent"].encode()
