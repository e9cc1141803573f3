"""ProducerBatch without I/O: appending (per record, run-wise, column-wise), sealing, splitting and completion.

Every assertion reads the batch back through the record format's decoder, so a batch that miscounts,
mislabels a timestamp or seals stale bytes fails here, not only on a broker.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable

import pytest

from kafkajet.errors import KafkaError, KafkaTimeoutError, NotLeaderOrFollowerError
from kafkajet.producer.batch import Columns, ProducerBatch, record_future
from kafkajet.producer.futures import RecordFuture
from kafkajet.records import BATCH_HEADER_SIZE, decode_batches, encode_headers
from kafkajet.records.codecs import Compression
from kafkajet.records.record import record_size_upper_bound


def new_batch(capacity: int = 16384, now_ms: float = 1000.0, partition: int = 3) -> ProducerBatch:
    return ProducerBatch("t", partition, bytearray(), capacity, now_ms)


def sealed(batch: ProducerBatch, **kw: int) -> object:
    args = {"compression": 0, "producer_id": -1, "producer_epoch": -1, "base_sequence": -1, **kw}
    (decoded,) = decode_batches(bytes(batch.seal(**args)))
    return decoded


def contents(batch: ProducerBatch) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]


# --- a fresh batch ---------------------------------------------------------------------------------------

def test_a_fresh_batch_is_unsealed_unsent_and_unresolved() -> None:
    b = new_batch(now_ms=1234.0)
    # -1 is Kafka's "none" for producer id, epoch, sequence, offset and log-append time: the sender and the
    # futures read these sentinels, so they are part of the batch's contract.
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)
    assert (b.base_offset, b.log_append_time, b.max_timestamp) == (-1, -1, -1)
    assert not b.has_sequence and b.wire is None
    assert (b.count, b.attempts, b.retry_at_ms) == (0, 0, 0.0)
    assert b.created_ms == b.last_attempt_ms == 1234.0
    assert not (b.full or b.in_flight or b.completed or b.is_split)
    assert b.pooled and b.error is None and b.last_error is None and b.moved is None
    assert b.order == () and b.tp == ("t", 3)
    assert len(b.buf) == BATCH_HEADER_SIZE  # room for the header, written when sealed
    assert b.size_in_bytes == BATCH_HEADER_SIZE


# --- per-record appends ----------------------------------------------------------------------------------

def test_records_go_in_with_deltas_from_the_first_timestamp() -> None:
    b = new_batch()
    b.try_append(5000, b"k", b"v1", None)
    b.try_append(4990, None, b"v2", [("h", b"x"), ("n", None)])
    b.try_append(5020, b"k2", None, None)
    assert b.base_timestamp == 5000 and b.max_timestamp == 5020 and b.count == 3
    assert contents(b) == [(0, 5000, b"k", b"v1", []), (1, 4990, None, b"v2", [("h", b"x"), ("n", None)]),
                           (2, 5020, b"k2", None, [])]
    batch = sealed(b)
    assert (batch.base_timestamp, batch.max_timestamp, batch.records_count) == (5000, 5020, 3)  # type: ignore[attr-defined]


def test_max_timestamp_is_the_largest_not_the_last() -> None:
    b = new_batch()
    for ts in (300, 900, 100):
        b.try_append(ts, None, b"v", None)
    assert b.max_timestamp == 900


def test_a_record_that_does_not_fit_is_refused_and_leaves_no_bytes() -> None:
    one = record_size_upper_bound(-1, 10, None)
    b = new_batch(capacity=BATCH_HEADER_SIZE + 2 * one + 5)
    assert b.try_append(1, None, b"0123456789", None) is not None
    assert b.try_append(1, None, b"0123456789", None) is not None
    assert not b.full
    size = len(b.buf)
    assert b.try_append(1, None, b"x" * 100, None) is None
    assert len(b.buf) == size and b.count == 2 and b.full
    assert [r.value for r in b.records()] == [b"0123456789"] * 2


def test_a_batch_filled_to_its_limit_exactly_is_full() -> None:
    probe = new_batch()
    probe.try_append(7, b"key", b"value", None)
    exact = len(probe.buf)
    b = new_batch(capacity=exact)
    b.try_append(7, b"key", b"value", None)
    assert b.full
    b = new_batch(capacity=exact + 1)
    b.try_append(7, b"key", b"value", None)
    assert not b.full


def test_the_first_record_goes_in_even_when_larger_than_the_batch() -> None:
    b = new_batch(capacity=100)
    fut = b.try_append(1, None, b"x" * 500, None)
    assert fut is not None and b.count == 1 and b.full
    assert b.try_append(1, None, b"y", None) is None


def test_a_records_future_resolves_to_its_offset_timestamp_and_sizes() -> None:
    b = new_batch()
    f0 = b.try_append(10, None, b"abc", None)
    f1 = b.try_append(20, b"kk", None, None)
    assert f0 is not None and f1 is not None
    assert b.complete(500, -1, None)
    m0, m1 = f0.result(0), f1.result(0)
    assert (m0.topic, m0.partition, m0.offset, m0.timestamp) == ("t", 3, 500, 10)
    assert (m0.serialized_key_size, m0.serialized_value_size) == (-1, 3)
    assert (m1.offset, m1.timestamp, m1.serialized_key_size, m1.serialized_value_size) == (501, 20, 2, -1)


def test_log_append_time_replaces_the_create_time_in_metadata() -> None:
    b = new_batch()
    f = b.try_append(10, None, b"abc", None)
    b.complete(7, 99_999, None)
    assert f is not None and f.result(0).timestamp == 99_999


# --- run-wise and column-wise appends (send_batch) -------------------------------------------------------

def test_append_run_takes_the_indexed_records_until_full() -> None:
    values = [f"value-{i}".encode() for i in range(50)]
    keys = [None if i % 2 else f"k{i}".encode() for i in range(50)]
    timestamps = [1000 + i for i in range(50)]
    indices = list(range(0, 50, 3))  # every third record is bound for this batch
    b = new_batch()
    pos = b.append_run(indices, 2, timestamps, keys, values, None)
    assert pos == len(indices) and b.count == len(indices) - 2
    assert b.base_timestamp == 1006 and b.max_timestamp == timestamps[indices[-1]]
    assert [(r.timestamp, r.key, r.value) for r in b.records()] == [
        (timestamps[i], keys[i], values[i]) for i in indices[2:]]
    assert not b.full
    assert b.append_run(indices, len(indices), timestamps, keys, values, None) == len(indices)  # nothing left


def test_append_run_stops_where_the_batch_fills_and_marks_it_full() -> None:
    values = [b"x" * 100] * 40
    timestamps = [5] * 40
    b = new_batch(capacity=1000)
    pos = b.append_run(list(range(40)), 0, timestamps, [None] * 40, values, None)
    assert 0 < pos < 40 and b.count == pos and b.full
    assert len(b.buf) <= 1000
    more = new_batch(capacity=1000)
    assert more.append_run(list(range(40)), pos, timestamps, [None] * 40, values, None) > pos


def test_append_run_continues_a_batch_with_offsets_and_deltas_after_its_records() -> None:
    b = new_batch()
    b.try_append(100, None, b"first", [("h", b"1")])
    b.append_run([0, 1], 0, [150, 90], [b"a", b"b"], [b"v0", b"v1"], [[("x", b"y")], None])
    assert b.max_timestamp == 150 and b.count == 3
    assert contents(b) == [(0, 100, None, b"first", [("h", b"1")]), (1, 150, b"a", b"v0", [("x", b"y")]),
                           (2, 90, b"b", b"v1", [])]


def columns_for(keys: list[bytes] | None, values: list[bytes], ts: int,
                headers: list[bytes] | None = None) -> Columns:
    return Columns(timestamp=ts, keys=keys, klens=None if keys is None else [len(k) for k in keys],
                   vlens=[len(v) for v in values], headers=headers,
                   hlens=None if headers is None else [len(h) for h in headers])


@pytest.mark.parametrize("indices", [list(range(30)), list(range(0, 30, 2)), [0, 1, 2, 10, 11, 12, 20, 21],
                                     list(range(7, 30)), list(range(3, 30, 3)), [5, 6, 7, 8, 15, 16, 25],
                                     [4, 9, 10, 11, 12, 13]],
                         ids=["contiguous", "strided", "runs", "contiguous-late", "strided-late", "runs-late",
                              "single-then-run"])
@pytest.mark.parametrize("with_keys", [True, False])
def test_append_columns_encodes_what_the_record_loop_would(indices: list[int], with_keys: bool) -> None:
    values = [f"v{i}".encode() * (i % 5 + 1) for i in range(30)]
    keys = [f"key-{i}".encode() for i in range(30)] if with_keys else None
    cols = columns_for(keys, values, 777)
    by_columns = new_batch()
    pos = by_columns.append_columns(indices, 0, cols, [777] * 30, keys or [None] * 30, values, None)
    by_records = new_batch()
    by_records.append_run(indices, 0, [777] * 30, keys or [None] * 30, values, None)
    assert pos == len(indices) and by_columns.count == len(indices)
    assert bytes(by_columns.buf) == bytes(by_records.buf)
    assert by_columns.base_timestamp == by_columns.max_timestamp == 777
    assert [r.value for r in by_columns.records()] == [values[i] for i in indices]


def test_append_columns_with_headers_and_an_earlier_base_timestamp() -> None:
    b = new_batch()
    b.try_append(700, None, b"earlier", None)
    values = [b"a", b"bb", b"ccc"]
    headers = [encode_headers([("h", bytes([i]))]) for i in range(3)]
    hdrs = [[("h", bytes([i]))] for i in range(3)]
    pos = b.append_columns([0, 1, 2], 0, columns_for(None, values, 750, headers), [750] * 3, [None] * 3,
                           values, hdrs)
    assert pos == 3 and b.max_timestamp == 750 and b.count == 4
    assert contents(b)[1:] == [(i + 1, 750, None, values[i], hdrs[i]) for i in range(3)]


def test_append_columns_fills_the_batch_then_stops() -> None:
    values = [b"x" * 50] * 100
    b = new_batch(capacity=1000)
    pos = b.append_columns(list(range(100)), 0, columns_for(None, values, 1), [1] * 100, [None] * 100, values,
                           None)
    assert 0 < pos < 100 and b.count == pos and b.full and len(b.buf) <= 1000
    assert all(r.value == b"x" * 50 for r in b.records())


def test_append_columns_hands_a_timestamp_outside_the_tables_to_the_record_loop() -> None:
    b = new_batch()
    b.try_append(1_000, None, b"old", None)
    late = 1_000 + (1 << 20)  # a delta beyond the varint tables
    values = [b"a", b"b"]
    pos = b.append_columns([0, 1], 0, columns_for(None, values, late), [late] * 2, [None] * 2, values, None)
    assert pos == 2 and b.max_timestamp == late
    assert [(r.timestamp, r.value) for r in b.records()] == [(1_000, b"old"), (late, b"a"), (late, b"b")]


def test_append_columns_from_a_middle_position() -> None:
    values = [bytes([65 + i]) for i in range(10)]
    b = new_batch()
    pos = b.append_columns(list(range(10)), 4, columns_for(None, values, 3), [3] * 10, [None] * 10, values, None)
    assert pos == 10 and [r.value for r in b.records()] == values[4:]


# --- sealing -------------------------------------------------------------------------------------------

def test_seal_writes_the_producer_identity_and_is_rebuilt_only_when_it_changes() -> None:
    b = new_batch()
    b.try_append(1, b"k", b"v", None)
    b.try_append(2, b"k", b"w", None)
    first = b.seal(0, 42, 7, 100, transactional=True)
    decoded = decode_batches(bytes(first))[0]
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (42, 7, 100)
    assert decoded.is_transactional and decoded.records_count == 2
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (42, 7, 100) and b.has_sequence
    assert b.seal(0, 42, 7, 100, transactional=True) is first  # a retry resends the same bytes
    for pid, epoch, seq in ((42, 8, 100), (42, 8, 101), (43, 8, 101)):  # one field changes at a time
        again = decode_batches(bytes(b.seal(0, pid, epoch, seq)))[0]
        assert (again.producer_id, again.producer_epoch, again.base_sequence) == (pid, epoch, seq)
        assert not again.is_transactional


def test_reset_sequence_forgets_the_sealed_bytes() -> None:
    b = new_batch()
    b.try_append(1, None, b"v", None)
    b.seal(0, 5, 0, 10)
    b.reset_sequence()
    assert b.base_sequence == -1 and b.wire is None and not b.has_sequence
    assert decode_batches(bytes(b.seal(0, 5, 1, 0)))[0].base_sequence == 0


def test_seal_compresses_and_size_in_bytes_follows_the_wire() -> None:
    b = new_batch()
    for _ in range(200):
        b.try_append(1, None, b"same value " * 5, None)
    plain = len(b.buf)
    wire = b.seal(int(Compression.GZIP), -1, -1, -1)
    decoded = decode_batches(bytes(wire))[0]
    assert decoded.compression == Compression.GZIP and decoded.records_count == 200
    assert b.size_in_bytes == len(wire) < plain


# --- splitting ---------------------------------------------------------------------------------------------

def test_split_keeps_every_record_in_order_within_the_new_size() -> None:
    b = new_batch(now_ms=50.0)
    futures = [b.try_append(1000 + i, f"k{i}".encode(), b"v" * 100, [("i", str(i).encode())]) for i in range(40)]
    b.attempts, b.order = 2, (9,)
    b.last_error = NotLeaderOrFollowerError("moved")
    parts = b.split(1000, now_ms=99.0)
    assert len(parts) > 1
    assert all(len(p.buf) <= 1000 and p.full and not p.pooled for p in parts)
    assert all(p.attempts == 2 and p.created_ms == 50.0 and p.last_error is b.last_error for p in parts)
    assert [p.order for p in parts] == [(9, i) for i in range(len(parts))]
    rebuilt = [(r.timestamp, r.key, r.value, r.headers) for p in parts for r in p.records()]
    assert rebuilt == [(1000 + i, f"k{i}".encode(), b"v" * 100, [("i", str(i).encode())]) for i in range(40)]
    assert b.moved is not None and len(b.moved) == 40
    assert b.parts() == parts
    # moved[i] names the part and index where record i went, consecutive within each part.
    flat = [(part, idx) for part in parts for idx in range(part.count)]
    assert b.moved == flat
    assert all(f is not None for f in futures)


def test_a_record_larger_than_the_split_size_gets_a_batch_of_its_own() -> None:
    b = new_batch()
    b.try_append(1, None, b"small", None)
    b.try_append(1, b"kk", b"L" * 3000, [("h", b"v")])
    b.try_append(1, None, b"tail", None)
    parts = b.split(500, now_ms=0.0)
    # Java's split sizes a part for the record that does not fit (max of batch.size and its upper bound).
    assert parts[1].capacity == BATCH_HEADER_SIZE + record_size_upper_bound(2, 3000, [("h", b"v")])
    assert parts[0].capacity == 500
    got = [[r.value for r in p.records()] for p in parts]
    # The record after it would fit in the slack of the big one's upper bound, but goes to a part of its own.
    assert got == [[b"small"], [b"L" * 3000], [b"tail"]]


def test_a_batch_led_by_a_record_too_large_for_the_broker_splits_it_off() -> None:
    # The broker refuses [big, small] as too large; the sender splits it to half its size. Were "small" to join
    # big's part again, the split would give back the same batch, refused and split until delivery.timeout.ms.
    b = new_batch(capacity=100_000)
    b.try_append(1, None, b"L" * 60_000, None)
    b.try_append(1, None, b"s", None)
    parts = b.split(BATCH_HEADER_SIZE + (len(b.buf) - BATCH_HEADER_SIZE) // 2, now_ms=0.0)
    assert [[r.value for r in p.records()] for p in parts] == [[b"L" * 60_000], [b"s"]]


def test_futures_follow_their_records_through_a_split() -> None:
    b = new_batch()
    futures = [b.try_append(1, None, bytes([i]) * 300, None) for i in range(6)]
    waiting = futures[4]
    assert waiting is not None
    seen: list[int] = []
    waiting.add_done_callback(lambda f: seen.append(f.result().offset))
    parts = b.split(700, now_ms=0.0)
    b.mark_split()
    assert b.is_split and b.completed
    assert b.locate(4)[0] is b.moved[4][0]  # type: ignore[index]
    base = 0
    for part in parts:
        part.complete(1000 + base, -1, None)
        base += part.count
    assert [f.result(0).offset for f in futures if f is not None] == [1000 + i for i in range(6)]
    assert seen == [1004]


def test_a_split_of_a_split_is_followed_to_the_end() -> None:
    b = new_batch()
    futs = [b.try_append(1, None, bytes([i]) * 200, None) for i in range(8)]
    (part,) = [p for p in b.split(4000, 0.0)]
    b.mark_split()
    small = part.split(500, 0.0)
    part.mark_split()
    assert len(small) == 4
    target, index = b.locate(5)
    assert target is small[2] and index == 1
    for i, s in enumerate(small):
        s.complete(10 * i, -1, None)
    assert [f.result(0).offset for f in futs if f is not None] == [0, 1, 10, 11, 20, 21, 30, 31]


def test_mark_split_after_everything_was_aborted_still_resolves_listeners() -> None:
    b = new_batch()
    fut = b.try_append(1, None, b"x" * 300, None)
    assert fut is not None
    fut.add_done_callback(lambda f: None)  # registers a listener with the batch
    parts = b.split(400, 0.0)
    for p in parts:
        p.complete(-1, -1, KafkaError("aborted"))  # close() got there first
    b.mark_split()
    assert isinstance(fut.exception(0), KafkaError)


# --- completion -----------------------------------------------------------------------------------------

def test_complete_resolves_once_and_later_registrations_are_refused() -> None:
    b = new_batch()
    fut = b.try_append(1, None, b"v", None)
    assert fut is not None
    assert b.register(fut, 0)
    assert b.complete(10, -1, None)
    assert not b.complete(20, -1, NotLeaderOrFollowerError("late"))
    assert (b.base_offset, b.error) == (10, None)
    assert not b.register(fut, 0)
    assert fut.result(0).offset == 10


def test_an_error_completes_every_record_with_it() -> None:
    b = new_batch()
    futs = [b.try_append(1, None, b"v", None) for _ in range(3)]
    err = NotLeaderOrFollowerError("gone")
    b.complete(-1, -1, err)
    assert all(f is not None and f.exception(0) is err for f in futs)


def test_wait_done_times_out_then_wakes_on_completion() -> None:
    b = new_batch()
    b.try_append(1, None, b"v", None)
    assert b.wait_done(0.01) is False
    started = threading.Event()
    result: list[bool] = []

    def waiter() -> None:
        started.set()
        result.append(b.wait_done(10))

    t = threading.Thread(target=waiter)
    t.start()
    assert started.wait(5)
    b.complete(0, -1, None)
    t.join(5)
    assert result == [True]
    assert b.wait_done(0) is True


def test_wait_done_wakes_on_a_split() -> None:
    b = new_batch()
    b.try_append(1, None, b"x" * 300, None)
    b.try_append(1, None, b"y" * 300, None)
    assert b.wait_done(0.001) is False  # creates the event the split must set
    b.split(400, 0.0)
    b.mark_split()
    assert b.wait_done(0) is True


def test_a_callback_registered_with_the_batch_runs_on_completion() -> None:
    b = new_batch()
    fut = b.try_append(1, None, b"v", None)
    assert fut is not None
    calls: list[int] = []
    assert b.register(fut, 0, lambda f: calls.append(f.result().offset))
    b.complete(33, -1, None)
    assert calls == [33]


def elsewhere(fn: Callable[[], object]) -> object:
    """fn() on another thread, waited for: what a thread other than the callbacks' sees at this moment."""
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(30)
    assert out, "the other thread did not finish"
    return out[0]


