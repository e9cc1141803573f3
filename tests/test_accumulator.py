"""RecordAccumulator rules that the end-to-end suites reach only by chance."""

from __future__ import annotations

from kafkajet.accumulator import RecordAccumulator
from kafkajet.buffer_pool import BufferPool
from kafkajet.metadata import Cluster, Node, PartitionInfo


def _cluster() -> Cluster:
    return Cluster(nodes={1: Node(1, "127.0.0.1", 9092)}, partitions={"t": (PartitionInfo("t", 0, 1, 0, (1,), (1,)),)})


def test_records_sent_after_a_split_never_join_the_split_parts() -> None:
    # The parts of a split batch go back to the head of the partition's deque, and may be all it holds. A
    # record sent afterwards must open a new batch behind them: if it joined the last part, it would be
    # written ahead of records of an older batch still in flight (the reordering the MESSAGE_TOO_LARGE
    # reliability scenario caught about one run in ten).
    now = [0.0]
    acc = RecordAccumulator(batch_size=4096, compression=0, linger_ms=0, retry_backoff_ms=10,
                            retry_backoff_max_ms=100, delivery_timeout_ms=60_000,
                            pool=BufferPool(1 << 20, 4096), clock=lambda: now[0])
    for i in range(41):  # 41 leaves the last part with room, where a wrong accumulator would put "late"
        acc.append("t", 0, 0, None, b"early-%02d" % i + b"." * 50, None, None)
    [[batch]] = acc.drain(_cluster(), [1], 1 << 20, now[0]).values()
    assert batch.count == 41
    parts = acc.split_and_reenqueue(batch, now[0])
    assert parts >= 2
    fut, _ = acc.append("t", 0, 0, None, b"late", None, None)
    queued = list(acc._queues[("t", 0)])
    assert len(queued) == parts + 1 and fut._batch is queued[-1]  # a batch of its own, behind every part
    assert all(p.count for p in queued[:-1]) and sum(p.count for p in queued[:-1]) == 41
