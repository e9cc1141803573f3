"""RecordFuture, BatchFuture and CombinedBatchFuture over real batches, without I/O: every way a caller
holds an outcome (result, exception, callbacks, concurrent.futures.wait, as_completed, repr) before and
after completion, with failures and splits."""

from __future__ import annotations

import concurrent.futures
import gc
import logging
import threading
from collections.abc import Callable

import pytest

from kafkajet.errors import KafkaTimeoutError, NotLeaderOrFollowerError, RecordTooLargeError
from kafkajet.producer.batch import ProducerBatch
from kafkajet.producer.futures import BatchFuture, CombinedBatchFuture, RecordFuture, RecordMetadata, Segment


def batch(partition: int = 0, topic: str = "t") -> ProducerBatch:
    return ProducerBatch(topic, partition, bytearray(), 1 << 16, 0.0)


def record(b: ProducerBatch, value: bytes = b"v", key: bytes | None = None, ts: int = 100) -> RecordFuture:
    fut = b.try_append(ts, key, value, None)
    assert fut is not None
    return fut


# --- RecordFuture ------------------------------------------------------------------------------------------

def test_result_waits_up_to_its_timeout_then_names_the_partition() -> None:
    b = batch(partition=4)
    fut = record(b)
    assert not fut.done() and fut.running()
    with pytest.raises(KafkaTimeoutError, match=r"record for t-4 not acknowledged within 0.01 s \(still pending"):
        fut.result(0.01)
    with pytest.raises(KafkaTimeoutError):
        fut.exception(0)
    b.complete(40, -1, None)
    assert fut.done() and not fut.running()
    assert fut.result(0) == RecordMetadata("t", 4, 40, 100, -1, 1)


def test_metadata_offsets_and_timestamps() -> None:
    b = batch()
    futs = [record(b, key=b"kk", ts=10 + i) for i in range(3)]
    b.complete(-1, -1, None)  # acks=0: no offset
    assert [f.result(0).offset for f in futs] == [-1, -1, -1]
    assert [f.result(0).timestamp for f in futs] == [10, 11, 12]
    assert futs[0].result(0).serialized_key_size == 2
    b2 = batch()
    f = record(b2, ts=10)
    b2.complete(0, 0, None)  # offset 0 and log-append time 0 are real values, not "none"
    assert f.result(0).offset == 0 and f.result(0).timestamp == 0


def test_a_failed_record_raises_its_error_and_reports_it() -> None:
    b = batch()
    fut = record(b)
    err = NotLeaderOrFollowerError("moved")
    b.complete(-1, -1, err)
    assert fut.exception(0) is err
    with pytest.raises(NotLeaderOrFollowerError):
        fut.result(0)


def test_a_record_future_cannot_be_cancelled_or_set_by_callers() -> None:
    fut = record(batch())
    assert fut.cancel() is False and fut.cancelled() is False
    assert fut.set_running_or_notify_cancel() is True
    with pytest.raises(RuntimeError, match="completed by the producer, not by callers"):
        fut.set_result(None)
    with pytest.raises(RuntimeError, match="completed by the producer"):
        fut.set_exception(ValueError())


def test_callbacks_run_once_whether_added_before_or_after_completion() -> None:
    b = batch()
    fut = record(b)
    calls: list[str] = []
    fut.add_done_callback(lambda f: calls.append("before"))
    assert calls == []
    b.complete(1, -1, None)
    fut.add_done_callback(lambda f: calls.append("after"))
    assert calls == ["before", "after"]
    b.complete(2, -1, None)
    assert calls == ["before", "after"]


def test_a_failing_callback_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    b = batch()
    fut = record(b)
    calls: list[int] = []

    def bad(f: object) -> None:
        raise ValueError("user bug")

    fut.add_done_callback(bad)
    fut.add_done_callback(lambda f: calls.append(1))
    with caplog.at_level(logging.ERROR, logger="kafkajet.producer.futures"):
        b.complete(1, -1, None)
    assert calls == [1]
    assert "exception calling callback for <RecordFuture" in caplog.text and "user bug" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="kafkajet.producer.futures"):
        fut.add_done_callback(bad)  # after completion: run at once, and logged the same way
    assert "user bug" in caplog.text


