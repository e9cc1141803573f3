"""Windowed statistics as Java's SampledStat keeps them (metrics.num.samples=2, metrics.sample.window.ms=30000,
the producer's defaults): what the producer's metrics and the network's traffic counts share, so that a rate
read after the same workload is the number Java's metrics() gives."""

from __future__ import annotations


class Windowed:
    """Sum, count and maximum over two samples of `sample_s` seconds each; a sample starts with the first
    value recorded after the last one filled, and one older than two samples is forgotten when read or
    written. Rates divide by the time since the oldest sample began, plus one whole sample while that is
    under one (Java's Rate.windowSize): a burst reads as spread over at least 30 s, as Java reads it."""

    __slots__ = ("sample_s", "_start", "_sum", "_count", "_max", "_prev_start", "_prev_sum", "_prev_count",
                 "_prev_max", "_started", "total", "count_total")

    def __init__(self, sample_s: float, now: float) -> None:
        self.sample_s = sample_s
        self._started = False  # no sample yet: Java makes the first one at the first value (or read)
        self._start = self._prev_start = now
        self._sum = self._prev_sum = 0.0
        self._count = self._prev_count = 0
        self._max = self._prev_max = float("-inf")
        self._prev_start = float("nan")  # no previous sample
        self.total = 0.0  # every value ever recorded (Java's CumulativeSum beside the windowed Rate)
        self.count_total = 0  # every sample ever recorded (Java's CumulativeCount)

    def _purge(self, now: float) -> None:
        expire = 2 * self.sample_s
        if self._prev_start == self._prev_start and now - self._prev_start >= expire:
            self._prev_start = float("nan")
            self._prev_sum, self._prev_count, self._prev_max = 0.0, 0, float("-inf")
        if self._started and now - self._start >= expire:
            # Java resets an expired sample to begin now (it stays the oldest one).
            self._start, self._sum, self._count, self._max = now, 0.0, 0, float("-inf")

    def _current(self, now: float) -> None:
        if not self._started:
            self._started, self._start = True, now
        elif now - self._start >= self.sample_s:
            self._prev_start, self._prev_sum, self._prev_count, self._prev_max = (
                self._start, self._sum, self._count, self._max)
            self._start, self._sum, self._count, self._max = now, 0.0, 0, float("-inf")

    def record(self, value: float, count: int, now: float, largest: float | None = None) -> None:
        """Add `value` as `count` samples; `largest` is the biggest single sample among them (default value)."""
        self._purge(now)
        self._current(now)
        self.total += value
        self.count_total += count
        self._sum += value
        self._count += count
        top = value if largest is None else largest
        if top > self._max:
            self._max = top

    def max(self, now: float) -> float:
        """The largest sample in the window; Java reports NaN with none, this 0.0 (a float users can compare)."""
        self._purge(now)
        top = max(self._max, self._prev_max)
        return top if top != float("-inf") else 0.0

    def _elapsed(self, now: float) -> float:
        if not self._started:
            self._started, self._start = True, now  # as Java's oldest(): a read makes the first sample
        oldest = self._prev_start if self._prev_start == self._prev_start else self._start
        elapsed = now - oldest
        full = int(elapsed // self.sample_s)
        return elapsed + (1 - full) * self.sample_s if full < 1 else elapsed

    def rate(self, now: float) -> float:
        """Values per second."""
        self._purge(now)
        return (self._sum + self._prev_sum) / self._elapsed(now)

    def count_rate(self, now: float) -> float:
        """Samples (not their values) per second."""
        self._purge(now)
        return (self._count + self._prev_count) / self._elapsed(now)

    def avg(self, now: float) -> float:
        self._purge(now)
        n = self._count + self._prev_count
        return (self._sum + self._prev_sum) / n if n else 0.0
