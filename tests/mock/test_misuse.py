"""The API as Python users actually misuse it: each mistake gets a clear answer and harms no other record.

Anything that used to hang runs under a hard timeout, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from kafkajet import BatchFuture, Producer, SerializationError
from kafkajet.errors import IllegalStateError, InvalidPartitionError
from kafkajet.testing import MockCluster

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 3, "u": 1}), pytest.mark.timeout(60)]


# --- item 6: a bad argument is refused before it touches shared state ------------------------------------------


def _deprecated_alias(p: Producer) -> object:
    with pytest.warns(DeprecationWarning):
        return p.send_batch("t", [b"a"], timestamps=[1.5])


@pytest.mark.parametrize("call", [
    pytest.param(lambda p: p.send("t", b"bad", timestamp_ms=time.time() * 1000), id="send-float"),
    pytest.param(lambda p: p.send("t", b"bad", timestamp_ms="1700000000000"), id="send-str"),
    pytest.param(lambda p: p.send("t", b"bad", timestamp_ms=2**63), id="send-too-large"),
    pytest.param(lambda p: p.send_batch("t", [b"a", b"b"], timestamps_ms=[1, time.time() * 1000]), id="batch-float"),
    pytest.param(_deprecated_alias, id="batch-deprecated-float"),
])
def test_a_bad_timestamp_is_refused_and_the_other_records_still_go(
        cluster: MockCluster, call: Callable[[Producer], object]) -> None:
    p = Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50)
    try:
        before = p.send("t", b"before", partition=0)
        with pytest.raises((TypeError, ValueError), match="timestamp") as e:
            call(p)
        if isinstance(e.value, TypeError):
            assert "int" in str(e.value)  # says the type wanted
        after = p.send("t", b"after", partition=0)
        assert before.result(timeout=15).offset == 0 and after.result(timeout=15).offset == 1
    finally:
        started = time.monotonic()
        p.close(10)
        assert time.monotonic() - started < 5, "close() waited for a batch a bad record had wedged"
    assert [r.value for r in cluster.records("t", 0)] == [b"before", b"after"]


@pytest.mark.parametrize("kwargs,error,says", [
    ({"topic": 5}, TypeError, "topic must be a non-empty str, got 5"),
    ({"topic": b"t"}, TypeError, "topic must be a non-empty str, got b't'"),
    ({"partition": "1"}, InvalidPartitionError, "Invalid partition '1'"),
    ({"partition": 1.0}, InvalidPartitionError, "Invalid partition 1.0"),
    ({"callback": "print"}, TypeError, "callback must be callable"),
    ({"key": 5}, SerializationError, "key.serializer"),
])
def test_an_argument_of_the_wrong_type_gets_the_producers_own_error(
        cluster: MockCluster, kwargs: dict[str, object], error: type[Exception], says: str) -> None:
    # send()'s per-record work is compiled (send_path.py): its parameters must not be declared with types the
    # compiled code would check on entry, which would answer with the compiler's TypeError instead.
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
        call: dict[str, object] = {"topic": "u", "value": b"v", **kwargs}
        with pytest.raises(error) as info:
            p.send(**call)  # type: ignore[arg-type]
        assert says in str(info.value)
        assert p.send("u", b"after").result(timeout=15).partition == 0  # and the producer goes on


def test_integral_timestamps_of_other_types_are_taken(cluster: MockCluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
        md = p.send("u", b"x", timestamp_ms=np.int64(1_700_000_000_123)).result(timeout=15)
        assert md.timestamp == 1_700_000_000_123
        p.send_batch("u", [b"y"], timestamps_ms=[np.int64(5)]).result(timeout=15)
    assert [r.timestamp for r in cluster.records("u", 0)] == [1_700_000_000_123, 5]


# --- item 7: flush() inside a callback ---------------------------------------------------------------------------


def test_flush_inside_a_callback_raises_instead_of_deadlocking(cluster: MockCluster) -> None:
    raised: list[BaseException] = []
    # linger.ms so that the first batch is still open when the callback is attached: it then runs on the sender
    # thread, where callbacks run in production.
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=200) as p:
        def cb(_: object) -> None:
            try:
                p.flush(5)
            except BaseException as e:
                raised.append(e)

        futures = [p.send("t", b"first", partition=0)]
        futures[0].add_done_callback(cb)
        futures += [p.send("t", b"%d" % i) for i in range(20_000)]
        done, pending = concurrent.futures.wait(futures, timeout=30)
        assert not pending, f"{len(pending)} records stuck behind a flush() in a callback"
    assert len(raised) == 1 and isinstance(raised[0], IllegalStateError)
    assert "flush() invocation inside a callback is not permitted because it may lead to deadlock" in str(raised[0])


def test_close_inside_a_callback_still_works(cluster: MockCluster) -> None:
    p = Producer(bootstrap_servers=cluster.bootstrap_servers)
    closed = threading.Event()

    def cb(_: object) -> None:
        p.close()
        closed.set()

    p.send("t", b"x").add_done_callback(cb)
    assert closed.wait(15)
    p.close(5)


# --- item 8: the futures are concurrent.futures.Futures -----------------------------------------------------------


def test_batch_future_works_with_wait_as_completed_and_asyncio(cluster: MockCluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=1024) as p:
        batches = [p.send_batch("t", [b"%d-%d" % (j, i) for i in range(500)]) for j in range(4)]
        assert all(isinstance(b, concurrent.futures.Future) and isinstance(b, BatchFuture) for b in batches)
        done, pending = concurrent.futures.wait(batches, timeout=15)
        assert not pending and len(done) == 4
        assert set(concurrent.futures.as_completed(batches, timeout=15)) == set(batches)
        called = threading.Event()
        batches[0].add_done_callback(lambda f: called.set())
        assert called.wait(5)

        async def main() -> list[object]:
            futs = [asyncio.wrap_future(p.send_batch("u", [b"a", b"b"])), asyncio.wrap_future(p.send("u", b"c"))]
            return await asyncio.wait_for(asyncio.gather(*futs), 15)

        batch_md, record_md = asyncio.run(main())
        assert [m.offset for m in batch_md] == [0, 1] and record_md.offset == 2  # type: ignore[attr-defined]
        arrow = p.send_arrow(None, pa.table({"value": [b"z"], "topic": ["u"]}))
        assert concurrent.futures.wait([arrow], timeout=15).not_done == set()
        assert [m.offset for m in arrow.result(0)] == [3]


def test_a_failed_batch_future_reports_through_the_future_protocol(cluster: MockCluster) -> None:
    cluster.push_request_errors("Produce", ["INVALID_RECORD"])
    with Producer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=False) as p:
        f = p.send_batch("u", [b"a", b"b"])
        (done,) = concurrent.futures.wait([f], timeout=15).done
        assert "INVALID_RECORD" in str(done.exception())
        async def awaited() -> object:
            return await asyncio.wait_for(asyncio.wrap_future(f), 15)

        with pytest.raises(Exception, match="INVALID_RECORD"):
            asyncio.run(awaited())


# --- item 9: a bare string ------------------------------------------------------------------------------------------


def test_a_string_is_taken_as_bootstrap_servers(cluster: MockCluster) -> None:
    with Producer(cluster.bootstrap_servers) as p:
        assert p.send("u", b"x").result(timeout=15).offset == 0


def test_a_config_of_the_wrong_type_shows_the_right_call() -> None:
    with pytest.raises(TypeError, match=r"Producer\('host:9092'\)"):
        Producer(["host:9092"])  # type: ignore[arg-type]


# --- items 10 and 11: logging -------------------------------------------------------------------------------------


def _run(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def test_an_unconfigured_application_sees_no_kafkajet_log_lines() -> None:
    # Reconnect warnings to an address where nothing listens: with logging unconfigured, nothing reaches stderr.
    out = _run("""
        from kafkajet import Producer
        from kafkajet.testing.ports import free_port
        from kafkajet.errors import KafkaError
        p = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "max.block.ms": 1500})
        try:
            p.send("t", b"x")
        except KafkaError as e:
            print("failed as expected:", type(e).__name__)
        p.close(1)
    """)
    assert "failed as expected" in out.stdout, out.stderr
    assert out.stderr == ""


def test_exiting_without_close_logs_how_many_records_were_lost() -> None:
    out = _run("""
        import logging
        logging.basicConfig(level=logging.WARNING)
        from kafkajet import Producer
        from kafkajet.testing import MockCluster
        cluster = MockCluster(brokers=1).start()
        cluster.create_topic("t", 1)
        p = Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0)
        p.send("t", b"first").result(timeout=15)
        cluster.stop()
        for i in range(1000):
            p.send("t", b"%d" % i)
        p._exit_close_timeout_s = 2.0  # the bounded wait at exit; its length is not what this test is about
        print("exiting without close()")
    """)
    assert "exiting without close()" in out.stdout, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("ERROR:kafkajet")]
    assert len(errors) == 1, out.stderr
    assert "1000 record(s) not delivered" in errors[0] and "without close()" in errors[0]
    assert "last cause" in errors[0]