def test_other_threads_see_the_batch_done_only_once_its_callbacks_ran() -> None:
    # Java's order (completeFutureAndFireCallbacks, then produceFuture.done()): flush(), close() and result()
    # on other threads must not return while a callback of the batch is still running.
    b = new_batch()
    seen: list[object] = []
    fut: list[RecordFuture] = []

    def first(md: object, exc: object) -> None:
        seen.append((b.completed, b.done))
        seen.append(elsewhere(lambda: b.wait_done(0)))
        seen.append(elsewhere(lambda: fut[0].done()))
        seen.append(elsewhere(lambda: result_now(fut[0])))

    b.try_append(1, None, b"a", None, first)
    second = b.try_append(1, None, b"b", None, lambda md, exc: seen.append("second callback"))
    assert second is not None
    fut.append(second)
    assert b.complete(7, -1, None)
    assert seen == [(True, False), False, False, "timed out", "second callback"]
    assert b.done and b.wait_done(0) and second.done() and second.result(0).offset == 8


def result_now(fut: RecordFuture) -> str:
    try:
        fut.result(0)
    except KafkaTimeoutError:
        return "timed out"
    return "returned"


def test_a_waiter_on_another_thread_returns_after_every_callback_of_the_batch() -> None:
    b = new_batch()
    entered, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def slow(md: object, exc: object) -> None:
        entered.set()
        assert release.wait(30)
        ran.append(0)

    b.try_append(1, None, b"a", None, slow)
    b.try_append(1, None, b"b", None, lambda md, exc: ran.append(1))
    completer = threading.Thread(target=b.complete, args=(0, -1, None))
    completer.start()
    assert entered.wait(30)
    at_return: list[object] = []
    waiter = threading.Thread(target=lambda: at_return.append((b.wait_done(30), list(ran))))
    waiter.start()
    waiter.join(0.2)  # a waiter that does not wait returns at once; one that waits is still here
    assert waiter.is_alive(), f"wait_done() returned {at_return} while a callback was still running"
    release.set()
    waiter.join(30)
    completer.join(30)
    assert at_return == [(True, [0, 1])]


