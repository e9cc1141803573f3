"""The failure-path suite: kafkajet's Producer against a MockCluster that misbehaves, every record accounted for.

Each scenario sends 50,000 records (keyed and keyless, some with headers, 6 partitions, 4 sending threads) while
a driver injects faults, then reconciles every record: delivered (its future resolved) and found in the log
exactly once at the offset the future named, or failed with a named cause -- never both, never neither -- and
checks each thread's records kept their send order within a partition.

`pytest -m reliability -s` prints one table row per scenario at the end of the module.
"""

from __future__ import annotations

import os
import random
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkajet.errors import BrokerError, KafkaTimeoutError
from kafkajet.producer.producer import Producer
from kafkajet.protocol import RequestHeader
from kafkajet.testing import MockCluster
from kafkajet.testing.mock import after_append
from tests.helpers.waiting import wait_for

TOPIC = "reliability"
PARTITIONS = 6

pytestmark = [pytest.mark.reliability, pytest.mark.mock_cluster(brokers=3, topics={TOPIC: PARTITIONS})]
RECORDS = 50_000
THREADS = 4

# Shorter than the defaults so a scenario takes seconds; ratios as in production (request < delivery).
BASE_CONFIG: dict[str, Any] = {
    "linger_ms": 5, "request_timeout_ms": 3000, "delivery_timeout_ms": 30_000, "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 200, "reconnect_backoff_ms": 20, "reconnect_backoff_max_ms": 200,
    "max_block_ms": 30_000,
}


# --- the table -------------------------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    records: int
    delivered: int
    failed: Counter[str]
    duplicated: int
    reordered: int
    failed_but_stored: int
    seconds: float


_ROWS: list[Row] = []


@pytest.fixture(scope="module", autouse=True)
def table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if not _ROWS:
        return
    head = (f"{'scenario':<34} {'records':>8} {'delivered':>9} {'dup':>5} {'reord':>5} {'fail+log':>8} "
            f"{'secs':>6}  failed by cause")
    lines = ["", "reliability suite (kafkajet Producer vs MockCluster)", head, "-" * len(head)]
    for r in _ROWS:
        causes = ", ".join(f"{c}={n}" for c, n in sorted(r.failed.items())) or "-"
        lines.append(f"{r.scenario:<34} {r.records:>8} {r.delivered:>9} {r.duplicated:>5} {r.reordered:>5} "
                     f"{r.failed_but_stored:>8} {r.seconds:>6.1f}  {causes}")
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print("\n".join(lines))
    else:
        print("\n".join(lines))


# --- sending and accounting ------------------------------------------------------------------------------


@dataclass
class Sent:
    thread: int
    value: bytes
    outcome: Future[Any] | BaseException  # a send() that raised keeps its exception


