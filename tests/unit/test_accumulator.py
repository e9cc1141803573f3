"""RecordAccumulator rules that the end-to-end suites reach only by chance."""

from __future__ import annotations

from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.metadata import Cluster, Node, PartitionInfo


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


def test_appends_wake_the_sender_only_when_a_batch_fills_or_opens() -> None:
    # Full batches queued behind the open one were announced when they filled. Waking the sender for every
    # append while it waits for in-flight room cost a wake-up (and a GIL hand-over) per record.
    from kafkajet import Producer
    from kafkajet.testing import MockCluster

    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        cluster.set_rtt(1, 100)  # slow answers: batches queue up behind five requests in flight
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0, batch_size=16 * 1024,
                      buffer_memory=64 * 1024 * 1024) as p:
            p.send("t", b"warm-up").result(timeout=30)
            calls = 0
            wake = p._wakeup

            def counting() -> None:
                nonlocal calls
                calls += 1
                wake()

            p._wakeup = counting  # type: ignore[method-assign]
            n = 1500
            for i in range(n):
                p.send("t", b"%04d" % i * 256)  # 1 KiB: 15 records a batch, about 100 batches
            batches = n // 15 + 1
            assert calls <= batches + 5, f"{calls} wake-ups for {n} records in about {batches} batches"
            p.flush(timeout=60)
        assert len(cluster.records("t", 0)) == n + 1


def test_retry_backoff_grows_exponentially_with_jitter_and_never_passes_the_cap() -> None:
    # Java's RecordAccumulator: ExponentialBackoff(retry.backoff.ms, 2, retry.backoff.max.ms, 0.2) at attempts - 1.
    # The cap holds after jitter: the jittered value is clamped, so no retry waits longer than the maximum.
    acc = RecordAccumulator(batch_size=4096, compression=0, linger_ms=0, retry_backoff_ms=10,
                            retry_backoff_max_ms=100, delivery_timeout_ms=60_000,
                            pool=BufferPool(1 << 20, 4096), clock=lambda: 0.0)
    from kafkajet.errors import KafkaConnectionError

    acc.append("t", 0, 0, None, b"v", None, None)
    [[batch]] = acc.drain(_cluster(), [1], 1 << 20, 0.0).values()
    waits: dict[int, list[float]] = {}
    for attempt in range(1, 9):
        for _ in range(200):
            batch.attempts = attempt - 1
            acc.reenqueue(batch, KafkaConnectionError("x"), 1000.0)
            acc._queues[batch.tp].clear()
            waits.setdefault(attempt, []).append(batch.retry_at_ms - 1000.0)
    assert 8.0 <= min(waits[1]) and max(waits[1]) <= 12.0  # 10 ms ± 20 %, first retry
    assert 16.0 <= min(waits[2]) and max(waits[2]) <= 24.0  # doubled
    assert max(waits[1]) - min(waits[1]) > 1.0  # jittered, not a fixed value
    capped = [w for a in (6, 7, 8) for w in waits[a]]
    assert max(capped) <= 100.0 and min(capped) >= 80.0