def test_a_callback_waiting_on_its_own_batch_gets_the_outcome_at_once() -> None:
    # The callbacks' thread is the one that would make the batch done: waiting there would be waiting for itself.
    b = new_batch()
    futs: list[RecordFuture] = []
    seen: list[object] = []

    def callback(md: object, exc: object) -> None:
        other = futs[1]
        seen.append(b.wait_done(5))
        seen.append((other.done(), other.result(5).offset))
        seen.append(len(concurrent.futures.wait([other], timeout=5).done))
        other.add_done_callback(lambda f: seen.append("done callback"))  # the outcome is known: runs now

    for value in (b"a", b"b"):
        f = b.try_append(1, None, value, None, callback if value == b"a" else None)
        assert f is not None
        futs.append(f)
    b.complete(20, -1, None)
    assert seen == [True, (True, 21), 1, "done callback"]


def test_a_listener_added_while_the_callbacks_run_runs_after_them() -> None:
    b = new_batch()
    order: list[str] = []
    fut: list[RecordFuture] = []

    def callback(md: object, exc: object) -> None:
        elsewhere(lambda: fut[0].add_done_callback(lambda f: order.append("listener")))
        order.append("delivery callback")

    f = b.try_append(1, None, b"a", None, callback)
    assert f is not None
    fut.append(f)
    b.complete(0, -1, None)
    assert order == ["delivery callback", "listener"]


