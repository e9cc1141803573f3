"""Records with a per-key sequence number, the checks on what came back, and a thread that moves leaders."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from kafkajet import Producer
from kafkajet.fetch import FetchClient
from kafkajet.producer.futures import RecordMetadata
from kafkajet.protocol import ApiKey
from kafkajet.records.batch import RecordBatch, decode_batches
from tests.helpers.rdkafka_mock import RdkafkaMockCluster
from tests.helpers.readback import ReadRecord

TOPIC_PARTITIONS = 6
PRODUCE = int(ApiKey.PRODUCE)  # api keys, as the mock's error injection and request tracking take them
INIT_PRODUCER_ID = int(ApiKey.INIT_PRODUCER_ID)


def stored_batches(mock: RdkafkaMockCluster, topic: str, partitions: int) -> dict[int, list[RecordBatch]]:
    """The record batches as the mock stores them (it keeps what the producer sent), per partition: what
    confluent-kafka's consumer does not show (codec, producer id, epoch, sequence)."""
    with FetchClient(bootstrap_servers=mock.bootstraps) as fc:
        return {p: decode_batches(fc._fetch(topic, p, 0, 8 << 20, 100)["record_set"] or b"", allow_partial_tail=True)
                for p in range(partitions)}


def make_records(n: int, keys: int, value_size: int = 60, tag: str = "") -> list[tuple[bytes, bytes]]:
    """(key, value) pairs; each value carries its key's running number, so order is checkable per key, and
    starts with `tag` (no colon), to tell rounds apart."""
    seq: dict[int, int] = defaultdict(int)
    out = []
    for i in range(n):
        k = i % keys
        head = f"{tag}k{k:04d}:{seq[k]:07d}:".encode()
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
                read: Sequence[ReadRecord], *, order: bool = True) -> None:
    """Every record stored once, where its metadata says, and (unless `order` is off) each key's records in
    send order."""
    stored = {(r.partition, r.offset): (r.key, r.value) for r in read}
    assert len(stored) == len(read)
    assert len(read) == len(sent), f"{len(read)} records stored for {len(sent)} sent"
    misplaced = [(i, md.partition, md.offset) for i, (rec, md) in enumerate(zip(sent, metas, strict=True))
                 if stored.get((md.partition, md.offset)) != rec]
    assert not misplaced, f"{len(misplaced)} records not at the offset their metadata gave, e.g. {misplaced[:3]}"
    inversions = order_inversions(read) if order else []
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

    def stop(self) -> None:
        """No more moves (already made ones stand): a retry then finds its leader where metadata says."""
        self._stop.set()

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


@contextmanager
def bounded_producer(mock: RdkafkaMockCluster, **config: object) -> Iterator[Producer]:
    """A producer on the mock whose close is bounded: a failing test must not wait out delivery.timeout.ms."""
    # A producer that cannot talk to the mock at all fails in 15 s with the cause, not at the test's timeout.
    p = Producer(bootstrap_servers=mock.bootstraps, **{"max_block_ms": 15_000, **config})
    try:
        yield p
    finally:
        p.close(10)


def produce(mock: RdkafkaMockCluster, topic: str, records: list[tuple[bytes, bytes]], *, pace_s: float = 0.0,
            chunks: int = 1, metrics: dict[str, float] | None = None, after_sends: Callable[[], object] | None = None,
            **config: object) -> list[RecordMetadata]:
    """Send `records` in `chunks` (pausing `pace_s` between them, so faults meet a producer at work); the
    metadata of each, in order. Raises the first failure. `after_sends` runs once everything is sent, before
    the flush; the producer's metrics go into `metrics`."""
    with bounded_producer(mock, **config) as p:
        futures = []
        step = -(-len(records) // chunks)
        for start in range(0, len(records), step):
            futures += [p.send(topic, value=v, key=k) for k, v in records[start:start + step]]
            if pace_s:
                time.sleep(pace_s)  # pacing the load, not waiting for an outcome
        if after_sends is not None:
            after_sends()
        p.flush(60)
        if metrics is not None:
            metrics.update(p.metrics())
        return [f.result(timeout=5) for f in futures]
