"""RecordFuture: what a caller holds for one record, across splits and after the caller lets go of it."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from concurrent.futures import FIRST_EXCEPTION, wait

from kafkajet import Producer
from kafkajet.producer.futures import RecordMetadata
from kafkajet.testing import MockCluster


def test_a_dropped_future_is_freed_while_its_record_is_still_queued() -> None:
    # The batch holds no reference to its records' futures: a caller that ignores them must not pay for them
    # for as long as the records wait (that is most of the producer's memory under load).
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000, batch_size=1 << 20) as p:
            fut = p.send("t", b"queued")
            ref = weakref.ref(fut)
            assert not fut.done()
            del fut
            gc.collect()
            assert ref() is None
            p.flush(timeout=30)
        assert [r.value for r in cluster.records("t", 0)] == [b"queued"]


def test_futures_callbacks_and_waiters_follow_records_through_a_split() -> None:
    # MESSAGE_TOO_LARGE splits a batch and re-encodes its records into new ones. Every way of holding a
    # record's outcome (result(), a callback added before the split, concurrent.futures.wait()) must report
    # where the record really landed.
    n = 2000
    values = [b"value-%05d" % i * 4 for i in range(n)]
    called: dict[int, RecordMetadata] = {}
    lock = threading.Lock()

    def on_done(i: int, f: object) -> None:
        with lock:
            called[i] = f.result()  # type: ignore[attr-defined]

    with MockCluster(brokers=1, max_message_bytes=3000) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=64 * 1024, linger_ms=200) as p:
            futs = []
            for i, v in enumerate(values):
                f = p.send("t", v)
                if i % 3 == 0:
                    f.add_done_callback(lambda f, i=i: on_done(i, f))
                futs.append(f)
            done, not_done = wait(futs[1::3], timeout=60, return_when=FIRST_EXCEPTION)
            assert not not_done
            mds = [f.result(timeout=60) for f in futs]
            deadline = time.monotonic() + 30
            while len(called) < len(range(0, n, 3)):
                assert time.monotonic() < deadline, "callbacks did not all run"
                time.sleep(0.01)
        assert cluster.stats().get("MESSAGE_TOO_LARGE", 0) > 0
        stored = cluster.records("t", 0)
    assert [md.offset for md in mds] == list(range(n))
    assert [r.value for r in stored] == values
    assert all(called[i] == mds[i] for i in called)
    assert all(f.done() and f.exception() is None for f in futs)