def test_waiters_go_even_when_a_callback_raises_past_the_batch() -> None:
    b = new_batch()

    def exits(md: object, exc: object) -> None:
        raise SystemExit(3)  # not an Exception: fire_callbacks does not catch it

    f = b.try_append(1, None, b"a", None, exits)
    assert f is not None
    listened: list[object] = []
    f.add_done_callback(listened.append)
    with pytest.raises(SystemExit):
        b.complete(0, -1, None)
    assert b.done and b.wait_done(0) and listened == [f]


def test_a_split_is_done_for_other_threads_once_the_callbacks_it_fired_ran() -> None:
    # close(0) failed the parts before the split handed the records over: mark_split() fires their callbacks
    # itself, and the split batch's waiters must wait for them as for complete()'s.
    b = new_batch()
    seen: list[object] = []

    def callback(md: object, exc: object) -> None:
        seen.append((b.completed, b.done, elsewhere(lambda: b.wait_done(0))))

    b.try_append(0, None, b"x" * 300, None, callback)
    (part,) = b.split(16384, 0.0)
    part.complete(-1, -1, KafkaError("closed"))
    b.mark_split()
    assert seen == [(True, False, False)]
    assert b.done and b.wait_done(0)


def test_repr_names_the_partition_and_counts() -> None:
    b = new_batch()
    b.try_append(1, None, b"v", None)
    assert repr(b) == f"ProducerBatch(t-3, records=1, bytes={len(b.buf)}, seq=-1, attempts=0)"


