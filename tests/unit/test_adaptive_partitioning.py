"""Java's BuiltInPartitioner choices for keyless records, given queue sizes (KIP-794 adaptive), node latency
(partitioner.availability.timeout.ms) and racks (KIP-1123); seeded, so every figure here is exact."""

from __future__ import annotations

import random
from collections import Counter

from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.metadata import Cluster, Node, PartitionInfo
from kafkajet.producer.partitioner import LoadStats, StickyPartitioner, cumulative_frequencies

ALL = (0, 1, 2, 3)


class Draws(random.Random):
    """randrange returns the numbers given, in order: the draw a LoadStats maps to a partition."""

    def __init__(self, *draws: int) -> None:
        super().__init__(0)
        self.draws = list(draws)
        self.ranges: list[int] = []

    def randrange(self, stop: int, *args: object, **kwargs: object) -> int:  # type: ignore[override]
        self.ranges.append(stop)
        return self.draws.pop(0)


def switches(sp: StickyPartitioner, n: int, available: tuple[int, ...] = ALL) -> Counter[int]:
    """The partitions n sticky switches go to (each record fills batch.size)."""
    got: Counter[int] = Counter()
    for _ in range(n):
        got[sp.take("t", sp.batch_size, lambda t: available, len(ALL))] += 1
    return got


def test_the_cumulative_frequency_table_is_javas_example() -> None:
    # BuiltInPartitioner's comment: queue sizes 0 3 1 -> inverted 4 1 3 -> running sum 4 5 8.
    assert cumulative_frequencies([0, 3, 1], 4) == [4, 5, 8]
    stats = LoadStats([4, 5, 8], [10, 11, 12])
    rng = Draws(0, 3, 4, 5, 7)
    assert [stats.pick(rng) for _ in range(5)] == [10, 10, 11, 12, 12]
    assert rng.ranges == [8] * 5


def test_a_long_queue_gets_fewer_switches_than_with_uniform_choice() -> None:
    sp = StickyPartitioner(100, rng=random.Random(7))
    sp.update_load_stats("t", [0, 10, 0, 0], [0, 1, 2, 3], [None] * 4, 4)
    got = switches(sp, 4000)
    # Weights 11 1 11 11 of 34: partition 1 gets 1/34 of the switches (118 expected; 101 with this seed), where
    # the uniform choice gives it a quarter.
    assert 60 < got[1] < 180
    assert sorted(got) == [0, 1, 2, 3]
    assert min(got[0], got[2], got[3]) > 1200


def test_equal_queues_or_a_single_partition_leave_the_choice_uniform() -> None:
    for sizes, queues in (([2, 2, 2, 2], 4), ([5], 1)):
        sp = StickyPartitioner(100, rng=random.Random(3))
        sp.update_load_stats("t", sizes, list(range(len(sizes))), [None] * len(sizes), queues)
        assert sp._load == {}
    # No stats (adaptive off, or not every partition has a queue yet): back to uniform.
    sp.update_load_stats("t", [0, 9, 0, 0], [0, 1, 2, 3], [None] * 4, 4)
    assert "t" in sp._load
    sp.update_load_stats("t", None, [], [], 4)
    assert sp._load == {}


def test_equal_queues_with_a_partition_left_out_still_weigh_the_rest() -> None:
    # Partition 1's leader is unavailable: only 0, 2, 3 are in the table, and never 1.
    sp = StickyPartitioner(100, rng=random.Random(5))
    sp.update_load_stats("t", [1, 1, 1], [0, 2, 3], [None] * 3, 4)
    got = switches(sp, 600)
    assert got[1] == 0 and sorted(got) == [0, 2, 3]


def test_rack_aware_choice_stays_in_the_rack_uniform_and_weighted() -> None:
    led_in_r2 = {"t": (1, 3)}
    sp = StickyPartitioner(100, rng=random.Random(11), rack="r2", in_rack=lambda t: led_in_r2[t])
    assert set(switches(sp, 200)) == {1, 3}
    # Weighted: only the rack's own table, with the rack's own longest queue.
    sp.update_load_stats("t", [0, 4, 9, 0], [0, 1, 2, 3], ["r1", "r2", "r3", "r2"], 4)
    got = switches(sp, 2000)
    assert set(got) == {1, 3}
    assert got[3] > 3 * got[1]  # weights 1 (queue 4) and 5 (queue 0) of the rack's max 4 + 1
    # No partition led in the rack: every partition, by the table of all of them, then uniformly.
    sp.update_load_stats("t", [0, 4, 9, 0], [0, 1, 2, 3], ["r1", "r3", "r3", "r1"], 4)
    assert set(switches(sp, 500)) == {0, 1, 2, 3}
    sp.update_load_stats("t", None, [], [], 4)
    led_in_r2["t"] = ()
    assert set(switches(sp, 500)) == {0, 1, 2, 3}


