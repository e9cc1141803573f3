"""Transaction versions 1 and 2 (KIP-890) on Apache Kafka 4.4, with the Java producer as the reference.

Kafka 4.4 finalizes transaction.version 2; a broker formatted with `--feature transaction.version=1` does
not. On each, kafkajet and the Java 4.4 producer run the same three transactions (commit, abort, commit)
into topics of their own, and the batches the broker wrote are read back from its log directory:

- under version 2 every transaction has a new producer epoch (EndTxn v5 answers it), each transaction's
  sequences start at 0 again, the markers carry the epoch after the transaction's, and no AddPartitionsToTxn
  is sent for a produced partition (Produce v12 adds it);
- under version 1 the epoch stays put and the sequences run on, AddPartitionsToTxn adds each partition once
  per transaction and Produce goes at v11 at most;
- in both, kafkajet's epochs and sequences are the Java producer's, and Java's read_committed consumer reads
  exactly the committed records.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kafkajet import PreparedTransaction, Producer
from kafkajet.admin import Admin
from kafkajet.errors import InvalidTxnStateError
from kafkajet.protocol import ApiKey
from kafkajet.records import decode_batches
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.apache import running_apache_kafka
from tests.helpers.java_clients import java_consume, java_produce
from tests.helpers.waiting import wait_for

# (outcome, values) of the three transactions.
TRANSACTIONS = (("commit", [b"t1-a", b"t1-b"]), ("abort", [b"t2-a"]), ("commit", [b"t3-a", b"t3-b", b"t3-c"]))
COMMITTED = [v for outcome, values in TRANSACTIONS if outcome == "commit" for v in values]


@pytest.fixture(scope="module")
def tv1_kafka() -> Iterator[ApacheKafka]:
    """Apache Kafka 4.4 formatted at transaction.version 1: it does not finalize version 2."""
    with running_apache_kafka(features={"transaction.version": 1}) as kafka:
        yield kafka


@dataclass(frozen=True)
class Batch:
    epoch: int
    base_sequence: int
    count: int
    control: bool

    def __str__(self) -> str:
        kind = "marker" if self.control else f"{self.count} record(s)"
        return f"epoch {self.epoch} seq {self.base_sequence} {kind}"


def _batches(kafka: ApacheKafka, topic: str, markers: int) -> list[Batch]:
    """The batches of partition 0 as the broker wrote them to its segment file, once `markers` are there."""
    segment = kafka.data_dir(kafka.node_id) / f"{topic}-0" / "00000000000000000000.log"
    found: list[Batch] = []

    def read() -> bool:
        found[:] = [Batch(b.producer_epoch, b.base_sequence, b.records_count, b.is_control)
                    for b in decode_batches(segment.read_bytes(), allow_partial_tail=True)]
        return sum(b.control for b in found) >= markers

    # Data batches are in the file once acknowledged; the markers once the coordinator has written them.
    wait_for(read, 30, f"{markers} transaction markers in {segment}")
    return found


def _transactions(batches: list[Batch]) -> list[tuple[set[int], int, int, int]]:
    """Each transaction (its data batches up to its marker): ({data epochs}, first sequence, records, marker
    epoch), epochs counted from the first batch's."""
    first = batches[0].epoch
    out: list[tuple[set[int], int, int, int]] = []
    data: list[Batch] = []
    for b in batches:
        if not b.control:
            data.append(b)
            continue
        out.append(({d.epoch - first for d in data}, data[0].base_sequence if data else -1,
                     sum(d.count for d in data), b.epoch - first))
        data = []
    return out


def _count_requests(p: Producer) -> list[tuple[ApiKey, int]]:
    """Every request the producer's sender sends from now on, as (API, version), in the list returned."""
    sent: list[tuple[ApiKey, int]] = []
    client = p._sender.client
    real_send = client.send

    def counting(node_id: int, api_key: int, body: dict[str, Any], now: float, **kw: Any) -> int:
        version = kw.get("version")
        sent.append((ApiKey(api_key), client.api_version(node_id, api_key) if version is None else version))
        return real_send(node_id, api_key, body, now, **kw)

    client.send = counting  # type: ignore[method-assign]
    return sent


