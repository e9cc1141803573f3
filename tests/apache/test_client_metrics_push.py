"""Client metrics push (KIP-714) on Apache Kafka 4.4: with a CLIENT_METRICS subscription the broker's exporter
(jvm/TelemetryRecorder.java, decoding with the OpenTelemetry classes kafka-clients shades) receives kafkajet's
pushes, under the instance id client_instance_id() answers, with Java's telemetry names, the subscribed ones
only, and a terminating push on close(); with enable.metrics.push=false it receives nothing."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.aio import AIOProducer
from kafkajet.errors import IllegalStateError
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.apache import running_apache_kafka
from tests.helpers.telemetry import Push, broker_config, compiled_recorder, read_pushes
from tests.helpers.waiting import wait_for

PREFIX = "org.apache.kafka.producer."


@pytest.fixture(scope="module")
def telemetry_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApacheKafka, Path]]:
    folder = tmp_path_factory.mktemp("telemetry")
    file = folder / "pushes.tsv"
    with running_apache_kafka(classpath=[compiled_recorder(folder)], broker_config=broker_config(file)) as kafka:
        _subscribe(kafka, "kafkajet-tests", f"metrics={PREFIX},interval.ms=1000,match=[client_id=t-.*]")
        with Admin(kafka.bootstrap_servers) as admin:
            admin.create_topics(["telemetry"], num_partitions=1)
        yield kafka, file


def _subscribe(kafka: ApacheKafka, name: str, config: str) -> None:
    done = kafka.run_tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", kafka.bootstrap_servers,
                          "--alter", "--entity-type", "client-metrics", "--entity-name", name,
                          "--add-config", config, timeout_s=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def _pushes_of(file: Path, client_id: str) -> list[Push]:
    return [p for p in read_pushes(file) if p.client_id == client_id]


def test_subscribed_metrics_are_pushed_under_the_client_instance_id(
        telemetry_kafka: tuple[ApacheKafka, Path]) -> None:
    kafka, file = telemetry_kafka
    with Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="t-pushing") as producer:
        for i in range(7):
            producer.send("telemetry", value=b"%d" % i)
        producer.flush(timeout=30)
        instance = producer.client_instance_id(timeout=30)
        assert isinstance(instance, uuid.UUID)
        # The broker asks for delta temporality (its default): the pushes' sums add up to the records sent.
        wait_for(lambda: _sent(_pushes_of(file, "t-pushing")) == 7.0, 30, "pushes counting the 7 records sent")
    pushes = _pushes_of(file, "t-pushing")
    assert {p.instance_id for p in pushes} == {_java_uuid(instance)}
    names = {name for p in pushes for name in p.metrics}
    assert all(name.startswith(PREFIX) for name in names), names
    assert PREFIX + "record.send.rate" in names
    assert PREFIX + "topic.record.send.rate{topic=telemetry}" in names
    assert pushes[-1].metrics[PREFIX + "record.send.total"][0] == "sum"
    assert _sent(pushes) == 7.0
    # close() ends with one terminating push, the last one.
    assert [p.terminating for p in pushes].count(True) == 1 and pushes[-1].terminating


def test_nothing_is_pushed_with_enable_metrics_push_false(telemetry_kafka: tuple[ApacheKafka, Path]) -> None:
    kafka, file = telemetry_kafka
    with Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="t-silent", enable_metrics_push=False) as quiet:
        with pytest.raises(IllegalStateError, match="enable.metrics.push"):
            quiet.client_instance_id(timeout=1)
        # The control: a pushing producer started after the silent one has pushed twice, so the silent one
        # had the time to push at least once too.
        with Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="t-control") as control:
            quiet.send("telemetry", value=b"q").result(timeout=30)
            control.send("telemetry", value=b"c").result(timeout=30)
            wait_for(lambda: len(_pushes_of(file, "t-control")) >= 2, 30, "two pushes of the control producer")
    assert _pushes_of(file, "t-silent") == []


def _sent(pushes: list[Push]) -> float:
    return sum(p.metrics.get(PREFIX + "record.send.total", ("", 0.0, ""))[1] for p in pushes)


def _java_uuid(value: uuid.UUID) -> str:
    """As Java's Uuid.toString() prints it (base64url, unpadded), as the recorder writes it."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def test_a_changed_subscription_is_fetched_again(telemetry_kafka: tuple[ApacheKafka, Path]) -> None:
    # The broker answers a push under the old subscription with UNKNOWN_SUBSCRIPTION_ID; the client asks for
    # the new one and pushes what it names, under the same instance id.
    kafka, file = telemetry_kafka
    _subscribe(kafka, "kafkajet-refetch", f"metrics={PREFIX}record.send.total,interval.ms=500,match=[client_id=r-.*]")
    with Producer(bootstrap_servers=kafka.bootstrap_servers, client_id="r-refetch") as producer:
        producer.send("telemetry", value=b"r").result(timeout=30)
        wait_for(lambda: _pushes_of(file, "r-refetch"), 30, "a push under the first subscription")
        first = _pushes_of(file, "r-refetch")[0]
        assert set(first.metrics) == {PREFIX + "record.send.total"}
        _subscribe(kafka, "kafkajet-refetch", f"metrics={PREFIX}topic.,interval.ms=500,match=[client_id=r-.*]")
        wait_for(lambda: any(p.metrics and all(n.startswith(PREFIX + "topic.") for n in p.metrics)
                             for p in _pushes_of(file, "r-refetch")), 30, "a push under the changed subscription")
    assert {p.instance_id for p in _pushes_of(file, "r-refetch")} == {first.instance_id}


def test_the_asyncio_producer_answers_its_instance_id(telemetry_kafka: tuple[ApacheKafka, Path]) -> None:
    kafka, file = telemetry_kafka

    async def main() -> uuid.UUID | None:
        async with AIOProducer(bootstrap_servers=kafka.bootstrap_servers, client_id="t-aio") as producer:
            await producer.send("telemetry", value=b"a")
            return await producer.client_instance_id(timeout=30)

    instance = asyncio.run(main())
    assert instance is not None
    wait_for(lambda: _pushes_of(file, "t-aio"), 30, "the terminating push of the asyncio producer")
    assert {p.instance_id for p in _pushes_of(file, "t-aio")} == {_java_uuid(instance)}
