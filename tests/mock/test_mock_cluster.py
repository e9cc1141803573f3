"""MockCluster against independent clients: kafka-python and confluent-kafka (librdkafka) produce into it and
read back from it, and its fault hooks act on them as a real broker's failures would."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from kafkajet.protocol import RequestHeader
from kafkajet.testing import MockCluster
from tests.helpers.waiting import wait_for

TOPIC = "interop"
PARTITIONS = 6

pytestmark = pytest.mark.mock_cluster(brokers=3, topics={TOPIC: PARTITIONS})
N = 10_000


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def workload(n: int, tag: str = "") -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    """Half keyed, half keyless; every third record carries headers."""
    out = []
    for i in range(n):
        key = f"key-{i % 97}".encode() if i % 2 == 0 else None
        headers = [("seq", str(i).encode()), ("tag", b"x")] if i % 3 == 0 else []
        out.append((key, f"{tag}value-{i}".encode(), headers))
    return out


def content(recs: list[Rec]) -> Counter[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    return Counter((r.key, r.value, r.headers) for r in recs)


def sent_content(sent: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]) -> Counter[Any]:
    return Counter((k, v, tuple(h)) for k, v, h in sent)


def stored(cluster: MockCluster, topic: str = TOPIC) -> list[Rec]:
    return [Rec(p, r.offset, r.key, r.value, tuple(r.headers))
            for p in range(cluster.topics()[topic]) for r in cluster.records(topic, p)]


def assert_contiguous(recs: list[Rec]) -> None:
    by_partition: dict[int, list[int]] = {}
    for r in recs:
        by_partition.setdefault(r.partition, []).append(r.offset)
    for p, offsets in by_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {p} offsets are not 0..n-1"


# --- producers -----------------------------------------------------------------------------------------


def produce_confluent(bootstrap: str, records: list[Any], config: dict[str, Any] | None = None,
                      topic: str = TOPIC) -> None:
    errors: list[Any] = []
    delivered = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(err)
        else:
            delivered += 1

    p = CkProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3, **(config or {})})
    deadline = time.monotonic() + 60
    for key, value, headers in records:
        while True:
            try:
                p.produce(topic, key=key, value=value, headers=ck_headers(headers), on_delivery=on_delivery)
                break
            except BufferError:
                assert time.monotonic() < deadline, "confluent-kafka's queue stayed full for 60 s"
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0, "confluent-kafka did not deliver everything within 60 s"
    assert errors == [] and delivered == len(records)


def produce_kafka_python(bootstrap: str, records: list[Any], topic: str = TOPIC, **config: Any) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    try:
        futures = [p.send(topic, key=k, value=v, headers=h) for k, v, h in records]
        p.flush(60)
        for f in futures:
            f.get(timeout=0)  # raises if a record failed
    finally:
        p.close(timeout=10)


def ck_headers(headers: list[tuple[str, bytes]]) -> Any:
    return headers or None


# --- consumers -----------------------------------------------------------------------------------------


def read_kafka_python(bootstrap: str, expected: int, topic: str = TOPIC, timeout: float = 60) -> list[Rec]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, check_crcs=True, enable_auto_commit=False)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected:
            assert time.monotonic() < deadline, f"kafka-python read {len(out)} of {expected}"
            for tp, msgs in c.poll(timeout_ms=500, max_records=50_000).items():
                out.extend(Rec(tp.partition, m.offset, m.key, m.value, tuple(m.headers)) for m in msgs)
        return out
    finally:
        c.close()


def read_confluent(bootstrap: str, expected: int, topic: str = TOPIC, timeout: float = 60) -> list[Rec]:
    # assign() with explicit offsets and no commits: librdkafka then needs no group coordinator, and the
    # cluster does not serve FindCoordinator (it is not in ApiVersions, so librdkafka never asks).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mock-readback", "enable.auto.commit": False,
                  "check.crcs": True, "log_level": 3})
    try:
        c.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected:
            assert time.monotonic() < deadline, f"confluent-kafka read {len(out)} of {expected}"
            for m in c.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                partition, offset = m.partition(), m.offset()
                assert partition is not None and offset is not None
                raw_headers: Any = m.headers() or ()
                headers = tuple((str(k), v) for k, v in raw_headers)
                out.append(Rec(partition, offset, m.key(), m.value(), headers))
        return out
    finally:
        c.close()


PRODUCERS: dict[str, Callable[[str, list[Any]], None]] = {
    "confluent-idempotent": lambda b, r: produce_confluent(b, r, {"enable.idempotence": True}),
    "confluent-plain": lambda b, r: produce_confluent(b, r, {"enable.idempotence": False, "acks": 1}),
    "kafka-python-idempotent": lambda b, r: produce_kafka_python(b, r, enable_idempotence=True),
    "kafka-python-plain": lambda b, r: produce_kafka_python(b, r, enable_idempotence=False, acks=1),
}


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_independent_clients_write_and_read_back_exactly(cluster: MockCluster, producer: str) -> None:
    records = workload(N)
    PRODUCERS[producer](cluster.bootstrap_servers, records)
    in_log = stored(cluster)
    assert content(in_log) == sent_content(records)
    assert_contiguous(in_log)
    assert len({r.partition for r in in_log}) == PARTITIONS
    batches = [b for p in range(PARTITIONS) for b in cluster.batches(TOPIC, p)]
    if producer.endswith("idempotent"):
        assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
        for p in range(PARTITIONS):
            seqs = [(b.base_sequence, b.records_count) for b in cluster.batches(TOPIC, p)]
            expected_seq = 0
            for base, count in seqs:
                assert base == expected_seq
                expected_seq += count
    else:
        assert {b.producer_id for b in batches} == {-1}

    for reader in (read_kafka_python, read_confluent):
        got = reader(cluster.bootstrap_servers, N)
        assert sorted(got, key=lambda r: (r.partition, r.offset)) == sorted(
            in_log, key=lambda r: (r.partition, r.offset)), reader.__name__


# --- faults with independent clients -------------------------------------------------------------------


def test_confluent_follows_a_leader_move(cluster: MockCluster) -> None:
    """Leaders of every partition move while librdkafka produces: NOT_LEADER_OR_FOLLOWER, refresh, resend."""
    misdirected: list[int] = []

    def watch(header: RequestHeader, body: dict[str, Any], broker_id: int) -> None:
        for t in body["topic_data"]:
            for p in t["partition_data"]:
                if cluster.leader(t["name"], p["index"]) != broker_id:
                    misdirected.append(p["index"])
        return None

    cluster.control("Produce", watch)
    first, second = workload(2000, "a-"), workload(2000, "b-")
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    p = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5,
                    "log_level": 3})
    for k, v, h in first:
        p.produce(TOPIC, key=k, value=v, headers=ck_headers(h), on_delivery=on_delivery)
    assert p.flush(30) == 0
    for part in range(PARTITIONS):
        cluster.set_leader(TOPIC, part, cluster.leader(TOPIC, part) % 3 + 1)
    for k, v, h in second:
        p.produce(TOPIC, key=k, value=v, headers=ck_headers(h), on_delivery=on_delivery)
    assert p.flush(30) == 0
    assert errors == []
    assert misdirected, "librdkafka never hit the old leader, so NOT_LEADER_OR_FOLLOWER was not exercised"
    in_log = stored(cluster)
    assert content(in_log) == sent_content(first + second)
    assert_contiguous(in_log)


def test_kafka_python_retries_pushed_errors_and_loses_nothing(cluster: MockCluster) -> None:
    errors = ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "LEADER_NOT_AVAILABLE"]
    cluster.push_request_errors("Produce", errors)
    records = workload(3000)
    produce_kafka_python(cluster.bootstrap_servers, records, enable_idempotence=False, retries=10,
                         retry_backoff_ms=10, max_in_flight_requests_per_connection=1)
    assert cluster.pending_faults("Produce") == 0, "the pushed errors were never consumed"
    assert all(cluster.stats().get(e, 0) >= 1 for e in errors)
    in_log = stored(cluster)
    assert content(in_log) == sent_content(records)  # errors answered before any append: no duplicates
    assert_contiguous(in_log)


def test_drop_after_append_duplicates_without_idempotence(cluster: MockCluster) -> None:
    cluster.drop_after_append("Produce", count=1)
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=False, acks=1, retries=5,
                      retry_backoff_ms=10, max_in_flight_requests_per_connection=1)
    try:
        p.send(TOPIC, value=b"only-once?", partition=0).get(timeout=30)
    finally:
        p.close(timeout=10)
    assert [r.value for r in cluster.records(TOPIC, 0)] == [b"only-once?", b"only-once?"]


def test_drop_after_append_no_duplicate_with_idempotent_confluent(cluster: MockCluster) -> None:
    cluster.drop_after_append("Produce", count=2)
    records = workload(500)
    produce_confluent(cluster.bootstrap_servers, records, {"enable.idempotence": True})
    assert cluster.pending_faults("Produce") == 0
    assert cluster.stats().get("duplicate_batches", 0) >= 1, "no retry of an appended batch reached the cluster"
    in_log = stored(cluster)
    assert content(in_log) == sent_content(records)
    assert_contiguous(in_log)


def test_broker_down_then_up_delivers_everything(cluster: MockCluster) -> None:
    down = cluster.leader(TOPIC, 0)
    p = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5,
                    "log_level": 0, "message.timeout.ms": 60_000})
    delivered: list[int] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg.partition())

    p.produce(TOPIC, value=b"warm-up", partition=0, on_delivery=on_delivery)
    assert p.flush(30) == 0
    cluster.broker_down(down)
    done = threading.Event()

    def pump() -> None:
        while not done.is_set():
            p.poll(0.05)

    pumper = threading.Thread(target=pump)
    pumper.start()
    try:
        for i in range(300):
            p.produce(TOPIC, value=b"during-%d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
        # The partitions of healthy brokers keep flowing while the leader of partition 0 is down.
        healthy = [q for q in range(PARTITIONS) if cluster.leader(TOPIC, q) != down]
        wait_for(lambda: sum(1 for d in delivered if d in healthy) == 50 * len(healthy), 30,
                 "delivery to healthy partitions")
        assert 0 not in delivered[1:]
        cluster.broker_up(down)
        wait_for(lambda: len(delivered) == 301, 30, "delivery after broker_up")
    finally:
        done.set()
        pumper.join()
    assert p.flush(10) == 0
    assert errors == []
    assert len(cluster.records(TOPIC, 0)) == 51


def test_the_cluster_s_housekeeping_helpers_do_what_they_say(cluster: MockCluster) -> None:
    cluster.create_topic("scratch", partitions=2)
    assert cluster.topics()["scratch"] == 2
    cluster.delete_topic("scratch")
    assert "scratch" not in cluster.topics()
    with pytest.raises(KeyError, match="scratch"):
        cluster.delete_topic("scratch")

    cluster.push_request_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"] * 3)
    cluster.set_rtt(cluster.broker_ids[0], 50)
    assert cluster.pending_faults("Produce") == 3
    cluster.clear_faults()
    assert cluster.pending_faults("Produce") == 0

    with pytest.raises(TimeoutError, match=r"1 records in 'interop' not reached within 0.2 s \(have 0\)"):
        cluster.wait_for_records(TOPIC, 1, timeout=0.2)
