"""AIOProducer against a real broker: what send(), send_and_wait() and send_batch() report is what an independent
consumer (kafka-python, CRC-checked) reads."""

from __future__ import annotations

import asyncio

import pytest

from kafkajet import RecordMetadata
from kafkajet.admin import Admin
from kafkajet.aio import AIOProducer
from kafkajet.errors import IllegalStateError, ProducerClosedError
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic


def test_every_send_shape_lands_where_its_metadata_says(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=3)

    async def main() -> dict[bytes, RecordMetadata]:
        out: dict[bytes, RecordMetadata] = {}
        async with AIOProducer({"bootstrap.servers": broker.bootstrap_servers}, linger_ms=2) as p:
            out[b"one"] = await p.send_and_wait(topic_name, b"one", key=b"k", headers=[("h", b"1")])
            futs = {b"s%d" % i: await p.send(topic_name, b"s%d" % i) for i in range(5000)}
            values = [b"b%d" % i for i in range(3000)]
            batch = await p.send_batch(topic_name, values, keys=[b"k%d" % (i % 7) for i in range(3000)])
            for v, md in zip(values, await asyncio.wait_for(batch, 60), strict=True):
                out[v] = md
            for v, f in futs.items():
                out[v] = await asyncio.wait_for(f, 60)
            await p.flush(30)
            assert p.metrics()["record-send-total"] == 8001
        return out

    sent = asyncio.run(main())
    got = {(r.partition, r.offset): r for r in read_topic(broker.bootstrap_servers, topic_name, 8001)}
    assert len(got) == 8001
    for value, md in sent.items():
        assert got[(md.partition, md.offset)].value == value
    assert got[(sent[b"one"].partition, sent[b"one"].offset)].headers == (("h", b"1"),)


def test_a_stopped_producer_refuses_to_start_again(broker: EmbeddedBroker) -> None:
    async def main() -> None:
        p = AIOProducer(bootstrap_servers=broker.bootstrap_servers)
        await p.start()
        await p.stop()
        with pytest.raises(IllegalStateError, match="stopped"):
            await p.start()

    asyncio.run(main())


def test_send_after_stop_is_refused_at_once_naming_stop(broker: EmbeddedBroker, topic_name: str) -> None:
    # Not the 60 s metadata wait of a closed producer, and not "close()", which the asyncio user never called.
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=1)

    async def main() -> None:
        p = AIOProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=3000)
        await p.start()
        await p.send_and_wait(topic_name, b"before")
        await p.stop()
        loop = asyncio.get_running_loop()
        for topic in (topic_name, topic_name + "-never-seen"):
            start = loop.time()
            with pytest.raises(ProducerClosedError, match=r"send\(\) called after stop\(\)"):
                await p.send(topic, b"after")
            with pytest.raises(ProducerClosedError, match=r"send_batch\(\) called after stop\(\)"):
                await p.send_batch(topic, [b"after"])
            assert loop.time() - start < 1

    asyncio.run(main())
