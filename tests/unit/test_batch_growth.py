"""batch.max.size: a batch still waiting in its deque takes records past batch.size, reserving each step from the
buffer pool without waiting, up to batch.max.size; once drained it takes no more. Ready (and the partition
sticky) at batch.size, as in Java."""

from __future__ import annotations

import pytest

from kafkajet.errors import BufferExhaustedError, MessageTooLargeError
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.batch import ProducerBatch
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.metadata import Cluster, Node, PartitionInfo

BATCH = 1024
VALUE = b"x" * 100  # 100-byte records take 108 bytes in a batch


def cluster() -> Cluster:
    return Cluster(nodes={1: Node(1, "127.0.0.1", 9092)},
                   partitions={"t": tuple(PartitionInfo("t", p, 1, 0, (1,), (1,)) for p in range(2))})


def make(*, max_size: int = 8 * BATCH, memory: int = 1 << 20, now: list[float] | None = None) -> RecordAccumulator:
    clock = now or [0.0]
    return RecordAccumulator(batch_size=BATCH, batch_max_size=max_size, compression=0, linger_ms=100,
                             retry_backoff_ms=100, retry_backoff_max_ms=1000, delivery_timeout_ms=60_000,
                             pool=BufferPool(memory, BATCH), clock=lambda: clock[0], max_block_ms=0)


def append(acc: RecordAccumulator, n: int, partition: int = 0) -> list[bool]:
    return [acc.append("t", partition, 0, None, VALUE, None, None)[1] for _ in range(n)]


def queued(acc: RecordAccumulator, partition: int = 0) -> list[ProducerBatch]:
    return list(acc._queues[("t", partition)])


def test_a_waiting_batch_grows_past_batch_size_and_is_ready_at_batch_size() -> None:
    acc = make()
    assert append(acc, 1) == [True]  # a new batch
    [batch] = queued(acc)
    while batch.size_in_bytes + 2 * len(VALUE) < BATCH:
        assert append(acc, 1) == [False]  # no news for the sender
    assert not acc.ready(cluster(), 0.0).nodes  # lingering
    while batch.size_in_bytes < BATCH:
        last = append(acc, 1)
    assert last == [True] and acc.ready(cluster(), 0.0).nodes == {1}  # ready at batch.size, linger or not
    count = batch.count
    append(acc, 40)
    assert queued(acc) == [batch]  # still one batch: it grew while it waited
    assert batch.count == count + 40 and batch.size_in_bytes > 4 * BATCH
    assert batch.capacity >= batch.size_in_bytes and batch.capacity % BATCH == 0  # reserved in batch.size steps


def test_a_batch_never_grows_past_batch_max_size() -> None:
    acc = make(max_size=3 * BATCH)
    append(acc, 100)
    batches = queued(acc)
    assert len(batches) > 1
    assert all(b.size_in_bytes <= 3 * BATCH for b in batches)
    assert all(b.size_in_bytes > 3 * BATCH - len(VALUE) - 20 for b in batches[:-1])  # each filled to the limit
    assert sum(b.count for b in batches) == 100


def test_a_drained_batch_takes_no_more_records() -> None:
    acc = make()
    append(acc, 20)
    [[drained]] = acc.drain(cluster(), [1], 1 << 20, 0.0).values()
    count = drained.count
    append(acc, 5)
    assert drained.count == count  # in flight: closed
    [after] = queued(acc)
    assert after.count == 5 and after is not drained


def test_growth_is_accounted_in_the_pool_and_all_of_it_comes_back() -> None:
    acc = make()
    pool = acc.pool
    append(acc, 60)  # about 6.4 KiB in one batch
    [batch] = queued(acc)
    assert pool.available_memory() == pool.total_memory - batch.capacity
    assert batch.capacity >= batch.size_in_bytes
    [[drained]] = acc.drain(cluster(), [1], 1 << 20, 0.0).values()
    acc.complete(drained, 0, -1, None)
    assert pool.available_memory() == pool.total_memory


