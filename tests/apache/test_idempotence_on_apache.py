"""Idempotent sequences where Apache Kafka's own rules decide, which the other brokers do not share.

Apache Kafka takes a batch of a producer it holds no state for on a partition as a new start, whatever its first
sequence (KIP-360). A batch sent behind a partition's first one, which the broker then refuses, could therefore
land ahead of it; and every retry of the refused one is then out of order until delivery.timeout.ms. Two ways a
first batch is refused, each tested here as it happens on the broker:

- a batch over the topic's max.message.bytes (MESSAGE_TOO_LARGE), which the producer splits: the records stay
  in send order and once each, the one record too large for the topic failing alone;
- a topic created a moment before: its leader refuses the first Produce to some partitions with
  NOT_LEADER_OR_FOLLOWER until it is ready to write. No record may be lost to it.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import Future

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.errors import MessageTooLargeError
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.readback import read_topic

RECORDS = 200
LARGE = 120  # the one record over the topic's limit, in the middle of a batch


@pytest.mark.parametrize("max_in_flight", [1, 5])
@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
def test_a_split_batch_keeps_send_order_and_fails_only_the_record_too_large(
        apache_kafka: ApacheKafka, topic_name: str, keyed: bool, max_in_flight: int) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=3, configs={"max.message.bytes": "50000"})
    futures: list[Future] = []
    sent: list[bytes] = []
    # delivery.timeout.ms bounds a producer that splits the same batch again and again (it failed every record).
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, batch_size=1_000_000, linger_ms=50,
                  max_in_flight_requests_per_connection=max_in_flight, request_timeout_ms=10_000,
                  delivery_timeout_ms=20_000) as p:
        for i in range(RECORDS):
            value = b"%03d:" % i + (b"L" * 60_000 if i == LARGE else b"")
            sent.append(value)
            futures.append(p.send(topic_name, key=b"k%d" % (i % 7) if keyed else None, value=value))
        p.flush(timeout=120)
    failed = {i: type(f.exception()).__name__ for i, f in enumerate(futures) if f.exception() is not None}
    assert failed == {LARGE: MessageTooLargeError.__name__}
    stored = read_topic(apache_kafka.bootstrap_servers, topic_name, RECORDS - 1)
    # Once each: 199 records, none twice, the large one nowhere.
    assert sorted(r.value for r in stored) == [v for i, v in enumerate(sent) if i != LARGE]
    by_partition: dict[int, list[bytes]] = defaultdict(list)
    for r in sorted(stored, key=lambda r: (r.partition, r.offset)):
        assert r.value is not None
        by_partition[r.partition].append(r.value)
    # In send order within each partition: the values begin with the send index.
    assert {p: sorted(vs) for p, vs in by_partition.items()} == dict(by_partition)


FRESH_TOPICS = 5
FRESH_PARTITIONS = 48
FRESH_RECORDS = 3000


def test_no_record_is_lost_to_a_first_batch_refused_on_a_topic_just_created(apache_kafka: ApacheKafka,
                                                                            topic_name: str) -> None:
    # The scenario: kafkajet lost records in 2 of 4 such runs before, each failing with a
    # DeliveryTimeoutError whose cause was OUT_OF_ORDER_SEQUENCE_NUMBER.
    lost: dict[str, dict[int, str]] = {}
    for run in range(FRESH_TOPICS):
        topic = f"{topic_name}-{run}"
        with Admin(apache_kafka.bootstrap_servers) as admin:
            admin.create_topics(topic, num_partitions=FRESH_PARTITIONS)
        with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, linger_ms=20, batch_size=8192,
                      request_timeout_ms=10_000, delivery_timeout_ms=30_000) as p:
            p.partitions_for(topic)  # metadata names every partition's leader before the first send
            futures = [p.send(topic, key=b"key-%d" % i, value=b"%d" % i) for i in range(FRESH_RECORDS)]
            p.flush(timeout=120)
        failed = {i: repr(f.exception()) for i, f in enumerate(futures) if f.exception() is not None}
        if failed:
            lost[topic] = failed
            continue
        stored = read_topic(apache_kafka.bootstrap_servers, topic, FRESH_RECORDS)
        assert sorted(int(r.value or b"") for r in stored) == list(range(FRESH_RECORDS)), topic
        for partition in range(FRESH_PARTITIONS):
            sent = [int(r.value or b"") for r in sorted(stored, key=lambda r: r.offset) if r.partition == partition]
            assert sent == sorted(sent), f"{topic}-{partition} out of send order"
    assert {t: (len(f), next(iter(f.values()))) for t, f in lost.items()} == {}
