"""Transactions against the real brokers (Apache Kafka and Tansu): what each stored for a transactional producer.

Tansu accepts the transactional APIs and writes the markers but does not hide aborted records from
read_committed readers, so here the stored batches are the evidence: transactional data batches under the
producer's id, contiguous sequences across transactions, and one commit or abort marker per partition per
transaction. Hiding aborted records is refereed on the MockCluster (tests/mock/test_transactions.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.errors import IllegalStateError, KafkaError
from kafkajet.records import CONTROL_ABORT, CONTROL_COMMIT, control_record_type
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic_confluent, stored_batches
from tests.helpers.waiting import wait_for


def test_commit_then_abort_writes_transactional_batches_and_one_marker_per_partition(
        broker: EmbeddedBroker, topic_name: str) -> None:
    topics = [f"{topic_name}-a", f"{topic_name}-b"]
    with Admin(broker.bootstrap_servers) as admin:
        for t in topics:
            admin.create_topics([t], num_partitions=3)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"txn-{topic_name}"}) as p:
        p.init_transactions(timeout=30)
        p.begin_transaction()
        committed = [p.send(t, f"c{i}".encode(), partition=i % 3) for t in topics for i in range(30)]
        p.commit_transaction(timeout=30)
        assert all(f.done() and f.exception() is None for f in committed)  # commit flushed everything first
        p.begin_transaction()
        aborted = [p.send(t, f"a{i}".encode(), partition=i % 3) for t in topics for i in range(12)]
        p.flush(timeout=30)
        p.abort_transaction(timeout=30)
        assert all(f.exception() is None for f in aborted)  # flushed before the abort: appended, then aborted
        p.begin_transaction()
        p.commit_transaction(timeout=30)  # an empty transaction needs no EndTxn and must not fail
    for t in topics:
        for partition in range(3):
            # Apache Kafka answers EndTxn once the coordinator has logged the outcome and writes the markers
            # after it: wait for the abort marker (the last) before reading what was stored.
            def stored(t: str = t, partition: int = partition) -> list[Any]:
                found = stored_batches(broker.bootstrap_servers, t, partition)
                return found if sum(b.is_control for b in found) >= 2 else []

            wait_for(stored, 30, f"both markers on {t}-{partition}")
            batches = stored()
            data = [b for b in batches if not b.is_control]
            markers = [(control_record_type(b.records[0].key), b.producer_id) for b in batches if b.is_control]
            assert {b.producer_id for b in data} == {data[0].producer_id} and data[0].producer_id >= 0
            assert all(b.is_transactional for b in data)
            pid = data[0].producer_id
            assert markers == [(CONTROL_COMMIT, pid), (CONTROL_ABORT, pid)], (t, partition, markers)
            # The commit marker sits between the two transactions' records.
            values = [(b.is_control, [r.value for r in b.records]) for b in batches]
            first_marker = next(i for i, (control, _) in enumerate(values) if control)
            assert all(v.startswith(b"c") for _, vs in values[:first_marker] for v in vs)
            # Sequences run on within an epoch. Under transaction version 2 (Apache Kafka 4.4) each EndTxn bumps
            # the epoch and the next transaction's sequences start again at 0; under version 1 (Tansu) they run on.
            seqs = [(b.producer_epoch, b.base_sequence, b.records_count) for b in data]
            expected, epoch = 0, data[0].producer_epoch
            for batch_epoch, base, count in seqs:
                assert batch_epoch >= epoch, f"{t}-{partition}: epochs went back {seqs}"
                if batch_epoch != epoch:
                    expected, epoch = 0, batch_epoch
                assert base == expected, f"{t}-{partition}: (epoch, sequence, count) {seqs}"
                expected += count
        got = read_topic_confluent(broker.bootstrap_servers, t, 3, expected=42)
        assert sorted(r.value for r in got) == sorted([f"c{i}".encode() for i in range(30)]
                                                      + [f"a{i}".encode() for i in range(12)])


def test_send_is_refused_outside_a_transaction_and_calls_out_of_order_say_what_to_do(
        broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=1)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"txn-{topic_name}"}) as p:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.send(topic_name, b"x")
        with pytest.raises(IllegalStateError, match="init_transactions"):
            p.begin_transaction()
        p.init_transactions(timeout=30)
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send(topic_name, b"x")
        with pytest.raises(IllegalStateError, match="no transaction to commit"):
            p.commit_transaction(timeout=5)
        with pytest.raises(IllegalStateError, match="once"):
            p.init_transactions(timeout=5)
        p.begin_transaction()
        with pytest.raises(IllegalStateError, match="already in progress"):
            p.begin_transaction()
        p.send(topic_name, b"inside").result(timeout=30)
        p.commit_transaction(timeout=30)
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send_batch(topic_name, [b"x"])
    assert [r.value for r in read_topic_confluent(broker.bootstrap_servers, topic_name, 1, expected=1)] == [b"inside"]


def test_a_producer_without_transactional_id_has_no_transactions(broker: EmbeddedBroker) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        with pytest.raises(IllegalStateError, match="transactional.id"):
            p.init_transactions(timeout=1)


@pytest.mark.parametrize("setting", [{"enable.idempotence": False}, {"acks": 1}, {"retries": 0}])
def test_transactional_id_refuses_settings_that_rule_out_idempotence(setting: dict[str, object]) -> None:
    with pytest.raises(KafkaError, match="transactional.id"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "x", **setting})
