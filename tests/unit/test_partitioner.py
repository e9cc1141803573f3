"""murmur2 is bit-exact with Java; keyed records hash, keyless ones stick (KIP-794)."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from kafkajet.errors import InvalidPartitionError, KafkaError
from kafkajet.producer.partitioner import (
    RECORD_OVERHEAD,
    PartitionPlanner,
    StickyPartitioner,
    murmur2,
    partition_for_key,
    resolve_partitioner,
    sticky_run_ends,
)

VECTORS = [(b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
           (b"a-little-bit-longer-string", -1486304829),
           (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971), (b"abc", 479470107),
           (b"", 275646681)]

# From murmur2-vectors.md section 2 (computed table): key -> partitions for N = 2, 3, 4, 5, 6, 8, 10, 12.
TABLE = {
    b"a": [0, 1, 0, 4, 4, 4, 4, 4], b"b": [0, 2, 0, 1, 2, 4, 6, 8], b"c": [0, 1, 2, 4, 4, 2, 4, 10],
    b"key1": [0, 2, 0, 0, 2, 4, 0, 8], b"user-42": [0, 1, 0, 0, 4, 4, 0, 4], b"hello": [1, 0, 1, 4, 3, 5, 9, 9],
}


@pytest.mark.parametrize("data,expected", VECTORS)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize("key", list(TABLE))
def test_key_to_partition_table(key: bytes) -> None:
    assert [partition_for_key(key, n) for n in (2, 3, 4, 5, 6, 8, 10, 12)] == TABLE[key]


def test_sticky_stays_until_batch_size_bytes_then_moves() -> None:
    sp = StickyPartitioner(batch_size=1000, rng=random.Random(1))
    first = sp.partition("t", [0, 1, 2, 3], 4)
    for _ in range(9):
        assert sp.partition("t", [0, 1, 2, 3], 4) == first
        sp.record_appended("t", first, 100, [0, 1, 2, 3], 4)
    assert sp.partition("t", [0, 1, 2, 3], 4) == first  # 900 bytes: not yet
    sp.record_appended("t", first, 100, [0, 1, 2, 3], 4)
    assert sp.partition("t", [0, 1, 2, 3], 4) != first  # 1000 bytes: switched


def _run_ends_one_by_one(lens: list[int], batch_size: int) -> list[int]:
    """send()'s rule record by record: count each record's bytes, move on once batch.size is reached."""
    ends, produced = [], 0
    for i, length in enumerate(lens):
        produced += length + RECORD_OVERHEAD
        if produced >= batch_size:
            ends.append(i + 1)
            produced = 0
    if lens and (not ends or ends[-1] != len(lens)):
        ends.append(len(lens))
    return ends


@pytest.mark.parametrize("seed", range(40))
def test_batch_path_sticky_runs_end_where_send_would_move_on(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 7, 148, 149, 1000])
    batch_size = rng.choice([1, 100, 116, 16384])
    # Every other case one size for all records: the batch path's shortcut, which must agree too.
    lens = [rng.choice([0, 100, 1024])] * n if seed % 2 else [rng.randint(0, 300) for _ in range(n)]
    assert sticky_run_ends(lens, batch_size) == _run_ends_one_by_one(lens, batch_size)


def test_sticky_spreads_uniformly_and_only_over_available_partitions() -> None:
    sp = StickyPartitioner(batch_size=10, rng=random.Random(7))
    counts: Counter[int] = Counter()
    for _ in range(6000):
        p = sp.partition("t", [1, 3, 5], 6)
        counts[p] += 1
        sp.record_appended("t", p, 10, [1, 3, 5], 6)
    assert set(counts) == {1, 3, 5}
    assert all(1700 < c < 2300 for c in counts.values()), counts


def test_default_partitioner_hashes_keys_and_sticks_keyless() -> None:
    part = resolve_partitioner("default", 16384)
    assert part.partition("t", b"key1", 6, [0, 1, 2, 3, 4, 5]) == 2
    a = part.partition("t", None, 6, [0, 1, 2, 3, 4, 5])
    assert part.partition("t", None, 6, [0, 1, 2, 3, 4, 5]) == a


def test_a_user_partitioner_out_of_range_is_a_clear_error() -> None:
    part = resolve_partitioner(lambda key, all_p, avail: 99, 16384)
    with pytest.raises(KafkaError, match="returned 99 for topic 't', which has partitions 0..2"):
        part.partition("t", b"k", 3, [0, 1, 2])


def test_sticky_is_safe_from_many_threads() -> None:
    sp = StickyPartitioner(batch_size=50)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5000):
                p = sp.partition("t", [0, 1, 2, 3], 4)
                assert 0 <= p < 4
                sp.record_appended("t", p, 7, [0, 1, 2, 3], 4)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors


def test_a_batch_plan_places_records_as_one_by_one_sends_would() -> None:
    # plan() has three paths (all keyless, all keyed, mixed); each must give every record the partition the
    # default partitioner gives it on its own: murmur2 for keys, the caller's partition, sticky runs otherwise.
    keys = [None if i % 3 == 0 else b"key-%d" % (i % 11) for i in range(300)]
    values = [b"v" * (i % 50) for i in range(300)]
    placed = [i % 4 if i % 7 == 0 else None for i in range(300)]
    for ks, ps in ((keys, placed), ([k or b"k" for k in keys], None)):
        planner = PartitionPlanner(resolve_partitioner("default", 16384), 16384, False)
        out = planner.plan("t", ks, values, ps, 6, list(range(6)), keyless=False)
        where = {i: p for p, idx in out.items() for i in idx}
        assert sorted(where) == list(range(300)) and all(idx == sorted(idx) for idx in out.values())
        for i, k in enumerate(ks):
            if ps is not None and ps[i] is not None:
                assert where[i] == ps[i]
            elif k is not None:
                assert where[i] == partition_for_key(k, 6)
    # Keyless: one sticky partition per run of batch.size bytes, each run a partition other than the last.
    planner = PartitionPlanner(resolve_partitioner("default", 1000), 1000, False)
    out = planner.plan("t", [None] * 100, [b"x" * 84] * 100, None, 6, list(range(6)), keyless=True)
    block = {i: p for p, idx in out.items() for i in idx}
    assert sorted(block) == list(range(100))
    # 84 + RECORD_OVERHEAD = 100 bytes a record: runs of exactly 10, each on another partition than the last.
    assert all(len({block[i] for i in range(r, r + 10)}) == 1 for r in range(0, 100, 10))
    assert all(block[r] != block[r - 10] for r in range(10, 100, 10))
    with pytest.raises(InvalidPartitionError, match=r"Invalid partition 9 for record 1 of topic 't'.*\[0...6\)"):
        planner.plan("t", [None, None], [b"a", b"b"], [0, 9], 6, list(range(6)), keyless=True)


def test_send_path_take_stays_for_batch_size_bytes_then_moves_to_another_partition() -> None:
    # take() is what send() calls for every keyless record; planted "never switch" must fail here.
    sp = StickyPartitioner(batch_size=1000, rng=random.Random(3))
    available = lambda _topic: [0, 1, 2, 3]  # noqa: E731
    seen = [sp.take("t", 100, available, 4) for _ in range(30)]
    assert seen[:10] == [seen[0]] * 10  # 10 x 100 bytes fill the first partition's batch.size
    assert seen[10] != seen[0]  # the record after batch.size bytes goes elsewhere (never the same one)
    assert seen[10:20] == [seen[10]] * 10 and seen[20] != seen[10]


def test_send_path_take_spreads_over_available_partitions_only() -> None:
    sp = StickyPartitioner(batch_size=10, rng=random.Random(11))
    counts = Counter(sp.take("t", 10, lambda _topic: [0, 2, 4], 6) for _ in range(6000))
    assert set(counts) == {0, 2, 4}
    assert all(1700 < c < 2300 for c in counts.values()), counts


def test_round_robin_cycles_per_topic_over_available_partitions() -> None:
    # Java's RoundRobinPartitioner: a counter per topic, modulo the available partitions when there are any.
    rr = resolve_partitioner("round_robin", 16384)
    assert [rr.partition("a", None, 3, []) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [rr.partition("b", b"key", 3, []) for _ in range(2)] == [0, 1], "keys are ignored; counters per topic"
    assert [rr.partition("c", None, 6, [1, 4]) for _ in range(4)] == [1, 4, 1, 4]
    rr.record_appended("a", 0, 100)  # no stickiness: the next record still moves on
    assert rr.partition("a", None, 3, []) == 1


def test_random_partitioner_draws_from_available_partitions_only() -> None:
    rnd = resolve_partitioner("random", 16384)
    random.seed(7)
    picks = Counter(rnd.partition("t", None, 6, [2, 5]) for _ in range(400))
    assert set(picks) == {2, 5} and min(picks.values()) > 100
    picks = Counter(rnd.partition("t", None, 3, []) for _ in range(600))
    assert set(picks) == {0, 1, 2}


def test_a_user_partitioner_sees_the_key_every_partition_and_the_available_ones() -> None:
    seen: list[tuple[bytes | None, list[int], list[int]]] = []

    def fn(key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        seen.append((key, all_partitions, available))
        return available[-1]

    p = resolve_partitioner(fn, 16384)
    assert p.partition("t", b"k", 4, [0, 2]) == 2
    assert seen == [(b"k", [0, 1, 2, 3], [0, 2])]
    p.record_appended("t", 2, 10)


@pytest.mark.parametrize("returned", [4, -1, 1.0, None, "1"])
def test_a_user_partitioner_returning_no_partition_names_it_the_topic_and_the_range(returned: object) -> None:
    def bad(key: bytes | None, all_partitions: list[int], available: list[int]) -> object:
        return returned

    with pytest.raises(KafkaError) as raised:
        resolve_partitioner(bad, 16384).partition("orders", None, 4, [])  # type: ignore[arg-type]
    text = str(raised.value)
    assert "bad" in text and repr(returned) in text and "'orders'" in text and "0..3" in text


def test_partitioner_names_resolve_and_a_wrong_one_lists_the_choices() -> None:
    from kafkajet.errors import ConfigError
    from kafkajet.producer.partitioner import DefaultPartitioner, RandomPartitioner, RoundRobinPartitioner

    assert type(resolve_partitioner("default", 100)) is DefaultPartitioner
    assert type(resolve_partitioner("round_robin", 100)) is RoundRobinPartitioner
    assert type(resolve_partitioner("random", 100)) is RandomPartitioner
    with pytest.raises(ConfigError, match="'ROUND_ROBIN' is not a callable or one of default, round_robin, random"):
        resolve_partitioner("ROUND_ROBIN", 100)


@pytest.mark.parametrize("keyless", [True, False])
def test_a_batch_call_asks_a_non_default_partitioner_for_every_record(keyless: bool) -> None:
    # Only the default partitioner sticks keyless records to a partition for batch.size bytes (KIP-794); a
    # round-robin or user partitioner decides record by record in a batch call too, as send() would.
    calls: list[bytes | None] = []

    def fn(key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        calls.append(key)
        return len(calls) % 3

    keys = [None] * 6 if keyless else [None, b"a", None, None, b"b", None]
    for spec in ("round_robin", fn):
        planner = PartitionPlanner(resolve_partitioner(spec, 16384), 16384, False)
        out = planner.plan("t", keys, [b"v"] * 6, None, 3, [0, 1, 2], keyless=keyless)
        where = [next(p for p, idx in out.items() if i in idx) for i in range(6)]
        assert where == [0, 1, 2, 0, 1, 2] if spec == "round_robin" else [1, 2, 0, 1, 2, 0], (spec, where)
    assert calls == keys
    # Caller-named partitions still win, and are still checked.
    planner = PartitionPlanner(resolve_partitioner("round_robin", 16384), 16384, False)
    out = planner.plan("t", keys, [b"v"] * 6, [2, None, None, 2, None, None], 3, [0, 1, 2], keyless=keyless)
    assert out == {2: [0, 3, 4], 0: [1, 5], 1: [2]}  # the counter moves only for unplaced records
    with pytest.raises(InvalidPartitionError):
        planner.plan("t", keys, [b"v"] * 6, [3, None, None, None, None, None], 3, [0, 1, 2], keyless=keyless)


def test_a_batch_call_hands_a_user_partitioner_what_send_would() -> None:
    seen: list[tuple[bytes | None, list[int], list[int]]] = []

    def fn(key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        seen.append((key, all_partitions, available))
        return available[0]

    planner = PartitionPlanner(resolve_partitioner(fn, 16384), 16384, False)
    out = planner.plan("t", [b"a", None], [b"v", None], [None, None], 4, [1, 3], keyless=False)
    assert out == {1: [0, 1]}
    assert seen == [(b"a", [0, 1, 2, 3], [1, 3]), (None, [0, 1, 2, 3], [1, 3])]
    with pytest.raises(InvalidPartitionError, match=r"Invalid partition 4 for record 1 of topic 't'.*\[0...4\)"):
        planner.plan("t", [b"a", b"b"], [b"v", b"v"], [3, 4], 4, [1, 3], keyless=False)


def test_the_mixed_path_checks_caller_partitions_at_both_ends() -> None:
    planner = PartitionPlanner(resolve_partitioner("default", 16384), 16384, False)
    keys = [b"k", None, b"k"]
    assert planner.plan("t", keys, [b"v"] * 3, [0, 5, None], 6, list(range(6)), keyless=False)[0] == [0]
    for bad in (6, -1, 1.0):
        with pytest.raises(InvalidPartitionError, match=rf"Invalid partition {bad} for record 1 of topic 't'"):
            planner.plan("t", keys, [b"v"] * 3, [0, bad, None], 6, list(range(6)),  # type: ignore[list-item]
                         keyless=False)


def test_the_mixed_path_sticks_keyless_runs_for_batch_size_bytes() -> None:
    # 84-byte values + RECORD_OVERHEAD = 100 bytes a record: with batch.size 1000, ten keyless records a run,
    # even when keyed records come between them.
    planner = PartitionPlanner(resolve_partitioner("default", 1000), 1000, False)
    keys: list[bytes | None] = [None] * 10 + [b"key"] + [None] * 20
    out = planner.plan("t", keys, [b"x" * (100 - RECORD_OVERHEAD)] * 31, None, 6, list(range(6)), keyless=False)
    where = {i: p for p, idx in out.items() for i in idx}
    assert where[10] == partition_for_key(b"key", 6)
    runs = [{where[i] for i in r} for r in (range(0, 10), range(11, 21), range(21, 31))]
    assert all(len(r) == 1 for r in runs), runs
    assert runs[0] != runs[1] != runs[2], "each run of batch.size bytes moves to another partition"
    # A null value counts its overhead only.
    planner = PartitionPlanner(resolve_partitioner("default", 1000), 1000, False)
    out = planner.plan("t", [None] * 30 + [b"k"], [None] * 30 + [b"v"], None, 6, list(range(6)), keyless=False)
    assert len({p for p, idx in out.items() if any(i < 30 for i in idx)}) == 1  # 30 x overhead < 1000


def test_ignore_keys_sticks_keyed_records_in_batch_calls_too() -> None:
    planner = PartitionPlanner(resolve_partitioner("default", 16384, ignore_keys=True), 16384, True)
    keys = [b"key-%d" % i for i in range(50)]
    out = planner.plan("t", keys, [b"v"] * 50, [None] * 49 + [2], 6, list(range(6)), keyless=False)
    sticky = [p for p, idx in out.items() if any(i < 49 for i in idx)]
    assert len(sticky) == 1, "keys ignored: one sticky partition, not a hash per key"
    assert 49 in out[2]


def test_the_default_partitioner_switches_at_exactly_batch_size_bytes_to_another_available_partition() -> None:
    from kafkajet.producer.partitioner import DefaultPartitioner

    for seed in range(20):
        part = DefaultPartitioner(1000)
        part.sticky._rng = random.Random(seed)
        first = part.partition("t", None, 6, [2, 4])
        assert first in (2, 4)
        part.record_appended("t", first, 999)
        part.record_appended("t", 5, 5000)  # bytes for another partition do not count
        assert part.partition("t", None, 6, [2, 4]) == first, "999 bytes: not yet batch.size"
        part.record_appended("t", first, 1)
        # batch.size reached: the next of the *available* partitions, never the same one again.
        assert part.partition("t", None, 6, [2, 4]) == ({2, 4} - {first}).pop()
        # With no partition available, any of the topic's partitions but the last.
        part.partition("u", None, 3, [])
        current = part.sticky._current["u"]
        part.record_appended("u", current, 1000)
        assert part.partition("u", None, 3, []) in {0, 1, 2} - {current}