def test_append_run_filling_the_limit_exactly_marks_the_batch_full() -> None:
    probe = new_batch()
    probe.append_run([0, 1], 0, [1, 1], [None, None], [b"aa", b"bb"], None)
    exact = new_batch(capacity=len(probe.buf))
    assert exact.append_run([0, 1], 0, [1, 1], [None, None], [b"aa", b"bb"], None) == 2
    assert exact.full
    roomy = new_batch(capacity=len(probe.buf) + 1)
    roomy.append_run([0, 1], 0, [1, 1], [None, None], [b"aa", b"bb"], None)
    assert not roomy.full


def test_append_columns_filling_the_limit_exactly_marks_the_batch_full() -> None:
    values = [b"aa", b"bb"]
    probe = new_batch()
    probe.append_columns([0, 1], 0, columns_for(None, values, 1), [1, 1], [None, None], values, None)
    exact = new_batch(capacity=len(probe.buf))
    assert exact.append_columns([0, 1], 0, columns_for(None, values, 1), [1, 1], [None, None], values, None) == 2
    assert exact.full


def test_append_columns_with_nothing_left_changes_nothing() -> None:
    b = new_batch()
    b.try_append(10, None, b"v", None)
    assert b.append_columns([0], 1, columns_for(None, [b"x"], 99), [99], [None], [b"x"], None) == 1
    assert (b.count, b.max_timestamp, b.base_timestamp) == (1, 10, 10)