def test_concurrent_futures_wait_sees_success_and_failure() -> None:
    ok_batch, bad_batch = batch(0), batch(1)
    ok, bad = record(ok_batch), record(bad_batch)
    done, pending = concurrent.futures.wait([ok, bad], timeout=0.01)
    assert done == set() and pending == {ok, bad}
    threading.Timer(0.05, bad_batch.complete, (-1, -1, NotLeaderOrFollowerError("x"))).start()
    done, pending = concurrent.futures.wait([ok, bad], timeout=10, return_when=concurrent.futures.FIRST_EXCEPTION)
    assert done == {bad} and pending == {ok}
    threading.Timer(0.05, ok_batch.complete, (3, -1, None)).start()
    assert list(concurrent.futures.as_completed([ok], timeout=10)) == [ok]


def test_waiting_on_an_already_completed_future_returns_at_once() -> None:
    b = batch()
    fut = record(b)
    b.complete(1, -1, None)
    done, _ = concurrent.futures.wait([fut], timeout=0)
    assert done == {fut}


def test_repr_shows_the_state() -> None:
    b = batch(partition=2)
    record(b)
    fut = record(b)
    assert repr(fut) == "<RecordFuture t-2 #1 pending>"
    b.complete(1, -1, None)
    assert repr(fut) == "<RecordFuture t-2 #1 done>"
    b2 = batch(partition=2)
    f2 = record(b2)
    b2.complete(-1, -1, RecordTooLargeError("big"))
    assert repr(f2) == "<RecordFuture t-2 #0 failed RecordTooLargeError>"


def test_a_record_future_follows_its_record_through_a_split() -> None:
    b = batch()
    futs = [record(b, bytes([i]) * 300) for i in range(4)]
    parts = b.split(700, 0.0)
    b.mark_split()
    assert not futs[3].done()
    with pytest.raises(KafkaTimeoutError):
        futs[3].result(0.01)
    for i, part in enumerate(parts):
        part.complete(100 * i, -1, None)
    assert [f.result(0).offset for f in futs] == [0, 1, 100, 101]


def test_done_callbacks_follow_their_records_through_a_split_and_run_once_each() -> None:
    b = batch()
    futs = [record(b, bytes([i]) * 300) for i in range(4)]
    seen: list[tuple[int, int]] = []

    def noting(tag: int) -> Callable[[RecordFuture], None]:
        return lambda f: seen.append((tag, f.result(0).offset))

    for i, f in enumerate(futs):
        f.add_done_callback(noting(i))
    futs[3].add_done_callback(noting(33))  # a second one on one future
    parts = b.split(700, 0.0)
    b.mark_split()
    assert seen == []
    for i, part in enumerate(parts):
        part.complete(100 * i, -1, None)
    assert sorted(seen) == [(0, 0), (1, 1), (2, 100), (3, 101), (33, 101)]


def test_a_pending_record_with_a_done_callback_costs_the_garbage_collector_one_object() -> None:
    """Its future: no tuple in the batch's listeners, no list for a single callback. Three tracked objects a
    record made the collector's passes over a send() loop with done-callbacks cost more than the sending.
    Counted as the small containers the collector tracks that hold one of these futures or their callback, so
    other threads' objects (the suite's) do not count."""
    b = ProducerBatch("t", 0, bytearray(), 1 << 22, 0.0)
    n = 2000
    calls: list[int] = []

    def callback(f: object) -> None:
        calls.append(1)

    futs: list[RecordFuture] = []
    for _ in range(n):
        fut = record(b)
        fut.add_done_callback(callback)
        futs.append(fut)
    ours = {id(f) for f in futs}
    per_record = [o for o in gc.get_objects()
                  if type(o) in (list, tuple) and len(o) <= 2 and any(id(x) in ours or x is callback for x in o)]
    assert len(per_record) < n // 10, f"{len(per_record)} small containers hold {n} pending records' parts"
    b.complete(0, -1, None)
    assert len(calls) == n  # and every callback ran once


# --- BatchFuture -------------------------------------------------------------------------------------------

