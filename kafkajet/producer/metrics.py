"""Producer metrics: windowed rates, averages and totals, readable from any thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from kafkajet.stats import Windowed as _Windowed


def java_metric_name(name: str) -> tuple[str, str, dict[str, str]]:
    """The Java group, name and tags (less client-id) a metrics() name stands for: topic.<t>.<m> and
    node-<id>.<m> fold the tag into the name (topic names never end with a metric name, so the last dot splits).
    """
    if name.startswith("topic."):
        topic, _, metric = name[len("topic."):].rpartition(".")
        return "producer-topic-metrics", metric, {"topic": topic}
    if name.startswith("node-"):
        node, _, metric = name.partition(".")
        return "producer-node-metrics", metric, {"node-id": node}
    return "producer-metrics", name, {}


class BatchStats(NamedTuple):
    """What the metrics take from one batch as its request leaves."""

    topic: str
    size: int  # bytes on the wire (compressed)
    uncompressed: int  # bytes before compression
    records_bytes: int  # the records' bytes, for record-size-avg
    records: int
    max_record: int  # the largest record in bytes (send()'s; for send_batch()/send_arrow() batches, their average)
    queue_ms: float  # from the batch's creation to this send


class ProducerMetrics:
    WINDOW_S = 30.0  # one sample's length (Java's metrics.sample.window.ms); two are kept

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._send = _Windowed(self.WINDOW_S, now)
        self._error = _Windowed(self.WINDOW_S, now)
        self._retry = _Windowed(self.WINDOW_S, now)
        self._batch_size = _Windowed(self.WINDOW_S, now)
        self._records_per_request = _Windowed(self.WINDOW_S, now)
        self._latency = _Windowed(self.WINDOW_S, now)
        self._queue_time = _Windowed(self.WINDOW_S, now)
        self._record_size = _Windowed(self.WINDOW_S, now)
        self._compression = _Windowed(self.WINDOW_S, now)
        self._throttle = _Windowed(self.WINDOW_S, now)
        self._split = _Windowed(self.WINDOW_S, now)
        self._exhausted = _Windowed(self.WINDOW_S, now)
        self._buffer_wait = _Windowed(self.WINDOW_S, now)  # seconds waited for buffer memory
        # Java's per-topic sensors (producer-topic-metrics), flattened as topic.<name>.<metric>.
        self._topics: dict[str, _TopicStats] = {}
        # Java's producer-node-metrics request latency, flattened as node-<id>.<metric> (the node's traffic is
        # the network client's).
        self._node_latency: dict[int, _Windowed] = {}
        self.totals = {"record-send-total": 0, "record-error-total": 0, "record-retry-total": 0,
                       "batch-split-total": 0, "buffer-exhausted-total": 0,
                       # Java's blocking calls, each a total of the time spent in it
                       "flush-time-ns-total": 0, "metadata-wait-time-ns-total": 0,
                       "txn-init-time-ns-total": 0, "txn-begin-time-ns-total": 0,
                       "txn-send-offsets-time-ns-total": 0, "txn-commit-time-ns-total": 0,
                       "txn-abort-time-ns-total": 0, "txn-prepare-time-ns-total": 0,
                       # kafkajet's own: records produce() queued without a callback that failed (logged too)
                       "record-error-no-callback-total": 0}
        self.gauges: dict[str, Callable[[], float]] = {}
        # More metrics read at snapshot time, by name (the network client's traffic counts).
        self.sources: list[Callable[[], dict[str, float]]] = []

    def _topic(self, topic: str, now: float) -> _TopicStats:
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = _TopicStats(self.WINDOW_S, now)
        return stats

    def records_sent(self, n: int, topic: str | None = None) -> None:
        with self._lock:
            now = self._clock()
            self._send.record(n, n, now)
            self.totals["record-send-total"] += n
            if topic is not None:
                self._topic(topic, now).sent.record(n, n, now)

    def records_failed(self, n: int, topic: str | None = None) -> None:
        with self._lock:
            now = self._clock()
            self._error.record(n, n, now)
            self.totals["record-error-total"] += n
            if topic is not None:
                self._topic(topic, now).errors.record(n, n, now)

    def records_unheard_failed(self, n: int) -> None:
        with self._lock:
            self.totals["record-error-no-callback-total"] += n

    def records_retried(self, n: int, topic: str | None = None) -> None:
        with self._lock:
            now = self._clock()
            self._retry.record(n, n, now)
            self.totals["record-retry-total"] += n
            if topic is not None:
                self._topic(topic, now).retries.record(n, n, now)

    def buffer_exhausted(self) -> None:
        with self._lock:
            self._exhausted.record(1, 1, self._clock())
            self.totals["buffer-exhausted-total"] += 1

    def buffer_waited(self, seconds: float) -> None:
        with self._lock:
            self._buffer_wait.record(seconds, 1, self._clock())

    def blocked(self, name: str, ns: int) -> None:
        """Time spent in one of Java's timed blocking calls (flush, metadata wait, transactions)."""
        with self._lock:
            self.totals[name] += ns

    def request_sent(self, batches: list[BatchStats], records: int) -> None:
        """A Produce request left with these batches (Java's Sender.updateProduceRequestMetrics)."""
        with self._lock:
            now = self._clock()
            for b in batches:
                self._batch_size.record(b.size, 1, now)
                self._queue_time.record(b.queue_ms, 1, now)
                self._record_size.record(b.records_bytes, b.records, now, b.max_record)
                rate = b.size / b.uncompressed if b.uncompressed else 1.0
                self._compression.record(rate, 1, now)
                per_topic = self._topic(b.topic, now)
                per_topic.size.record(b.size, 1, now)
                per_topic.compression.record(rate, 1, now)
            self._records_per_request.record(records, 1, now)

    def request_latency(self, ms: float, node_id: int | None = None) -> None:
        with self._lock:
            now = self._clock()
            self._latency.record(ms, 1, now)
            if node_id is not None:
                node = self._node_latency.get(node_id)
                if node is None:
                    node = self._node_latency[node_id] = _Windowed(self.WINDOW_S, now)
                node.record(ms, 1, now)

    def throttle_time(self, ms: float) -> None:
        with self._lock:
            self._throttle.record(ms, 1, self._clock())

    def batch_split(self) -> None:
        with self._lock:
            self._split.record(1, 1, self._clock())
            self.totals["batch-split-total"] += 1

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            now = self._clock()
            out: dict[str, float] = {
                "record-send-rate": self._send.rate(now),
                "record-error-rate": self._error.rate(now),
                "record-retry-rate": self._retry.rate(now),
                "batch-size-avg": self._batch_size.avg(now),
                "records-per-request-avg": self._records_per_request.avg(now),
                "request-latency-avg": self._latency.avg(now),
                "request-latency-max": self._latency.max(now),
                "batch-size-max": self._batch_size.max(now),
                "record-queue-time-avg": self._queue_time.avg(now),
                "record-queue-time-max": self._queue_time.max(now),
                "record-size-avg": self._record_size.avg(now),
                "record-size-max": self._record_size.max(now),
                "compression-rate-avg": self._compression.avg(now),
                "produce-throttle-time-avg": self._throttle.avg(now),
                "produce-throttle-time-max": self._throttle.max(now),
                "batch-split-rate": self._split.rate(now),
                "buffer-exhausted-rate": self._exhausted.rate(now),
                # Java's Rate over nanoseconds waited, per second: the fraction of time spent waiting
                "bufferpool-wait-ratio": self._buffer_wait.rate(now),
            }
            for topic, t in self._topics.items():
                out.update({
                    f"topic.{topic}.record-send-rate": t.sent.rate(now),
                    f"topic.{topic}.record-send-total": t.sent.total,
                    f"topic.{topic}.byte-rate": t.size.rate(now),
                    f"topic.{topic}.byte-total": t.size.total,
                    f"topic.{topic}.compression-rate": t.compression.avg(now),
                    f"topic.{topic}.record-error-rate": t.errors.rate(now),
                    f"topic.{topic}.record-error-total": t.errors.total,
                    f"topic.{topic}.record-retry-rate": t.retries.rate(now),
                    f"topic.{topic}.record-retry-total": t.retries.total,
                })
            latencies = {node_id: (latency.avg(now), latency.max(now))
                         for node_id, latency in self._node_latency.items()}
            out.update({k: float(v) for k, v in self.totals.items()})
        for source in self.sources:
            out.update(source())
        # Java gives every node it talked to a request latency (NaN until a Produce answer: 0.0 here).
        nodes = {name[5:-len(".request-total")] for name in out if name.startswith("node-")
                 and name.endswith(".request-total")}
        for node in nodes:
            out.setdefault(f"node-{node}.request-latency-avg", 0.0)
            out.setdefault(f"node-{node}.request-latency-max", 0.0)
        for node_id, (avg, top) in latencies.items():
            out[f"node-{node_id}.request-latency-avg"] = avg
            out[f"node-{node_id}.request-latency-max"] = top
        for name, gauge in self.gauges.items():
            out[name] = float(gauge())
        return out


class _TopicStats:
    """One topic's sensors (Java's producer-topic-metrics)."""

    __slots__ = ("sent", "size", "compression", "errors", "retries")

    def __init__(self, window_s: float, now: float) -> None:
        self.sent = _Windowed(window_s, now)  # records acknowledged
        self.size = _Windowed(window_s, now)  # bytes of the batches sent
        self.compression = _Windowed(window_s, now)
        self.errors = _Windowed(window_s, now)
        self.retries = _Windowed(window_s, now)
