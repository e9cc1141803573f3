"""Transactions against Apache Kafka's own coordinators, where Tansu cannot stand in:

- consume-transform-produce: offsets sent to the transaction become the real group coordinator's committed
  offsets when the transaction commits (seen by kafka-python's consumer of that group), and not when it aborts;
- a transaction the broker times out: the coordinator aborts it by itself (the record is never readable at
  read_committed), and the producer's commit then fails with ProducerFencedError saying so, as Java's does.

Fencing by a second producer with the same transactional.id is tests/integration/test_fenced_transaction.py,
on every broker kind.
"""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafkajet import Producer, TopicPartition
from kafkajet.admin import Admin
from kafkajet.errors import InvalidTxnStateError, ProducerFencedError
from kafkajet.fetch import FetchClient
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.waiting import wait_for


def test_offsets_sent_to_a_transaction_reach_the_real_group_coordinator(apache_kafka: ApacheKafka,
                                                                        topic_name: str) -> None:
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-group"
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics([source, sink], num_partitions=2)
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers) as plain:
        for i in range(10):
            plain.send(source, value=f"in-{i}".encode(), partition=i % 2)

    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, transactional_id=f"{topic_name}-etl") as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        p.send(sink, value=b"out-committed")
        p.send_offsets_to_transaction({TopicPartition(source, 0): 3, TopicPartition(source, 1): 4}, group,
                                      timeout=60)
        p.commit_transaction(timeout=60)
        p.begin_transaction()
        p.send(sink, value=b"out-aborted")
        p.send_offsets_to_transaction({TopicPartition(source, 0): 5, TopicPartition(source, 1): 5}, group,
                                      timeout=60)
        p.abort_transaction(timeout=60)

    with Admin(apache_kafka.bootstrap_servers) as admin:
        assert admin.list_consumer_group_offsets(group) == {(source, 0): 3, (source, 1): 4}
    # The group's own consumer (kafka-python, an independent client) resumes where the transaction left it.
    consumer = KafkaConsumer(bootstrap_servers=apache_kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    try:
        assert consumer.committed(KpTopicPartition(source, 0)) == 3
        assert consumer.committed(KpTopicPartition(source, 1)) == 4
    finally:
        consumer.close()
    with FetchClient(apache_kafka.bootstrap_servers, isolation_level="read_committed") as reader:
        def committed() -> list[bytes | None]:
            return [r.value for part in (0, 1) for r in reader.fetch_range(sink, part, *reader.offsets(sink, part))]

        wait_for(lambda: committed() != [], 30, "the commit marker")  # written after EndTxn is answered
        assert committed() == [b"out-committed"]


def test_a_transaction_the_broker_times_out_is_aborted_and_the_producer_told(apache_kafka: ApacheKafka,
                                                                           topic_name: str) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=1)
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, transactional_id=f"{topic_name}-slow",
                  transaction_timeout_ms=2000) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        p.send(topic_name, value=b"too-late").result(timeout=60)
        with FetchClient(apache_kafka.bootstrap_servers, isolation_level="read_committed") as reader:
            # The coordinator's abort marker moves the last stable offset past the record: 0 -> 2.
            wait_for(lambda: reader.offsets(topic_name, 0)[1] == 2, 60,
                     "the coordinator to abort the transaction that outlived transaction.timeout.ms")
            assert list(reader.fetch_range(topic_name, 0, 0, 2)) == []
        # Transaction version 1 answers PRODUCER_FENCED; version 2 (Kafka 4.4's default), whose coordinator
        # bumped the epoch when it aborted, answers INVALID_TXN_STATE, fatal in Java's producer as here.
        tv2 = apache_kafka.finalized_features().get("transaction.version", 0) >= 2
        with pytest.raises(InvalidTxnStateError if tv2 else ProducerFencedError, match="transaction.timeout.ms"):
            p.commit_transaction(timeout=60)
    # The transactional id is not poisoned: its next producer runs a transaction.
    with Producer(bootstrap_servers=apache_kafka.bootstrap_servers, transactional_id=f"{topic_name}-slow") as again:
        again.init_transactions(timeout=60)
        again.begin_transaction()
        again.send(topic_name, value=b"on-time")
        again.commit_transaction(timeout=60)
    with FetchClient(apache_kafka.bootstrap_servers, isolation_level="read_committed") as reader:
        # The commit marker is written after EndTxn is answered: wait for the record to become readable.
        def committed() -> list[bytes | None]:
            return [r.value for r in reader.fetch_range(topic_name, 0, *reader.offsets(topic_name, 0))]

        wait_for(lambda: committed() != [], 30, "the commit marker")
        assert committed() == [b"on-time"]