def batch_future(n_per_batch: tuple[int, ...], keys: bool = False) -> tuple[BatchFuture, list[ProducerBatch]]:
    """Records 0..n-1 spread over batches round-robin, as send_batch() spreads keyless records."""
    n = sum(n_per_batch)
    batches = [batch(p) for p in range(len(n_per_batch))]
    where: list[list[int]] = [[] for _ in batches]
    for i in range(n):
        p = i % len(batches)
        while len(where[p]) >= n_per_batch[p]:
            p = (p + 1) % len(batches)
        where[p].append(i)
    segments: list[Segment] = []
    for b, idx in zip(batches, where, strict=True):
        first = b.count
        for i in idx:
            b.try_append(1000 + i, b"k" * i if keys else None, b"v" * (i + 1), None)
        segments.append((b, first, idx))
    fut = BatchFuture(n, segments, [1000 + i for i in range(n)], [i for i in range(n)] if keys else None,
                      [i + 1 for i in range(n)])
    return fut, batches


def test_batch_future_result_is_every_record_in_input_order() -> None:
    fut, batches = batch_future((3, 2), keys=True)
    assert len(fut) == 5 and not fut.done()
    batches[0].complete(10, -1, None)
    assert not fut.done()
    batches[1].complete(50, 7777, None)
    assert fut.done()
    md = fut.result(0)
    assert [(m.partition, m.offset) for m in md] == [(0, 10), (1, 50), (0, 11), (1, 51), (0, 12)]
    assert [m.timestamp for m in md] == [1000, 7777, 1002, 7777, 1004]
    assert [m.serialized_key_size for m in md] == [0, 1, 2, 3, 4]
    assert [m.serialized_value_size for m in md] == [1, 2, 3, 4, 5]


def test_batch_future_without_keys_reports_null_keys_and_unknown_offsets() -> None:
    fut, batches = batch_future((2,))
    batches[0].complete(-1, -1, None)
    assert [(m.offset, m.serialized_key_size) for m in fut.result(0)] == [(-1, -1), (-1, -1)]


def test_batch_future_errors_name_each_failed_record_and_result_raises_the_first() -> None:
    fut, batches = batch_future((2, 2))
    err = NotLeaderOrFollowerError("gone")
    batches[1].complete(-1, -1, err)
    assert repr(fut) == "<BatchFuture records=4 pending failed=2>"
    batches[0].complete(0, -1, None)
    assert fut.errors(0) == [(1, err), (3, err)]
    assert fut.exception(0) is err
    with pytest.raises(NotLeaderOrFollowerError):
        fut.result(0)
    assert repr(fut) == "<BatchFuture records=4 failed failed=2>"


def test_batch_future_wait_times_out_naming_the_partition() -> None:
    fut, batches = batch_future((1, 1))
    batches[0].complete(0, -1, None)
    with pytest.raises(KafkaTimeoutError, match=r"records for t-1 not acknowledged within 0.01 s"):
        fut.wait(0.01)
    assert repr(fut) == "<BatchFuture records=2 pending failed=0>"
    batches[1].complete(0, -1, None)
    fut.wait(0)
    assert repr(fut) == "<BatchFuture records=2 done failed=0>"


def test_a_timed_out_wait_names_the_records_of_the_call_that_already_failed() -> None:
    # A CI run saw only "not acknowledged within 60 s" while 1,849 records of the call had failed: the timeout
    # must say so, and carry the first failure as its cause.
    fut, batches = batch_future((2, 3, 1))
    err = NotLeaderOrFollowerError("gone")
    batches[1].complete(-1, -1, err)
    with pytest.raises(KafkaTimeoutError, match=r"records for t-0 not acknowledged within 0.01 s .*; 3 records "
                                                r"already failed, the first so \(last cause: ") as e:
        fut.wait(0.01)
    assert e.value.cause is err
    combined = CombinedBatchFuture(6, [(fut, range(6))])
    with pytest.raises(KafkaTimeoutError, match="3 records already failed") as e:
        combined.result(0.01)
    assert e.value.cause is err


