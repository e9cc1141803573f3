"""Producer metrics: windowed rates, averages and totals, readable from any thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple


class _Windowed:
    """Sum and count over the last window (two half-windows, rolled lazily), as Java's SampledStat does."""

    __slots__ = ("window_s", "_start", "_prev_sum", "_prev_count", "_sum", "_count", "_prev_start", "_max",
                 "_prev_max")

    def __init__(self, window_s: float, now: float) -> None:
        self.window_s = window_s
        self._start = now
        self._prev_start = now
        self._prev_sum = 0.0
        self._prev_count = 0
        self._sum = 0.0
        self._count = 0
        self._max = self._prev_max = float("-inf")

    def _roll(self, now: float) -> None:
        half = self.window_s / 2
        if now - self._start >= half:
            if now - self._start >= self.window_s:
                self._prev_sum, self._prev_count, self._prev_start = 0.0, 0, now - half
                self._prev_max = float("-inf")
            else:
                self._prev_sum, self._prev_count, self._prev_start = self._sum, self._count, self._start
                self._prev_max = self._max
            self._sum, self._count, self._start = 0.0, 0, now
            self._max = float("-inf")

    def record(self, value: float, count: int, now: float, largest: float | None = None) -> None:
        """Add `value` as `count` samples; `largest` is the biggest single sample among them (default value)."""
        self._roll(now)
        self._sum += value
        self._count += count
        top = value if largest is None else largest
        if top > self._max:
            self._max = top

    def max(self, now: float) -> float:
        """The largest sample in the window; Java reports NaN with none, this 0.0 (a float users can compare)."""
        self._roll(now)
        top = max(self._max, self._prev_max)
        return top if top != float("-inf") else 0.0

    def rate(self, now: float) -> float:
        self._roll(now)
        elapsed = max(now - self._prev_start, 1e-3)
        return (self._sum + self._prev_sum) / elapsed

    def avg(self, now: float) -> float:
        self._roll(now)
        n = self._count + self._prev_count
        return (self._sum + self._prev_sum) / n if n else 0.0


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
    WINDOW_S = 30.0

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
        # Java's per-topic sensors, named as it names them: topic.<name>.record-send-rate and so on.
        self._topics: dict[str, tuple[_Windowed, _Windowed, _Windowed]] = {}
        self.totals = {"record-send-total": 0, "record-error-total": 0, "record-retry-total": 0,
                       "request-total": 0, "batch-split-total": 0,
                       # kafkajet's own: records produce() queued without a callback that failed (logged too)
                       "record-error-no-callback-total": 0}
        self.gauges: dict[str, Callable[[], float]] = {}

    def records_sent(self, n: int, topic: str | None = None) -> None:
        with self._lock:
            now = self._clock()
            self._send.record(n, n, now)
            self.totals["record-send-total"] += n
            per_topic = self._topics.get(topic) if topic is not None else None
            if per_topic is not None:
                per_topic[0].record(n, n, now)

    def records_failed(self, n: int) -> None:
        with self._lock:
            self._error.record(n, n, self._clock())
            self.totals["record-error-total"] += n

    def records_unheard_failed(self, n: int) -> None:
        with self._lock:
            self.totals["record-error-no-callback-total"] += n

    def records_retried(self, n: int) -> None:
        with self._lock:
            self._retry.record(n, n, self._clock())
            self.totals["record-retry-total"] += n

    def request_sent(self, batches: list[BatchStats], records: int) -> None:
        """A Produce request left with these batches (Java's Sender.updateProduceRequestMetrics)."""
        with self._lock:
            now = self._clock()
            window_s = self.WINDOW_S
            for b in batches:
                self._batch_size.record(b.size, 1, now)
                self._queue_time.record(b.queue_ms, 1, now)
                self._record_size.record(b.records_bytes, b.records, now, b.max_record)
                rate = b.size / b.uncompressed if b.uncompressed else 1.0
                self._compression.record(rate, 1, now)
                per_topic = self._topics.get(b.topic)
                if per_topic is None:
                    per_topic = self._topics[b.topic] = (_Windowed(window_s, now), _Windowed(window_s, now),
                                                         _Windowed(window_s, now))
                per_topic[1].record(b.size, 1, now)
                per_topic[2].record(rate, 1, now)
            self._records_per_request.record(records, 1, now)
            self.totals["request-total"] += 1

    def request_latency(self, ms: float) -> None:
        with self._lock:
            self._latency.record(ms, 1, self._clock())

    def throttle_time(self, ms: float) -> None:
        with self._lock:
            self._throttle.record(ms, 1, self._clock())

    def batch_split(self) -> None:
        with self._lock:
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
                "outgoing-byte-rate": self._batch_size.rate(now),  # the same samples: bytes per batch sent
                "produce-throttle-time-avg": self._throttle.avg(now),
                "produce-throttle-time-max": self._throttle.max(now),
            }
            for topic, (sent, size, compression) in self._topics.items():
                out[f"topic.{topic}.record-send-rate"] = sent.rate(now)
                out[f"topic.{topic}.byte-rate"] = size.rate(now)
                out[f"topic.{topic}.compression-rate"] = compression.avg(now)
            out.update({k: float(v) for k, v in self.totals.items()})
        for name, gauge in self.gauges.items():
            out[name] = float(gauge())
        return out
