"""What a transactional producer raises on Apache Kafka 4.4, sorted by Java's KIP-1050 categories: the
recovery each failure calls for is the `except` that catches it.

- A second producer with the same transactional.id fences the first: the first one's commit raises an
  ApplicationRecoverableError (ProducerFencedError) within seconds, and its close() returns.
- A record the broker refuses inside a transaction (larger than the topic's max.message.bytes: Java's
  RecordTooLargeException is no retriable error, so its TransactionManager goes to the abortable state): the
  commit raises a TransactionAbortableError, the abort works, and a new transaction of the same producer commits.
"""

from __future__ import annotations

import threading
import time

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.errors import (
    ApplicationRecoverableError,
    MessageTooLargeError,
    ProducerFencedError,
    TransactionAbortableError,
)
from kafkajet.fetch import FetchClient
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

# The fenced commit is answered at once (PRODUCER_FENCED); "within seconds" leaves room for a loaded machine.
FENCED_WITHIN_S = 10.0


def test_a_fenced_producer_commit_raises_application_recoverable_and_close_returns(
        apache_kafka: ApacheKafka, topic_name: str) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=1)
    settings = {"bootstrap.servers": apache_kafka.bootstrap_servers, "transactional.id": f"{topic_name}-txn",
                "max.block.ms": 30_000}
    first = Producer(settings)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send(topic_name, b"first").result(timeout=30)
        with Producer(settings) as second:
            second.init_transactions()  # fences the first and aborts its transaction
            started = time.monotonic()
            with pytest.raises(ApplicationRecoverableError) as failed:
                first.commit_transaction()
            took = time.monotonic() - started
            assert took < FENCED_WITHIN_S, f"the fenced commit took {took:.1f} s"
            assert isinstance(failed.value, ProducerFencedError), failed.value
            assert not isinstance(failed.value, TransactionAbortableError)
            closer = threading.Thread(target=first.close, daemon=True)  # no timeout: a hang fails the wait
            closer.start()
            wait_for(lambda: not closer.is_alive(), FENCED_WITHIN_S, "close() of the fenced producer")
            second.begin_transaction()
            second.send(topic_name, b"second")
            second.commit_transaction()
    finally:
        first.close(timeout=0)
    with FetchClient(apache_kafka.bootstrap_servers, isolation_level="read_committed") as reader:
        def committed() -> list[bytes | None]:
            return [r.value for r in reader.fetch_range(topic_name, 0, *reader.offsets(topic_name, 0))]

        wait_for(lambda: committed() != [], 30, "the second producer's commit marker")
        assert committed() == [b"second"]


def test_a_record_the_broker_refuses_makes_the_transaction_abortable_then_a_new_one_commits(
        apache_kafka: ApacheKafka, topic_name: str) -> None:
    with Admin(apache_kafka.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=1, configs={"max.message.bytes": "50000"})
    with Producer({"bootstrap.servers": apache_kafka.bootstrap_servers, "transactional.id": f"{topic_name}-txn",
                   "max.block.ms": 30_000}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic_name, b"before").result(timeout=30)
        too_large = p.send(topic_name, b"x" * 60_000)  # under max.request.size: only the broker refuses it
        assert isinstance(too_large.exception(timeout=30), MessageTooLargeError)
        with pytest.raises(TransactionAbortableError, match="abort_transaction") as failed:
            p.commit_transaction()
        assert isinstance(failed.value.__cause__, MessageTooLargeError)
        assert not isinstance(failed.value, ApplicationRecoverableError)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic_name, b"after")
        p.commit_transaction()
    with FetchClient(apache_kafka.bootstrap_servers, isolation_level="read_committed") as reader:
        def committed() -> list[bytes | None]:
            return [r.value for r in reader.fetch_range(topic_name, 0, *reader.offsets(topic_name, 0))]

        wait_for(lambda: committed() != [], 30, "the new transaction's commit marker")
        assert committed() == [b"after"]
