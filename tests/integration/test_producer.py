"""The producer's seed behaviours against a real broker (Tansu), each read back by kafka-python."""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
import time
from concurrent.futures import wait

import pytest

from kafkajet import (
    BufferExhaustedError,
    ConfigError,
    KafkaTimeoutError,
    Producer,
    ProducerClosedError,
    RecordMetadata,
)
from kafkajet.admin import Admin
from kafkajet.errors import IllegalStateError, KafkaConnectionError
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic
from tests.helpers.waiting import wait_for


def create_topic(bootstrap: str, name: str, partitions: int = 6) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([name], num_partitions=partitions)


def test_send_returns_metadata_matching_what_a_consumer_reads(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        futs = [p.send(topic_name, value=f"v{i}".encode(), key=f"k{i}".encode(), headers=[("h", b"x")],
                       timestamp_ms=1_700_000_000_000 + i) for i in range(100)]
        mds = [f.result(timeout=30) for f in futs]
    assert all(isinstance(md, RecordMetadata) for md in mds)
    assert mds[0].serialized_key_size == 2 and mds[0].serialized_value_size == 2
    got = {(r.partition, r.offset): r for r in read_topic(broker.bootstrap_servers, topic_name, 100)}
    assert len(got) == 100
    for i, md in enumerate(mds):
        r = got[(md.partition, md.offset)]
        assert (r.key, r.value, r.headers, r.timestamp) == (f"k{i}".encode(), f"v{i}".encode(), (("h", b"x"),),
                                                            1_700_000_000_000 + i)
        assert md.timestamp == 1_700_000_000_000 + i


def test_linger_holds_a_lone_record_about_linger_ms(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=400) as p:
        p.send(topic_name, b"warm-up").result(timeout=30)  # connection and producer id ready first
        start = time.monotonic()
        fut = p.send(topic_name, b"lone")
        fut.result(timeout=30)
        elapsed = time.monotonic() - start
    # A producer that ignores linger answers in a few ms; one that waits for more data never answers.
    assert elapsed >= 0.35, elapsed
    assert elapsed < 5.0, elapsed


def test_a_full_batch_goes_without_waiting_for_linger(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    # batch.max.size = batch.size: Java's fixed batches, so the first one closes at 2 KiB and the rest linger
    # (a growing batch would take all 30 records before the sender takes it).
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=120_000, batch_size=2048,
                  batch_max_size=2048, delivery_timeout_ms=200_000) as p:
        futs = [p.send(topic_name, b"x" * 100, partition=0) for _ in range(30)]  # > 2 batches of 2 KiB
        # The first batch filled up: it must go now, not after two minutes of linger.
        md = futs[0].result(timeout=20)
        assert md.offset == 0
        assert not futs[-1].done()  # the last, partly filled batch keeps lingering
        p.close(0)
    with pytest.raises(ProducerClosedError):
        futs[-1].result(timeout=5)


def test_flush_returns_only_after_every_future_is_done(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 6)
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=60_000) as p:
        futs = [p.send(topic_name, f"{i}".encode()) for i in range(5000)]
        assert not all(f.done() for f in futs)
        p.flush(timeout=30)
        assert all(f.done() for f in futs)
        assert all(f.exception() is None for f in futs)


def test_close_zero_fails_pending_futures_at_once(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    p = Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=60_000)
    futs = [p.send(topic_name, b"pending") for _ in range(10)]
    start = time.monotonic()
    p.close(0)
    assert time.monotonic() - start < 5
    for f in futs:
        with pytest.raises(ProducerClosedError, match="forcefully"):
            f.result(timeout=1)
    with pytest.raises(ProducerClosedError):
        p.send(topic_name, b"after close")


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's closed state, refused without asking a broker"))
def test_partitions_for_a_new_topic_after_close_is_refused_at_once(broker: EmbeddedBroker, topic_name: str) -> None:
    # The closed producer has no sender thread to fetch metadata: the call must not wait out max.block.ms.
    # A topic it knew still answers from what it had, as Java's partitionsFor does.
    create_topic(broker.bootstrap_servers, topic_name, 2)
    p = Producer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=30_000)
    assert len(p.partitions_for(topic_name)) == 2
    p.close()
    assert len(p.partitions_for(topic_name)) == 2
    start = time.monotonic()
    with pytest.raises(ProducerClosedError, match=r"partitions_for\('never-seen'\) called after close\(\)"):
        p.partitions_for("never-seen")
    assert time.monotonic() - start < 15  # not max.block.ms; half of it is a margin no busy machine eats


def test_close_wakes_a_caller_waiting_for_metadata(broker: EmbeddedBroker, topic_name: str) -> None:
    # Java's Metadata.close(): a send() waiting for a topic that never appears ends when the producer closes.
    p = Producer(bootstrap_servers=broker.bootstrap_servers, allow_auto_create_topics=False, max_block_ms=60_000)
    outcome: list[BaseException] = []

    def send() -> None:
        try:
            p.send(topic_name, b"x")
        except BaseException as e:  # the outcome is what the test checks
            outcome.append(e)

    sender = threading.Thread(target=send)
    sender.start()
    wait_for(lambda: topic_name in p._metadata.topics(), 10, "send() to start waiting for the topic")
    p.close()
    sender.join(10)
    assert not sender.is_alive(), "send() still waiting for metadata after close()"
    assert len(outcome) == 1 and isinstance(outcome[0], ProducerClosedError), outcome


