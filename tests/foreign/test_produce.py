"""kafkajet, unpatched and at its default protocol versions, producing into librdkafka's mock cluster.

Each test reads back with confluent-kafka (partitions assigned, no group) and checks every record: stored
once, at the offset its metadata gave, each key's records in send order.
"""

from __future__ import annotations

import time

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.fetch import FetchClient
from kafkajet.producer.futures import RecordMetadata
from kafkajet.records.batch import decode_batches
from tests.foreign.support import TOPIC_PARTITIONS, BrokerOutage, LeaderMover, check_exact, make_records
from tests.helpers.rdkafka_mock import RdkafkaMockCluster
from tests.helpers.readback import read_topic_confluent

pytestmark = pytest.mark.foreign
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]  # in the order of their attribute values


def produce(mock: RdkafkaMockCluster, topic: str, records: list[tuple[bytes, bytes]], *, pace_s: float = 0.0,
            chunks: int = 1, metrics: dict[str, float] | None = None, **config: object) -> list[RecordMetadata]:
    """Send `records` in `chunks` (pausing `pace_s` between them, so faults meet a producer at work); the
    metadata of each, in order. Raises the first failure. The producer's metrics go into `metrics`."""
    with Producer(bootstrap_servers=mock.bootstraps, **config) as p:
        futures = []
        step = -(-len(records) // chunks)
        for start in range(0, len(records), step):
            futures += [p.send(topic, value=v, key=k) for k, v in records[start:start + step]]
            if pace_s:
                time.sleep(pace_s)  # pacing the load, not waiting for an outcome
        p.flush(60)
        if metrics is not None:
            metrics.update(p.metrics())
        return [f.result(timeout=5) for f in futures]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_to_three_brokers_and_six_partitions(rdmock: RdkafkaMockCluster, codec: str) -> None:
    topic = f"codec-{codec}"
    rdmock.create_topic(topic, TOPIC_PARTITIONS, 3)
    records = make_records(3_000, keys=120, value_size=120)
    metas = produce(rdmock, topic, records, compression_type=codec, linger_ms=5)
    assert {m.partition for m in metas} == set(range(TOPIC_PARTITIONS))
    check_exact(records, metas, read_topic_confluent(rdmock.bootstraps, topic, TOPIC_PARTITIONS))
    # The mock stores batches as sent: their attributes show the codec really was applied.
    assert stored_codecs(rdmock, topic) == {CODECS.index(codec)}


def stored_codecs(mock: RdkafkaMockCluster, topic: str) -> set[int]:
    with FetchClient(bootstrap_servers=mock.bootstraps) as fc:
        return {int(b.compression) for p in range(TOPIC_PARTITIONS)
                for b in decode_batches(fc._fetch(topic, p, 0, 8 << 20, 100)["record_set"] or b"",
                                        allow_partial_tail=True)}


@pytest.mark.timeout(60)
def test_admin_and_fetch_client_negotiate_with_the_mock(rdmock: RdkafkaMockCluster) -> None:
    # The blocking connection (Admin, FetchClient) meets the same ApiVersions answer as the producer.
    rdmock.create_topic("blocking", 3, 3)
    with Admin(bootstrap_servers=rdmock.bootstraps) as admin:
        assert len(admin.describe_cluster(timeout_s=20).brokers) == 3
        assert len(admin.describe_topics("blocking", timeout_s=20)["blocking"].partitions) == 3
    records = make_records(50, keys=5)
    metas = produce(rdmock, "blocking", records)
    with FetchClient(bootstrap_servers=rdmock.bootstraps) as fc:
        got = {}
        for p in fc.partitions("blocking"):
            start, end = fc.offsets("blocking", p)
            got.update({(p, r.offset): (r.key, r.value) for r in fc.fetch_range("blocking", p, start, end)})
    assert got == {(m.partition, m.offset): rec for m, rec in zip(metas, records, strict=True)}


@pytest.mark.timeout(90)
def test_leaders_moving_under_load(rdmock: RdkafkaMockCluster) -> None:
    topic = "moving"
    rdmock.create_topic(topic, TOPIC_PARTITIONS, 3)
    records = make_records(12_000, keys=300)
    metrics: dict[str, float] = {}
    with LeaderMover(rdmock, topic, TOPIC_PARTITIONS) as mover:
        metas = produce(rdmock, topic, records, pace_s=0.1, chunks=30, linger_ms=5, metrics=metrics)
    assert mover.moves >= 10, f"only {mover.moves} leader moves happened while producing"
    assert metrics["record-retry-total"] > 0, "no batch ever met a moved leader: the test proved nothing"
    check_exact(records, metas, read_topic_confluent(rdmock.bootstraps, topic, TOPIC_PARTITIONS))


@pytest.mark.timeout(90)
def test_a_broker_going_down_and_up_mid_stream(rdmock: RdkafkaMockCluster) -> None:
    topic = "down-up"
    rdmock.create_topic(topic, TOPIC_PARTITIONS, 3)
    for p in range(TOPIC_PARTITIONS):
        rdmock.set_leader(topic, p, rdmock.broker_ids[p % 3])  # broker 1 leads partitions 0 and 3
    records = make_records(6_000, keys=120)
    with BrokerOutage(rdmock, broker_id=1, after_s=0.8, down_s=1.5) as outage:
        metas = produce(rdmock, topic, records, pace_s=0.1, chunks=30, linger_ms=5)
    assert outage.done, "the producer finished before the outage was over"
    # The broker led partitions 0 and 3 before, during (their batches waited) and after the outage.
    assert outage.produce_before > 0 and outage.produce_after > outage.produce_before
    check_exact(records, metas, read_topic_confluent(rdmock.bootstraps, topic, TOPIC_PARTITIONS))
