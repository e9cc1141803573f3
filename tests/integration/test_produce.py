"""produce(), send() without a future, against a real broker: what it queues arrives once and in order (read back
by kafka-python), its callbacks carry the offsets a consumer reads, AIOProducer's does the same, and bad input
raises what send() raises, at the call."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from kafkajet import KafkaTimeoutError, Producer, ProducerClosedError, RecordMetadata
from kafkajet.admin import Admin
from kafkajet.aio import AIOProducer
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([name], num_partitions=partitions)


def assert_once_in_order(got: list[Any], sent: dict[int, list[bytes]]) -> None:
    """`got` (read back) holds each partition's values exactly as `sent` lists them, at consecutive offsets."""
    by_partition: dict[int, list[Any]] = defaultdict(list)
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        by_partition[r.partition].append(r)
    assert set(by_partition) == set(sent)
    for partition, records in by_partition.items():
        assert [r.value for r in records] == sent[partition], f"partition {partition}"
        assert [r.offset for r in records] == list(range(len(records)))


def test_produced_records_arrive_exactly_once_and_in_order(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 3)
    n = 3000
    sent: dict[int, list[bytes]] = defaultdict(list)
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5) as p:
        for i in range(n):
            partition = i % 3
            p.produce(topic_name, b"v%05d" % i, key=b"k%d" % (i % 7), partition=partition,
                      headers=[("i", b"%d" % i)])
            sent[partition].append(b"v%05d" % i)
        assert p.produce(topic_name, b"nothing returned", partition=0) is None  # type: ignore[func-returns-value]
        sent[0].append(b"nothing returned")
        p.flush(60)
        metrics = p.metrics()
    assert metrics["record-send-total"] == n + 1 and metrics["record-error-no-callback-total"] == 0
    got = read_topic(broker.bootstrap_servers, topic_name, n + 1)
    assert len(got) == n + 1
    assert_once_in_order(got, sent)
    first = min((r for r in got if r.partition == 0), key=lambda r: r.offset)
    assert (first.key, first.headers) == (b"k0", (("i", b"0"),))


def test_produce_callbacks_carry_the_offsets_a_consumer_reads(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 4)
    n = 2000
    lock = threading.Lock()
    calls: list[tuple[int, RecordMetadata, BaseException | None]] = []

    def on_delivery(i: int) -> Any:
        def callback(md: RecordMetadata, exc: BaseException | None) -> None:
            with lock:
                calls.append((i, md, exc))
        return callback

    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5) as p:
        for i in range(n):
            p.produce(topic_name, b"v%d" % i, key=b"k%d" % (i % 11), timestamp_ms=1_700_000_000_000 + i,
                      callback=on_delivery(i))
        p.flush(60)
        with lock:  # flush() returns once every callback has run
            assert len(calls) == n
    assert [exc for _, _, exc in calls if exc is not None] == []
    assert sorted(i for i, _, _ in calls) == list(range(n))  # each record's callback exactly once
    got = {(r.partition, r.offset): r for r in read_topic(broker.bootstrap_servers, topic_name, n)}
    assert len(got) == n
    for i, md, _ in calls:
        record = got[(md.partition, md.offset)]
        assert (md.topic, record.value, record.key) == (topic_name, b"v%d" % i, b"k%d" % (i % 11))
        assert md.timestamp == record.timestamp == 1_700_000_000_000 + i
        assert (md.serialized_key_size, md.serialized_value_size) == (len(record.key or b""), len(record.value or b""))
    per_partition: dict[int, list[int]] = defaultdict(list)
    for i, md, _ in calls:
        per_partition[md.partition].append(i)
    assert all(order == sorted(order) for order in per_partition.values())  # send order within a partition