def _kafkajet(kafka: ApacheKafka, topic: str) -> tuple[list[Batch], list[tuple[ApiKey, int]]]:
    """The three transactions through kafkajet; the batches written and every request sent (API, version)."""
    with Producer(bootstrap_servers=kafka.bootstrap_servers, transactional_id=f"{topic}-kj") as p:
        sent = _count_requests(p)
        p.init_transactions(timeout=60)
        for outcome, values in TRANSACTIONS:
            p.begin_transaction()
            for v in values:
                p.send(topic, value=v, partition=0)
            p.flush(timeout=60)  # an abort drops what is not yet sent: the aborted records must be written first
            if outcome == "commit":
                p.commit_transaction(timeout=60)
            else:
                p.abort_transaction(timeout=60)
    return _batches(kafka, topic, 3), sent


def _java(kafka: ApacheKafka, topic: str) -> list[Batch]:
    commands: list[dict[str, Any]] = [{"op": "init"}]
    for outcome, values in TRANSACTIONS:
        commands.append({"op": "begin"})
        commands.extend({"op": "send", "topic": topic, "partition": 0, "value": v} for v in values)
        commands += [{"op": "flush"}, {"op": outcome}]
    java_produce(kafka, commands, **{"transactional.id": f"{topic}-java"})
    return _batches(kafka, topic, 3)


@pytest.mark.parametrize("version", [2, 1], ids=["tv2", "tv1"])
def test_three_transactions_carry_the_epochs_and_sequences_of_the_java_producer(
        request: pytest.FixtureRequest, version: int, topic_name: str) -> None:
    kafka: ApacheKafka = request.getfixturevalue("apache_kafka" if version == 2 else "tv1_kafka")
    assert kafka.finalized_features().get("transaction.version", 0) == version
    ours, java_topic = topic_name, f"{topic_name}-java"
    with Admin(kafka.bootstrap_servers) as admin:
        admin.create_topics([ours, java_topic], num_partitions=1)

    kj, sent = _kafkajet(kafka, ours)
    java = _java(kafka, java_topic)
    print(f"\ntransaction.version {version}, partition 0 as the broker wrote it:")
    print(f"  {'kafkajet':<34} Java 4.4")
    for i in range(max(len(kj), len(java))):
        print(f"  {str(kj[i]) if i < len(kj) else '':<34} {java[i] if i < len(java) else ''}")

    # Per transaction, epochs counted from the first batch's: the data batches' epochs, the first sequence, the
    # records, and the marker's epoch.
    if version == 2:
        expected = [({0}, 0, 2, 1), ({1}, 0, 1, 2), ({2}, 0, 3, 3)]
    else:
        expected = [({0}, 0, 2, 0), ({0}, 2, 1, 0), ({0}, 3, 3, 0)]
    assert _transactions(java) == expected  # the reference: what Java 4.4's producer makes the broker write
    assert _transactions(kj) == expected

    add_partitions = [v for api, v in sent if api == ApiKey.ADD_PARTITIONS_TO_TXN]
    produce = {v for api, v in sent if api == ApiKey.PRODUCE}
    end_txn = [v for api, v in sent if api == ApiKey.END_TXN]
    if version == 2:
        assert add_partitions == []
        # v13 from a 4.4 broker: topics by the ids metadata gave, as Java 4.4's Sender sends them.
        assert produce == {13} and end_txn == [5, 5, 5]
    else:
        assert len(add_partitions) >= 3  # the one partition, in every transaction (retried while the last ends)
        assert produce == {11} and end_txn == [4, 4, 4]

    # The aborted record lies between the committed ones: a reader that showed it would read it third.
    read = {topic: [r["value"] for r in java_consume(kafka, topic, len(COMMITTED),
                                                    **{"isolation.level": "read_committed"})]
            for topic in (java_topic, ours)}
    assert read == {java_topic: COMMITTED, ours: COMMITTED}


def _prepare(kafka: ApacheKafka, transactional_id: str, topic: str, values: list[bytes]) -> PreparedTransaction:
    """A producer writes `values` to partition 0 in a transaction, prepares it and closes, leaving it open."""
    with Producer(bootstrap_servers=kafka.bootstrap_servers, transactional_id=transactional_id) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        for v in values:
            p.send(topic, value=v, partition=0)
        return p.prepare_transaction(timeout=60)


