"""opentelemetry.enable on the failure paths a real broker cannot be made to take on demand: a record the broker
refuses, one that expires unanswered, one send() refuses, and the extra missing."""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest
from opentelemetry.trace import StatusCode

from kafkajet import Producer
from kafkajet.aio import AIOProducer
from kafkajet.errors import ConfigError, DeliveryTimeoutError, RecordTooLargeError
from kafkajet.testing import MockCluster
from tests.helpers.otel import metric_points, sdk, spans_named

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 1}), pytest.mark.timeout(60)]


def test_a_record_the_broker_refuses_ends_its_span_with_the_error(cluster: MockCluster) -> None:
    exporter, reader = sdk()

    def refused_so_far() -> float:
        # Cumulative over the process's provider: other tests in this worker may have failed records on "t".
        return sum(pt.value for pt in metric_points(reader, "messaging.client.sent.messages")
                   if pt.attributes.get("error.type") == "InvalidRecordError"
                   and pt.attributes.get("messaging.destination.name") == "t")

    before = refused_so_far()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=False,
                  opentelemetry_enable=True, client_id="refused") as p:
        p.send("t", b"warm-up").result(15)
        cluster.push_request_errors("Produce", ["INVALID_RECORD"])
        err = p.send("t", b"bad").exception(15)
    assert err is not None and "INVALID_RECORD" in str(err)
    warm, bad = sorted(spans_named(exporter, "send t"), key=lambda s: s.start_time or 0)
    assert warm.attributes["messaging.kafka.offset"] == 0  # type: ignore[index]
    assert bad.attributes["error.type"] == type(err).__qualname__  # type: ignore[index]
    assert "messaging.kafka.offset" not in (bad.attributes or {})
    assert bad.attributes["messaging.destination.partition.id"] == "0"  # type: ignore[index]
    assert bad.status.status_code is StatusCode.ERROR
    assert [e.name for e in bad.events] == ["exception"]
    assert type(err).__qualname__ == "InvalidRecordError"
    assert refused_so_far() - before == 1


def test_a_record_that_expires_unanswered_ends_its_span_with_the_timeout(cluster: MockCluster) -> None:
    exporter, _ = sdk()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, delivery_timeout_ms=1500, request_timeout_ms=1000,
                  linger_ms=0, opentelemetry_enable=True) as p:
        p.send("t", b"warm-up").result(15)
        cluster.broker_down(cluster.broker_ids[0])
        fut = p.send("t", b"lost", partition=0)
        assert isinstance(fut.exception(30), DeliveryTimeoutError)
    lost = [s for s in spans_named(exporter, "send t") if s.attributes.get("error.type")]  # type: ignore[union-attr]
    assert [s.attributes["error.type"] for s in lost] == ["DeliveryTimeoutError"]  # type: ignore[index]


def test_a_record_send_refuses_ends_its_span_at_once_with_the_error(cluster: MockCluster) -> None:
    exporter, _ = sdk()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, max_request_size=1000,
                  opentelemetry_enable=True) as p:
        with pytest.raises(RecordTooLargeError):
            p.send("t", b"x" * 2000)
    (span,) = spans_named(exporter, "send t")
    assert span.attributes["error.type"] == "RecordTooLargeError"  # type: ignore[index]
    assert span.end_time is not None


def test_the_setting_without_the_extra_names_the_extra_to_install(cluster: MockCluster,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if opentelemetry-api were not installed
    monkeypatch.delitem(sys.modules, "kafkajet.producer.telemetry", raising=False)
    with pytest.raises(ConfigError, match=r"pip install 'kafkajet\[otel\]'"):
        Producer(bootstrap_servers=cluster.bootstrap_servers, opentelemetry_enable=True)
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:  # off: the extra is never imported
        p.send("t", b"v").result(15)
    assert sys.modules.get("kafkajet.producer.telemetry") is None


def test_a_batch_call_send_batch_refuses_ends_its_span_once_with_the_error(cluster: MockCluster) -> None:
    exporter, _ = sdk()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, max_request_size=1000,
                  opentelemetry_enable=True) as p:
        with pytest.raises(RecordTooLargeError):
            p.send_batch("t", [b"ok", b"x" * 2000])
    (span,) = spans_named(exporter, "send t")
    assert span.attributes["error.type"] == "RecordTooLargeError"  # type: ignore[index]
    assert span.attributes["messaging.batch.message_count"] == 2  # type: ignore[index]
    assert [e.name for e in span.events] == ["exception"]  # recorded once


def test_sent_messages_keep_counting_a_producer_that_is_gone(cluster: MockCluster) -> None:
    # The counter is read at collection from live producers' counts: a collected producer's must stay in the sum,
    # or a cumulative counter would go down.
    _, reader = sdk()
    cluster.create_topic("gone", partitions=1)

    def sent() -> int:
        return sum(pt.value for pt in metric_points(reader, "messaging.client.sent.messages")
                   if pt.attributes.get("messaging.destination.name") == "gone")

    before = sent()
    p = Producer(bootstrap_servers=cluster.bootstrap_servers, opentelemetry_enable=True)
    with p:
        p.send_batch("gone", [b"a", b"b", b"c"]).result(15)
        p.send("gone", b"d").result(15)
    assert sent() == before + 4
    del p
    gc.collect()
    assert sent() == before + 4


def test_the_asyncio_producer_gets_the_same_spans(cluster: MockCluster) -> None:
    exporter, _ = sdk()

    async def main() -> int:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers, opentelemetry_enable=True) as p:
            await p.send_and_wait("t", b"a")
            return (await p.send_and_wait("t", b"b")).offset

    offset = asyncio.run(main())
    offsets = sorted(s.attributes["messaging.kafka.offset"] for s in spans_named(exporter, "send t"))  # type: ignore[index]
    assert offsets == [offset - 1, offset]