def test_aio_produce_arrives_once_in_order_and_calls_back_on_the_loop(broker: EmbeddedBroker,
                                                                      topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 2)
    n = 2000
    sent: dict[int, list[bytes]] = defaultdict(list)
    calls: list[tuple[RecordMetadata, BaseException | None, int]] = []

    def callback(md: RecordMetadata, exc: BaseException | None) -> None:
        calls.append((md, exc, threading.get_ident()))

    async def main() -> None:
        async with AIOProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5) as p:
            for i in range(n):
                partition = i % 2
                # every other record with a callback: both kinds interleave in one partition's batches
                await p.produce(topic_name, b"a%05d" % i, partition=partition,
                                callback=callback if i % 4 < 2 else None)
                sent[partition].append(b"a%05d" % i)
            await p.flush(60)
            assert p.metrics()["record-send-total"] == n

    asyncio.run(main())
    assert len(calls) == n // 2 and all(exc is None for _, exc, _ in calls)
    assert {ident for _, _, ident in calls} == {threading.get_ident()}  # the loop's thread: asyncio.run() ran here
    got = read_topic(broker.bootstrap_servers, topic_name, n)
    assert len(got) == n
    assert_once_in_order(got, sent)
    values = {(r.partition, r.offset): r.value for r in got}
    assert all(values[(md.partition, md.offset)] is not None for md, _, _ in calls)


# --- input refused at the call, as send() refuses it -----------------------------------------------------------

class Unserializable:
    pass


BAD_INPUT: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("topic not a str", (b"topic", b"v"), {}),
    ("empty topic", ("", b"v"), {}),
    ("partition out of range", (None, b"v"), {"partition": 2}),
    ("partition not an int", (None, b"v"), {"partition": "0"}),
    ("negative timestamp", (None, b"v"), {"timestamp_ms": -5}),
    ("headers not pairs", (None, b"v"), {"headers": [("h",)]}),
    ("header value not bytes", (None, b"v"), {"headers": [("h", 5)]}),
    ("value without a serializer", (None, Unserializable()), {}),
    ("key without a serializer", (None, b"v", Unserializable()), {}),
    ("record too large", (None, b"x" * 2_000_000), {}),
    ("callback not callable", (None, b"v"), {"callback": "print"}),
]


@pytest.mark.broker_kinds("tansu", reason="the input is refused by kafkajet before the record is queued")
@pytest.mark.parametrize(("case", "args", "kwargs"), BAD_INPUT, ids=[c for c, _, _ in BAD_INPUT])
def test_bad_input_raises_what_send_raises_at_the_call(broker: EmbeddedBroker, topic_name: str, case: str,
                                                      args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 2)
    args = tuple(topic_name if a is None and i == 0 else a for i, a in enumerate(args))
    errors: list[BaseException] = []
    with Producer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=5000) as p:
        for call in (p.send, p.produce):
            with pytest.raises(Exception) as info:  # noqa: PT011  (compared with send()'s below)
                call(*args, **kwargs)
            errors.append(info.value)
        p.flush(30)
        assert p.metrics()["record-send-total"] == 0  # nothing was queued
    sent, produced = errors
    assert type(produced) is type(sent) and str(produced) == str(sent), case


@pytest.mark.broker_kinds("tansu", reason="its subject is kafkajet's closed state, refused without asking a broker")
def test_produce_after_close_is_refused_naming_produce(broker: EmbeddedBroker, topic_name: str) -> None:
    p = Producer(bootstrap_servers=broker.bootstrap_servers)
    p.close()
    with pytest.raises(ProducerClosedError, match=r"^produce\(\) called after close\(\)"):
        p.produce(topic_name, b"v")

    async def main() -> None:
        aio = AIOProducer(bootstrap_servers=broker.bootstrap_servers)
        await aio.start()
        await aio.stop()
        with pytest.raises(ProducerClosedError, match=r"^produce\(\) called after stop\(\)"):
            await aio.produce(topic_name, b"v")

    asyncio.run(main())


def test_produce_to_an_unknown_topic_gives_up_after_max_block_ms(broker: EmbeddedBroker, topic_name: str) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers, allow_auto_create_topics=False,
                  max_block_ms=1500) as p:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=f"Topic '{topic_name}' not present in metadata after 1500 ms"):
            p.produce(topic_name, b"x")
        assert 1.4 < time.monotonic() - start < 10