def test_batch_future_callbacks_and_waiters_fire_when_the_last_batch_completes() -> None:
    fut, batches = batch_future((2, 2, 2))
    calls: list[object] = []
    fut.add_done_callback(calls.append)
    batches[2].complete(0, -1, None)
    batches[0].complete(0, -1, None)
    assert calls == [] and not fut.done()
    threading.Timer(0.05, batches[1].complete, (0, -1, None)).start()
    assert list(concurrent.futures.as_completed([fut], timeout=10)) == [fut]
    assert calls == [fut]


def test_batch_future_follows_records_through_a_split() -> None:
    b = batch()
    for i in range(4):
        b.try_append(1, None, bytes([i]) * 300, None)
    fut = BatchFuture(4, [(b, 0, [0, 1, 2, 3])], [1] * 4, None, [300] * 4)
    parts = b.split(700, 0.0)
    b.mark_split()
    assert not fut.done()
    parts[0].complete(10, -1, None)
    assert not fut.done()
    with pytest.raises(KafkaTimeoutError):
        fut.wait(0.01)
    err = RecordTooLargeError("still too big")
    parts[1].complete(-1, -1, err)
    assert fut.done()
    assert fut.errors(0) == [(2, err), (3, err)]
    assert repr(fut) == "<BatchFuture records=4 failed failed=2>"


def test_batch_future_result_after_a_successful_split() -> None:
    b = batch(partition=5)
    for i in range(4):
        b.try_append(1, None, bytes([i]) * 300, None)
    fut = BatchFuture(4, [(b, 0, [3, 2, 1, 0])], [1, 2, 3, 4], None, [300] * 4)
    parts = b.split(700, 0.0)
    b.mark_split()
    parts[0].complete(10, -1, None)
    parts[1].complete(20, 999, None)
    md = fut.result(0)
    assert [(m.partition, m.offset, m.timestamp) for m in md] == [(5, 21, 999), (5, 20, 999), (5, 11, 3),
                                                                  (5, 10, 4)]


def test_batch_future_of_record_futures_keeps_their_metadata() -> None:
    b = batch()
    futs = [record(b, key=b"abc", ts=5 + i) for i in range(3)]
    fut = BatchFuture.of(futs)
    assert len(fut) == 3
    b.complete(7, -1, None)
    assert fut.result(0) == [f.result(0) for f in futs]
    assert fut.result(0)[2] == RecordMetadata("t", 0, 9, 7, 3, 1)


def test_batch_future_cannot_be_cancelled_or_set() -> None:
    fut, _ = batch_future((1,))
    assert fut.cancel() is False
    with pytest.raises(RuntimeError, match="send_batch\\(\\) future is completed by the producer"):
        fut.set_result([])


def test_combined_batch_future_puts_records_back_in_input_order() -> None:
    a, a_batches = batch_future((2,))
    b, b_batches = batch_future((2,))
    combined = CombinedBatchFuture(4, [(a, [1, 3]), (b, [0, 2])])
    calls: list[object] = []
    combined.add_done_callback(calls.append)
    a_batches[0].complete(100, -1, None)
    assert not combined.done() and calls == []
    with pytest.raises(KafkaTimeoutError):
        combined.wait(0.01)
    err = NotLeaderOrFollowerError("x")
    b_batches[0].complete(-1, -1, err)
    assert combined.done() and calls == [combined]
    assert combined.errors(0) == [(0, err), (2, err)]
    assert combined.exception(0) is err
    assert repr(combined) == "<CombinedBatchFuture records=4 failed failed=2>"
    ok, ok_batches = batch_future((1,))
    ok2, ok2_batches = batch_future((1,))
    both = CombinedBatchFuture(2, [(ok, [1]), (ok2, [0])])
    ok_batches[0].complete(5, -1, None)
    ok2_batches[0].complete(9, -1, None)
    assert [m.offset for m in both.result(0)] == [9, 5]


def test_an_empty_combined_future_is_done_at_once() -> None:
    empty = CombinedBatchFuture(0, [])
    assert empty.done() and empty.result(0) == [] and empty.exception(0) is None


# --- what mutation testing found unchecked ------------------------------------------------------------------