@dataclass
class Progress:
    counts: list[int] = field(default_factory=lambda: [0] * THREADS)
    refused: list[int] = field(default_factory=lambda: [0] * THREADS)  # send() calls that raised, per thread

    @property
    def sent(self) -> int:
        return sum(self.counts)

    def wait_sent(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.sent < n:
            assert time.monotonic() < deadline, f"only {self.sent} of {n} records sent within {timeout} s"
            time.sleep(0.005)


def record_for(scenario: str, thread: int, i: int) -> tuple[bytes | None, bytes, list[tuple[str, bytes]] | None]:
    key = f"user-{(i * 7 + thread) % 500}".encode() if i % 2 == 0 else None
    value = f"{scenario}|{thread}|{i}|".encode().ljust(64, b".")
    headers = [("i", str(i).encode())] if i % 5 == 0 else None
    return key, value, headers


def send_from_threads(producer: Producer, scenario: str, progress: Progress, n: int, rate: float | None,
                      ) -> tuple[list[list[Sent]], list[threading.Thread]]:
    per_thread = n // THREADS
    sent: list[list[Sent]] = [[] for _ in range(THREADS)]
    start = time.monotonic()

    def run(t: int) -> None:
        out = sent[t]
        for i in range(per_thread):
            if rate is not None:
                # Paced so the faults land mid-stream rather than after a burst.
                due = start + i * THREADS / rate
                ahead = due - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            key, value, headers = record_for(scenario, t, i)
            try:
                out.append(Sent(t, value, producer.send(TOPIC, value=value, key=key, headers=headers)))
            except Exception as e:
                out.append(Sent(t, value, e))
                progress.refused[t] += 1
            progress.counts[t] = i + 1

    threads = [threading.Thread(target=run, args=(t,), name=f"sender-{t}") for t in range(THREADS)]
    for th in threads:
        th.start()
    return sent, threads


def cause_of(exc: BaseException) -> str:
    """A named cause: the broker error's name, and for timeouts the underlying cause after an arrow."""
    name = exc.name if isinstance(exc, BrokerError) else type(exc).__name__
    if isinstance(exc, KafkaTimeoutError) and exc.cause is not None:
        return f"{name}<-{cause_of(exc.cause)}"
    return name


@dataclass
class Accounting:
    row: Row
    missing: int = 0  # delivered per its future but absent from the log, or never resolved
    phantom: int = 0  # in the log but never sent
    wrong_offset: int = 0
    failed_partitions: set[int] = field(default_factory=set)
    errors: list[BaseException] = field(default_factory=list)


def account(cluster: MockCluster, scenario: str, sent: list[list[Sent]], seconds: float) -> Accounting:
    in_log: dict[bytes, list[tuple[int, int]]] = {}
    for p in range(PARTITIONS):
        for r in cluster.records(TOPIC, p):
            assert r.value is not None
            in_log.setdefault(r.value, []).append((p, r.offset))
    total = sum(len(s) for s in sent)
    acc = Accounting(Row(scenario, total, 0, Counter(), 0, 0, 0, seconds))
    row = acc.row
    seen: set[bytes] = set()
    for thread_sent in sent:
        last_offset: dict[int, int] = {}
        for s in thread_sent:
            seen.add(s.value)
            where = in_log.get(s.value, [])
            if isinstance(s.outcome, BaseException):
                exc: BaseException | None = s.outcome
            elif not s.outcome.done():
                acc.missing += 1
                continue
            else:
                exc = s.outcome.exception()
            if exc is not None:
                row.failed[cause_of(exc)] += 1
                acc.errors.append(exc)
                if where:
                    row.failed_but_stored += 1
                    acc.failed_partitions.add(where[0][0])
                continue
            assert not isinstance(s.outcome, BaseException)
            md = s.outcome.result()
            row.delivered += 1
            if not where:
                acc.missing += 1
                continue
            row.duplicated += len(where) - 1
            if (md.partition, md.offset) not in where:
                acc.wrong_offset += 1
                continue
            previous = last_offset.get(md.partition)
            if previous is not None and md.offset < previous:
                row.reordered += 1
            last_offset[md.partition] = md.offset
    acc.phantom = sum(len(v) for k, v in in_log.items() if k not in seen)
    _ROWS.append(row)
    return acc


def run_scenario(cluster: MockCluster, scenario: str, *, config: dict[str, Any] | None = None,
                 driver: Callable[[Progress, Producer], None] | None = None, rate: float | None = None,
                 n: int = RECORDS, close_timeout: float | None = 60) -> Accounting:
    """Send n records from THREADS threads while `driver` injects faults, close the producer, account."""
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, **{**BASE_CONFIG, **(config or {})})
    progress = Progress()
    start = time.monotonic()
    try:
        sent, threads = send_from_threads(producer, scenario, progress, n, rate)
        try:
            if driver is not None:
                driver(progress, producer)
        finally:
            for th in threads:
                th.join(120)
        assert not any(th.is_alive() for th in threads), "a sending thread hung"
    finally:
        producer.close(close_timeout)
    return account(cluster, scenario, sent, time.monotonic() - start)


