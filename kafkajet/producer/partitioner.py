"""Choosing a partition: explicit > murmur2 of the key (Java-exact) > sticky (KIP-794), weighted by the
brokers' queues (adaptive), without partitions whose leader stopped draining (availability timeout) and within
the client's rack when asked (KIP-1123), as Java's BuiltInPartitioner.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

import random
import struct
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Final, Protocol, cast

from kafkajet.errors import ConfigError, InvalidPartitionError, KafkaError

_WORDS: Final = [struct.Struct(f"<{n}I") for n in range(64)]

# What a record counts toward its sticky partition's batch.size beyond its key and value: an estimate of its
# framing (varints, attributes, headers count). send() and the batch paths must use the same figure, or a batch
# call and a send() loop would switch partitions at different points.
STICKY_RECORD_FRAMING: Final = 16

# Keys repeat (user ids, device ids): a bounded memo of their murmur2 skips most hashing.
_KEY_HASH_MEMO_SIZE = 65536


def murmur2(data: bytes) -> int:
    """Java's Utils.murmur2 (seed 0x9747b28c): a signed 32-bit result, bit-exact."""
    length = len(data)
    m = 0x5BD1E995
    h = 0x9747B28C ^ length
    n4 = length >> 2
    # All 4-byte little-endian words in one C call: the per-byte indexing was most of the cost.
    words = (_WORDS[n4] if n4 < 64 else struct.Struct(f"<{n4}I")).unpack_from(data)
    for k in words:
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        h = ((h * m) ^ (k * m)) & 0xFFFFFFFF
    end4 = n4 << 2
    rem = length & 3
    if rem == 3:
        h ^= data[end4 + 2] << 16
    if rem >= 2:
        h ^= data[end4 + 1] << 8
    if rem >= 1:
        h ^= data[end4]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def invalid_partition(topic: str, partition: object, count: int, record: int | None = None) -> InvalidPartitionError:
    """The error for a caller's partition outside the topic's (Java: "Invalid partition given with record: 7 is not
    in the range [0...3)."); `record` is its position in a batch call."""
    where = "" if record is None else f" for record {record}"
    return InvalidPartitionError(
        f"Invalid partition {partition!r}{where} of topic '{topic}': not in the range [0...{count}) "
        f"(the topic has {count} partitions)")


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def sticky_run_ends(lens: Sequence[int], batch_size: int) -> list[int]:
    """Where runs of keyless records end when each goes to one sticky partition until batch.size bytes went
    there (KIP-794): a run takes records while the bytes so far are below batch.size, up to and including the
    first that reaches it. `lens` are the values' lengths; a record counts STICKY_RECORD_FRAMING bytes more."""
    n = len(lens)
    if n and lens.count(lens[0]) == n:
        # One size: every run has the same length, with no running sums to build.
        step = -(-batch_size // (lens[0] + STICKY_RECORD_FRAMING))
        return [*range(step, n, step), n]
    running = list(accumulate(map(STICKY_RECORD_FRAMING.__add__, lens)))
    ends = []
    i = 0
    while i < n:
        before = running[i - 1] if i else 0
        i = min(n, bisect_left(running, before + batch_size, i) + 1)
        ends.append(i)
    return ends


class Partitioner(Protocol):
    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int: ...

    def record_appended(self, topic: str, partition: int, nbytes: int) -> None: ...


class LoadStats:
    """Java's PartitionLoadStats: a cumulative frequency table over some partitions of a topic, each weighted by
    (longest queue + 1 - its queue), so a random number below the last entry lands on a short queue more often."""

    def __init__(self, cumulative: list[int], partitions: list[int]) -> None:
        self.cumulative = cumulative
        self.partitions = partitions

    def pick(self, rng: random.Random) -> int:
        # The first entry strictly greater than the draw: Java's binarySearch, insertion point + 1.
        return self.partitions[bisect_right(self.cumulative, rng.randrange(self.cumulative[-1]))]


def cumulative_frequencies(queue_sizes: Sequence[int], max_size_plus_1: int) -> list[int]:
    """Java's invertAndFoldQueueSizeArray: (max + 1 - size) as a running sum."""
    out = []
    total = 0
    for size in queue_sizes:
        total += max_size_plus_1 - size
        out.append(total)
    return out


class StickyPartitioner:
    """KIP-794 sticky: keyless records stay on one partition until batch.size bytes went to it, then move to
    one chosen at random: weighted by the queue sizes the accumulator last saw when it has them (adaptive
    partitioning, update_load_stats()), else uniformly among the partitions with a leader; with `in_rack`, among
    those led in the client's rack when there are any (KIP-1123).

    Thread-safe: the switch decision happens under a short lock; reading the current choice does not lock
    (a stale read only sends one record to the previous sticky partition, which is harmless). The load stats
    are replaced whole by the sender thread and read once per switch.
    """

    def __init__(self, batch_size: int, rng: random.Random | None = None, rack: str | None = None,
                 in_rack: Callable[[str], Sequence[int]] | None = None) -> None:
        self.batch_size = batch_size
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._current: dict[str, int] = {}
        self._produced: dict[str, int] = {}
        # partitioner.rack.aware with client.rack: the rack, and the topic's available partitions led there.
        self.rack = rack
        self.in_rack = in_rack
        # topic -> the stats of all its weighed partitions, and of those led in `rack` (None: none are).
        self._load: dict[str, tuple[LoadStats, LoadStats | None]] = {}
        # What each topic's stats were last built from: the sender's passes mostly see the same queues again.
        self._load_inputs: dict[str, tuple[list[int] | None, list[int], list[str | None], int]] = {}

    def update_load_stats(self, topic: str, queue_sizes: list[int] | None, partitions: list[int],
                          racks: list[str | None], queues: int) -> None:
        """Java's updatePartitionLoadStats: the queue sizes of the topic's partitions that have a leader and
        are not excluded by partitioner.availability.timeout.ms (None: no adaptive stats for the topic),
        their ids, their leaders' racks (only read when rack-aware), and `queues`, how many partitions of the
        topic have a queue at all."""
        inputs = (queue_sizes, partitions, racks, queues)
        if self._load_inputs.get(topic) == inputs:
            return
        self._load_inputs[topic] = inputs
        n = 0 if queue_sizes is None else len(queue_sizes)
        # Fewer than two partitions: nothing to weigh, unless some were excluded (then the rest still count).
        if queue_sizes is None or n < 1 or queues < 2:
            self._load.pop(topic, None)
            return
        longest = max(queue_sizes)
        if n == queues and min(queue_sizes) == longest:
            # Equal queues and none excluded: the uniform choice is the same distribution, and cheaper.
            self._load.pop(topic, None)
            return
        local: LoadStats | None = None
        rack = self.rack
        if rack is not None:
            here = [i for i, r in enumerate(racks) if r == rack]
            if here:
                sizes = [queue_sizes[i] for i in here]
                local = LoadStats(cumulative_frequencies(sizes, max(sizes) + 1), [partitions[i] for i in here])
        self._load[topic] = (LoadStats(cumulative_frequencies(queue_sizes, longest + 1), list(partitions)), local)

    def partition(self, topic: str, available: Sequence[int], num_partitions: int) -> int:
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            with self._lock:
                p = self._current.get(topic)
                if p is None or p >= num_partitions:
                    p = self._next(topic, available, num_partitions, None)
        return p

    def _next(self, topic: str, available: Sequence[int], num_partitions: int, previous: int | None) -> int:
        load = self._load.get(topic)
        if load is not None:
            # Java's nextPartition: the in-rack table when rack-aware and some weighed partition is in the rack.
            total, local = load
            p = (total if local is None else local).pick(self._rng)
        else:
            choices = list(available) if available else list(range(num_partitions))
            if available and self.in_rack is not None:
                led_here = self.in_rack(topic)
                if led_here:
                    choices = list(led_here)
            if previous is not None and len(choices) > 1 and previous in choices:
                choices.remove(previous)
            p = self._rng.choice(choices)
        self._current[topic] = p
        self._produced[topic] = 0
        return p

    def record_appended(self, topic: str, partition: int, nbytes: int, available: Sequence[int] = (),
                        num_partitions: int = 0) -> None:
        if self._current.get(topic) != partition:
            return
        # Counting without the lock may lose an increment under a race; the switch point only moves by a
        # record, while a lock per record would cost every send().
        produced = self._produced.get(topic, 0) + nbytes
        self._produced[topic] = produced
        if produced >= self.batch_size:
            with self._lock:
                if self._current.get(topic) == partition and self._produced.get(topic, 0) >= self.batch_size:
                    self._next(topic, available, num_partitions or partition + 1, partition)

    def take(self, topic: str, nbytes: int, available: Callable[[str], Sequence[int]], num_partitions: int) -> int:
        """The sticky partition for one keyless record of nbytes, counted at once (the send() fast path).

        `available` is only called when the partition must change, which is once per batch.size bytes.
        """
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            with self._lock:
                p = self._next(topic, available(topic), num_partitions, None)
        produced = self._produced.get(topic, 0) + nbytes
        self._produced[topic] = produced
        if produced >= self.batch_size:
            with self._lock:
                if self._current.get(topic) == p:
                    self._next(topic, available(topic), num_partitions, p)
        return p


class DefaultPartitioner:
    """Explicit partitions are handled by the producer; here: murmur2 for keys, sticky otherwise."""

    def __init__(self, batch_size: int, ignore_keys: bool = False) -> None:
        self.sticky = StickyPartitioner(batch_size)
        self.ignore_keys = ignore_keys
        self._available: dict[str, Sequence[int]] = {}
        self._counts: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int:
        if key is not None and not self.ignore_keys:
            return (murmur2(key) & 0x7FFFFFFF) % num_partitions
        self._available[topic] = available
        self._counts[topic] = num_partitions
        return self.sticky.partition(topic, available, num_partitions)

    def record_appended(self, topic: str, partition: int, nbytes: int) -> None:
        self.sticky.record_appended(topic, partition, nbytes, self._available.get(topic, ()),
                                    self._counts.get(topic, 0))


class PartitionPlanner:
    """Where records go when the caller named no partition: the configured partitioner, with the default one's
    two paths kept cheap. send() inlines them (`sticky` for keyless records, `key_hashes` then hash_key() on a
    miss for keyed ones); batch calls get every record's partition at once from plan()."""

    def __init__(self, partitioner: Partitioner, batch_size: int, ignore_keys: bool) -> None:
        self.partitioner = partitioner
        self.batch_size = batch_size
        self.ignore_keys = ignore_keys
        self.sticky = partitioner.sticky if isinstance(partitioner, DefaultPartitioner) else None
        self.key_hashes: dict[bytes, int] = {}  # murmur2 & 0x7FFFFFFF of recent keys

    def hash_key(self, key: bytes) -> int:
        """murmur2 of a key the memo missed, remembered; callers look the memo up inline first."""
        if len(self.key_hashes) >= _KEY_HASH_MEMO_SIZE:
            self.key_hashes.clear()
        h = self.key_hashes[key] = murmur2(key) & 0x7FFFFFFF
        return h

    def plan(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None],
             partitions: Sequence[int | None] | None, count: int, available: Sequence[int], *,
             keyless: bool, lens: list[int] | None = None) -> dict[int, list[int]]:
        """Input positions per partition, in input order; `keyless` when the caller gave no keys at all, `lens`
        the values' lengths if known. InvalidPartitionError for a caller's partition the topic lacks."""
        if self.sticky is None:
            # Round-robin, random or the user's function: asked for every record, exactly as send() asks.
            return self._each_record(topic, keys, partitions, count, available)
        if keyless and partitions is None:
            return self._sticky_runs(topic, values, count, available, lens)
        memo = self.key_hashes if self.sticky is not None and not self.ignore_keys else None
        if partitions is None and memo is not None and not keyless and None not in keys:
            return self._keyed_runs(keys, count, memo)
        return self._record_by_record(topic, keys, values, partitions, count, available, memo)

    def _each_record(self, topic: str, keys: Sequence[bytes | None], partitions: Sequence[int | None] | None,
                     count: int, available: Sequence[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        part = self.partitioner
        for i, key in enumerate(keys):
            explicit = None if partitions is None else partitions[i]
            if explicit is None:
                p = part.partition(topic, key, count, available)
            elif type(explicit) is not int or not 0 <= explicit < count:
                raise invalid_partition(topic, explicit, count, i)
            else:
                p = explicit
            out.setdefault(p, []).append(i)
        return out

    def _record_by_record(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None],
                          partitions: Sequence[int | None] | None, count: int, available: Sequence[int],
                          memo: dict[bytes, int] | None) -> dict[int, list[int]]:
        """The mixed case: caller's partitions, keys and keyless runs interleaved."""
        out: dict[int, list[int]] = {}
        part = self.partitioner
        batch_size = self.batch_size
        i, n = 0, len(values)
        while i < n:
            # A caller's value, checked below: read as object (compiled, mypyc would check the annotated type first).
            explicit = None if partitions is None else cast("Sequence[object]", partitions)[i]
            key = keys[i]
            if explicit is not None:
                if type(explicit) is not int or not 0 <= explicit < count:
                    raise invalid_partition(topic, explicit, count, i)
                out.setdefault(explicit, []).append(i)
                i += 1
            elif key is not None:
                if memo is None:
                    p = part.partition(topic, key, count, available)
                else:  # the default partitioner, with send()'s memo of key hashes
                    h = memo.get(key)
                    if h is None:
                        h = self.hash_key(key)
                    p = h % count
                out.setdefault(p, []).append(i)
                i += 1
            else:
                # A run of keyless records goes to the sticky partition until batch.size bytes went there.
                p = part.partition(topic, None, count, available)
                bucket = out.setdefault(p, [])
                size = 0
                while i < n and keys[i] is None and (partitions is None or partitions[i] is None) \
                        and size < batch_size:
                    v = values[i]
                    size += (0 if v is None else len(v)) + STICKY_RECORD_FRAMING
                    bucket.append(i)
                    i += 1
                part.record_appended(topic, p, size)
        return out

    def _keyed_runs(self, keys: Sequence[bytes | None], count: int, memo: dict[bytes, int]) -> dict[int, list[int]]:
        """Every record keyed, none placed by the caller, the default partitioner: murmur2 of the key (from the
        memo where it can), with the per-record work cut to a look-up, a modulo and an append."""
        hashes = list(map(memo.get, keys))  # type: ignore[arg-type]
        if None in hashes:
            for i, h in enumerate(hashes):
                if h is None:
                    hashes[i] = self.hash_key(keys[i])  # type: ignore[arg-type]
        parts = [h % count for h in hashes]  # type: ignore[operator]
        out: dict[int, list[int]] = {p: [] for p in sorted(set(parts))}
        add = {p: positions.append for p, positions in out.items()}
        for i, p in enumerate(parts):
            add[p](i)
        return out

    def _sticky_runs(self, topic: str, values: Sequence[bytes | None], count: int,
                     available: Sequence[int], lens: list[int] | None = None) -> dict[int, list[int]]:
        """All records keyless and unplaced: runs of batch.size bytes to one sticky partition each (KIP-794),
        the run ends found without a step per record."""
        out: dict[int, list[int]] = {}
        part = self.partitioner
        if lens is None:  # null values among them
            lens = [0 if v is None else len(v) for v in values]
        i = 0
        positions = _positions(len(lens))
        for j in sticky_run_ends(lens, self.batch_size):
            p = part.partition(topic, None, count, available)
            out.setdefault(p, []).extend(positions[i:j])
            part.record_appended(topic, p, sum(lens[i:j]) + STICKY_RECORD_FRAMING * (j - i))
            i = j
        return out


# 0, 1, 2, ... as int objects made once: a run's indices are a slice of it, where extend(range(i, j)) made a new
# int per record past 256 (three quarters of the sticky runs' time in a send_batch() of 10,000 records).
_POSITIONS: list[int] = list(range(1 << 16))


def _positions(n: int) -> list[int]:
    global _POSITIONS
    if n > len(_POSITIONS):
        _POSITIONS = list(range(max(n, 2 * len(_POSITIONS))))  # a new list: a reader may hold the old one
    return _POSITIONS


class RoundRobinPartitioner:
    def __init__(self) -> None:
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int:
        with self._lock:
            n = self._counters.get(topic, 0)
            self._counters[topic] = n + 1
        choices = available or range(num_partitions)
        return choices[n % len(choices)]

    def record_appended(self, topic: str, partition: int, nbytes: int) -> None:
        pass


class RandomPartitioner(RoundRobinPartitioner):
    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int:
        return random.choice(available or range(num_partitions))


UserPartitioner = Callable[[bytes | None, list[int], list[int]], int]


class CallablePartitioner:
    """A user's function with kafka-python's signature: fn(key_bytes, all_partitions, available) -> int."""

    def __init__(self, fn: UserPartitioner) -> None:
        # Returning object, not UserPartitioner's int: whatever the user's function returns reaches the check in
        # partition() (compiled, an int-returning callable would raise mypyc's own TypeError first).
        self.fn: Callable[..., object] = fn

    def partition(self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]) -> int:
        p = self.fn(key, list(range(num_partitions)), list(available))
        if type(p) is not int or not 0 <= p < num_partitions:
            raise KafkaError(
                f"the partitioner {self.fn!r} returned {p!r} for topic '{topic}', which has partitions "
                f"0..{num_partitions - 1}")
        return p

    def record_appended(self, topic: str, partition: int, nbytes: int) -> None:
        pass


BUILTIN_NAMES = ("default", "round_robin", "random")


def resolve_partitioner(spec: str | UserPartitioner, batch_size: int, ignore_keys: bool = False) -> Partitioner:
    if callable(spec):
        return CallablePartitioner(spec)
    if spec == "default":
        return DefaultPartitioner(batch_size, ignore_keys)
    if spec == "round_robin":
        return RoundRobinPartitioner()
    if spec == "random":
        return RandomPartitioner()
    raise ConfigError(f"partitioner={spec!r} is not a callable or one of {', '.join(BUILTIN_NAMES)}")
