"""send(callback=fn): fn(metadata, exception) exactly once per record, in send order within a partition, through
retries, splits, expiry and close(0). Driven pass by pass with the fake network and clock of test_sender.py."""

from __future__ import annotations

import logging
import weakref
from typing import Any

import pytest

from kafkajet.errors import (
    DeliveryTimeoutError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
)
from kafkajet.producer.futures import RecordFuture, RecordMetadata
from kafkajet.protocol import ApiKey
from tests.helpers.fake_network import produce_body
from tests.unit.test_sender import RETRY_BACKOFF_MS, TOPIC, Rig, batch_header, make_rig


class Calls:
    """A delivery callback that records every call: (value tag, metadata, exception)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, RecordMetadata, BaseException | None]] = []

    def for_record(self, tag: int) -> Any:
        def callback(md: RecordMetadata, exc: BaseException | None) -> None:
            self.calls.append((tag, md, exc))
        return callback

    def tags(self) -> list[int]:
        return [tag for tag, _, _ in self.calls]


def send(rig: Rig, calls: Calls, tag: int, partition: int = 0, value: bytes | None = None) -> RecordFuture:
    fut, _ = rig.accumulator.append(TOPIC, partition, 1_000 + tag, None, value or b"r%d" % tag, None, None,
                                    calls.for_record(tag))
    return fut


def test_each_callback_runs_once_with_its_records_offset_in_send_order() -> None:
    rig = make_rig()
    rig.connect()
    calls = Calls()
    futs = [send(rig, calls, i) for i in range(5)]
    rig.run()
    assert calls.calls == []  # nothing before the answer
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=40))
    rig.run()
    assert calls.tags() == [0, 1, 2, 3, 4]
    for i, (_, md, exc) in enumerate(calls.calls):
        assert exc is None
        assert md == RecordMetadata(TOPIC, 0, 40 + i, 1_000 + i, -1, 2)
        assert md == futs[i].result(timeout=0)  # the callback and the future agree
    rig.run(10_000)
    assert len(calls.calls) == 5  # and never again


def test_a_retried_batch_calls_back_once_after_the_retry_succeeds() -> None:
    rig = make_rig()
    rig.connect()
    calls = Calls()
    for i in range(3):
        send(rig, calls, i)
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    assert calls.calls == []  # a retriable error is not an outcome
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], base_offset=7))
    rig.run()
    assert [(tag, md.offset, exc) for tag, md, exc in calls.calls] == [(0, 7, None), (1, 8, None), (2, 9, None)]


def test_a_failed_batch_calls_back_with_the_error_and_javas_empty_metadata() -> None:
    rig = make_rig(delivery_timeout_ms=5_000)
    rig.connect()
    rig.client.disconnect(0)
    calls = Calls()
    send(rig, calls, 0, partition=1)
    send(rig, calls, 1, partition=1)
    rig.run(5_000)
    assert calls.tags() == [0, 1]
    for _, md, exc in calls.calls:
        assert isinstance(exc, DeliveryTimeoutError)
        assert md == RecordMetadata(TOPIC, 1, -1, -1, -1, -1)


def test_callbacks_follow_records_into_the_parts_of_a_split_batch() -> None:
    rig = make_rig()
    rig.connect()
    calls = Calls()
    for i in range(10):
        send(rig, calls, i)
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], MessageTooLargeError.code))
    rig.run()
    rig.run()
    halves = rig.produces()[1:]
    assert [batch_header(r).records_count for r in halves] == [5, 5]
    assert calls.calls == []  # the split itself is not an outcome
    rig.client.respond(ApiKey.PRODUCE, produce_body(halves[0], base_offset=100))
    rig.run()
    assert calls.tags() == [0, 1, 2, 3, 4]
    rig.client.respond(ApiKey.PRODUCE, produce_body(halves[1], base_offset=200))
    rig.run()
    assert calls.tags() == list(range(10))
    assert [md.offset for _, md, _ in calls.calls] == [100, 101, 102, 103, 104, 200, 201, 202, 203, 204]
    assert all(exc is None for _, _, exc in calls.calls)
    # The rest of each record's metadata moved with its callback.
    assert [(md.timestamp, md.serialized_key_size, md.serialized_value_size) for _, md, _ in calls.calls] == [
        (1_000 + i, -1, len(b"r%d" % i)) for i in range(10)]


def test_a_callback_does_not_keep_its_records_future_alive() -> None:
    # Fire and forget with a callback: the batch holds the callback and the metadata it needs, not the future,
    # so the caller's dropped future is freed at once (and the garbage collector has nothing per record to scan).
    rig = make_rig()
    rig.connect()
    calls = Calls()
    fut = send(rig, calls, 0, value=b"abc")
    gone = weakref.ref(fut)
    del fut
    assert gone() is None
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=7))
    rig.run()
    assert calls.calls == [(0, RecordMetadata(TOPIC, 0, 7, 1_000, -1, 3), None)]


def test_abort_all_calls_back_in_send_order_within_each_partition() -> None:
    # close(0) fails everything incomplete: in flight, queued, several batches deep per partition.
    rig = make_rig(batch_size=200)
    rig.connect()
    calls = Calls()
    tags_by_partition: dict[int, list[int]] = {0: [], 1: []}
    for i in range(60):
        p = i % 2
        send(rig, calls, i, partition=p, value=b"x" * 40)
        tags_by_partition[p].append(i)
    rig.run()  # some batches in flight now, the rest queued
    assert rig.produces()
    rig.accumulator.abort_all(ProducerClosedError("closed"))
    assert sorted(calls.tags()) == list(range(60))
    for p, tags in tags_by_partition.items():
        assert [tag for tag, md, _ in calls.calls if md.partition == p] == tags
    assert all(isinstance(exc, ProducerClosedError) for _, _, exc in calls.calls)
    # A late answer for a batch already failed changes nothing.
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=0))
    rig.run()
    assert len(calls.calls) == 60


def test_a_raising_callback_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig()
    rig.connect()
    calls = Calls()

    def boom(md: RecordMetadata, exc: BaseException | None) -> None:
        raise RuntimeError("callback bug")

    send(rig, calls, 0)
    rig.accumulator.append(TOPIC, 0, 0, None, b"b", None, None, boom)
    send(rig, calls, 2)
    rig.run()
    with caplog.at_level(logging.ERROR, logger="kafkajet.producer.futures"):
        rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=0))
        rig.run()
    assert calls.tags() == [0, 2]
    assert [md.offset for _, md, _ in calls.calls] == [0, 2]
    assert "callback bug" in caplog.text
    # concurrent.futures' words, naming the record the callback was called for.
    assert [r.getMessage() for r in caplog.records] == [
        f"exception calling callback for {RecordMetadata(TOPIC, 0, 1, 0, -1, 1)!r}"]
    assert rig.accumulator.has_incomplete() is False  # the batch still completed and freed its memory


def test_a_callback_raising_for_a_failed_record_names_the_record_and_its_error(
        caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig(delivery_timeout_ms=5_000)
    rig.connect()
    rig.client.disconnect(0)
    calls = Calls()

    def boom(md: RecordMetadata, exc: BaseException | None) -> None:
        raise RuntimeError("callback bug")

    rig.accumulator.append(TOPIC, 1, 1_000, None, b"a", None, None, boom)
    send(rig, calls, 1, partition=1)
    with caplog.at_level(logging.ERROR, logger="kafkajet.producer.futures"):
        rig.run(5_000)
    assert calls.tags() == [1]  # the next record's callback still ran
    (logged,) = caplog.records
    assert logged.getMessage().startswith(
        f"exception calling callback for {RecordMetadata(TOPIC, 1, -1, -1, -1, -1)!r} (failed: DeliveryTimeoutError(")
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], RuntimeError)


def test_futures_are_resolved_when_the_callback_runs() -> None:
    # The callback may read its own future's state (done, with the same metadata) without waiting for itself:
    # its batch is settled on the thread running its callbacks, though not done for other threads until they ran.
    # (Java's isDone() is false there and get() would wait forever.)
    rig = make_rig()
    rig.connect()
    seen: list[Any] = []
    holder: dict[str, RecordFuture] = {}

    def callback(md: RecordMetadata, exc: BaseException | None) -> None:
        seen.append((holder["fut"].done(), holder["fut"].result(timeout=0) == md))

    holder["fut"], _ = rig.accumulator.append(TOPIC, 0, 0, None, b"v", None, None, callback)
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=3))
    rig.run()
    assert seen == [(True, True)]


def test_acks_zero_calls_back_without_an_offset() -> None:
    rig = make_rig(acks=0)
    rig.connect()
    calls = Calls()
    send(rig, calls, 0)
    rig.run()  # written: with acks=0 that is the outcome
    rig.run()
    [(_, md, exc)] = calls.calls
    assert exc is None and md.offset == -1 and md.timestamp == 1_000


@pytest.mark.parametrize("append_time", [0, 1_700_000_000_000])
def test_log_append_time_from_the_broker_replaces_the_create_time(append_time: int) -> None:
    rig = make_rig()
    rig.connect()
    calls = Calls()
    send(rig, calls, 0)
    send(rig, calls, 1)
    rig.run()
    body = produce_body(rig.produces()[0], base_offset=5)
    body["responses"][0]["partition_responses"][0]["log_append_time_ms"] = append_time
    rig.client.respond(ApiKey.PRODUCE, body)
    rig.run()
    assert [(md.offset, md.timestamp) for _, md, _ in calls.calls] == [(5, append_time), (6, append_time)]