def assert_exact(acc: Accounting, *, failures: set[str] | None = None, duplicates_allowed: bool = False,
                 reorder_allowed: bool = False, failed_but_stored_allowed: bool = False) -> None:
    row = acc.row
    assert acc.missing == 0, f"{acc.missing} records delivered per their future but missing, or unresolved"
    assert acc.phantom == 0, f"{acc.phantom} records in the log that were never sent"
    assert acc.wrong_offset == 0, f"{acc.wrong_offset} futures named an offset the record is not at"
    assert row.delivered + sum(row.failed.values()) == row.records
    unexpected = {c: n for c, n in row.failed.items() if not any(c.startswith(f) for f in failures or ())}
    assert not unexpected, f"unexpected failures: {unexpected}; first: {acc.errors[:1]}"
    if not duplicates_allowed:
        assert row.duplicated == 0, f"{row.duplicated} duplicates"
    if not reorder_allowed:
        assert row.reordered == 0, f"{row.reordered} records out of send order"
    if not failed_but_stored_allowed:
        assert row.failed_but_stored == 0, f"{row.failed_but_stored} records both failed and stored"


def rotate_leaders(cluster: MockCluster) -> None:
    for p in range(PARTITIONS):
        cluster.set_leader(TOPIC, p, cluster.leader(TOPIC, p) % len(cluster.broker_ids) + 1)