def test_append_columns_at_a_delta_of_exactly_the_table_size_takes_the_record_loop() -> None:
    from kafkajet.protocol.varint import TABLE_SIZE

    b = new_batch()
    b.try_append(0, None, b"first", None)
    values = [b"a", b"b"]
    hdrs = [[("h", b"1")], [("h", b"2")]]
    encoded = [encode_headers(h) for h in hdrs]
    pos = b.append_columns([0, 1], 0, columns_for(None, values, TABLE_SIZE, encoded), [TABLE_SIZE] * 2,
                           [None, None], values, hdrs)
    assert pos == 2
    assert contents(b) == [(0, 0, None, b"first", []), (1, TABLE_SIZE, None, b"a", [("h", b"1")]),
                           (2, TABLE_SIZE, None, b"b", [("h", b"2")])]


def test_append_columns_past_the_table_size_in_records_goes_on_record_by_record() -> None:
    from kafkajet.protocol.varint import TABLE_SIZE

    n = TABLE_SIZE + 100
    values = [b"v"] * n
    b = new_batch(capacity=1 << 20)
    pos = b.append_columns(list(range(n)), 0, columns_for(None, values, 5), [5] * n, [None] * n, values, None)
    assert pos == n and b.count == n and not b.full
    records = b.records()
    assert len(records) == n and records[-1].offset == n - 1


