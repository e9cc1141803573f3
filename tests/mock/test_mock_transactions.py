"""The MockCluster's transaction coordinator refereed by foreign clients before kafkajet relies on it.

confluent-kafka's transactional producer (librdkafka, an independent implementation of Kafka's transaction
protocol) commits, aborts, is fenced and sends offsets against the mock; confluent-kafka's and kafka-python's
read_committed consumers must then see exactly the committed records, and read_uncommitted readers all.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafkajet.testing import MockCluster
from tests.helpers.readback import ReadRecord, read_topic_confluent
from tests.helpers.waiting import wait_for

TOPICS = ("orders", "payments")
pytestmark = [pytest.mark.mock_cluster(brokers=3, topics={t: 6 for t in TOPICS}), pytest.mark.timeout(120)]


def ck_producer(cluster: MockCluster, txn_id: str, **extra: Any) -> CkProducer:
    return CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                       "linger.ms": 5, "log_level": 3, **extra})


def read_committed_kafka_python(cluster: MockCluster, topic: str, expected: int) -> list[ReadRecord]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level="read_committed",
                             check_crcs=True, enable_auto_commit=False)
    try:
        tps = [KpTopicPartition(topic, p) for p in range(6)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[ReadRecord] = []
        deadline = time.monotonic() + 30
        # Read until every partition's position reached its end: markers and aborted records are skipped over.
        ends = {tp: cluster.high_watermark(topic, tp.partition) for tp in tps}
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, {tp.partition: consumer.position(tp) for tp in tps}
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                out.extend(ReadRecord(tp.partition, m.offset, m.key, m.value, (), m.timestamp) for m in msgs)
        assert len(out) == expected
        return out
    finally:
        consumer.close()


def values_by_partition(records: list[ReadRecord]) -> dict[int, list[bytes | None]]:
    out: dict[int, list[bytes | None]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append(r.value)
    return out


def test_committed_records_only_are_read_committed_and_all_are_read_uncommitted(cluster: MockCluster) -> None:
    p = ck_producer(cluster, "ck-commit-abort")
    p.init_transactions(30)
    sent: dict[str, list[bytes]] = {t: [] for t in TOPICS}
    for round_ in range(4):
        p.begin_transaction()
        for i in range(60):
            topic = TOPICS[i % 2]
            value = b"r%d-%d" % (round_, i)
            p.produce(topic, value=value, key=b"k%d" % (i % 13))
            sent[topic].append(value)
        if round_ % 2:
            p.flush(30)  # appended, then aborted: the markers must hide them
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    assert cluster.transaction_state("ck-commit-abort") == "CompleteAbort"
    for topic in TOPICS:
        committed = [v for v in sent[topic] if v.startswith((b"r0-", b"r2-"))]
        rc = read_topic_confluent(cluster.bootstrap_servers, topic, 6, isolation_level="read_committed")
        assert Counter(r.value for r in rc) == Counter(committed)
        kp = read_committed_kafka_python(cluster, topic, len(committed))
        assert values_by_partition(kp) == values_by_partition(rc)  # same records, same order per partition
        ru = read_topic_confluent(cluster.bootstrap_servers, topic, 6)
        assert Counter(r.value for r in ru) == Counter(sent[topic])
        for part in range(6):
            batches = cluster.batches(topic, part)
            markers = [b for b in batches if b.is_control]
            assert len(markers) == 4 and all(b.is_transactional for b in batches)
            assert cluster.last_stable_offset(topic, part) == cluster.high_watermark(topic, part)


def test_an_open_transaction_holds_the_last_stable_offset_back(cluster: MockCluster) -> None:
    p = ck_producer(cluster, "ck-open")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("orders", value=b"before", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("orders", value=b"open", partition=0)
    p.flush(30)
    assert cluster.high_watermark("orders", 0) == 3  # before, its commit marker, open
    assert cluster.last_stable_offset("orders", 0) == 2
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "lso",
                         "isolation.level": "read_committed", "log_level": 3})
    try:
        low, high = consumer.get_watermark_offsets(CkTopicPartition("orders", 0), timeout=10)
        assert high == 2, "read_committed readers are told the LSO as the end"
    finally:
        consumer.close()
    p.commit_transaction(30)
    assert cluster.last_stable_offset("orders", 0) == 4


def test_a_second_producer_with_the_same_id_fences_the_first(cluster: MockCluster) -> None:
    first = ck_producer(cluster, "ck-fenced")
    first.init_transactions(30)
    first.begin_transaction()
    first.produce("orders", value=b"zombie-1", partition=1)
    first.flush(30)
    second = ck_producer(cluster, "ck-fenced")
    second.init_transactions(30)  # aborts what the first left open and bumps the epoch
    second.begin_transaction()
    second.produce("orders", value=b"fresh", partition=1)
    second.commit_transaction(30)
    first.produce("orders", value=b"zombie-2", partition=1)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(30)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    rc = read_topic_confluent(cluster.bootstrap_servers, "orders", 6, isolation_level="read_committed")
    assert [r.value for r in rc] == [b"fresh"]


def test_offsets_sent_in_a_transaction_are_committed_only_when_it_commits(cluster: MockCluster) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "etl",
                         "enable.auto.commit": False, "log_level": 3})
    try:
        p = ck_producer(cluster, "ck-offsets")
        p.init_transactions(30)
        tp = CkTopicPartition("payments", 2, 17)
        p.begin_transaction()
        p.produce("orders", value=b"out")
        p.send_offsets_to_transaction([tp], consumer.consumer_group_metadata(), 30)
        p.abort_transaction(30)
        assert cluster.committed_offsets("etl") == {}
        p.begin_transaction()
        p.produce("orders", value=b"out")
        p.send_offsets_to_transaction([CkTopicPartition("payments", 2, 42)], consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert cluster.committed_offsets("etl") == {("payments", 2): 42}
        (got,) = consumer.committed([CkTopicPartition("payments", 2)], timeout=10)
        assert got.offset == 42
    finally:
        consumer.close()


def test_the_coordinator_aborts_a_transaction_open_past_its_timeout(cluster: MockCluster) -> None:
    p = ck_producer(cluster, "ck-timeout", **{"transaction.timeout.ms": 1500})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("orders", value=b"too-late", partition=3)
    p.flush(30)
    wait_for(lambda: cluster.transaction_state("ck-timeout") == "CompleteAbort", 15, "the timeout abort")
    assert cluster.last_stable_offset("orders", 3) == cluster.high_watermark("orders", 3)
    rc = read_topic_confluent(cluster.bootstrap_servers, "orders", 6, isolation_level="read_committed")
    assert rc == []
    with pytest.raises(KafkaException):
        p.commit_transaction(30)  # the epoch was bumped by the abort: this producer is fenced


@pytest.mark.parametrize("api,error", [
    ("EndTxn", "COORDINATOR_LOAD_IN_PROGRESS"), ("EndTxn", "NOT_COORDINATOR"),
    ("EndTxn", "CONCURRENT_TRANSACTIONS"), ("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS"),
    ("AddPartitionsToTxn", "COORDINATOR_NOT_AVAILABLE"), ("InitProducerId", "COORDINATOR_LOAD_IN_PROGRESS"),
])
def test_retriable_coordinator_errors_are_retried_through_to_the_commit(cluster: MockCluster, api: str,
                                                                         error: str) -> None:
    p = ck_producer(cluster, f"ck-retry-{api}-{error}")
    cluster.push_request_errors(api, [error, error])
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("payments", value=b"once", partition=4)
    p.commit_transaction(30)
    assert cluster.pending_faults(api) == 0, "the injected errors were answered"
    rc = read_topic_confluent(cluster.bootstrap_servers, "payments", 6, isolation_level="read_committed")
    assert [r.value for r in rc] == [b"once"]
