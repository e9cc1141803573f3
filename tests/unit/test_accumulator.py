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


# --- Java's RecordAccumulatorTest, without I/O: a fake clock, a fixed cluster, drained by hand ----------------

import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from kafkajet.errors import (  # noqa: E402
    DeliveryTimeoutError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
)
from kafkajet.producer.batch import Columns  # noqa: E402
from kafkajet.producer.idempotence import IdempotenceManager  # noqa: E402
from kafkajet.records import BATCH_HEADER_SIZE, decode_batches, record_size_upper_bound  # noqa: E402
from tests.helpers.futures import on_future_made  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def two_node_cluster(partitions: int = 4, leaderless: tuple[int, ...] = ()) -> Cluster:
    """Partitions of "t" alternate between nodes 1 and 2; those in `leaderless` have none."""
    nodes = {1: Node(1, "127.0.0.1", 9092), 2: Node(2, "127.0.0.1", 9093)}
    parts = tuple(PartitionInfo("t", p, -1 if p in leaderless else 1 + p % 2, 0, (1, 2), (1, 2))
                  for p in range(partitions))
    return Cluster(nodes=nodes, partitions={"t": parts})


def make(clock: Clock, *, batch_size: int = 1024, linger_ms: float = 100, delivery_timeout_ms: float = 10_000,
         memory: int = 1 << 20, idempotence: IdempotenceManager | None = None, guarantee_order: bool = False,
         compression: int = 0) -> RecordAccumulator:
    return RecordAccumulator(batch_size=batch_size, compression=compression, linger_ms=linger_ms,
                             retry_backoff_ms=100, retry_backoff_max_ms=1000,
                             delivery_timeout_ms=delivery_timeout_ms, pool=BufferPool(memory, batch_size),
                             idempotence=idempotence, clock=clock, guarantee_order=guarantee_order)


def fill_one_batch(acc: RecordAccumulator, partition: int = 0, value: bytes = b"x" * 100) -> int:
    """Append until partition's first batch is full; the number of records it took."""
    n = 0
    while True:
        acc.append("t", partition, 0, None, value, None, None)
        n += 1
        dq = acc._queues[("t", partition)]
        if dq[0].full:
            return n if len(dq) == 1 else n - 1


def test_the_wake_flag_marks_a_new_batch_and_a_filled_one_only() -> None:
    acc = make(Clock())
    flags = [acc.append("t", 0, 0, None, b"x" * 100, None, None)[1] for _ in range(12)]
    dq = acc._queues[("t", 0)]
    assert len(dq) == 2
    first_full_at = dq[0].count - 1
    assert flags[0] is True  # a batch opened
    assert flags[first_full_at] is True or flags[first_full_at + 1] is True
    quiet = [f for i, f in enumerate(flags) if i not in (0, first_full_at, first_full_at + 1)]
    assert quiet and not any(quiet)


def test_each_record_joins_its_own_topic_and_partitions_batch_whatever_came_before() -> None:
    # append() remembers the last partition's deque: a record for another topic with the same partition
    # number, or for another partition of the same topic, must not land there.
    acc = make(Clock())
    sent = [("t", 0), ("t", 0), ("u", 0), ("t", 0), ("t", 1), ("u", 0), ("u", 1), ("t", 1), ("t", 0)]
    for i, (topic, partition) in enumerate(sent):
        fut, _ = acc.append(topic, partition, 0, None, b"%d" % i, None, None)
        assert (fut._batch.topic, fut._batch.partition) == (topic, partition)
    for tp in set(sent):
        (batch,) = acc._queues[tp]
        assert [r.value for r in batch.records()] == [b"%d" % i for i, sent_to in enumerate(sent) if sent_to == tp]


def test_a_record_larger_than_batch_size_opens_a_batch_sized_for_it() -> None:
    acc = make(Clock(), batch_size=1024)
    acc.append("t", 0, 0, b"k", b"v" * 5000, [("h", b"1")], None)
    (batch,) = acc._queues[("t", 0)]
    assert batch.capacity == BATCH_HEADER_SIZE + record_size_upper_bound(1, 5000, [("h", b"1")])
    small = make(Clock(), batch_size=1024)
    small.append("t", 0, 0, None, b"v", None, None)
    assert small._queues[("t", 0)][0].capacity == 1024


def test_ready_waits_for_linger_then_names_the_leader() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=100)
    cluster = two_node_cluster()
    acc.append("t", 1, 0, None, b"v", None, None)
    clock.now = 40
    early = acc.ready(cluster, clock.now)
    assert early.nodes == set() and early.next_check_ms == 60
    clock.now = 100  # waited exactly linger.ms
    assert acc.ready(cluster, clock.now).nodes == {2}


def test_a_full_batch_or_a_second_one_is_ready_before_linger() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=10_000)
    cluster = two_node_cluster()
    fill_one_batch(acc, 0)
    assert acc.ready(cluster, 0).nodes == {1}
    other = make(clock, linger_ms=10_000)
    other.append("t", 0, 0, None, b"x", None, None)
    assert other.ready(cluster, 0).nodes == set()
    other._queues[("t", 0)].append(other._queues[("t", 0)][0])  # two batches queued: the first is ready
    assert other.ready(cluster, 0).nodes == {1}