# --- metrics, growth and callbacks through splits ------------------------------------------------------------

def test_stats_give_the_metrics_sizes_the_largest_record_and_the_queue_time() -> None:
    from kafkajet.producer.metrics import BatchStats

    b = new_batch(now_ms=100.0)
    sizes = []
    for value in (b"x" * 10, b"y" * 300, b"z" * 20):
        before = len(b.buf)
        b.try_append(5, b"k", value, None)
        sizes.append(len(b.buf) - before)
    records_bytes = len(b.buf) - BATCH_HEADER_SIZE
    assert b.stats(130.0) == BatchStats("t", b.size_in_bytes, len(b.buf), records_bytes, 3, max(sizes), 30.0)
    sealed(b, compression=int(Compression.GZIP))
    st = b.stats(150.0)
    assert st.size == b.size_in_bytes < st.uncompressed == len(b.buf)  # compressed on the wire
    # A batch filled by the run path has no per-record maximum: its average stands in.
    run = new_batch()
    run.append_run([0, 1], 0, [5, 5], [None, None], [b"a" * 40, b"b" * 60], None)
    assert run.stats(1000.0).max_record == (len(run.buf) - BATCH_HEADER_SIZE) // 2


def test_a_batch_grows_exactly_up_to_its_max_limit() -> None:
    asked: list[int] = []

    def grow(batch: ProducerBatch, end: int) -> bool:
        asked.append(end)
        batch.capacity = batch.limit = end
        return True

    probe = new_batch()
    probe.try_append(0, None, b"v" * 50, None)
    size = len(probe.buf) - BATCH_HEADER_SIZE  # one record's bytes
    b = ProducerBatch("t", 0, bytearray(), BATCH_HEADER_SIZE + 2 * size, 0.0,
                      max_limit=BATCH_HEADER_SIZE + 3 * size, grow=grow)
    for _ in range(3):
        assert b.try_append(0, None, b"v" * 50, None) is not None  # the third ends exactly at the limit
    assert len(b.buf) == b.max_limit and b.full  # reached exactly: closed
    # Room for the next records may be asked for ahead of need (ProducerBatch._reserve_room), never past the max.
    assert max(asked) == BATCH_HEADER_SIZE + 3 * size
    assert b.try_append(0, None, b"v", None) is None