def at_milestones(progress: Progress, count: int, action: Callable[[int], None], n: int = RECORDS) -> None:
    """Call action(k) for k in 0..count-1 as sending passes evenly spaced points of the stream."""
    for k in range(count):
        progress.wait_sent((k + 1) * n // (count + 2))
        action(k)


# --- scenarios -------------------------------------------------------------------------------------------


def test_baseline(cluster: MockCluster) -> None:
    assert_exact(run_scenario(cluster, "baseline (no faults)"))


def test_leader_moves_mid_stream(cluster: MockCluster) -> None:
    def driver(progress: Progress, _: Producer) -> None:
        at_milestones(progress, 5, lambda k: rotate_leaders(cluster))

    acc = run_scenario(cluster, "leader moves x5", driver=driver, rate=25_000)
    assert cluster.stats().get("NOT_LEADER_OR_FOLLOWER", 0) > 0, "no request reached an old leader"
    assert_exact(acc)


RETRIABLE = ["NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "REQUEST_TIMED_OUT", after_append("REQUEST_TIMED_OUT"),
             "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "CORRUPT_MESSAGE"]

# Regression guard: a pipelined batch answered OUT_OF_ORDER_SEQUENCE_NUMBER because its predecessor is
# being retried must itself be retried (Java's lastAckedSequence + 1 rule), not failed with an epoch bump
# that re-sends appended batches as duplicates.


def _push_retriable(cluster: MockCluster) -> Callable[[Progress, Producer], None]:
    def driver(progress: Progress, _: Producer) -> None:
        at_milestones(progress, 4, lambda k: cluster.push_request_errors("Produce", RETRIABLE))

    return driver


def test_retriable_errors_injected_one_in_flight(cluster: MockCluster) -> None:
    acc = run_scenario(cluster, "retriable errors x4, 1 in flight", driver=_push_retriable(cluster),
                       rate=25_000, config={"max_in_flight_requests_per_connection": 1})
    assert cluster.pending_faults("Produce") == 0
    assert cluster.stats().get("duplicate_batches", 0) > 0, "no retry of an appended batch was recognised"
    assert_exact(acc)


def test_retriable_errors_injected_pipelined(cluster: MockCluster) -> None:
    # A real network's latency keeps several requests per connection in flight when an error comes back.
    for b in cluster.broker_ids:
        cluster.set_rtt(b, 20)
    acc = run_scenario(cluster, "retriable errors x4, 5 in flight", driver=_push_retriable(cluster),
                       rate=25_000)
    assert cluster.pending_faults("Produce") == 0
    assert_exact(acc)


def test_drop_after_append_idempotent(cluster: MockCluster) -> None:
    def driver(progress: Progress, _: Producer) -> None:
        at_milestones(progress, 5, lambda k: cluster.drop_after_append("Produce"))

    acc = run_scenario(cluster, "drop after append, idempotent", driver=driver, rate=25_000)
    assert cluster.pending_faults("Produce") == 0
    assert_exact(acc)


def test_drop_after_append_without_idempotence(cluster: MockCluster) -> None:
    def driver(progress: Progress, _: Producer) -> None:
        at_milestones(progress, 5, lambda k: cluster.drop_after_append("Produce"))

    acc = run_scenario(cluster, "drop after append, no idempotence", driver=driver, rate=25_000,
                       config={"enable_idempotence": False})
    assert cluster.pending_faults("Produce") == 0
    # What idempotence exists to prevent: each appended-but-unanswered batch is written twice.
    assert acc.row.duplicated > 0
    assert_exact(acc, duplicates_allowed=True, reorder_allowed=True)


def test_broker_down_longer_than_delivery_timeout(cluster: MockCluster) -> None:
    down = cluster.leader(TOPIC, 0)
    affected = {p for t, p in cluster.partitions_led_by(down)}
    healthy_acked_while_down: list[int] = []
    # Half the usual records at half the rate, and 4 s to deliver: on a machine that runs the whole suite
    # this process (producer and cluster) got so little CPU that a healthy partition's batch once waited
    # 3 s. The CPU asked for is halved and the time allowed grows, so only the down broker's batches expire.
    n = RECORDS // 2

    def driver(progress: Progress, producer: Producer) -> None:
        progress.wait_sent(n // 5)
        # The broker dies with requests in flight that it never handled (not just between requests).
        dying = cluster.control("Produce", lambda h, b, broker_id: "drop" if broker_id == down else None)
        progress.wait_sent(n // 5 + 2000)
        cluster.broker_down(down)
        cluster.remove_control(dying)
        before = cluster.record_count(TOPIC)
        # Down until what was sent to it has expired (past delivery.timeout.ms) while the healthy brokers went
        # on taking records: both are conditions with a deadline, not a length of time.
        wait_for(lambda: producer.metrics()["record-error-total"] > 0, 30, "a record for the down broker to expire")
        cluster.wait_until(lambda: cluster.record_count(TOPIC) - before > 1000, timeout=30,
                           what="healthy partitions to take 1,000 records while one broker is down")
        healthy_acked_while_down.append(cluster.record_count(TOPIC) - before)
        cluster.broker_up(down)

    acc = run_scenario(cluster, "broker down past delivery 4 s", driver=driver, rate=4_000, n=n,
                       config={"delivery_timeout_ms": 4000, "request_timeout_ms": 1000})
    assert healthy_acked_while_down[0] > 1000, "healthy partitions stalled while one broker was down"
    assert acc.row.failed, "nothing expired although the broker was down past delivery.timeout.ms"
    for exc in acc.errors:
        assert isinstance(exc, KafkaTimeoutError) and exc.cause is not None, exc
    # Only the down broker's partitions fail.
    failed_partitions = {s for s in _failed_partitions(acc)}
    assert failed_partitions <= affected
    # A batch in flight when the connection dropped may be written and still expire (Java does the same).
    assert_exact(acc, failures={"DeliveryTimeoutError"}, failed_but_stored_allowed=True)


def _failed_partitions(acc: Accounting) -> set[int]:
    out = set()
    for exc in acc.errors:
        text = str(exc)
        for p in range(PARTITIONS):
            if f"{TOPIC}-{p}" in text:
                out.add(p)
    return out


def test_slow_broker_beyond_request_timeout(cluster: MockCluster) -> None:
    slow = cluster.leader(TOPIC, 1)

    def driver(progress: Progress, _: Producer) -> None:
        progress.wait_sent(RECORDS // 5)
        cluster.set_rtt(slow, 1500)
        progress.wait_sent(RECORDS // 2)
        cluster.set_rtt(slow, 0)

    acc = run_scenario(cluster, "slow broker rtt 1.5 s > req 1 s", driver=driver, rate=10_000,
                       config={"request_timeout_ms": 1000})
    assert_exact(acc)


# Regression guard: on MESSAGE_TOO_LARGE a batch must really shrink (halve), even when the broker's limit
# is below batch.size, and its parts must keep send order among retried batches.


def test_message_too_large_is_split(cluster: MockCluster) -> None:
    cluster.config.max_message_bytes = 3000  # smaller than the producer's 16 KiB batches
    # delivery.timeout.ms only bounds the run should splitting stall; it measures scheduling otherwise (the
    # pure build took 35 s of the 30 s it once had at a load of 15 on 2 cores). A batch that is not split fails
    # with MESSAGE_TOO_LARGE at once, whatever this is.
    acc = run_scenario(cluster, "MESSAGE_TOO_LARGE -> split", rate=50_000,
                       config={"delivery_timeout_ms": 120_000, "max_block_ms": 120_000})
    assert cluster.stats().get("MESSAGE_TOO_LARGE", 0) > 0
    assert_exact(acc)


def test_sequence_errors_injected(cluster: MockCluster) -> None:
    def driver(progress: Progress, _: Producer) -> None:
        at_milestones(progress, 3, lambda k: cluster.push_request_errors(
            "Produce", ["UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"]))

    acc = run_scenario(cluster, "OUT_OF_ORDER / UNKNOWN_PRODUCER_ID", driver=driver, rate=25_000)
    # UNKNOWN_PRODUCER_ID is retried under a new epoch; OUT_OF_ORDER fails the batch with that cause when it
    # was the partition's next sequence (the Java producer's rule), else it is retried.
    assert cluster.pending_faults("Produce") == 0
    assert_exact(acc, failures={"OUT_OF_ORDER_SEQUENCE_NUMBER"})


def _garbage(kind: int) -> Callable[[RequestHeader], bytes]:
    rng = random.Random(kind)

    def build(h: RequestHeader) -> bytes:
        if kind == 0:  # random bytes in a well-formed frame
            body = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200)))
            return struct.pack(">i", len(body)) + body
        if kind == 1:  # the right correlation id, then a truncated body
            return struct.pack(">ii", 40, h.correlation_id) + b"\x00\x00\x00\x01"
        if kind == 2:  # somebody else's correlation id
            return struct.pack(">ii", 4, h.correlation_id + 1000)
        return struct.pack(">i", 0x7FFFFFF0) + os.urandom(16)  # a frame larger than any client allows

    return build


def test_garbage_from_a_broker(cluster: MockCluster) -> None:
    def driver(progress: Progress, _: Producer) -> None:
        at_milestones(progress, 8, lambda k: cluster.inject_response_bytes("Produce", _garbage(k % 4)))

    acc = run_scenario(cluster, "garbage responses x8", driver=driver, rate=25_000,
                       config={"request_timeout_ms": 1500})
    assert cluster.pending_faults("Produce") == 0
    assert_exact(acc)


def test_buffer_full_while_cluster_down(cluster: MockCluster) -> None:
    def driver(progress: Progress, producer: Producer) -> None:
        progress.wait_sent(1000)
        for b in cluster.broker_ids:
            cluster.broker_down(b)
        # Down until the buffer has filled and send() has refused records after max.block.ms.
        wait_for(lambda: sum(progress.refused) > 0, 30, "send() to refuse a record after max.block.ms")
        for b in cluster.broker_ids:
            cluster.broker_up(b)

    acc = run_scenario(cluster, "buffer full while cluster down", driver=driver, rate=50_000,
                       config={"buffer_memory": 256 * 1024, "max_block_ms": 400})
    assert acc.row.failed.get("BufferExhaustedError", 0) > 0
    assert_exact(acc, failures={"BufferExhaustedError"})


def test_close_with_timeout_while_cluster_down(cluster: MockCluster) -> None:
    closed_in: list[float] = []

    def driver(progress: Progress, producer: Producer) -> None:
        progress.wait_sent(2000)
        for b in cluster.broker_ids:
            cluster.broker_down(b)
        progress.wait_sent(RECORDS)
        start = time.monotonic()
        producer.close(timeout=1.0)
        closed_in.append(time.monotonic() - start)

    acc = run_scenario(cluster, "close(1 s) while cluster down", driver=driver, close_timeout=1.0)
    for b in cluster.broker_ids:
        cluster.broker_up(b)
    assert closed_in[0] < 1.0 + 5.0, f"close(1.0) took {closed_in[0]:.1f} s"
    assert sum(acc.row.failed.values()) > 0
    assert_exact(acc, failures={"ProducerClosedError", "DeliveryTimeoutError"}, failed_but_stored_allowed=True)
