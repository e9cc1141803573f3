"""murmur2 is bit-exact with Java; keyed records hash, keyless ones stick (KIP-794)."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from kafkajet.errors import InvalidPartitionError, KafkaError
from kafkajet.producer.partitioner import (
    STICKY_RECORD_FRAMING,
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
        produced += length + STICKY_RECORD_FRAMING
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
    # 84 + STICKY_RECORD_FRAMING = 100 bytes a record: runs of exactly 10, each on another partition than the last.
    assert all(len({block[i] for i in range(r, r + 10)}) == 1 for r in range(0, 100, 10))
    assert all(block[r] != block[r - 10] for r in range(10, 100, 10))
    # A call longer than the positions kept for runs (1 << 16) still places every record once, in order.
    n = (1 << 16) + 5000
    out = planner.plan("t", [None] * n, [b"x" * 84] * n, None, 6, list(range(6)), keyless=True)
    assert sorted(i for idx in out.values() for i in idx) == list(range(n))
    assert all(idx == sorted(idx) for idx in out.values())
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
    # 84-byte values + STICKY_RECORD_FRAMING = 100 bytes a record: with batch.size 1000, ten keyless records a run,
    # even when keyed records come between them.
    planner = PartitionPlanner(resolve_partitioner("default", 1000), 1000, False)
    keys: list[bytes | None] = [None] * 10 + [b"key"] + [None] * 20
    out = planner.plan("t", keys, [b"x" * (100 - STICKY_RECORD_FRAMING)] * 31, None, 6, list(range(6)), keyless=False)
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


# --- what mutation testing found unchecked ----------------------------------------------------------------------


def _java_murmur2(data: bytes) -> int:
    """Java's Utils.murmur2 transcribed line by line (a word at a time from bytes, the switch falling through),
    to check kafkajet's unpack-all-words version at every length, past the 64-word table too."""
    mask = 0xFFFFFFFF
    m = 0x5BD1E995
    h = (0x9747B28C ^ len(data)) & mask
    for i in range(len(data) // 4):
        k = data[4 * i] | data[4 * i + 1] << 8 | data[4 * i + 2] << 16 | data[4 * i + 3] << 24
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = len(data) & ~3
    rem = len(data) % 4
    if rem == 3:
        h ^= data[tail + 2] << 16
    if rem >= 2:
        h ^= data[tail + 1] << 8
    if rem >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def test_the_reference_murmur2_is_javas() -> None:
    assert [_java_murmur2(d) for d, _ in VECTORS] == [e for _, e in VECTORS]


def test_murmur2_matches_java_at_every_length_up_to_past_the_word_table() -> None:
    rng = random.Random(5)
    for n in range(0, 300):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert murmur2(data) == _java_murmur2(data), n
    high = bytes([0xFF] * 7)  # top bits set in every byte: sign and shift slips show
    assert murmur2(high) == _java_murmur2(high)


def test_invalid_partition_names_the_partition_record_topic_and_range() -> None:
    from kafkajet.producer.partitioner import invalid_partition

    assert str(invalid_partition("t", 7, 3)).endswith(
        "Invalid partition 7 of topic 't': not in the range [0...3) (the topic has 3 partitions)")
    assert "Invalid partition '7' for record 2 of topic 't'" in str(invalid_partition("t", "7", 3, 2))
    assert "for record 0 of" in str(invalid_partition("t", 7, 3, 0))


def test_sticky_run_ends_one_size_and_mixed_sizes_exactly() -> None:
    assert sticky_run_ends([], 100) == []
    assert sticky_run_ends([84] * 25, 1000) == [10, 20, 25]  # 100 bytes a record
    assert sticky_run_ends([84] * 20, 1000) == [10, 20]
    assert sticky_run_ends([85] * 20, 1000) == [10, 20]  # 101 bytes: the tenth passes 1000
    assert sticky_run_ends([83] * 21, 1000) == [11, 21]  # 99 bytes: ten make 990, the eleventh reaches it
    assert sticky_run_ends([84, 84, 85] * 4, 300) == [3, 6, 9, 12]
    assert sticky_run_ends([0, 84] + [84] * 9, 200) == [3, 5, 7, 9, 11]
    assert sticky_run_ends([1000, 0, 0], 500) == [1, 3]
    assert sticky_run_ends([5], 1) == [1]


def test_sticky_partition_picks_again_when_its_partition_is_gone() -> None:
    sp = StickyPartitioner(batch_size=1000, rng=random.Random(2))
    sp._current["t"] = 3
    assert sp.partition("t", [0, 1, 2], 3) in (0, 1, 2)  # partition 3 is not in a 3-partition topic
    assert sp._produced["t"] == 0
    sp._current["u"] = 2
    assert sp.partition("u", [0, 1, 2], 3) == 2  # still there: kept
    sp2 = StickyPartitioner(batch_size=1000, rng=random.Random(2))
    assert sp2.partition("v", [], 4) in range(4)  # nothing available: any partition of the topic


def test_sticky_moves_only_for_its_own_partition_and_stays_on_a_lone_available_one() -> None:
    sp = StickyPartitioner(batch_size=100, rng=random.Random(4))
    p = sp.partition("t", [5], 6)
    assert p == 5
    sp.record_appended("t", 5, 100, [5], 6)
    assert sp.partition("t", [5], 6) == 5  # the only choice: switching to itself, not failing
    assert sp._produced["t"] == 0  # a new run counts from zero
    sp.record_appended("t", 4, 1000, [5], 6)  # another partition's bytes: ignored
    assert sp._produced["t"] == 0
    sp.record_appended("t", 5, 99, [5], 6)
    assert sp._produced["t"] == 99
    # The previous partition is not among the available ones: nothing to remove, any available one goes.
    sp2 = StickyPartitioner(batch_size=100, rng=random.Random(4))
    sp2._current["t"] = 1
    sp2.record_appended("t", 1, 100, [2, 3], 6)
    assert sp2._current["t"] in (2, 3)
    # Without the partition count, record_appended() still moves off: among partitions up to its own.
    for seed in range(20):
        sp3 = StickyPartitioner(batch_size=100, rng=random.Random(seed))
        sp3._current["t"] = 1
        sp3.record_appended("t", 1, 100)
        assert sp3._current["t"] == 0  # partitions 0 and 1 known, 1 just filled


def test_take_counts_bytes_from_zero_after_each_move_and_repicks_a_vanished_partition() -> None:
    sp = StickyPartitioner(batch_size=300, rng=random.Random(9))
    calls: list[str] = []

    def available(topic: str) -> list[int]:
        calls.append(topic)
        return [0, 1, 2]

    first = sp.take("t", 100, available, 3)
    assert calls == ["t"] and sp._produced["t"] == 100
    assert sp.take("t", 100, available, 3) == first and calls == ["t"]  # no look-up while it stays
    assert sp.take("t", 100, available, 3) == first  # 300 bytes: this record still goes there ...
    assert len(calls) == 2 and sp._current["t"] != first and sp._produced["t"] == 0  # ... then it moves
    sp._current["t"] = 3
    assert sp.take("t", 10, available, 3) in (0, 1, 2)  # partition 3 is gone: picked again
    assert sp._produced["t"] == 10


def test_the_planner_memo_of_key_hashes_is_bounded_and_exact() -> None:
    from kafkajet.producer import partitioner as mod

    planner = PartitionPlanner(resolve_partitioner("default", 16384), 16384, False)
    assert planner.hash_key(b"key1") == murmur2(b"key1") & 0x7FFFFFFF == planner.key_hashes[b"key1"]
    planner.key_hashes.update({b"%d" % i: 0 for i in range(mod._KEY_HASH_MEMO_SIZE - 2)})
    assert len(planner.key_hashes) == mod._KEY_HASH_MEMO_SIZE - 1
    planner.hash_key(b"one more")  # the memo is one short of full: it grows to its bound
    assert len(planner.key_hashes) == mod._KEY_HASH_MEMO_SIZE
    planner.hash_key(b"past the bound")  # full: cleared first
    assert planner.key_hashes == {b"past the bound": murmur2(b"past the bound") & 0x7FFFFFFF}


def test_keyed_runs_use_the_memo_fill_it_and_list_partitions_in_order() -> None:
    planner = PartitionPlanner(resolve_partitioner("default", 16384), 16384, False)
    planner.key_hashes[b"planted"] = 5  # a memo hit is trusted: 5 % 3 == 2
    keys = [b"hello", b"planted", b"a", b"b", b"c", b"key1"]
    out = planner.plan("t", keys, [b"v"] * 6, None, 3, [0, 1, 2], keyless=False)
    assert list(out) == sorted(out)
    where = {i: p for p, idx in out.items() for i in idx}
    assert where == {0: partition_for_key(b"hello", 3), 1: 2, 2: partition_for_key(b"a", 3),
                     3: partition_for_key(b"b", 3), 4: partition_for_key(b"c", 3), 5: partition_for_key(b"key1", 3)}
    assert planner.key_hashes[b"hello"] == murmur2(b"hello") & 0x7FFFFFFF


def test_the_mixed_path_uses_the_memo_and_ignores_it_when_keys_are_ignored() -> None:
    planner = PartitionPlanner(resolve_partitioner("default", 16384), 16384, False)
    planner.key_hashes[b"planted"] = 4  # 4 % 3 == 1
    out = planner.plan("t", [b"planted", None, b"new"], [b"v"] * 3, [None, None, 0], 3, [0, 1, 2],
                       keyless=False)
    assert 0 in out[1] and 2 in out[0]
    planner.plan("t", [b"fresh", None], [b"v"] * 2, [None, 1], 3, [0, 1, 2], keyless=False)
    assert planner.key_hashes[b"fresh"] == murmur2(b"fresh") & 0x7FFFFFFF


def test_sticky_runs_with_null_values_count_overhead_only_and_report_bytes() -> None:
    part = resolve_partitioner("default", 1000)
    planner = PartitionPlanner(part, 1000, False)
    out = planner.plan("t", [None] * 70, [None] * 70, None, 4, [0, 1, 2, 3], keyless=True)
    runs = sorted(len(idx) for idx in out.values())
    # STICKY_RECORD_FRAMING bytes a null record: 63 reach 1000 (62 make 992), the other 7 begin the next run.
    assert sum(runs) == 70 and sorted(i for idx in out.values() for i in idx) == list(range(70))
    sticky = part.sticky  # type: ignore[attr-defined]
    assert sticky._produced["t"] == 7 * STICKY_RECORD_FRAMING


def test_round_robin_and_random_fall_back_to_every_partition_when_none_is_available() -> None:
    rr = resolve_partitioner("round_robin", 16384)
    assert [rr.partition("t", None, 2, []) for _ in range(3)] == [0, 1, 0]
    rnd = resolve_partitioner("random", 16384)
    random.seed(3)
    assert {rnd.partition("t", None, 2, []) for _ in range(100)} == {0, 1}


def test_a_user_partitioner_may_return_the_first_and_the_last_partition() -> None:
    for want in (0, 3):
        assert resolve_partitioner(lambda k, a, v, w=want: w, 16384).partition("t", None, 4, []) == want
