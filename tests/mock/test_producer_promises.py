"""What the README promises of the producer, checked through the public API on the MockCluster."""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest

from kafkajet import Producer
from kafkajet.testing import MockCluster

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 6}), pytest.mark.timeout(60)]


def test_close_without_a_timeout_delivers_everything_pending(cluster: MockCluster) -> None:
    # linger.ms long enough that nearly everything is still buffered when close() is called.
    p = Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2000)
    futures = [p.send("t", b"%05d" % i, key=b"k%d" % (i % 20)) for i in range(5000)]
    assert not all(f.done() for f in futures)
    p.close()
    assert all(f.exception(timeout=0) is None for f in futures)
    assert cluster.record_count("t") == 5000


def test_keyless_records_from_send_move_across_partitions(cluster: MockCluster) -> None:
    # 16 KiB batch.size, 100-byte records: about 140 to a partition before the sticky partitioner moves on.
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
        mds = [f.result(timeout=15) for f in [p.send("t", b"x" * 100) for _ in range(3000)]]
    used = {md.partition for md in mds}
    assert len(used) >= 4, f"3,000 keyless records went to partitions {used} only"


def test_send_futures_work_with_as_completed_and_asyncio(cluster: MockCluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
        futures = [p.send("t", b"v%d" % i) for i in range(200)]
        assert set(concurrent.futures.as_completed(futures, timeout=15)) == set(futures)

        async def main() -> list[int]:
            mds = await asyncio.wait_for(asyncio.gather(*(asyncio.wrap_future(p.send("t", b"a")) for _ in range(50))),
                                         15)
            return [md.offset for md in mds]

        assert len(asyncio.run(main())) == 50
