"""Client metrics pushed to the broker (KIP-714), as Java's ClientTelemetryReporter does it.

After the first connection the sender asks the least loaded node for a subscription (GetTelemetrySubscriptions,
with a zero client instance id the first time: the broker assigns one). A subscription whose requested metrics
match anything starts a push every push_interval_ms (the first one after a jittered interval, as Java staggers
clients); each push carries the producer's metrics, named as Java names them for telemetry, in an OTLP
MetricsData. close() ends with a terminating push. A broker without the APIs (no telemetry plugin, Tansu,
before 3.7) switches this off quietly; any error changes only when the next request goes, never produce.

The sender thread owns this object; client_instance_id() is the one method other threads call.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from kafkajet._version import __version__
from kafkajet.clock import now_ms
from kafkajet.errors import (
    NO_ERROR,
    KafkaError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
)
from kafkajet.network import ClientResponse, NetworkClient
from kafkajet.producer.otlp import CUMULATIVE, DELTA, Point, metrics_data
from kafkajet.protocol import ApiKey
from kafkajet.records.codecs import compress

log = logging.getLogger("kafkajet.producer.metrics_push")

ZERO_UUID = bytes(16)
# Java's ClientTelemetryReporter.DEFAULT_PUSH_INTERVAL_MS: the wait after an error that names none.
DEFAULT_PUSH_INTERVAL_MS = 5 * 60 * 1000
_DISABLED = float("inf")
# Java's initial push jitter: the first push after 0.5 to 1.5 push intervals.
_JITTER = (0.5, 1.5)
_ALL_METRICS = "*"
_CODECS = frozenset({0, 1, 2, 3, 4})  # none, gzip, snappy, lz4, zstd: the records' codecs, in their framing
_DOMAIN = "org.apache.kafka"
# Errors after which the broker will not take this client's telemetry (Java's maybeFetchErrorIntervalMs).
_FATAL_CODES = frozenset({42, 87, 35})  # INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION
_REFETCH_NOW_CODES = frozenset({UnknownSubscriptionIdError.code, UnsupportedCompressionTypeError.code})
_WAIT_INTERVAL_CODES = frozenset({TelemetryTooLargeError.code, ThrottlingQuotaExceededError.code})


class PushState(Enum):
    SUBSCRIPTION_NEEDED = "subscription-needed"
    SUBSCRIPTION_IN_PROGRESS = "subscription-in-progress"
    PUSH_NEEDED = "push-needed"
    PUSH_IN_PROGRESS = "push-in-progress"
    TERMINATING_PUSH_NEEDED = "terminating-push-needed"
    TERMINATING_PUSH_IN_PROGRESS = "terminating-push-in-progress"
    TERMINATED = "terminated"


def telemetry_metric_name(name: str) -> tuple[str, dict[str, str]]:
    """A name from ProducerMetrics.snapshot() -> Java's telemetry name and attributes
    (TelemetryMetricNamingConvention: "org.apache.kafka." + group without "-metrics" + "." + name, lower case,
    '-' -> '.'; tag keys '-' -> '_'). kafkajet's per-topic names are Java's producer-topic-metrics group."""
    if name.startswith("topic."):
        topic, _, metric = name[len("topic."):].rpartition(".")
        return f"{_DOMAIN}.producer.topic.{metric.lower().replace('-', '.')}", {"topic": topic}
    return f"{_DOMAIN}.producer.{name.lower().replace('-', '.')}", {}


class ClientMetricsPush:
    def __init__(self, *, client: NetworkClient, snapshot: Callable[[], Mapping[str, float]], client_id: str,
                 retry_backoff_ms: float, rng: random.Random | None = None,
                 clock: Callable[[], float] = now_ms, wall_clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._client = client
        self._snapshot = snapshot
        self._client_id = client_id
        self._retry_backoff_ms = retry_backoff_ms
        self._rng = rng or random.Random()
        self._clock = clock
        self._wall_clock_ns = wall_clock_ns
        self._closing = False  # close() began: the next push is the terminating one
        self.state = PushState.SUBSCRIPTION_NEEDED
        self._instance_id = ZERO_UUID
        self._instance_known = threading.Condition()
        self._subscription: dict[str, Any] | None = None
        self._next_at = 0.0  # when the next request is due (sender clock, ms)
        self._start_ns = wall_clock_ns()
        self._last_push_ns = self._start_ns
        self._last_values: dict[str, float] = {}
        self.pushes = 0  # pushes answered without error: for tests and logs

    # --- called from any thread -----------------------------------------------------------------------

    def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """The id the broker assigned, waiting up to `timeout` seconds for it; None if it did not come (or the
        brokers do not take client metrics), as Java's clientInstanceId returns null."""
        if timeout < 0:
            raise ValueError(f"client_instance_id: timeout must not be negative, got {timeout}")
        deadline = time.monotonic() + timeout
        with self._instance_known:
            while self._instance_id == ZERO_UUID and self.state is not PushState.TERMINATED:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._instance_known.wait(left)
            return None if self._instance_id == ZERO_UUID else uuid.UUID(bytes=self._instance_id)

    # --- the sender thread ------------------------------------------------------------------------------

    def poll(self, now: float) -> float:
        """Send what is due; returns how long (ms) until something is due again."""
        state = self.state
        if state in (PushState.SUBSCRIPTION_IN_PROGRESS, PushState.PUSH_IN_PROGRESS,
                     PushState.TERMINATING_PUSH_IN_PROGRESS, PushState.TERMINATED):
            return _DISABLED
        if state is not PushState.TERMINATING_PUSH_NEEDED and now < self._next_at:
            return self._next_at - now
        node = self._client.least_loaded_node(now)
        if node is None or not self._client.is_ready(node, now):
            if state is PushState.TERMINATING_PUSH_NEEDED:
                # Closing with no broker to tell: the close must not wait for one.
                self._terminate()
                return _DISABLED
            # Only on a connection the producer made anyway: telemetry never opens one of its own.
            return self._retry_backoff_ms
        versions = self._client.broker_api_versions(node) or {}
        wanted = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS if state is PushState.SUBSCRIPTION_NEEDED \
            else ApiKey.PUSH_TELEMETRY
        if int(wanted) not in versions:
            log.debug("node %s does not offer %s: client metrics are not pushed", node, wanted.name)
            self._terminate()
            return _DISABLED
        try:
            if state is PushState.SUBSCRIPTION_NEEDED:
                self._client.send(node, wanted, {"client_instance_id": self._instance_id}, now,
                                  context=self._on_subscription)
                self.state = PushState.SUBSCRIPTION_IN_PROGRESS
            else:
                terminating = state is PushState.TERMINATING_PUSH_NEEDED
                self._client.send(node, wanted, self._push_body(terminating), now, context=self._on_push)
                self.state = PushState.TERMINATING_PUSH_IN_PROGRESS if terminating else PushState.PUSH_IN_PROGRESS
        except KafkaError as e:
            log.debug("client metrics request not sent: %s", e)
            return self._retry_backoff_ms
        return _DISABLED

    def initiate_close(self) -> None:
        """Java's initiateClose: a subscribed client sends one last, terminating push (after the request in
        flight, if one is)."""
        self._closing = True
        if self.state is PushState.PUSH_NEEDED:
            self.state = PushState.TERMINATING_PUSH_NEEDED
        elif self.state is PushState.SUBSCRIPTION_NEEDED:
            self._terminate()

    @property
    def closing(self) -> bool:
        """close() began and the terminating push is still to be sent or answered."""
        return self._closing and self.state is not PushState.TERMINATED

    def _terminate(self) -> None:
        with self._instance_known:
            self.state = PushState.TERMINATED
            self._instance_known.notify_all()

    def _push_body(self, terminating: bool) -> dict[str, Any]:
        sub = self._subscription
        assert sub is not None
        delta = bool(sub["delta_temporality"])
        now_ns = self._wall_clock_ns()
        points: list[Point] = []
        for name, value in sorted(self._snapshot().items()):
            metric, attributes = telemetry_metric_name(name)
            if not self._selected(metric):
                continue
            if name.endswith("-total"):
                # Java's cumulative sums; with delta temporality the change since the last push.
                start = self._last_push_ns if delta else self._start_ns
                reported = value - self._last_values.get(name, 0.0) if delta else value
                self._last_values[name] = value
                points.append(Point(metric, reported, now_ns, start, True, attributes))
            else:
                points.append(Point(metric, value, now_ns, 0, False, attributes))
        self._last_push_ns = now_ns
        payload = metrics_data(points, resource={"client_id": self._client_id}, scope_name="kafkajet",
                               scope_version=__version__, temporality=DELTA if delta else CUMULATIVE)
        limit = int(sub["telemetry_max_bytes"])
        if 0 < limit < len(payload):
            log.debug("client metrics payload of %d bytes exceeds the broker's %d: sent empty", len(payload), limit)
            payload = metrics_data([], resource={"client_id": self._client_id}, scope_name="kafkajet",
                                   scope_version=__version__)
        codec = self._codec(sub["accepted_compression_types"])
        if codec:
            try:
                payload = compress(codec, payload)
            except Exception as e:  # a codec this installation lacks: send it as it is, as Java falls back
                log.debug("client metrics not compressed with codec %d: %s", codec, e)
                codec = 0
        return {"client_instance_id": self._instance_id, "subscription_id": sub["subscription_id"],
                "terminating": terminating, "compression_type": codec, "metrics": payload}

    @staticmethod
    def _codec(accepted: list[int]) -> int:
        """Java's ClientTelemetryUtils.preferredCompressionType: the broker lists the types in its order of
        preference; the first one it names, or none."""
        return int(accepted[0]) if accepted and int(accepted[0]) in _CODECS else 0

    def _selected(self, metric: str) -> bool:
        sub = self._subscription
        requested = [] if sub is None else sub["requested_metrics"]
        if requested == [_ALL_METRICS]:
            return True
        return any(metric.startswith(prefix) for prefix in requested)

    def _error_wait(self, code: int) -> float:
        """Java's ClientTelemetryUtils.maybeFetchErrorIntervalMs: how long an error defers the next request."""
        if code in _FATAL_CODES:
            return _DISABLED
        if code in _REFETCH_NOW_CODES:
            return 0.0
        if code in _WAIT_INTERVAL_CODES and self._subscription is not None:
            return float(self._subscription["push_interval_ms"])
        return float(DEFAULT_PUSH_INTERVAL_MS)

    def _on_subscription(self, response: ClientResponse) -> None:
        now = self._clock()
        body = response.body
        if response.error is not None or body is None:
            log.debug("GetTelemetrySubscriptions failed: %s", response.error)
            self.state = PushState.SUBSCRIPTION_NEEDED
            self._next_at = now + self._retry_backoff_ms
            return
        code = body["error_code"]
        if code != NO_ERROR:
            wait = self._error_wait(code)
            log.debug("GetTelemetrySubscriptions answered error %d", code)
            if wait == _DISABLED:
                self._terminate()
                return
            self.state = PushState.SUBSCRIPTION_NEEDED
            self._next_at = now + wait
            return
        with self._instance_known:
            if self._instance_id == ZERO_UUID and bytes(body["client_instance_id"]) != ZERO_UUID:
                self._instance_id = bytes(body["client_instance_id"])
            self._instance_known.notify_all()
        first = self._subscription is None
        self._subscription = body
        interval = float(body["push_interval_ms"])
        if first:
            interval *= self._rng.uniform(*_JITTER)
        self._next_at = now + interval
        if not body["requested_metrics"]:
            # Nothing asked for: look again after the interval, as Java does.
            self.state = PushState.SUBSCRIPTION_NEEDED
            if self._closing:
                self._terminate()
        else:
            self.state = PushState.TERMINATING_PUSH_NEEDED if self._closing else PushState.PUSH_NEEDED

    def _on_push(self, response: ClientResponse) -> None:
        now = self._clock()
        terminating = self.state is PushState.TERMINATING_PUSH_IN_PROGRESS
        body = response.body
        code = -1 if body is None else body["error_code"]
        if code == NO_ERROR:
            self.pushes += 1
        else:
            log.debug("PushTelemetry failed: %s", response.error or code)
        if terminating:
            self._terminate()
            return
        if self._closing and code == NO_ERROR:
            self.state = PushState.TERMINATING_PUSH_NEEDED  # the push that was in flight at close()
            return
        sub = self._subscription
        assert sub is not None
        if code == NO_ERROR:
            self.state = PushState.PUSH_NEEDED
            self._next_at = now + float(sub["push_interval_ms"])
            return
        wait = self._retry_backoff_ms if body is None else self._error_wait(code)
        if wait == _DISABLED or self._closing:
            self._terminate()
            return
        # UNKNOWN_SUBSCRIPTION_ID and the like: the subscription changed; fetch it again.
        self.state = PushState.SUBSCRIPTION_NEEDED if code in _REFETCH_NOW_CODES or body is None \
            else PushState.PUSH_NEEDED
        self._next_at = now + wait


__all__ = ["ClientMetricsPush", "PushState", "telemetry_metric_name"]