@pytest.mark.parametrize("reason", ["flush", "close", "memory"])
def test_flush_close_and_exhausted_memory_skip_the_linger(reason: str) -> None:
    clock = Clock()
    acc = make(clock, linger_ms=10_000, memory=2048, batch_size=1024)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"x", None, None)
    assert acc.ready(cluster, 0).nodes == set()
    blocked = None
    if reason == "flush":
        acc.begin_flush()
    elif reason == "close":
        acc.closed = True
    else:
        acc.append("t", 1, 0, None, b"x", None, None)  # both buffers taken; a third caller waits
        blocked = threading.Thread(target=lambda: pytest.raises(ProducerClosedError, acc.append, "t", 2, 0,
                                                                None, b"x", None, clock.now + 2000))
        blocked.start()
        deadline = time.monotonic() + 5
        while acc.pool.queued() == 0:
            assert time.monotonic() < deadline
            time.sleep(0.001)
    assert 1 in acc.ready(cluster, 0).nodes
    if reason == "flush":
        acc.end_flush()
        assert acc.ready(cluster, 0).nodes == set()
    if blocked is not None:
        acc.pool.close()
        blocked.join(5)


def test_partitions_without_a_leader_are_reported_not_drained() -> None:
    acc = make(Clock(), linger_ms=0)
    cluster = two_node_cluster(leaderless=(3,))
    acc.append("t", 3, 0, None, b"v", None, None)
    check = acc.ready(cluster, 0)
    assert check.unknown_leaders and check.nodes == set()
    acc.append("t", 1, 0, None, b"v", None, None)
    check = acc.ready(cluster, 0)
    assert check.unknown_leaders and check.nodes == {2}


def test_a_retried_batch_waits_out_its_backoff_then_skips_the_linger() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=10_000)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"v", None, None)
    acc.begin_flush()
    [[batch]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    acc.end_flush()
    clock.now = 1000
    acc.reenqueue(batch, KafkaConnectionError("dropped"), clock.now)
    assert batch.attempts == 1 and not batch.in_flight and isinstance(batch.last_error, KafkaConnectionError)
    wait = batch.retry_at_ms - clock.now
    assert 80 <= wait <= 120
    check = acc.ready(cluster, clock.now + wait - 1)
    assert check.nodes == set() and check.next_check_ms == pytest.approx(1)
    assert acc.drain(cluster, [1], 1 << 20, clock.now + wait - 1) == {}
    assert acc.ready(cluster, batch.retry_at_ms).nodes == {1}  # linger does not apply to a retry
    assert acc.drain(cluster, [1], 1 << 20, batch.retry_at_ms) == {1: [batch]}


def test_drain_takes_one_batch_per_partition_and_marks_it() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=0, compression=1)
    cluster = two_node_cluster()
    for p in (0, 2):
        fill_one_batch(acc, p)
        acc.append("t", p, 0, None, b"second", None, None)
    clock.now = 7
    out = acc.drain(cluster, [1, 2], 1 << 20, 7)
    assert list(out) == [1]
    assert sorted(b.partition for b in out[1]) == [0, 2]
    for b in out[1]:
        assert b.full and b.in_flight and b.last_attempt_ms == 7
        assert decode_batches(bytes(b.wire))[0].compression == 1  # type: ignore[arg-type]
    assert [len(acc._queues[("t", p)]) for p in (0, 2)] == [1, 1]


def test_drain_stops_at_max_size_but_always_takes_one() -> None:
    acc = make(Clock(), linger_ms=0)
    cluster = two_node_cluster()
    for p in (0, 2):
        fill_one_batch(acc, p)
    size = acc._queues[("t", 0)][0].size_in_bytes
    out = acc.drain(cluster, [1], size, 0)
    assert len(out[1]) == 1
    out = acc.drain(cluster, [1], 1, 0)  # smaller than any batch: still one, or nothing would ever go
    assert len(out[1]) == 1


def test_drain_rotates_the_starting_partition_so_none_starves() -> None:
    acc = make(Clock(), linger_ms=0)
    cluster = Cluster(nodes={1: Node(1, "h", 1)},
                      partitions={"t": tuple(PartitionInfo("t", p, 1, 0, (1,), (1,)) for p in range(3))})
    for _ in range(3):
        for p in range(3):
            fill_one_batch(acc, p) if not acc._queues.get(("t", p)) else acc.append("t", p, 0, None, b"x" * 900,
                                                                                     None, None)
    size = acc._queues[("t", 0)][0].size_in_bytes
    firsts = []
    for _ in range(3):
        out = acc.drain(cluster, [1], size, 0)
        firsts.append(out[1][0].partition)
    assert sorted(firsts) == [0, 1, 2]


def test_drain_leaves_partitions_the_transaction_has_not_added() -> None:
    acc = make(Clock(), linger_ms=0)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"v", None, None)
    acc.append("t", 2, 0, None, b"v", None, None)
    acc.send_allowed = lambda tp: tp[1] == 2
    out = acc.drain(cluster, [1], 1 << 20, 0)
    assert [b.partition for b in out[1]] == [2]