@pytest.mark.parametrize("version", [2, 1], ids=["tv2", "tv1"])
def test_admin_completes_prepared_transactions(request: pytest.FixtureRequest, version: int,
                                               topic_name: str) -> None:
    """Two transactions prepared by producers that then closed, the first aborted and the second committed by
    the Admin (as the Spark sink's driver does): a read_committed reader sees the second's records only."""
    kafka: ApacheKafka = request.getfixturevalue("apache_kafka" if version == 2 else "tv1_kafka")
    with Admin(kafka.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=1)
        aborted = _prepare(kafka, f"{topic_name}-a", topic_name, [b"aborted-1", b"aborted-2"])
        committed = _prepare(kafka, f"{topic_name}-c", topic_name, [b"committed-1", b"committed-2"])
        assert (aborted.transaction_version, committed.transaction_version) == (version, version)
        admin.complete_transaction(aborted, commit=False, timeout_s=60)
        admin.complete_transaction(committed, commit=True, timeout_s=60)
        # A driver that lost the first answer repeats the same outcome and succeeds; the other one is refused.
        admin.complete_transaction(committed, commit=True, timeout_s=60)
        admin.complete_transaction(aborted, commit=False, timeout_s=60)
        with pytest.raises(InvalidTxnStateError):
            admin.complete_transaction(committed, commit=False, timeout_s=60)

    # The aborted records come first in the partition: a reader that showed them would read them instead.
    read = [r["value"] for r in java_consume(kafka, topic_name, 2, **{"isolation.level": "read_committed"})]
    assert read == [b"committed-1", b"committed-2"]
    # A new producer with the committed one's id takes over without waiting for anything.
    with Producer(bootstrap_servers=kafka.bootstrap_servers, transactional_id=f"{topic_name}-c") as p:
        p.init_transactions(timeout=60)


@pytest.mark.parametrize("version", [2, 1], ids=["tv2", "tv1"])
def test_offsets_sent_to_transactions_go_as_the_java_producer_sends_them(
        request: pytest.FixtureRequest, version: int, topic_name: str) -> None:
    """Consumer offsets in three transactions (with a record and committed, alone and aborted, alone and
    committed): under version 2 TxnOffsetCommit v5 adds the group itself, with no AddOffsetsToTxn, as Java 4.4's
    TransactionManager.sendOffsetsToTransaction does; under version 1 AddOffsetsToTxn comes first and
    TxnOffsetCommit goes at v4. Either way the group's committed offset is the last committed transaction's."""
    kafka: ApacheKafka = request.getfixturevalue("apache_kafka" if version == 2 else "tv1_kafka")
    source, group = f"{topic_name}-in", f"{topic_name}-group"
    with Admin(kafka.bootstrap_servers) as admin:
        admin.create_topics([topic_name, source], num_partitions=1)
        with Producer(bootstrap_servers=kafka.bootstrap_servers, transactional_id=topic_name) as p:
            sent = _count_requests(p)
            p.init_transactions(timeout=60)
            p.begin_transaction()
            p.send(topic_name, value=b"out", partition=0)
            p.send_offsets_to_transaction({(source, 0): 42}, group, timeout=60)
            p.commit_transaction(timeout=60)
            p.begin_transaction()
            p.send_offsets_to_transaction({(source, 0): 99}, group, timeout=60)
            p.abort_transaction(timeout=60)
            assert admin.list_consumer_group_offsets(group, [(source, 0)], timeout_s=60) == {(source, 0): 42}
            # Offsets alone: the transaction still has to be ended at the coordinator, or the offset would
            # stay pending and the stable read below would wait for it.
            p.begin_transaction()
            p.send_offsets_to_transaction({(source, 0): 7}, group, timeout=60)
            p.commit_transaction(timeout=60)
        assert admin.list_consumer_group_offsets(group, [(source, 0)], timeout_s=60) == {(source, 0): 7}

    add_offsets = [v for api, v in sent if api == ApiKey.ADD_OFFSETS_TO_TXN]
    offset_commits = [v for api, v in sent if api == ApiKey.TXN_OFFSET_COMMIT]
    end_txn = [v for api, v in sent if api == ApiKey.END_TXN]
    # Each once per transaction at least: retried when the answer is NOT_COORDINATOR (the group's coordinator
    # still loading on a fresh broker) or CONCURRENT_TRANSACTIONS (the last transaction's markers being written).
    assert len(offset_commits) >= 3 and end_txn == [version + 3] * 3
    if version == 2:
        assert add_offsets == [] and set(offset_commits) == {5}
    else:
        assert len(add_offsets) >= 3 and set(add_offsets) == {4} and set(offset_commits) == {4}
