"""Errors injected on Produce by librdkafka's mock cluster, with outcomes as Java's producer classifies them.

Java retries an error whose exception is a RetriableException (NOT_LEADER_OR_FOLLOWER and
UNKNOWN_TOPIC_OR_PARTITION via InvalidMetadataException, REQUEST_TIMED_OUT via TimeoutException,
NOT_ENOUGH_REPLICAS, and CORRUPT_MESSAGE: CorruptRecordException extends RetriableException) and fails the
batch with anything else (INVALID_RECORD, TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import concurrent.futures

import pytest

from kafkajet import Producer
from kafkajet.errors import (
    CorruptMessageError,
    InvalidRecordError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
)
from kafkajet.producer.partitioner import partition_for_key
from tests.foreign.support import PRODUCE, TOPIC_PARTITIONS, check_exact, make_records
from tests.helpers.rdkafka_mock import RdkafkaMockCluster
from tests.helpers.readback import read_topic_confluent

pytestmark = pytest.mark.foreign

RETRIABLE = [NotLeaderOrFollowerError, RequestTimedOutError, CorruptMessageError, NotEnoughReplicasError]


def test_the_error_classes_used_here_are_classified_as_java_does() -> None:
    assert all(e.retriable for e in RETRIABLE)
    assert not InvalidRecordError.retriable and not TopicAuthorizationFailedError.retriable


@pytest.mark.timeout(60)
@pytest.mark.parametrize("in_flight", [5, 1])
def test_retriable_errors_are_retried_and_every_record_is_delivered_once(rdmock: RdkafkaMockCluster,
                                                                         in_flight: int) -> None:
    topic = "retriable"
    rdmock.create_topic(topic, TOPIC_PARTITIONS, 3)
    for p in range(TOPIC_PARTITIONS):
        rdmock.set_leader(topic, p, rdmock.broker_ids[p % 3])  # every broker leads two partitions
    for b in rdmock.broker_ids:  # each broker answers its next four Produce requests with these
        rdmock.broker_push_request_error_rtts(b, PRODUCE, [(e.code, 0) for e in RETRIABLE])
    records = make_records(3_000, keys=60)
    with Producer(bootstrap_servers=rdmock.bootstraps, linger_ms=5,
                  max_in_flight_requests_per_connection=in_flight) as p:
        futures = [p.send(topic, value=v, key=k) for k, v in records]
        p.flush(45)
        metas = [f.result(timeout=5) for f in futures]
        retries = p.metrics()["record-retry-total"]
    assert [rdmock.broker_error_stack_count(b, PRODUCE) for b in rdmock.broker_ids] == [0, 0, 0], \
        "some injected errors were never met"
    assert retries > 0
    # With several requests in flight, order after a retry is the broker's to keep: Kafka refuses a
    # partition's batch whose sequence does not follow the last one written (OUT_OF_ORDER_SEQUENCE_NUMBER),
    # and the producer retries it in turn. librdkafka's mock accepts a first sequence other than 0 for a new
    # producer (seen: a batch with base sequence 180 stored at offset 0 while sequence 0 was being retried),
    # so there only one in flight (Java's guarantee without the broker's help) is checked for order; the
    # MockCluster and Tansu suites check order with five in flight against brokers that enforce sequences.
    check_exact(records, metas, read_topic_confluent(rdmock.bootstraps, topic, TOPIC_PARTITIONS, expected=len(records)),
                order=in_flight == 1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("error", [InvalidRecordError, TopicAuthorizationFailedError])
def test_a_non_retriable_error_fails_exactly_the_records_of_its_request(rdmock: RdkafkaMockCluster,
                                                                      error: type) -> None:
    # Idempotence off: with it on, Java also bumps the epoch after a failed batch (a separate behaviour,
    # tests/foreign/test_java_behaviour.py); here only the classification and its reach are under test.
    topic = "non-retriable"
    rdmock.create_topic(topic, TOPIC_PARTITIONS, 3)
    led_by_1 = set()
    for p in range(TOPIC_PARTITIONS):
        rdmock.set_leader(topic, p, rdmock.broker_ids[p % 3])
        if p % 3 == 0:
            led_by_1.add(p)
    rdmock.broker_push_request_error_rtts(1, PRODUCE, [(error.code, 0)])  # broker 1's first Produce only
    records = make_records(3_000, keys=60)
    with Producer(bootstrap_servers=rdmock.bootstraps, linger_ms=20, enable_idempotence=False) as p:
        futures = [p.send(topic, value=v, key=k) for k, v in records]
        p.flush(45)
        concurrent.futures.wait(futures, timeout=5)
    assert all(f.done() for f in futures)
    failed = [i for i, f in enumerate(futures) if f.exception() is not None]
    assert failed, "the injected error failed no record"
    for i in failed:
        exc = futures[i].exception()
        assert isinstance(exc, error) and error.name in str(exc), f"record {i} failed with {exc!r}"
    assert rdmock.broker_error_stack_count(1, PRODUCE) == 0
    ok = [i for i, f in enumerate(futures) if f.exception() is None]
    read = read_topic_confluent(rdmock.bootstraps, topic, TOPIC_PARTITIONS, expected=len(ok))
    check_exact([records[i] for i in ok], [futures[i].result() for i in ok], read)
    # Only broker 1's first request failed: the failures are, in each partition broker 1 leads, the first
    # records sent there (that request's batch), and nothing elsewhere.
    failed_set = set(failed)
    assert {partition_for_key(records[i][0], TOPIC_PARTITIONS) for i in failed} <= led_by_1
    for p in led_by_1:
        sent_here = [i for i in range(len(records)) if partition_for_key(records[i][0], TOPIC_PARTITIONS) == p]
        failed_here = [i for i in sent_here if i in failed_set]
        assert failed_here == sent_here[:len(failed_here)], f"partition {p}: the failures are not its first batch"