def test_drain_without_a_producer_id_sends_nothing_then_numbers_batches() -> None:
    idem = IdempotenceManager()
    acc = make(Clock(), linger_ms=0, idempotence=idem)
    acc.transactional = True
    cluster = two_node_cluster()
    for _ in range(3):
        acc.append("t", 0, 0, None, b"v", None, None)
    assert acc.drain(cluster, [1], 1 << 20, 0) == {}
    idem.set_producer_id(77, 3)
    [[batch]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    header = decode_batches(bytes(batch.wire))[0]  # type: ignore[arg-type]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 0)
    assert header.is_transactional and idem.in_flight_count(("t", 0)) == 1


def acknowledge_a_first_batch(acc: RecordAccumulator, idem: IdempotenceManager, partition: int = 0) -> None:
    """Send one batch of `partition` and acknowledge it: from then on the partition's batches may pipeline."""
    acc.append("t", partition, 0, None, b"first", None, None)
    acc._queues[("t", partition)][-1].full = True
    acc._drain_index[1] = 0
    (first,) = (b for bs in acc.drain(two_node_cluster(), [1], 1 << 20, 0).values() for b in bs)
    idem.remove_in_flight(first)
    idem.acknowledged(first)


def test_at_most_five_batches_per_partition_in_flight_with_idempotence() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    acc = make(Clock(), linger_ms=0, idempotence=idem)
    acknowledge_a_first_batch(acc, idem)
    cluster = two_node_cluster()
    drained = []
    for i in range(7):
        acc.append("t", 0, 0, None, b"%d" % i, None, None)
        acc._queues[("t", 0)][-1].full = True  # one record per batch
        drained.extend(b for bs in acc.drain(cluster, [1], 1 << 20, 0).values() for b in bs)
    assert [b.base_sequence for b in drained] == [1, 2, 3, 4, 5]
    assert len(acc._queues[("t", 0)]) == 2


def test_nothing_is_pipelined_behind_a_first_batch_the_broker_has_not_acknowledged() -> None:
    # Apache Kafka takes a batch of a producer it has no state for as a new start whatever its sequence: a
    # second batch sent behind an unanswered first one could be appended ahead of it if the first is refused.
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    acc = make(Clock(), linger_ms=0, idempotence=idem)
    cluster = two_node_cluster()
    for i in range(3):
        acc.append("t", 0, 0, None, b"%d" % i, None, None)
        acc._queues[("t", 0)][-1].full = True
    [[first]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    assert acc.drain(cluster, [1], 1 << 20, 0) == {}
    idem.remove_in_flight(first)
    idem.acknowledged(first)
    drained = [b for _ in range(2) for bs in acc.drain(cluster, [1], 1 << 20, 0).values() for b in bs]
    assert [b.base_sequence for b in drained] == [1, 2]  # acknowledged: the rest pipelines
    # A new epoch (bumped once nothing is in flight) starts from no state on the broker again.
    for b in drained:
        idem.remove_in_flight(b)
    idem.set_producer_id(1, 1)
    for i in range(2):
        acc.append("t", 0, 0, None, b"%d" % i, None, None)
        acc._queues[("t", 0)][-1].full = True
    assert [b.base_sequence for bs in acc.drain(cluster, [1], 1 << 20, 0).values() for b in bs] == [0]
    assert acc.drain(cluster, [1], 1 << 20, 0) == {}


def test_a_retried_batch_goes_only_when_it_is_the_oldest_in_flight() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    clock = Clock()
    acc = make(clock, linger_ms=0, idempotence=idem)
    acknowledge_a_first_batch(acc, idem)
    cluster = two_node_cluster()
    batches = []
    for i in range(2):
        acc.append("t", 0, 0, None, b"%d" % i, None, None)
        acc._queues[("t", 0)][-1].full = True
        batches.extend(acc.drain(cluster, [1], 1 << 20, 0)[1])
    first, second = batches
    acc.reenqueue(second, KafkaConnectionError("x"), 0)  # the later one fails first
    later = second.retry_at_ms + 1
    assert acc.drain(cluster, [1], 1 << 20, later) == {}  # sequence 1 must not overtake sequence 0
    acc.reenqueue(first, KafkaConnectionError("x"), 0)
    out = acc.drain(cluster, [1], 1 << 20, max(first.retry_at_ms, second.retry_at_ms) + 1)
    assert out[1] == [first] and first.base_sequence == 1


def test_max_in_flight_one_mutes_the_partition_until_its_batch_resolves() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=0, guarantee_order=True)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"a", None, None)
    [[a]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    acc.append("t", 0, 0, None, b"b", None, None)
    assert acc.ready(cluster, 0).nodes == set() and acc.drain(cluster, [1], 1 << 20, 0) == {}
    acc.reenqueue(a, NotLeaderOrFollowerError("moved"), 0)  # unmutes; the retry goes first again
    out = acc.drain(cluster, [1], 1 << 20, a.retry_at_ms)
    assert out[1] == [a]
    acc.complete(a, 5, -1, None)
    [[b]] = acc.drain(cluster, [1], 1 << 20, a.retry_at_ms).values()
    assert b.records()[0].value == b"b"


def test_a_retry_goes_back_ahead_of_younger_batches() -> None:
    acc = make(Clock(), linger_ms=0)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"old", None, None)
    [[old]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    for v in (b"young-1", b"young-2"):
        acc.append("t", 0, 0, None, v, None, None)
        acc._queues[("t", 0)][-1].full = True
    acc.reenqueue(old, KafkaConnectionError("x"), 0)
    assert [b.records()[0].value for b in acc._queues[("t", 0)]] == [b"old", b"young-1", b"young-2"]


def test_complete_returns_the_memory_and_forgets_the_batch() -> None:
    acc = make(Clock(), linger_ms=0)
    acc.append("t", 0, 0, None, b"v", None, None)
    [[batch]] = acc.drain(two_node_cluster(), [1], 1 << 20, 0).values()
    assert acc.pool.available_memory() == (1 << 20) - 1024 and acc.has_incomplete()
    acc.complete(batch, 9, -1, None)
    assert acc.pool.available_memory() == 1 << 20
    assert not acc.has_incomplete() and acc.incomplete_batches() == []
    assert batch.wire is None and len(batch.buf) == 0
    acc.complete(batch, 10, -1, KafkaError("late"))  # a second outcome changes nothing
    assert batch.base_offset == 9 and batch.error is None and acc.pool.available_memory() == 1 << 20


def test_split_halves_what_the_broker_refused_and_returns_the_memory() -> None:
    acc = make(Clock(), linger_ms=0, batch_size=4096)
    for i in range(30):
        acc.append("t", 0, 0, None, b"%03d" % i * 30, None, None)
    [[batch]] = acc.drain(two_node_cluster(), [1], 1 << 20, 0).values()
    refused = len(batch.buf)
    n = acc.split_and_reenqueue(batch, 0)
    parts = list(acc._queues[("t", 0)])
    assert n == len(parts) == 2
    assert all(len(p.buf) <= BATCH_HEADER_SIZE + (refused - BATCH_HEADER_SIZE) // 2 for p in parts)
    assert [r.value for p in parts for r in p.records()] == [b"%03d" % i * 30 for i in range(30)]
    assert acc.pool.available_memory() == 1 << 20  # the parts' memory is not the pool's
    assert set(acc.incomplete_batches()) == set(parts)
    # A part refused and split again gives up its buffer too: the futures, which hold the whole chain of
    # splits, must not keep every level's bytes alive.
    [[again]] = acc.drain(two_node_cluster(), [1], 1 << 20, 0).values()
    acc.split_and_reenqueue(again, 0)
    assert len(again.buf) == 0 and again.is_split
    assert [r.value for p in acc._queues[("t", 0)] for r in p.records()] == [b"%03d" % i * 30 for i in range(30)]


def test_queued_batches_expire_at_the_delivery_timeout_with_the_last_cause() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=0, delivery_timeout_ms=1000)
    cluster = two_node_cluster()
    f0, _ = acc.append("t", 0, 0, None, b"a", None, None)
    [[retried]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    acc.reenqueue(retried, NotLeaderOrFollowerError("moved"), 0)
    clock.now = 500
    f1, _ = acc.append("t", 2, 0, None, b"b", None, None)
    assert acc.next_expiry_ms(500) == 500
    assert acc.expire(999, lambda b: None) == []
    cause = KafkaConnectionError("no leader")
    assert acc.expire(1000, lambda b: cause) == [retried]  # exactly delivery.timeout.ms after creation
    err = f0.exception(0)
    # The retried batch's own last error explains it, not the generic cause.
    assert isinstance(err, DeliveryTimeoutError) and isinstance(err.cause, NotLeaderOrFollowerError)
    assert "1000 ms has passed since batch creation (delivery.timeout.ms=1000)" in str(err)
    assert acc.next_expiry_ms(1000) == 500
    [expired] = acc.expire(1500, lambda b: cause)
    assert expired.partition == 2 and f1.exception(0).cause is cause  # type: ignore[union-attr]


def test_expiry_names_the_cause_for_a_batch_that_never_left() -> None:
    acc = make(Clock(), linger_ms=0, delivery_timeout_ms=100)
    fut, _ = acc.append("t", 0, 0, None, b"a", None, None)
    cause = KafkaConnectionError("connection refused")
    acc.expire(100, lambda b: cause)
    err = fut.exception(0)
    assert isinstance(err, DeliveryTimeoutError) and err.cause is cause


def test_in_flight_batches_do_not_expire_and_abort_undrained_spares_them() -> None:
    acc = make(Clock(), linger_ms=0, delivery_timeout_ms=100)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"a", None, None)
    [[flying]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    queued, _ = acc.append("t", 0, 0, None, b"b", None, None)
    assert acc.abort_undrained(KafkaError("abort")) == 1
    assert isinstance(queued.exception(0), KafkaError)
    assert not flying.completed and acc.expire(1000, lambda b: None) == []
    assert acc.abort_all(KafkaError("closing")) == 1
    assert flying.completed and not acc.has_incomplete()
    assert acc.pool.available_memory() == 1 << 20


def test_reset_sequences_renumbers_queued_batches() -> None:
    acc = make(Clock(), linger_ms=0)
    acc.append("t", 0, 0, None, b"a", None, None)
    batch = acc._queues[("t", 0)][0]
    batch.seal(0, 1, 0, 40)
    acc.reset_sequences()
    assert not batch.has_sequence and batch.wire is None


def test_await_completion_times_out_then_follows_splits() -> None:
    acc = make(Clock(), linger_ms=0, batch_size=4096)
    for i in range(30):
        acc.append("t", 0, 0, None, b"%03d" % i * 30, None, None)
    batches = acc.incomplete_batches()
    with pytest.raises(KafkaTimeoutError, match="1 batches still in progress"):
        acc.await_completion(batches, time.monotonic() + 0.01)
    [[batch]] = acc.drain(two_node_cluster(), [1], 1 << 20, 0).values()
    acc.split_and_reenqueue(batch, 0)
    parts = list(acc._queues[("t", 0)])
    acc.complete(parts[0], 0, -1, None)
    with pytest.raises(KafkaTimeoutError):
        acc.await_completion(batches, time.monotonic() + 0.01)  # the second part is still out
    acc.complete(parts[1], 15, -1, None)
    acc.await_completion(batches, time.monotonic() + 1)


def test_append_after_close_is_refused_and_the_memory_comes_back() -> None:
    acc = make(Clock())
    acc.closed = True
    with pytest.raises(ProducerClosedError, match="producer closed while the record was being appended"):
        acc.append("t", 0, 0, None, b"v", None, None)
    assert acc.pool.available_memory() == 1 << 20 and not acc.has_incomplete()


def test_an_append_deadline_bounds_the_wait_for_memory() -> None:
    clock = Clock()
    acc = make(clock, memory=1024, batch_size=1024)
    acc.append("t", 0, 0, None, b"v", None, None)
    clock.now = 1000
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="within 50 ms"):
        acc.append("t", 1, 0, None, b"v", None, 1050)
    assert time.monotonic() - start < 5


def test_append_many_records_segments_in_order_and_wakes_for_new_batches() -> None:
    acc = make(Clock(), batch_size=1024)
    opened: list[int] = []
    acc.on_new_batch = lambda: opened.append(1)
    n = 40
    values = [b"%03d" % i * 20 for i in range(n)]
    segments: list = []
    wake = acc.append_many("t", 0, list(range(n)), [5] * n, [None] * n, values, None, None, segments)
    dq = acc._queues[("t", 0)]
    assert wake and len(dq) >= 2 and len(opened) == len(dq)
    assert [i for _, _, idx in segments for i in idx] == list(range(n))
    for batch, first, idx in segments:
        assert [r.value for r in batch.records()[first:first + len(idx)]] == [values[i] for i in idx]
    more: list = []
    assert acc.append_many("t", 0, [0], [5], [None], [b"x"], None, None, more) is False  # joins the open batch
    assert more[0][0] is dq[-1] and more[0][1] == dq[-1].count - 1


def test_append_many_with_columns_matches_the_record_loop() -> None:
    n = 50
    values = [b"v%02d" % i for i in range(n)]
    keys: list[bytes | None] = [b"k%02d" % i for i in range(n)]
    cols = Columns(timestamp=9, keys=keys, klens=[3] * n, vlens=[3] * n)  # type: ignore[arg-type]
    by_cols, by_rows = make(Clock()), make(Clock())
    by_cols.append_many("t", 0, list(range(n)), [9] * n, keys, values, None, None, [], cols)
    by_rows.append_many("t", 0, list(range(n)), [9] * n, keys, values, None, None, [])
    assert [bytes(b.buf) for b in by_cols._queues[("t", 0)]] == [bytes(b.buf) for b in by_rows._queues[("t", 0)]]


# --- what the first round of mutation testing left alive ---------------------------------------------------


class HookPool(BufferPool):
    """A pool that runs `hook` (once) while a caller is between counting itself in and getting memory: where
    another thread can open a batch, close the producer, or ask has_incomplete()."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.hook: Any = None

    def allocate(self, size: int, max_time_ms: float) -> bytearray:
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return super().allocate(size, max_time_ms)


def hooked(clock: Clock, **kw: Any) -> RecordAccumulator:
    acc = make(clock, **kw)
    acc.pool = HookPool(1 << 20, kw.get("batch_size", 1024))
    return acc


from typing import Any  # noqa: E402


def test_a_record_waiting_for_memory_joins_a_batch_another_thread_opened_meanwhile() -> None:
    acc = hooked(Clock())
    acc.pool.hook = lambda: acc.append("t", 0, 5, b"k0", b"first", [("h", b"0")], None)  # type: ignore[attr-defined]
    fut, wake = acc.append("t", 0, 7, b"k1", b"second", [("h", b"1")], None)
    (batch,) = acc._queues[("t", 0)]
    assert [(r.timestamp, r.key, r.value, r.headers) for r in batch.records()] == [
        (5, b"k0", b"first", [("h", b"0")]), (7, b"k1", b"second", [("h", b"1")])]
    assert fut._batch is batch and wake is False
    assert acc.pool.available_memory() == (1 << 20) - 1024  # the memory it waited for went back


def test_append_many_waiting_for_memory_fills_a_batch_another_thread_opened() -> None:
    acc = hooked(Clock())
    acc.pool.hook = lambda: acc.append("t", 3, 5, None, b"first", None, None)  # type: ignore[attr-defined]
    segments: list = []
    acc.append_many("t", 3, [0, 1], [6, 7], [b"a", None], [b"x", b"y"], [[("h", b"1")], None], None, segments)
    (batch,) = acc._queues[("t", 3)]
    assert [(r.timestamp, r.key, r.value, r.headers) for r in batch.records()] == [
        (5, None, b"first", []), (6, b"a", b"x", [("h", b"1")]), (7, None, b"y", [])]
    assert segments == [(batch, 1, [0, 1])] and batch.topic == "t" and batch.partition == 3
    assert acc.pool.available_memory() == (1 << 20) - 1024


@pytest.mark.parametrize("many", [False, True])
def test_an_append_in_progress_counts_as_incomplete_work(many: bool) -> None:
    acc = hooked(Clock())
    seen: list[bool] = []
    acc.pool.hook = lambda: seen.append(acc.has_incomplete())  # type: ignore[attr-defined]
    if many:
        acc.append_many("t", 0, [0], [1], [None], [b"v"], None, None, [])
    else:
        acc.append("t", 0, 1, None, b"v", None, None)
    assert seen == [True]  # a flush must wait for a record still being appended
    [[batch]] = acc.drain(two_node_cluster(), [1], 1 << 20, 0).values()
    acc.complete(batch, 0, -1, None)
    assert not acc.has_incomplete()


@pytest.mark.parametrize("many", [False, True])
def test_closing_while_a_caller_waits_for_memory_refuses_the_record_and_returns_the_memory(many: bool) -> None:
    acc = hooked(Clock())
    acc.pool.hook = lambda: setattr(acc, "closed", True)  # type: ignore[attr-defined]
    with pytest.raises(ProducerClosedError, match="^producer closed while the record was being appended$"):
        if many:
            acc.append_many("t", 0, [0], [1], [None], [b"v"], None, None, [])
        else:
            acc.append("t", 0, 1, None, b"v", None, None)
    assert acc.pool.available_memory() == 1 << 20 and not acc.has_incomplete()


def test_an_expired_deadline_gives_no_wait_at_all() -> None:
    clock = Clock()
    acc = make(clock, memory=1024, batch_size=1024)
    acc.append("t", 0, 0, None, b"v", None, None)
    clock.now = 5000
    with pytest.raises(KafkaTimeoutError, match="within 0 ms"):
        acc.append("t", 1, 0, None, b"v", None, 4000)
    with pytest.raises(KafkaTimeoutError, match="within 0 ms"):
        acc.append_many("t", 1, [0], [0], [None], [b"v"], None, 4000, [])


@pytest.mark.parametrize("key,value", [(None, 5000), (5000, None), (3, 5000)])
def test_a_large_first_record_sizes_its_batch_by_the_upper_bound(key: int | None, value: int | None) -> None:
    for many in (False, True):
        acc = make(Clock(), batch_size=64)
        k = None if key is None else b"k" * key
        v = None if value is None else b"v" * value
        if many:
            acc.append_many("t", 0, [0], [0], [k], [v], None, None, [])
        else:
            acc.append("t", 0, 0, k, v, None, None)
        (batch,) = acc._queues[("t", 0)]
        assert batch.capacity == BATCH_HEADER_SIZE + record_size_upper_bound(-1 if k is None else len(k),
                                                                              -1 if v is None else len(v), None)


def test_append_many_with_headers_keeps_them() -> None:
    acc = make(Clock())
    acc.append_many("t", 0, [0, 1], [1, 2], [None, b"k"], [b"a", b"b"], [[("x", b"1")], [("y", None)]], None, [])
    assert [r.headers for r in acc._queues[("t", 0)][0].records()] == [[("x", b"1")], [("y", None)]]


def test_append_many_reports_a_batch_it_filled_and_records_no_empty_segment() -> None:
    acc = make(Clock(), batch_size=400)
    acc.append("t", 0, 0, None, b"x" * 200, None, None)
    segments: list = []
    # The open batch has room for neither: the run goes to a new batch, and only that segment is recorded.
    assert acc.append_many("t", 0, [0], [0], [None], [b"y" * 300], None, None, segments) is True
    assert len(segments) == 1 and segments[0][0] is acc._queues[("t", 0)][1]
    filler: list = []
    fresh = make(Clock(), batch_size=400)
    fresh.append("t", 0, 0, None, b"x", None, None)
    n = 60
    # These fill the open batch exactly to the end of the input: the wake says so, and nothing is left over.
    assert fresh.append_many("t", 0, list(range(n)), [0] * n, [None] * n, [b"z" * 40] * n, None, None, filler)
    assert sum(len(idx) for _, _, idx in filler) == n


def test_append_many_honours_its_deadline_not_max_block_ms() -> None:
    clock = Clock()
    acc = make(clock, memory=1024, batch_size=1024)
    acc.max_block_ms = 60_000
    acc.append("t", 0, 0, None, b"v", None, None)
    with pytest.raises(KafkaTimeoutError, match="within 50 ms"):
        acc.append_many("t", 1, [0], [0], [None], [b"v"], None, 50, [])


def test_partitions_skipped_by_ready_do_not_hide_the_ones_after_them() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=0)
    cluster = two_node_cluster(partitions=4, leaderless=(2,))
    acc.append("t", 0, 0, None, b"a", None, None)
    acc.drain(cluster, [1], 1 << 20, 0)  # partition 0: an empty deque now, first in iteration order
    acc.append("t", 2, 0, None, b"b", None, None)  # no leader
    acc.append("t", 3, 0, None, b"c", None, None)  # node 2
    assert acc.ready(cluster, 0).nodes == {2}
    three = Cluster(nodes={1: Node(1, "h", 1), 2: Node(2, "h", 2)}, partitions={"t": (
        PartitionInfo("t", 0, 1, 0, (1,), (1,)), PartitionInfo("t", 1, 1, 0, (1,), (1,)),
        PartitionInfo("t", 2, 2, 0, (2,), (2,)))})
    acc2 = make(clock, linger_ms=0)
    for p in (0, 1, 2):  # node 1 is named by partition 0; partition 1 (same node) must not end the pass
        acc2.append("t", p, 0, None, b"v", None, None)
    assert acc2.ready(three, 0).nodes == {1, 2}


def test_a_muted_partition_does_not_hide_the_ones_after_it() -> None:
    acc = make(Clock(), linger_ms=0, guarantee_order=True)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"a", None, None)
    acc.drain(cluster, [1], 1 << 20, 0)  # partition 0 muted
    acc.append("t", 0, 0, None, b"a2", None, None)
    acc.append("t", 2, 0, None, b"b", None, None)
    assert acc.ready(cluster, 0).nodes == {1}
    assert [b.partition for b in acc.drain(cluster, [1], 1 << 20, 0)[1]] == [2]


def test_drain_skips_without_stopping_at_backoff_transactions_and_idempotence_limits() -> None:
    clock = Clock()
    cluster = two_node_cluster()
    # A partition backing off comes first in the rotation; the next one still goes.
    acc = make(clock, linger_ms=0)
    acc.append("t", 0, 0, None, b"a", None, None)
    [[a]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    acc.reenqueue(a, KafkaConnectionError("x"), 0)
    acc._drain_index[1] = 0
    acc.append("t", 2, 0, None, b"b", None, None)
    assert [b.partition for b in acc.drain(cluster, [1], 1 << 20, 1)[1]] == [2]
    # A partition the transaction has not added yet, first in the rotation.
    acc = make(clock, linger_ms=0)
    for p in (0, 2):
        acc.append("t", p, 0, None, b"v", None, None)
    acc.send_allowed = lambda tp: tp[1] != 0
    assert [b.partition for b in acc.drain(cluster, [1], 1 << 20, 0)[1]] == [2]
    # A partition with five batches in flight, first in the rotation.
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    acc = make(clock, linger_ms=0, idempotence=idem)
    for _ in range(5):
        acc.append("t", 0, 0, None, b"v", None, None)
        acc._queues[("t", 0)][-1].full = True
        acc._drain_index[1] = 0
        acc.drain(cluster, [1], 1 << 20, 0)
    acc.append("t", 0, 0, None, b"sixth", None, None)
    acc.append("t", 2, 0, None, b"other", None, None)
    acc._drain_index[1] = 0
    assert [b.partition for b in acc.drain(cluster, [1], 1 << 20, 0)[1]] == [2]


def test_a_retry_behind_an_older_unresolved_batch_does_not_stop_other_partitions() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(1, 0)
    acc = make(Clock(), linger_ms=0, idempotence=idem)
    acknowledge_a_first_batch(acc, idem)
    cluster = two_node_cluster()
    flying = []
    for i in range(2):
        acc.append("t", 0, 0, None, b"%d" % i, None, None)
        acc._queues[("t", 0)][-1].full = True
        acc._drain_index[1] = 0
        flying.extend(acc.drain(cluster, [1], 1 << 20, 0)[1])
    acc.reenqueue(flying[1], KafkaConnectionError("x"), 0)
    acc.append("t", 2, 0, None, b"other", None, None)
    acc._drain_index[1] = 0
    assert [b.partition for b in acc.drain(cluster, [1], 1 << 20, flying[1].retry_at_ms + 1)[1]] == [2]


def test_drain_without_a_producer_id_leaves_other_partitions_too() -> None:
    acc = make(Clock(), linger_ms=0, idempotence=IdempotenceManager())
    for p in (0, 2):
        acc.append("t", p, 0, None, b"v", None, None)
    assert acc.drain(two_node_cluster(), [1], 1 << 20, 0) == {}


def test_drain_order_starts_at_partition_zero_and_rotates_by_one() -> None:
    acc = make(Clock(), linger_ms=0)
    cluster = Cluster(nodes={1: Node(1, "h", 1)},
                      partitions={"t": tuple(PartitionInfo("t", p, 1, 0, (1,), (1,)) for p in range(3))})
    orders = []
    for _ in range(4):
        for p in range(3):
            acc.append("t", p, 0, None, b"v", None, None)
        orders.append([b.partition for b in acc.drain(cluster, [1], 1 << 20, 0)[1]])
    assert orders == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]]


def test_drain_fills_a_request_up_to_max_size_exactly() -> None:
    acc = make(Clock(), linger_ms=0)
    cluster = Cluster(nodes={1: Node(1, "h", 1)},
                      partitions={"t": tuple(PartitionInfo("t", p, 1, 0, (1,), (1,)) for p in range(3))})
    for p in range(3):
        acc.append("t", p, 0, None, b"v" * 50, None, None)
    size = acc._queues[("t", 0)][0].size_in_bytes
    out = acc.drain(cluster, [1], 2 * size, 0)
    assert [b.partition for b in out[1]] == [0, 1]
    # The starved partition goes first next time.
    assert [b.partition for b in acc.drain(cluster, [1], 2 * size, 0)[1]] == [2]
    sealed = decode_batches(bytes(out[1][0].wire))[0]  # type: ignore[arg-type]
    assert (sealed.producer_id, sealed.producer_epoch, sealed.base_sequence) == (-1, -1, -1)


def test_a_batch_failing_outside_flight_does_not_unmute_its_partition() -> None:
    acc = make(Clock(), linger_ms=0, guarantee_order=True)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"a", None, None)
    [[flying]] = acc.drain(cluster, [1], 1 << 20, 0).values()
    acc.append("t", 0, 0, None, b"b", None, None)
    acc.abort_undrained(KafkaError("aborted"))  # b fails while a is still in flight
    acc.append("t", 0, 0, None, b"c", None, None)
    assert acc.drain(cluster, [1], 1 << 20, 0) == {}, "c must wait for a: the partition is still muted"
    acc.complete(flying, 0, -1, None)
    assert len(acc.drain(cluster, [1], 1 << 20, 0)[1]) == 1


def test_failed_batches_carry_no_offset_and_no_log_append_time() -> None:
    clock = Clock()
    acc = make(clock, linger_ms=0, delivery_timeout_ms=100)
    cluster = two_node_cluster()
    acc.append("t", 0, 0, None, b"a", None, None)
    [expired] = acc.expire(100, lambda b: None)
    acc.append("t", 0, 0, None, b"b", None, None)
    [[flying]] = acc.drain(cluster, [1], 1 << 20, 100).values()
    acc.append("t", 2, 0, None, b"c", None, None)
    queued = acc._queues[("t", 2)][0]
    acc.abort_undrained(KafkaError("x"))
    acc.abort_all(KafkaError("y"))
    for b in (expired, flying, queued):
        assert (b.base_offset, b.log_append_time) == (-1, -1) and b.error is not None


def test_expiry_message_counts_from_the_batch_creation() -> None:
    clock = Clock()
    clock.now = 300
    acc = make(clock, linger_ms=0, delivery_timeout_ms=1000)
    fut, _ = acc.append("t", 0, 0, None, b"a", None, None)
    assert acc.next_expiry_ms(1300) == 0 and acc.next_expiry_ms(1299.5) == 0.5
    acc.expire(1300, lambda b: None)
    assert "1000 ms has passed since batch creation" in str(fut.exception(0))


def test_a_split_keeps_the_expiry_of_the_original_batch() -> None:
    clock = Clock()
    clock.now = 500
    acc = make(clock, linger_ms=0, batch_size=4096, delivery_timeout_ms=10_000)
    for i in range(30):
        acc.append("t", 0, 0, None, b"%03d" % i * 30, None, None)
    [[batch]] = acc.drain(two_node_cluster(), [1], 1 << 20, 600).values()
    acc._expiry_due = float("inf")  # as after an expiry pass that found nothing queued
    acc.split_and_reenqueue(batch, 700)
    assert acc.next_expiry_ms(700) == 500 + 10_000 - 700


def test_nested_flushes_end_only_when_the_last_one_ends() -> None:
    acc = make(Clock(), linger_ms=10_000)
    acc.append("t", 0, 0, None, b"v", None, None)
    acc.begin_flush()
    acc.begin_flush()
    acc.end_flush()
    assert acc.ready(two_node_cluster(), 0).nodes == {1}
    acc.end_flush()
    assert acc.ready(two_node_cluster(), 0).nodes == set()


def test_await_completion_names_how_many_batches_are_left() -> None:
    acc = make(Clock(), linger_ms=0)
    for p in (0, 1):
        acc.append("t", p, 0, None, b"v", None, None)
    with pytest.raises(KafkaTimeoutError, match="flush timed out with 2 batches still in progress"):
        acc.await_completion(acc.incomplete_batches(), time.monotonic() - 1)


def test_without_guarantee_order_a_partition_is_never_muted_by_default() -> None:
    acc = RecordAccumulator(batch_size=1024, compression=0, linger_ms=0, retry_backoff_ms=100,
                            retry_backoff_max_ms=1000, delivery_timeout_ms=10_000,
                            pool=BufferPool(1 << 20, 1024), clock=Clock())
    cluster = two_node_cluster()
    for v in (b"a", b"b"):
        acc.append("t", 0, 0, None, v, None, None)
        assert len(acc.drain(cluster, [1], 1 << 20, 0)[1]) == 1


def test_a_records_future_is_made_after_the_accumulator_lets_go_of_its_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    # The future's class is Python even in the compiled build; the interpreter may hand the GIL to the sender
    # thread at its __init__, and inside the lock the sender then blocked on the lock (py-spy: 69% of its
    # samples in a send(callback=) loop). Appends to an open batch and ones that open a batch alike.
    acc = make(Clock(), batch_size=256)
    made_under_lock: list[bool] = []

    on_future_made(monkeypatch, lambda: made_under_lock.append(acc._lock.locked()))
    futs = [acc.append("t", i % 2, 0, None, b"x" * 40, None, None, lambda md, e: None)[0] for i in range(12)]
    batches = len({id(f._batch) for f in futs})
    assert 4 <= batches < 12, f"{batches} batches: the appends must both open batches and join open ones"
    assert made_under_lock == [False] * 12


# --- records produce() queued without a callback ------------------------------------------------------------

def _accumulator() -> RecordAccumulator:
    return RecordAccumulator(batch_size=4096, compression=0, linger_ms=0, retry_backoff_ms=10,
                             retry_backoff_max_ms=100, delivery_timeout_ms=60_000, pool=BufferPool(1 << 20, 4096),
                             clock=lambda: 0.0)


def test_only_records_with_neither_future_nor_callback_are_counted_unheard() -> None:
    acc = _accumulator()
    acc.append("t", 0, 0, None, b"future", None, None)  # send(): a future
    acc.append("t", 0, 0, None, b"callback", None, None, lambda md, e: None, False)  # produce(callback=)
    for _ in range(3):
        acc.append("t", 0, 0, None, b"unheard", None, None, None, False)  # produce()
    acc.append("t", 1, 0, None, b"unheard", None, None, None, False)  # the first record of its batch
    assert [b.unheard for b in acc._queues[("t", 0)]] == [3]
    assert [b.unheard for b in acc._queues[("t", 1)]] == [1]


def test_a_failed_batch_with_unheard_records_is_reported_once_and_a_delivered_one_never() -> None:
    from kafkajet.errors import InvalidRecordError

    acc = _accumulator()
    told: list[tuple[int, str]] = []
    acc.on_unheard_failure = lambda batch, error: told.append((batch.unheard, str(error).split(": ")[-1]))
    for p in (0, 1, 2):
        for _ in range(4):
            acc.append("t", p, 0, None, b"v", None, None, None, False)
    acc.append("t", 2, 0, None, b"with a future", None, None)
    [ok] = acc._queues[("t", 0)]
    [bad] = acc._queues[("t", 1)]
    [mixed] = acc._queues[("t", 2)]
    acc.complete(ok, 0, -1, None)
    acc.complete(bad, -1, -1, InvalidRecordError("refused"))
    acc.complete(bad, -1, -1, InvalidRecordError("again"))  # a batch resolves once: no second report
    acc.complete(mixed, -1, -1, InvalidRecordError("mixed"))
    assert told == [(4, "refused"), (4, "mixed")]  # the future's record is not counted: its future tells


def test_split_parts_share_the_unheard_count_and_keep_its_total() -> None:
    now = [0.0]
    acc = RecordAccumulator(batch_size=4096, compression=0, linger_ms=0, retry_backoff_ms=10,
                            retry_backoff_max_ms=100, delivery_timeout_ms=60_000,
                            pool=BufferPool(1 << 20, 4096), clock=lambda: now[0])
    for i in range(41):
        acc.append("t", 0, 0, None, b"r-%02d" % i + b"." * 50, None, None, None, False)
    [[batch]] = acc.drain(_cluster(), [1], 1 << 20, now[0]).values()
    assert batch.unheard == 41
    acc.split_and_reenqueue(batch, now[0])
    parts = list(acc._queues[("t", 0)])
    assert len(parts) >= 2 and [p.unheard for p in parts] == [p.count for p in parts]