def test_unknown_topic_without_auto_creation_times_out_naming_it(broker: EmbeddedBroker, topic_name: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers, allow_auto_create_topics=False,
                  max_block_ms=1500) as p:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=f"Topic '{topic_name}' not present in metadata after 1500 ms"):
            p.send(topic_name, b"x")
        assert 1.4 < time.monotonic() - start < 10


def test_buffer_exhaustion_blocks_then_raises_within_max_block(topic_name: str) -> None:
    with EmbeddedBroker() as own:
        create_topic(own.bootstrap_servers, topic_name, 6)
        p = Producer(bootstrap_servers=own.bootstrap_servers, buffer_memory=64 * 1024, batch_size=16 * 1024,
                     max_block_ms=1000, linger_ms=0, delivery_timeout_ms=30_000, request_timeout_ms=10_000)
        p.send(topic_name, b"warm-up").result(timeout=30)
        own.stop()  # nothing drains any more: memory can only run out
        futs = []
        with pytest.raises(BufferExhaustedError, match=r"Failed to allocate 16384 bytes within \d+ ms") as err:
            start = time.monotonic()
            for i in range(1000):
                start = time.monotonic()
                futs.append(p.send(topic_name, b"x" * 1000, partition=i % 6))
        blocked = time.monotonic() - start
        assert 0.9 <= blocked < 3.0, blocked
        # The error names the real trouble (the broker went away), not a buffer that is too small.
        assert "cannot be delivered" in str(err.value) and "buffer.memory would not help" in str(err.value)
        assert isinstance(err.value.__cause__, KafkaConnectionError), repr(err.value.__cause__)
        p.close(0)
        assert all(f.done() for f in futs)


def test_bad_config_key_names_the_nearest_valid_one() -> None:
    with pytest.raises(ConfigError, match="linger.ms"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "linger.msec": 5})


