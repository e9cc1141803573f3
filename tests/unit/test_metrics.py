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
    assert s["outgoing-byte-rate"] == pytest.approx(800 / 2.0)
    assert s["records-per-request-avg"] == 12
    assert s["topic.a.record-send-rate"] == pytest.approx(10 / 2.0)
    assert s["topic.a.byte-rate"] == pytest.approx(500 / 2.0)
    assert s["topic.a.compression-rate"] == 0.5 and s["topic.b.compression-rate"] == 1.0
    assert s["topic.b.record-send-rate"] == 0.0


def test_maxima_forget_samples_older_than_the_window() -> None:
    clock = Clock()
    m = ProducerMetrics(clock)
    m.request_latency(100)
    clock.now = m.WINDOW_S * 0.75  # the sample is in the previous half-window now: still counted
    m.request_latency(10)
    assert m.snapshot()["request-latency-max"] == 100
    clock.now = m.WINDOW_S * 1.3  # the first half-window rolled out
    assert m.snapshot()["request-latency-max"] == 10
    clock.now = m.WINDOW_S * 3
    assert m.snapshot()["request-latency-max"] == 0.0  # nothing in the window