def test_cluster_names_the_available_partitions_led_in_a_rack() -> None:
    nodes = {i: Node(i, "127.0.0.1", 9090 + i, f"r{i}") for i in (1, 2, 3)}
    parts = tuple(PartitionInfo("t", p, [1, 2, 3, 2, -1][p]) for p in range(5))
    cluster = Cluster(nodes=nodes, partitions={"t": parts})
    assert cluster.available_partitions_in_rack("t", "r2") == (1, 3)
    assert cluster.available_partitions_in_rack("t", "r9") == ()
    assert cluster.available_partitions_in_rack("other", "r2") == ()


# --- the accumulator's side: ready() measures the queues (Java's RecordAccumulator.partitionReady) --------------

def four_partitions(racks: tuple[str | None, str | None] = (None, None)) -> Cluster:
    """Partitions 0 and 2 led by node 1, 1 and 3 by node 2."""
    nodes = {1: Node(1, "127.0.0.1", 9092, racks[0]), 2: Node(2, "127.0.0.1", 9093, racks[1])}
    return Cluster(nodes=nodes, partitions={"t": tuple(PartitionInfo("t", p, 1 + p % 2) for p in ALL)})


def adaptive_accumulator(sp: StickyPartitioner, timeout_ms: float = 0) -> RecordAccumulator:
    acc = RecordAccumulator(batch_size=100, compression=0, linger_ms=1000, retry_backoff_ms=100,
                            retry_backoff_max_ms=1000, delivery_timeout_ms=60_000, pool=BufferPool(1 << 20, 100),
                            batch_max_size=100, clock=lambda: 0.0)
    acc.adaptive = sp
    acc.availability_timeout_ms = timeout_ms
    return acc


def queue(acc: RecordAccumulator, partition: int, batches: int) -> None:
    for _ in range(batches):
        acc.append("t", partition, 0, None, b"x" * 80, None, None)  # one record fills a 100-byte batch


def test_ready_weighs_the_queues_in_batch_size_units_once_every_partition_has_one() -> None:
    sp = StickyPartitioner(100, rng=random.Random(2))
    acc = adaptive_accumulator(sp)
    cluster = four_partitions()
    for p, n in zip(ALL, (1, 6, 1, 1), strict=True):
        if p != 3:
            queue(acc, p, n)
    acc.ready(cluster, 0.0)
    assert sp._load == {}  # partition 3 has no queue yet: Java stays uniform until every partition has one
    queue(acc, 3, 1)
    acc.ready(cluster, 0.0)
    total, local = sp._load["t"]
    assert (total.cumulative, total.partitions, local) == ([6, 7, 13, 19], [0, 1, 2, 3], None)
    # A waiting batch that grew to 3x batch.size (batch.max.size) weighs as the three batches Java would queue,
    # alone in its deque (partition 0: 3) or behind others (partition 1: 5 + 3).
    for p in (0, 1):
        acc._queues[("t", p)][-1].buf.extend(b"\0" * 200)
    acc.ready(cluster, 0.0)
    assert sp._load["t"][0].cumulative == [6, 7, 15, 23]


def test_ready_builds_the_rack_table_from_the_leaders_racks() -> None:
    sp = StickyPartitioner(100, rng=random.Random(2), rack="east")
    acc = adaptive_accumulator(sp)
    for p, n in zip(ALL, (1, 2, 3, 1), strict=True):
        queue(acc, p, n)
    acc.ready(four_partitions(("west", "east")), 0.0)
    total, local = sp._load["t"]
    assert local is not None and (local.cumulative, local.partitions) == ([1, 3], [1, 3])
    assert total.partitions == [0, 1, 2, 3]


def test_partitions_of_a_node_that_could_not_drain_for_the_timeout_are_left_out() -> None:
    sp = StickyPartitioner(100, rng=random.Random(4))
    acc = adaptive_accumulator(sp, timeout_ms=100)
    cluster = four_partitions()
    for p in ALL:
        queue(acc, p, 1)
    acc.update_node_latency(1, 0.0, True)
    acc.update_node_latency(2, 0.0, True)
    acc.update_node_latency(2, 100.0, False)  # node 2 ready but not sendable for exactly the timeout: still in
    acc.ready(cluster, 100.0)
    assert "t" not in sp._load  # equal queues, none left out: uniform
    acc.update_node_latency(2, 101.0, False)  # past the timeout: its partitions (1, 3) leave the table
    acc.ready(cluster, 101.0)
    assert sp._load["t"][0].partitions == [0, 2]
    assert set(switches(sp, 300)) == {0, 2}
    acc.update_node_latency(2, 150.0, True)  # it took a batch: back in
    acc.ready(cluster, 150.0)
    assert "t" not in sp._load


def test_without_the_timeout_a_node_that_cannot_drain_is_not_left_out() -> None:
    sp = StickyPartitioner(100, rng=random.Random(4))
    acc = adaptive_accumulator(sp, timeout_ms=0)
    for p in ALL:
        queue(acc, p, 1)
    acc.update_node_latency(2, 0.0, True)
    acc.update_node_latency(2, 10_000.0, False)
    acc.ready(four_partitions(), 10_000.0)
    assert "t" not in sp._load