def test_send_from_many_threads_keeps_each_threads_order(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 4)
    n_threads, per_thread = 8, 5000
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        futures: dict[int, list] = {}

        def worker(t: int) -> None:
            futures[t] = [p.send(topic_name, f"{t}:{i}".encode(), key=f"key-{t}".encode())
                          for i in range(per_thread)]

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        p.flush(timeout=60)
    records = read_topic(broker.bootstrap_servers, topic_name, n_threads * per_thread)
    assert len(records) == n_threads * per_thread
    by_thread: dict[int, list[tuple[int, int]]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        t, i = map(int, r.value.decode().split(":"))  # type: ignore[union-attr]
        by_thread.setdefault(t, []).append((r.partition, i))
    for t, seen in by_thread.items():
        assert [i for _, i in seen] == list(range(per_thread)), f"thread {t} reordered"
        assert len({part for part, _ in seen}) == 1  # one key, one partition


def _send_in_child(producer: Producer, topic: str, q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        producer.send(topic, b"from child")
        q.put("sent")
    except IllegalStateError as e:
        q.put(f"IllegalStateError: {e}")


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's fork check in the child, which no broker changes"))
def test_a_producer_used_after_fork_raises_instead_of_hanging(broker: EmbeddedBroker, topic_name: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        p.send(topic_name, b"parent").result(timeout=30)
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        child = ctx.Process(target=_send_in_child, args=(p, topic_name, q))
        child.start()
        outcome = q.get(timeout=30)
        child.join(30)
        assert outcome.startswith("IllegalStateError") and "fork" in outcome


def _outcomes_in_forked_child(calls: dict[str, object]) -> dict[str, str]:
    """Run each call in a child made by os.fork(); what each raised there ("Type: message"), read through a pipe
    with a deadline so a hang fails the test instead of stalling it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's atexit or pytest's teardown
        code = 0
        try:
            os.close(r)
            lines = []
            for name, call in calls.items():
                try:
                    call()  # type: ignore[operator]
                    lines.append(f"{name}\tno error")
                except Exception as e:
                    lines.append(f"{name}\t{type(e).__name__}: {e}")
            os.write(w, "\n".join(lines).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    deadline = time.monotonic() + 30
    try:
        while True:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "the forked child did not answer within 30 s"
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return dict(line.split("\t", 1) for line in data.decode().splitlines())


def test_batch_apis_in_a_forked_child_explain_the_fork_not_a_close() -> None:
    # After fork() the child's producer is also marked closed (one flag on send()'s fast path); send_batch() and
    # send_arrow() once checked "closed" first and blamed close(). No broker: the check comes before any I/O.
    import pyarrow as pa

    p = Producer(bootstrap_servers="127.0.0.1:1")
    try:
        table = pa.table({"value": [b"v"]})
        got = _outcomes_in_forked_child({
            "send": lambda: p.send("t", b"v"),
            "send_batch": lambda: p.send_batch("t", [b"v"]),
            "send_arrow": lambda: p.send_arrow("t", table),
        })
    finally:
        p.close(0)
    assert got["send"].startswith("IllegalStateError") and "fork()" in got["send"]
    assert got["send_batch"] == got["send"]  # the same explanation as send() gives
    assert got["send_arrow"] == got["send"]


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is the future protocol of kafkajet's RecordFuture, which no broker changes"))
def test_futures_work_with_concurrent_futures_wait_and_callbacks(broker: EmbeddedBroker, topic_name: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=50) as p:
        seen: list[RecordMetadata] = []
        futs = [p.send(topic_name, f"{i}".encode(), partition=0) for i in range(50)]
        for f in futs:
            f.add_done_callback(lambda f: seen.append(f.result()))
        done, not_done = wait(futs, timeout=30)
        assert not not_done and len(done) == 50
    assert sorted(md.offset for md in seen) == [f.result().offset for f in futs]


class CountingInterceptor:
    def __init__(self) -> None:
        self.acks: list[tuple[object, object]] = []
        self.closed = False

    def on_send(self, record: tuple) -> tuple:  # type: ignore[type-arg]
        topic, value, key, headers, partition, ts = record
        # Interceptors see the record before serialization, as in Java.
        return topic, {**value, "seen": True}, key, [*(headers or []), ("icp", b"1")], partition, ts

    def on_acknowledgement(self, metadata: object, error: object) -> None:
        self.acks.append((metadata, error))

    def close(self) -> None:
        self.closed = True


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's serializer and interceptor chain"))
def test_serializers_interceptors_and_partitions_for(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    icp = CountingInterceptor()
    with Producer(bootstrap_servers=broker.bootstrap_servers, key_serializer="str", value_serializer="json",
                  interceptors=[icp]) as p:
        assert [pi.partition for pi in p.partitions_for(topic_name)] == [0, 1, 2]
        futs = [p.send(topic_name, {"n": i}, key=f"user-{i}") for i in range(20)]
        p.flush(timeout=30)
        metrics = p.metrics()
    assert icp.closed and len(icp.acks) == 20 and all(err is None for _, err in icp.acks)
    records = read_topic(broker.bootstrap_servers, topic_name, 20)
    assert sorted(r.value for r in records) == sorted(f'{{"n":{i},"seen":true}}'.encode() for i in range(20))
    assert all(r.headers == (("icp", b"1"),) for r in records)
    assert {(f.result().partition, f.result().offset) for f in futs} == {(r.partition, r.offset) for r in records}
    # Interceptors are told what the futures say: where each record landed, its timestamp and sizes.
    assert sorted(md for md, _ in icp.acks) == sorted(f.result() for f in futs)  # type: ignore[type-var]
    for name in ("record-send-rate", "record-error-rate", "record-retry-rate", "batch-size-avg",
                 "records-per-request-avg", "request-latency-avg", "buffer-available-bytes",
                 "bufferpool-wait-time-total", "requests-in-flight"):
        assert name in metrics
    assert metrics["record-send-total"] == 20


@pytest.mark.broker_kinds("tansu", reason=(
    "input is refused by kafkajet before a record is queued, whatever the broker"))
def test_bad_input_is_refused_with_a_clear_error(broker: EmbeddedBroker, topic_name: str) -> None:
    from kafkajet import RecordTooLargeError, SerializationError
    from kafkajet.errors import InvalidPartitionError

    create_topic(broker.bootstrap_servers, topic_name, 2)
    with Producer(bootstrap_servers=broker.bootstrap_servers, max_request_size=10_000) as p:
        with pytest.raises(RecordTooLargeError, match="larger than max.request.size"):
            p.send(topic_name, b"x" * 20_000)
        with pytest.raises(SerializationError, match="cannot serialize int"):
            p.send(topic_name, 5)
        with pytest.raises(InvalidPartitionError, match=r"Invalid partition 7 .*\[0...2\)"):
            p.send(topic_name, b"x", partition=7)
        with pytest.raises(SerializationError, match="header key must be str"):
            p.send(topic_name, b"x", headers=[(b"k", b"v")])
        assert p.send(topic_name, b"fine").result(timeout=30).offset >= 0


def test_records_for_an_unreachable_broker_expire_with_the_cause(topic_name: str) -> None:
    from kafkajet import DeliveryTimeoutError

    with EmbeddedBroker() as own:
        create_topic(own.bootstrap_servers, topic_name, 1)
        p = Producer(bootstrap_servers=own.bootstrap_servers, linger_ms=0, request_timeout_ms=1000,
                     delivery_timeout_ms=2000)
        p.send(topic_name, b"warm-up").result(timeout=30)
        own.stop()
        start = time.monotonic()
        fut = p.send(topic_name, b"doomed")
        with pytest.raises(DeliveryTimeoutError, match="Expiring 1 record.*last cause.*(refused|failed|closed)"):
            fut.result(timeout=30)
        assert 1.9 < time.monotonic() - start < 10
        p.close(timeout=5)
