"""send(callback=) against a real broker: every record's callback once, on the sender thread, in send order per
partition, and what the callbacks report is what a consumer reads."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

from kafkajet import Producer, RecordMetadata
from kafkajet.admin import Admin
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


def test_a_callback_that_is_not_callable_is_refused_before_the_record_is_taken(broker: EmbeddedBroker,
                                                                               topic_name: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        with pytest.raises(TypeError, match="callback must be callable"):
            p.send(topic_name, b"v", callback="print")  # type: ignore[arg-type]
        p.flush(30)
        assert p.metrics()["record-send-total"] == 0
