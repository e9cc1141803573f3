"""Records with a per-key sequence number, the checks on what came back, and a thread that moves leaders."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafkajet.producer.futures import RecordMetadata
from tests.helpers.rdkafka_mock import RdkafkaMockCluster
from tests.helpers.readback import ReadRecord

TOPIC_PARTITIONS = 6
PRODUCE = 0  # api keys, as the mock's error injection takes them
INIT_PRODUCER_ID = 22


def make_records(n: int, keys: int, value_size: int = 60) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs; each value carries its key's running number, so order is checkable per key."""
    seq: dict[int, int] = defaultdict(int)
    out = []
    for i in range(n):
        k = i % keys
        head = f"k{k:04d}:{seq[k]:07d}:".encode()
        seq[k] += 1
        out.append((f"k{k:04d}".encode(), head + b"x" * max(0, value_size - len(head))))
    return out


def order_inversions(read: Sequence[ReadRecord]) -> list[str]:
    """Every place where a key's records are stored out of send order (by offset within their partition)."""
    by_key: dict[bytes | None, list[ReadRecord]] = defaultdict(list)
    for r in sorted(read, key=lambda r: (r.partition, r.offset)):
        by_key[r.key].append(r)
    bad = []
    for key, recs in by_key.items():
        seqs = [int(r.value.split(b":")[1]) for r in recs if r.value is not None]
        bad += [f"{key!r}: #{a} stored before #{b} in partition {recs[0].partition}"
                for a, b in zip(seqs, seqs[1:], strict=False) if b < a]
    return bad


def check_exact(sent: Sequence[tuple[bytes, bytes]], metas: Sequence[RecordMetadata],
                read: Sequence[ReadRecord]) -> None:
    """Every record stored once, where its metadata says, and each key's records in send order."""
    stored = {(r.partition, r.offset): (r.key, r.value) for r in read}
    assert len(stored) == len(read)
    assert len(read) == len(sent), f"{len(read)} records stored for {len(sent)} sent"
    misplaced = [(i, md.partition, md.offset) for i, (rec, md) in enumerate(zip(sent, metas, strict=True))
                 if stored.get((md.partition, md.offset)) != rec]
    assert not misplaced, f"{len(misplaced)} records not at the offset their metadata gave, e.g. {misplaced[:3]}"
    inversions = order_inversions(read)
    assert not inversions, f"{len(inversions)} per-key order inversions: {inversions[:5]}"


@dataclass
class LeaderMover:
    """Moves every partition's leader to the next broker every `interval_s` until stopped."""

    mock: RdkafkaMockCluster
    topic: str
    partitions: int
    interval_s: float = 0.2
    moves: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def __enter__(self) -> LeaderMover:
        self._thread = threading.Thread(target=self._run, name="leader-mover", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), "the leader mover did not stop"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        brokers = self.mock.broker_ids
        try:
            while not self._stop.wait(self.interval_s):
                self.moves += 1
                for p in range(self.partitions):
                    self.mock.set_leader(self.topic, p, brokers[(p + self.moves) % len(brokers)])
        except BaseException as e:  # reported by __exit__ on the test's thread
            self.error = e


@dataclass
class BrokerOutage:
    """Takes one broker down `after_s` into the block and brings it back `down_s` later (on its own thread)."""

    mock: RdkafkaMockCluster
    broker_id: int
    after_s: float
    down_s: float
    done: bool = False
    error: BaseException | None = None
    produce_before: int = 0  # Produce requests the broker had received when it went down
    produce_after: int = 0  # ... and when the block ended
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _produce_requests(self) -> int:
        return sum(1 for r in self.mock.requests() if r.broker_id == self.broker_id and r.api_key == PRODUCE)

    def __enter__(self) -> BrokerOutage:
        self.mock.start_request_tracking()
        self._thread = threading.Thread(target=self._run, name="broker-outage", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._thread is not None
        self._thread.join(timeout=self.after_s + self.down_s + 10)
        assert not self._thread.is_alive(), "the outage thread did not finish"
        if self.error is not None:
            raise self.error
        self.produce_after = self._produce_requests()

    def _run(self) -> None:
        try:
            self._stop.wait(self.after_s)
            self.mock.broker_down(self.broker_id)
            self.produce_before = self._produce_requests()
            self._stop.wait(self.down_s)
            self.mock.broker_up(self.broker_id)
            self.done = True
        except BaseException as e:  # reported by __exit__ on the test's thread
            self.error = e
