"""ProducerMetrics: Java's names, windowed averages and maxima, per-topic sensors, on a fake clock."""

from __future__ import annotations

import pytest

from kafkajet.producer.metrics import BatchStats, ProducerMetrics


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_batch_metrics_take_their_java_names_and_values() -> None:
    clock = Clock()
    m = ProducerMetrics(clock)
    m.request_sent([BatchStats("a", 500, 1000, 939, 10, 120, 7.0),
                    BatchStats("b", 300, 300, 239, 2, 130, 3.0)], 12)
    m.records_sent(10, "a")
    m.throttle_time(40)
    m.throttle_time(0)
    m.request_latency(5)
    m.request_latency(15)
    clock.now = 2.0
    s = m.snapshot()
    assert s["batch-size-avg"] == 400 and s["batch-size-max"] == 500
    assert s["record-queue-time-avg"] == 5.0 and s["record-queue-time-max"] == 7.0
    assert s["record-size-avg"] == pytest.approx((939 + 239) / 12) and s["record-size-max"] == 130
    assert s["compression-rate-avg"] == pytest.approx((0.5 + 1.0) / 2)
    assert s["produce-throttle-time-avg"] == 20 and s["produce-throttle-time-max"] == 40
    assert s["request-latency-avg"] == 10 and s["request-latency-max"] == 15
    assert s["records-per-request-avg"] == 12
    # Java's Rate: 2 s since the first sample began, plus a whole sample (30 s) while under one
    assert s["topic.a.record-send-rate"] == pytest.approx(10 / 32.0)
    assert s["topic.a.byte-rate"] == pytest.approx(500 / 32.0)
    assert s["topic.a.record-send-total"] == 10 and s["topic.a.byte-total"] == 500
    assert s["topic.a.compression-rate"] == 0.5 and s["topic.b.compression-rate"] == 1.0
    assert s["topic.b.record-send-rate"] == 0.0


def test_maxima_forget_samples_older_than_two_sample_windows() -> None:
    clock = Clock()
    m = ProducerMetrics(clock)
    m.request_latency(100)
    clock.now = m.WINDOW_S * 1.3  # a second sample begins; the first is still kept
    m.request_latency(10)
    assert m.snapshot()["request-latency-max"] == 100
    clock.now = m.WINDOW_S * 2.1  # the first sample is older than two windows: forgotten
    assert m.snapshot()["request-latency-max"] == 10
    clock.now = m.WINDOW_S * 5
    assert m.snapshot()["request-latency-max"] == 0.0  # nothing in the window


def test_rates_divide_as_javas_rate_does() -> None:
    """Numbers from Java's Rate.windowSize with the producer's defaults (2 samples of 30 s)."""
    clock = Clock()
    m = ProducerMetrics(clock)
    clock.now = 5.0
    m.records_sent(60, "t")  # the first sample begins here, not at construction
    clock.now = 11.0
    assert m.snapshot()["record-send-rate"] == pytest.approx(60 / (6 + 30))
    clock.now = 40.0
    m.records_sent(30, "t")  # a second sample: 35 s since the oldest began, one whole window, no padding
    assert m.snapshot()["record-send-rate"] == pytest.approx(90 / 35)
    clock.now = 70.0  # the first sample (begun at 5) is 65 s old: gone; the second has 30 s
    assert m.snapshot()["record-send-rate"] == pytest.approx(30 / 30)
    assert m.snapshot()["record-send-total"] == 90 and m.snapshot()["topic.t.record-send-total"] == 90


def test_errors_retries_splits_and_buffer_waits_by_java_names() -> None:
    clock = Clock()
    m = ProducerMetrics(clock)
    m.records_failed(3, "a")
    m.records_retried(4, "a")
    m.records_retried(1, "b")
    m.batch_split()
    m.buffer_exhausted()
    m.buffer_waited(1.5)
    m.blocked("flush-time-ns-total", 2_000)
    m.blocked("flush-time-ns-total", 500)
    clock.now = 10.0
    s = m.snapshot()
    assert s["topic.a.record-error-total"] == 3 and s["topic.a.record-retry-total"] == 4
    assert s["topic.b.record-retry-total"] == 1 and s["topic.b.record-error-total"] == 0
    assert s["record-retry-total"] == 5 and s["record-error-total"] == 3
    assert s["topic.a.record-error-rate"] == pytest.approx(3 / 40)
    assert s["batch-split-total"] == 1 and s["batch-split-rate"] == pytest.approx(1 / 40)
    assert s["buffer-exhausted-total"] == 1 and s["buffer-exhausted-rate"] == pytest.approx(1 / 40)
    assert s["bufferpool-wait-ratio"] == pytest.approx(1.5 / 40)  # seconds waited per second
    assert s["flush-time-ns-total"] == 2_500
