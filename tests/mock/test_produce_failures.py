"""produce() on the failure paths a real broker cannot be made to take on demand: a record that fails with no
callback is logged (once per batch) and counted, one with a callback has that callback told once, and every
record ends in exactly one outcome, for the thread Producer, AIOProducer and the traced (opentelemetry) path."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from kafkajet import Producer, RecordMetadata
from kafkajet.aio import AIOProducer
from kafkajet.errors import InvalidRecordError, ProducerClosedError
from kafkajet.testing import MockCluster

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 2}), pytest.mark.timeout(60)]


def loss_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.ERROR and "without a callback" in r.getMessage()]


class Outcomes:
    """A delivery callback that keeps every call, and the threads it ran on."""

    def __init__(self) -> None:
        self.calls: list[tuple[RecordMetadata, BaseException | None]] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, md: RecordMetadata, exc: BaseException | None) -> None:
        with self._lock:
            self.calls.append((md, exc))
            self.threads.add(threading.get_ident())


def test_a_failed_record_without_a_callback_is_logged_once_per_batch_and_counted(
        cluster: MockCluster, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=200, client_id="fire") as p:
        p.partitions_for("t")
        cluster.push_request_errors("Produce", ["INVALID_RECORD"])
        for i in range(5):
            p.produce("t", b"v%d" % i, partition=0)  # one batch, one request: the one that fails
        p.flush(15)
        m = p.metrics()
        p.produce("t", b"after", partition=0)  # the producer goes on: delivered, nothing more reported
        p.flush(15)
    assert m["record-error-no-callback-total"] == 5 and m["record-error-total"] == 5
    assert p.metrics()["record-error-no-callback-total"] == 5
    [line] = loss_lines(caplog)
    assert line.startswith("producer fire: 5 record(s) queued by produce() without a callback failed for t-0: "
                           "InvalidRecordError") and "INVALID_RECORD" in line
    # caplog's handler does not write to stderr: the loss is said there too, once.
    assert capsys.readouterr().err.count("without a callback failed") == 1
    assert cluster.record_count("t") == 1


def test_with_a_callback_the_callback_gets_the_exception_once_and_nothing_is_logged(
        cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    outcomes = Outcomes()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=200) as p:
        p.partitions_for("t")
        cluster.push_request_errors("Produce", ["INVALID_RECORD"])
        for i in range(5):
            p.produce("t", b"v%d" % i, partition=1, callback=outcomes)
        p.flush(15)
        assert p.metrics()["record-error-no-callback-total"] == 0
    assert len(outcomes.calls) == 5
    assert all(isinstance(exc, InvalidRecordError) for _, exc in outcomes.calls)
    assert {(md.topic, md.partition, md.offset) for md, _ in outcomes.calls} == {("t", 1, -1)}
    assert threading.get_ident() not in outcomes.threads  # on the sender thread, as send(callback=)
    assert loss_lines(caplog) == []


def test_every_record_ends_in_one_outcome_when_produce_and_send_share_a_failed_batch(
        cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    outcomes = Outcomes()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=200) as p:
        p.partitions_for("t")
        cluster.push_request_errors("Produce", ["INVALID_RECORD"])
        p.produce("t", b"unheard-1", partition=0)
        p.produce("t", b"heard-1", partition=0, callback=outcomes)
        futures = [p.send("t", b"future-1", partition=0), p.send("t", b"future-2", partition=0)]
        p.produce("t", b"unheard-2", partition=0)
        p.produce("t", b"heard-2", partition=0, callback=outcomes)
        p.produce("t", b"unheard-3", partition=0)
        p.flush(15)
        m = p.metrics()
    assert [type(exc) for _, exc in outcomes.calls] == [InvalidRecordError] * 2
    assert all(isinstance(f.exception(0), InvalidRecordError) for f in futures)
    [line] = loss_lines(caplog)
    assert ": 3 record(s) queued by produce() without a callback" in line  # not the futures' or callbacks'
    assert m["record-error-no-callback-total"] == 3 and m["record-error-total"] == 7


def test_close_zero_fails_the_buffered_records_and_reports_them(
        cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    p = Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000)
    p.partitions_for("t")
    for i in range(10):
        p.produce("t", b"v%d" % i, partition=1)
    p.close(0)
    [line] = loss_lines(caplog)
    assert ": 10 record(s) queued by produce() without a callback failed for t-1: ProducerClosedError" in line
    assert p.metrics()["record-error-no-callback-total"] == 10
    assert cluster.record_count("t") == 0
    with pytest.raises(ProducerClosedError, match=r"produce\(\) called after close\(\)"):
        p.produce("t", b"late")


def test_aio_produce_runs_the_callback_on_the_loop_and_reports_a_failure_without_one(
        cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    outcomes = Outcomes()

    async def main() -> tuple[int, dict[str, float]]:
        async with AIOProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=200) as p:
            await p.partitions_for("t")
            cluster.push_request_errors("Produce", ["INVALID_RECORD"])
            for i in range(4):
                await p.produce("t", b"heard-%d" % i, partition=0, callback=outcomes)
                await p.produce("t", b"unheard-%d" % i, partition=0)
            await p.flush(15)
            # flush() returned once the callbacks were queued for the loop; they ran before it returned
            called = len(outcomes.calls)
            metrics = p.metrics()
        return called, metrics

    loop_thread = threading.get_ident()
    called, metrics = asyncio.run(main())
    assert called == 4
    assert len(outcomes.calls) == 4 and all(isinstance(exc, InvalidRecordError) for _, exc in outcomes.calls)
    assert outcomes.threads == {loop_thread}  # on the event loop, not the sender thread
    [line] = loss_lines(caplog)
    assert ": 4 record(s) queued by produce() without a callback failed for t-0" in line
    assert metrics["record-error-no-callback-total"] == 4


def test_aio_produce_callbacks_run_before_stop_returns(cluster: MockCluster) -> None:
    outcomes = Outcomes()

    async def main() -> int:
        p = AIOProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000)
        await p.start()
        for i in range(20):
            await p.produce("t", b"v%d" % i, partition=i % 2, callback=outcomes)
        await p.stop()
        return len(outcomes.calls)

    assert asyncio.run(main()) == 20
    assert all(exc is None and md.offset >= 0 for md, exc in outcomes.calls)
    per_partition: dict[int, list[int]] = {}
    for md, _ in outcomes.calls:
        per_partition.setdefault(md.partition, []).append(md.offset)
    assert per_partition == {0: list(range(10)), 1: list(range(10))}  # in send order within each partition


def test_traced_produce_without_a_callback_still_reports_a_failure(
        cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    from tests.helpers.otel import sdk, spans_named

    exporter, _ = sdk()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=200, opentelemetry_enable=True) as p:
        p.partitions_for("t")
        cluster.push_request_errors("Produce", ["INVALID_RECORD"])
        p.produce("t", b"a", partition=0)
        p.produce("t", b"b", partition=0)
        p.flush(15)
        m: dict[str, Any] = p.metrics()
    assert m["record-error-no-callback-total"] == 2
    assert len(loss_lines(caplog)) == 2  # one record at a time on this path
    assert len(spans_named(exporter, "send t")) == 2