def test_callbacks_of_a_split_part_that_already_failed_run_with_its_error() -> None:
    # close(0) can fail a split's parts before mark_split() hands the records over: their callbacks must still
    # run, once, with the part's outcome.
    b = new_batch()
    calls: list[tuple[int, object]] = []
    for i in range(4):
        b.try_append(0, None, b"r%d" % i + b"." * 100, None, lambda md, exc, i=i: calls.append((i, exc)))
    parts = b.split(BATCH_HEADER_SIZE + 2 * 120, 0.0)  # two records of about 110 bytes a part
    assert len(parts) == 2
    failure = KafkaError("closed")
    parts[0].complete(-1, -1, failure)
    b.mark_split()
    assert [(i, exc) for i, exc in calls] == [(0, failure), (1, failure)]
    parts[1].complete(7, -1, None)
    assert [i for i, _ in calls] == [0, 1, 2, 3] and calls[2][1] is None


def test_a_waiter_on_a_batch_wakes_when_it_is_split() -> None:
    b = new_batch()
    b.try_append(0, None, b"v", None)
    b.split(16384, 0.0)
    woke = threading.Event()

    def wait() -> None:
        if b.wait_done(30):
            woke.set()

    t = threading.Thread(target=wait)
    t.start()
    while b._done_event is None:  # the waiter registered its event
        pass
    b.mark_split()
    t.join(30)
    assert woke.is_set()


def test_split_hands_the_unheard_count_on_in_order_and_keeps_its_total() -> None:
    # Which records came from produce() without a callback is not kept per record: the parts take the count
    # in order, so the records reported when every part fails add up to those the batch held.
    b = new_batch()
    for _ in range(40):
        b.try_append(1, None, b"v" * 100, None)
    b.unheard = 15
    parts = b.split(1000, now_ms=0.0)
    assert len(parts) > 2 and parts[0].count < 15
    assert sum(p.unheard for p in parts) == 15
    assert all(p.unheard in (0, p.count) for p in parts[:1] + parts[2:])  # only one part is partly unheard
    assert parts[0].unheard == parts[0].count


@pytest.mark.parametrize(("key", "value"), [(b"k", None), (None, b"value"), (b"", b"")])
def test_record_future_makes_the_future_recordfutures_init_makes(key: bytes | None, value: bytes | None) -> None:
    batch = new_batch()
    made = record_future(batch, 3, 1_700_000_000_123, key, value)
    want = RecordFuture(batch, 3, 1_700_000_000_123, -1 if key is None else len(key),
                        -1 if value is None else len(value))
    assert type(made) is RecordFuture and vars(made) == vars(want)
    batch.complete(40, -1, None)
    assert made.result(timeout=1) == want.result(timeout=1)
    assert made.result(timeout=1).offset == 43
