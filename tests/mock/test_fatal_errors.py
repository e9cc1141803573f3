"""After a fatal error the producer refuses sends at once, naming the cause, and every queued record fails with it.

Java: TransactionManager.failIfNotReadyForSend throws "Cannot perform send because at least one previous
transactional or idempotent request has failed with errors." from send(), with the fatal error as its cause.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pyarrow as pa
import pytest

from kafkajet import Producer
from kafkajet.errors import ClusterAuthorizationFailedError, IllegalStateError, ProducerClosedError
from kafkajet.testing import MockCluster

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 3}), pytest.mark.timeout(60)]


def _caused_by(error: BaseException | None, cls: type[BaseException]) -> bool:
    while error is not None:
        if isinstance(error, cls):
            return True
        error = error.__cause__
    return False


def test_queued_records_fail_with_the_fatal_error_and_later_sends_raise_at_once(cluster: MockCluster) -> None:
    # The broker refuses InitProducerId only once the records are queued: otherwise the fatal error can win
    # the race and send() itself raises (the case the second half of this test checks). Until then it answers
    # a retriable error rather than holding the request: the sends wait for a Metadata answer, which may be
    # queued behind the InitProducerId on the same connection (the sender may ask for a producer id first).
    queued_all = threading.Event()

    def refuse_once_queued(header: object, body: object, broker: int) -> str:
        return "CLUSTER_AUTHORIZATION_FAILED" if queued_all.is_set() else "COORDINATOR_LOAD_IN_PROGRESS"

    cluster.control("InitProducerId", refuse_once_queued)  # type: ignore[arg-type]
    max_block_ms = 20_000
    with Producer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=max_block_ms) as p:
        queued = [p.send("t", value=b"v%d" % i, key=b"k%d" % (i % 5)) for i in range(50)]
        queued_all.set()
        done, pending = concurrent.futures.wait(queued, timeout=15)
        assert not pending
        assert all(_caused_by(f.exception(), ClusterAuthorizationFailedError) for f in done)
        for call in (lambda: p.send("t", b"later"),
                     lambda: p.send_batch("t", [b"a", b"b"]),
                     lambda: p.send_arrow("t", pa.table({"value": [b"a"]}))):
            started = time.monotonic()
            with pytest.raises(IllegalStateError, match="Cannot perform send because at least one previous") as e:
                call()
            # At once: not after waiting out max.block.ms (a wide margin, which a loaded machine cannot eat)
            assert time.monotonic() - started < max_block_ms / 1000 / 2
            assert isinstance(e.value.__cause__, Exception)
            assert _caused_by(e.value, ClusterAuthorizationFailedError)
        assert "failed" in repr(p)
    assert cluster.record_count("t") == 0


def test_after_close_a_failed_producer_says_it_is_closed(cluster: MockCluster) -> None:
    cluster.push_request_errors("InitProducerId", ["CLUSTER_AUTHORIZATION_FAILED"])
    p = Producer(bootstrap_servers=cluster.bootstrap_servers)
    # The sender asks for a producer id as it starts: on a busy machine the refusal can land before this
    # send(), which then raises at once instead of failing its future; either way the refusal is the cause.
    with pytest.raises((ClusterAuthorizationFailedError, IllegalStateError)) as e:
        p.send("t", b"x").result(timeout=15)
    assert _caused_by(e.value, ClusterAuthorizationFailedError)
    p.close(5)
    with pytest.raises(ProducerClosedError):
        p.send("t", b"after close")
