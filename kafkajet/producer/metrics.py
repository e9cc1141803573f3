"""Producer metrics: windowed rates, averages and totals, readable from any thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class _Windowed:
    """Sum and count over the last window (two half-windows, rolled lazily), as Java's SampledStat does."""

    __slots__ = ("window_s", "_start", "_prev_sum", "_prev_count", "_sum", "_count", "_prev_start")

    def __init__(self, window_s: float, now: float) -> None:
        self.window_s = window_s
        self._start = now
        self._prev_start = now
        self._prev_sum = 0.0
        self._prev_count = 0
        self._sum = 0.0
        self._count = 0

    def _roll(self, now: float) -> None:
        half = self.window_s / 2
        if now - self._start >= half:
            if now - self._start >= self.window_s:
                self._prev_sum, self._prev_count, self._prev_start = 0.0, 0, now - half
            else:
                self._prev_sum, self._prev_count, self._prev_start = self._sum, self._count, self._start
            self._sum, self._count, self._start = 0.0, 0, now

    def record(self, value: float, count: int, now: float) -> None:
        self._roll(now)
        self._sum += value
        self._count += count

    def rate(self, now: float) -> float:
        self._roll(now)
        elapsed = max(now - self._prev_start, 1e-3)
        return (self._sum + self._prev_sum) / elapsed

    def avg(self, now: float) -> float:
        self._roll(now)
        n = self._count + self._prev_count
        return (self._sum + self._prev_sum) / n if n else 0.0


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
        self.totals = {"record-send-total": 0, "record-error-total": 0, "record-retry-total": 0,
                       "request-total": 0, "batch-split-total": 0}
        self.gauges: dict[str, Callable[[], float]] = {}

    def records_sent(self, n: int) -> None:
        with self._lock:
            self._send.record(n, n, self._clock())
            self.totals["record-send-total"] += n

    def records_failed(self, n: int) -> None:
        with self._lock:
            self._error.record(n, n, self._clock())
            self.totals["record-error-total"] += n

    def records_retried(self, n: int) -> None:
        with self._lock:
            self._retry.record(n, n, self._clock())
            self.totals["record-retry-total"] += n

    def request_sent(self, batch_sizes: list[int], records: int) -> None:
        with self._lock:
            now = self._clock()
            for size in batch_sizes:
                self._batch_size.record(size, 1, now)
            self._records_per_request.record(records, 1, now)
            self.totals["request-total"] += 1

    def request_latency(self, ms: float) -> None:
        with self._lock:
            self._latency.record(ms, 1, self._clock())

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
            }
            out.update({k: float(v) for k, v in self.totals.items()})
        for name, gauge in self.gauges.items():
            out[name] = float(gauge())
        return out