def test_result_waits_for_a_completion_that_comes_within_its_timeout() -> None:
    b = batch()
    fut = record(b)
    threading.Timer(0.05, b.complete, (8, -1, None)).start()
    assert fut.result(0.9).offset == 8  # well inside the timeout, less than a second
    b2 = batch()
    fut2 = record(b2)
    threading.Timer(0.05, b2.complete, (9, -1, None)).start()
    assert fut2.result().offset == 9  # no timeout: wait as long as it takes


def test_batch_future_waits_for_completions_inside_its_timeout() -> None:
    fut, batches = batch_future((1, 1))
    for i, b in enumerate(batches):
        threading.Timer(0.05 * (i + 1), b.complete, (i, -1, None)).start()
    fut.wait(5)
    assert fut.done()
    other, more = batch_future((1,))
    combined = CombinedBatchFuture(1, [(other, [0])])
    threading.Timer(0.05, more[0].complete, (0, -1, None)).start()
    combined.wait(5)
    assert combined.done()


def test_pending_batch_futures_time_out_in_every_accessor() -> None:
    fut, _ = batch_future((1,))
    combined = CombinedBatchFuture(1, [(fut, [0])])
    for f in (fut, combined):
        for call in (f.exception, f.errors, f.result):
            with pytest.raises(KafkaTimeoutError, match="not acknowledged within 0.01 s"):
                call(0.01)


def test_the_first_failure_by_input_position_is_the_one_raised() -> None:
    fut, batches = batch_future((2, 2))  # records 0, 2 in batch 0; 1, 3 in batch 1
    first, second = RecordTooLargeError("first"), NotLeaderOrFollowerError("second")
    batches[0].complete(-1, -1, first)
    batches[1].complete(-1, -1, second)
    assert fut.exception(0) is first
    with pytest.raises(RecordTooLargeError):
        fut.result(0)
    assert concurrent.futures.Future.exception(fut, 0) is first  # what wait()/as_completed()/asyncio see
    assert repr(fut) == "<BatchFuture records=4 failed failed=4>"
    combined = CombinedBatchFuture(4, [(fut, [3, 1, 2, 0])])
    assert combined.errors(0)[0] == (0, second) and combined.exception(0) is second
    with pytest.raises(NotLeaderOrFollowerError):
        combined.result(0)


def test_a_successful_batch_future_completes_the_underlying_future_with_none() -> None:
    fut, batches = batch_future((1,))
    batches[0].complete(0, -1, None)
    assert concurrent.futures.Future.result(fut, 0) is None and concurrent.futures.Future.exception(fut, 0) is None


def test_the_failed_record_is_logged_by_its_position(caplog: pytest.LogCaptureFixture) -> None:
    fut, batches = batch_future((1, 1))
    batches[0].complete(0, -1, None)
    batches[1].complete(-1, -1, RecordTooLargeError("x"))
    with caplog.at_level(logging.DEBUG, logger="kafkajet.producer.futures"), pytest.raises(RecordTooLargeError):
        fut.result(0)
    assert [r.getMessage() for r in caplog.records] == ["record 1 of a send_batch() call failed"]


def test_offset_zero_and_log_append_time_zero_are_values_in_batch_results() -> None:
    fut, batches = batch_future((2,))
    batches[0].complete(0, 0, None)
    assert [(m.topic, m.offset, m.timestamp) for m in fut.result(0)] == [("t", 0, 0), ("t", 1, 0)]


def test_a_segment_that_starts_inside_a_split_batch_follows_its_own_records() -> None:
    b = batch(partition=1)
    for i in range(6):
        b.try_append(100 + i, None, bytes([i]) * 300, None)
    later = BatchFuture(3, [(b, 3, [0, 1, 2])], [103, 104, 105], None, [300] * 3)
    parts = b.split(700, 0.0)
    b.mark_split()
    # Two records a part: records 3, 4, 5 are in parts 1 and 2.
    parts[0].complete(0, -1, None)
    parts[1].complete(10, -1, RecordTooLargeError("x"))
    assert not later.done()
    parts[2].complete(20, -1, None)
    assert later.done() and [i for i, _ in later.errors(0)] == [0]
    assert repr(later) == "<BatchFuture records=3 failed failed=1>"


