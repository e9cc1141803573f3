"""send(callback=) against a real broker: every record's callback once, on the sender thread, in send order per
partition, and what the callbacks report is what a consumer reads."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkajet import Producer, RecordMetadata
from kafkajet.admin import Admin
from kafkajet.errors import IllegalStateError
from kafkajet.producer.futures import RecordFuture
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic


def test_callbacks_report_every_record_once_in_send_order_per_partition(broker: EmbeddedBroker,
                                                                        topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=4)
    n = 20_000
    lock = threading.Lock()
    seen: dict[int, list[tuple[int, RecordMetadata]]] = defaultdict(list)
    threads: set[str] = set()
    errors: list[BaseException] = []

    def on_delivery(i: int):  # type: ignore[no-untyped-def]
        def callback(md: RecordMetadata, exc: BaseException | None) -> None:
            with lock:
                threads.add(threading.current_thread().name)
                if exc is not None:
                    errors.append(exc)
                seen[md.partition].append((i, md))
        return callback

    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5) as p:
        for i in range(n):
            p.send(topic_name, b"v%d" % i, key=b"k%d" % (i % 97), callback=on_delivery(i))
        p.flush(60)
        with lock:  # flush() returns once every callback has run
            assert sum(len(v) for v in seen.values()) == n
    assert errors == []
    assert threading.current_thread().name not in threads  # run by the producer's thread, not the caller's
    got = {(r.partition, r.offset): r.value for r in read_topic(broker.bootstrap_servers, topic_name, n)}
    for partition, calls in seen.items():
        sent_order = [i for i, _ in calls]
        assert sent_order == sorted(sent_order)  # callbacks in send order within the partition
        offsets = [md.offset for _, md in calls]
        assert offsets == sorted(set(offsets))
        for i, md in calls:
            assert got[(partition, md.offset)] == b"v%d" % i
    assert sorted(i for calls in seen.values() for i, _ in calls) == list(range(n))


@pytest.mark.broker_kinds("tansu", reason=(
    "the callback is refused by kafkajet before the record is taken, whatever the broker"))
def test_a_callback_that_is_not_callable_is_refused_before_the_record_is_taken(broker: EmbeddedBroker,
                                                                               topic_name: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        with pytest.raises(TypeError, match="callback must be callable"):
            p.send(topic_name, b"v", callback="print")  # type: ignore[arg-type]
        p.flush(30)
        assert p.metrics()["record-send-total"] == 0


# --- flush(), close() and commit_transaction() return only after the callbacks ran --------------------------------


def returns_after_every_callback(p: Producer, topic: str, call: Callable[[], object]) -> None:
    """Send ten records whose first callback blocks (on an Event), run `call` on another thread meanwhile, and
    check that it returned only after all ten callbacks had run (Java: produceFuture.done() follows them)."""
    entered, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def slow(md: RecordMetadata, exc: BaseException | None) -> None:
        entered.set()
        assert release.wait(60)
        ran.append(0)

    def quick(i: int) -> Callable[[RecordMetadata, BaseException | None], None]:
        return lambda md, exc: ran.append(i)

    p.send(topic, b"0", partition=0, callback=slow)
    for i in range(1, 10):
        p.send(topic, b"%d" % i, partition=0, callback=quick(i))
    assert entered.wait(30), "the first record's callback never ran"
    at_return: list[object] = []

    def caller() -> None:
        try:
            call()
        except BaseException as e:
            at_return.append(e)
        else:
            at_return.append(list(ran))

    t = threading.Thread(target=caller)
    t.start()
    t.join(0.5)  # one that does not wait returns at once; one that waits is still here
    try:
        assert t.is_alive(), f"returned while a callback was still running, with these run: {at_return}"
    finally:
        release.set()
        t.join(60)
    assert at_return == [list(range(10))]


def test_flush_returns_only_after_the_callbacks_ran(broker: EmbeddedBroker, topic_name: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=20) as p:
        returns_after_every_callback(p, topic_name, lambda: p.flush(60))


def test_close_returns_only_after_the_callbacks_ran(broker: EmbeddedBroker, topic_name: str) -> None:
    p = Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=20)
    try:
        returns_after_every_callback(p, topic_name, lambda: p.close(60))
    finally:
        p.close(0)


def test_commit_transaction_returns_only_after_the_callbacks_ran(broker: EmbeddedBroker, topic_name: str) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"txn-{topic_name}",
                   "linger.ms": 20}) as p:
        p.init_transactions(timeout=30)
        p.begin_transaction()
        returns_after_every_callback(p, topic_name, lambda: p.commit_transaction(60))


def test_a_callback_may_read_its_batchs_records_but_not_flush(broker: EmbeddedBroker, topic_name: str) -> None:
    # Callbacks run on the sender thread: a future of the same batch is resolved there already (waiting would
    # be waiting for itself), while flush() would wait for the thread it runs on and is refused, as in Java.
    seen: list[object] = []
    futs: list[RecordFuture] = []

    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=20) as p:
        def callback(md: RecordMetadata, exc: BaseException | None) -> None:
            other = futs[1]
            seen.append((other.done(), other.result(10).offset - md.offset))
            try:
                p.flush(10)
            except IllegalStateError as e:
                seen.append(str(e))

        futs.append(p.send(topic_name, b"a", partition=0, callback=callback))
        futs.append(p.send(topic_name, b"b", partition=0))
        p.flush(30)
    assert seen[0] == (True, 1)
    assert len(seen) == 2 and "flush() invocation inside a callback is not permitted" in str(seen[1])


# Without logging set up, with it set up to stderr, and to a file only: what a plain concurrent.futures.Future
# does with a callback's exception (printed by Python's last resort in the first case, left to the handlers
# in the others, once).
_SET_UP = {"none": "", "stderr": "import logging; logging.basicConfig()\n",
           "file": "import logging, sys; logging.basicConfig(filename=sys.argv[1])\n"}


@pytest.mark.parametrize("set_up", list(_SET_UP))
def test_a_raising_callback_is_printed_as_concurrent_futures_prints_it(broker: EmbeddedBroker, topic_name: str,
                                                                       set_up: str, tmp_path: Path) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic_name, timeout_s=30)
    script = _SET_UP[set_up] + f"""
from kafkajet import Producer
with Producer(bootstrap_servers={broker.bootstrap_servers!r}) as p:
    fut = p.send({topic_name!r}, b"v", callback=lambda md, exc: 1 / 0)
    fut.add_done_callback(lambda f: [][1])
    p.flush(60)
    print(fut.result(0).offset, flush=True)
"""
    log_file = tmp_path / "app.log"
    r = subprocess.run([sys.executable, "-c", script, str(log_file)], capture_output=True, text=True, timeout=120)
    # The record's outcome is untouched: delivered, at its offset, and the script exits 0.
    assert (r.returncode, r.stdout) == (0, "0\n"), r.stderr
    said = log_file.read_text() if set_up == "file" else r.stderr
    assert said.count("exception calling callback for") == 2, said
    assert said.count("Traceback (most recent call last)") == 2
    assert f"exception calling callback for RecordMetadata(topic='{topic_name}', partition=0, offset=0" in said
    assert "ZeroDivisionError" in said
    assert "exception calling callback for <RecordFuture " in said and "IndexError" in said
    if set_up == "file":
        assert r.stderr == ""  # the application sent its log elsewhere: nothing printed behind its back