def test_without_memory_to_spare_the_batch_closes_instead_of_growing() -> None:
    # 3 KiB of memory: the first batch takes 1 KiB and can grow by two steps, no more.
    acc = make(memory=3 * BATCH)
    append(acc, 27)  # about 2.9 KiB: all of the memory
    [batch] = queued(acc)
    assert batch.capacity == 3 * BATCH and acc.pool.available_memory() == 0
    # The next record cannot grow it (no memory) and a new batch cannot get memory either: with max.block.ms 0
    # that is BufferExhaustedError, and the batch is closed for appends, not overfilled.
    with pytest.raises(BufferExhaustedError):
        append(acc, 10)
    assert batch.full and batch.size_in_bytes <= batch.capacity


def test_growth_does_not_jump_the_queue_of_callers_waiting_for_memory() -> None:
    acc = make()
    append(acc, 9)
    [batch] = queued(acc)
    acc.pool._waiters.append(object())  # type: ignore[arg-type]  (someone is queued for memory)
    try:
        assert acc._grow(batch, batch.capacity + 1) is False
    finally:
        acc.pool._waiters.clear()
    assert acc._grow(batch, batch.capacity + 1) is True


def test_batch_max_size_at_batch_size_gives_javas_fixed_batches() -> None:
    acc = make(max_size=BATCH)
    append(acc, 30)
    batches = queued(acc)
    assert len(batches) == 4 and all(b.size_in_bytes <= BATCH for b in batches)


def test_send_batch_runs_grow_the_waiting_batch_too() -> None:
    acc = make()
    n = 200
    segments: list[object] = []
    acc.append_many("t", 0, list(range(n)), [0] * n, [None] * n, [VALUE] * n, None, None, segments)  # type: ignore[arg-type]
    batches = queued(acc)
    assert sum(b.count for b in batches) == n
    assert len(batches) == 3  # 8 KiB at most each: 75 records, not 9
    assert all(b.size_in_bytes <= 8 * BATCH for b in batches)


def test_a_grown_batch_that_is_too_large_for_the_broker_splits_into_batch_size_parts() -> None:
    acc = make()
    append(acc, 60)
    [[grown]] = acc.drain(cluster(), [1], 1 << 20, 0.0).values()
    assert grown.size_in_bytes > 6 * BATCH
    acc.reenqueue  # noqa: B018  (the sender splits on MESSAGE_TOO_LARGE through split_and_reenqueue)
    parts = acc.split_and_reenqueue(grown, 0.0)
    assert parts >= 6
    assert all(p.size_in_bytes <= BATCH for p in queued(acc))
    assert sum(p.count for p in queued(acc)) == 60
    assert MessageTooLargeError  # the error that leads there


def test_a_filling_batch_reallocates_its_buffer_a_few_times_and_holds_no_memory_the_pool_did_not_count() -> None:
    # Left to itself a bytearray grows by an eighth at a time: a batch filled to 1 MiB was reallocated about 80
    # times, each copying the whole buffer so far (perf: a third of a 1 KiB send()'s encoding). The batch asks
    # for room ahead (ProducerBatch._reserve_room), taken from the pool first, so buffer.memory still counts it.
    acc = make(max_size=1 << 20, memory=4 << 20)
    append(acc, 1)
    [batch] = queued(acc)
    allocations = {batch.buf.__alloc__()}
    while not batch.full:
        append(acc, 1)
        if queued(acc)[0] is batch:
            allocations.add(batch.buf.__alloc__())
            # CPython may overallocate a bytearray by an eighth of itself on any append, room asked for or not.
            assert batch.buf.__alloc__() <= batch.capacity * 9 // 8 + 8, "the buffer holds memory the pool did not count"
    assert batch.size_in_bytes > (1 << 20) - 200
    assert len(allocations) <= 25, f"the buffer was reallocated {len(allocations)} times while filling"
