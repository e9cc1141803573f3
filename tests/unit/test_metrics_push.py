"""ClientMetricsPush's decisions, driven request by request: what Java's ClientTelemetryReporter does after each
answer (the Apache tests show the pushes themselves reaching a broker's exporter)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kafkajet.network import ClientResponse
from kafkajet.producer.metrics_push import (
    DEFAULT_PUSH_INTERVAL_MS,
    ClientMetricsPush,
    PushState,
    telemetry_metric_name,
)
from kafkajet.protocol import ApiKey
from kafkajet.records.codecs import decompress

INSTANCE = bytes(range(1, 17))


class _Client:
    """The four NetworkClient calls the push makes, with one always-ready node that offers the APIs."""

    def __init__(self) -> None:
        self.ready = True
        self.sent: list[tuple[ApiKey, dict[str, Any], Any]] = []

    def least_loaded_node(self, now: float) -> int:
        return 1

    def is_ready(self, node: int, now: float) -> bool:
        return self.ready

    def broker_api_versions(self, node: int) -> dict[int, tuple[int, int]]:
        return {71: (0, 0), 72: (0, 0)}

    def send(self, node: int, api: ApiKey, body: dict[str, Any], now: float, *, context: Any) -> int:
        self.sent.append((api, body, context))
        return len(self.sent)


def _answer(client: _Client, body: dict[str, Any] | None) -> None:
    api, _, handler = client.sent[-1]
    handler(ClientResponse(1, int(api), 0, len(client.sent), body, None, handler, 1.0))


def _subscription(**overrides: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "client_instance_id": INSTANCE, "subscription_id": 7,
            "accepted_compression_types": [], "push_interval_ms": 1000, "telemetry_max_bytes": 1 << 20,
            "delta_temporality": False, "requested_metrics": ["org.apache.kafka.producer.record."], **overrides}


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _push(values: dict[str, float]) -> tuple[ClientMetricsPush, _Client, _Clock]:
    client, clock = _Client(), _Clock()
    push = ClientMetricsPush(client=client, snapshot=lambda: dict(values), client_id="c",  # type: ignore[arg-type]
                             retry_backoff_ms=100, clock=clock, wall_clock_ns=lambda: 5)
    return push, client, clock


def test_java_telemetry_names() -> None:
    assert telemetry_metric_name("record-send-total") == ("org.apache.kafka.producer.record.send.total", {})
    assert telemetry_metric_name("topic.a.b-c.byte-rate") == ("org.apache.kafka.producer.topic.byte.rate",
                                                              {"topic": "a.b-c"})


def test_subscribe_then_push_only_the_requested_prefixes_every_interval() -> None:
    push, client, clock = _push({"record-send-total": 3.0, "batch-size-avg": 10.0})
    assert push.poll(clock.now) == float("inf")
    assert client.sent[0][0] == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
    assert client.sent[0][1] == {"client_instance_id": bytes(16)}
    _answer(client, _subscription())
    assert push.client_instance_id(0).bytes == INSTANCE  # type: ignore[union-attr]
    wait = push.poll(clock.now)
    assert 500 <= wait <= 1500  # the first push is jittered, as Java staggers clients
    clock.now += wait
    push.poll(clock.now)
    api, body, _ = client.sent[-1]
    assert (api, body["subscription_id"], body["terminating"]) == (ApiKey.PUSH_TELEMETRY, 7, False)
    assert b"org.apache.kafka.producer.record.send.total" in body["metrics"]
    assert b"batch.size.avg" not in body["metrics"]
    _answer(client, {"throttle_time_ms": 0, "error_code": 0})
    assert push.poll(clock.now) == pytest.approx(1000)


def test_unknown_subscription_id_fetches_the_subscription_at_once() -> None:
    push, client, clock = _push({})
    push.poll(clock.now)
    _answer(client, _subscription())
    clock.now += 2000
    push.poll(clock.now)
    _answer(client, {"throttle_time_ms": 0, "error_code": 117})
    assert push.state is PushState.SUBSCRIPTION_NEEDED
    push.poll(clock.now)
    assert client.sent[-1][0] == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
    assert client.sent[-1][1] == {"client_instance_id": INSTANCE}  # the id the broker gave is kept


@pytest.mark.parametrize("code", [42, 87, 35])  # INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION
def test_errors_java_treats_as_final_stop_the_pushes(code: int) -> None:
    push, client, clock = _push({})
    push.poll(clock.now)
    _answer(client, _subscription(error_code=code))
    assert push.state is PushState.TERMINATED
    assert push.poll(clock.now + 10**9) == float("inf")


def test_other_errors_wait_the_default_interval() -> None:
    push, client, clock = _push({})
    push.poll(clock.now)
    _answer(client, _subscription(error_code=15))  # COORDINATOR_NOT_AVAILABLE: nothing special
    assert push.poll(clock.now) == DEFAULT_PUSH_INTERVAL_MS


def test_close_sends_one_terminating_push() -> None:
    push, client, clock = _push({"record-send-total": 1.0})
    push.poll(clock.now)
    _answer(client, _subscription())
    push.initiate_close()
    assert push.closing
    push.poll(clock.now)  # not waiting for the interval
    assert client.sent[-1][1]["terminating"] is True
    _answer(client, {"throttle_time_ms": 0, "error_code": 0})
    assert not push.closing and push.state is PushState.TERMINATED


def test_delta_temporality_pushes_the_change_since_the_last_push() -> None:
    values = {"record-send-total": 5.0}
    push, client, clock = _push(values)
    push.poll(clock.now)
    _answer(client, _subscription(delta_temporality=True, push_interval_ms=10))
    clock.now += 100
    push.poll(clock.now)
    first = client.sent[-1][1]["metrics"]
    _answer(client, {"throttle_time_ms": 0, "error_code": 0})
    values["record-send-total"] = 8.0
    clock.now += 100
    push.poll(clock.now)
    second = client.sent[-1][1]["metrics"]
    assert struct.pack("<d", 5.0) in first and struct.pack("<d", 3.0) in second


def test_close_with_no_broker_ready_does_not_wait_for_one() -> None:
    push, client, clock = _push({"record-send-total": 1.0})
    push.poll(clock.now)
    _answer(client, _subscription())
    client.ready = False
    push.initiate_close()
    push.poll(clock.now)
    assert not push.closing


def test_the_payload_is_compressed_with_the_brokers_first_choice() -> None:
    push, client, clock = _push({"record-send-total": 1.0})
    push.poll(clock.now)
    _answer(client, _subscription(accepted_compression_types=[4, 3, 1, 2], push_interval_ms=10))
    clock.now += 100
    push.poll(clock.now)
    body = client.sent[-1][1]
    assert body["compression_type"] == 4
    assert b"record.send.total" in decompress(4, body["metrics"])