def test_failures_from_split_and_whole_segments_add_up() -> None:
    b = batch()
    for i in range(4):
        b.try_append(1, None, bytes([i]) * 300, None)
    whole = batch(partition=2)
    for _ in range(3):
        whole.try_append(1, None, b"w", None)
    fut = BatchFuture(7, [(b, 0, [0, 1, 2, 3]), (whole, 0, [4, 5, 6])], [1] * 7, None, [1] * 7)
    parts = b.split(700, 0.0)
    b.mark_split()
    parts[0].complete(-1, -1, RecordTooLargeError("x"))
    whole.complete(-1, -1, RecordTooLargeError("y"))
    assert repr(fut) == "<BatchFuture records=7 pending failed=5>"
    parts[1].complete(-1, -1, RecordTooLargeError("z"))
    assert repr(fut) == "<BatchFuture records=7 failed failed=7>"


def test_waiting_follows_a_split_of_a_split() -> None:
    b = batch()
    for i in range(8):
        b.try_append(1, None, bytes([i]) * 200, None)
    fut = BatchFuture(8, [(b, 0, list(range(8)))], [1] * 8, None, [200] * 8)
    (part,) = b.split(4000, 0.0)
    b.mark_split()
    small = part.split(500, 0.0)
    part.mark_split()
    for s in small[:-1]:
        s.complete(0, -1, None)
    with pytest.raises(KafkaTimeoutError):
        fut.wait(0.01)
    small[-1].complete(0, -1, None)
    fut.wait(0)
    assert fut.done() and fut.errors(0) == []


def test_log_messages_and_refusals_say_exactly_what_happened(caplog: pytest.LogCaptureFixture) -> None:
    b = batch()
    fut = record(b)

    def bad(f: object) -> None:
        raise ValueError("user bug")

    fut.add_done_callback(bad)
    with caplog.at_level(logging.ERROR, logger="kafkajet.producer.futures"):
        b.complete(1, -1, None)
    assert [r.getMessage() for r in caplog.records] == [f"exception calling callback for {fut!r}"]
    with pytest.raises(RuntimeError, match="^a record's future is completed by the producer, not by callers$"):
        fut.set_result(None)
    bf, _ = batch_future((1,))
    with pytest.raises(RuntimeError, match="^a send_batch\\(\\) future is completed by the producer, not by callers$"):
        bf.set_result([])
    pending, _ = batch_future((1,))
    with pytest.raises(KafkaTimeoutError, match=r"\(still pending; the producer keeps trying until "
                                                r"delivery.timeout.ms\)$"):
        pending.wait(0)


# --- while a batch's delivery callbacks run ------------------------------------------------------------------


def test_a_batch_future_is_not_done_for_other_threads_until_the_callbacks_ran() -> None:
    b = batch()
    seen: list[object] = []
    fut: list[BatchFuture] = []

    def on_other_thread() -> object:
        try:
            fut[0].result(0)
        except KafkaTimeoutError:
            return (fut[0].done(), "timed out")
        return (fut[0].done(), "returned")

    def callback(md: object, exc: object) -> None:
        out: list[object] = []
        t = threading.Thread(target=lambda: out.append(on_other_thread()))
        t.start()
        t.join(30)
        seen.extend(out)

    first = b.try_append(1, None, b"a", None, callback)
    assert first is not None
    fut.append(BatchFuture.of([first, record(b)]))
    b.complete(3, -1, None)
    assert seen == [(False, "timed out")]
    assert fut[0].done() and [m.offset for m in fut[0].result(0)] == [3, 4]


@pytest.mark.timeout(30)
def test_a_batch_future_made_inside_a_callback_of_its_batch_resolves_at_once() -> None:
    # On the callbacks' thread the batch refuses listeners (it would never reach them); a BatchFuture must take
    # that as settled rather than look at the batch again forever.
    b = batch()
    futs: list[RecordFuture] = []
    seen: list[object] = []

    def callback(md: object, exc: object) -> None:
        inner = BatchFuture.of(futs)
        seen.append((inner.done(), [m.offset for m in inner.result(5)]))

    first = b.try_append(1, None, b"a", None, callback)
    assert first is not None
    futs += [first, record(b)]
    b.complete(10, -1, None)
    assert seen == [(True, [10, 11])]
