"""MockCluster transactions against independent clients: confluent-kafka's (librdkafka's) transactional producer
writes, confluent-kafka and kafka-python read back at read_committed and read_uncommitted, and the group
coordinator's offsets are read with confluent-kafka's committed(). What the mock does is judged by what these
clients, written against real Kafka, accept and see."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KpTopicPartition

from kafkajet.records import CONTROL_ABORT, CONTROL_COMMIT, control_record_type
from kafkajet.testing import MockCluster
from tests.helpers.waiting import wait_for

A, B, IN = "txn-a", "txn-b", "txn-in"
PARTITIONS = 6
TOPICS = (A, B)

pytestmark = pytest.mark.mock_cluster(brokers=3, topics={A: PARTITIONS, B: PARTITIONS, IN: PARTITIONS})

# Per (topic, partition): the values in log order.
PerPartition = dict[tuple[str, int], list[bytes]]


def txn_producer(cluster: MockCluster, txn_id: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                     "linger.ms": 5, "log_level": 3, **extra})


def produce_round(producer: Producer, tag: str, n: int, sent: PerPartition) -> None:
    """n records spread over both topics and all their partitions; what was sent is added to `sent`."""
    for i in range(n):
        topic = TOPICS[i % 2]
        partition = (i // 2) % PARTITIONS
        value = f"{tag}-{i}".encode()
        producer.produce(topic, value=value, key=f"k{i}".encode(), partition=partition)
        sent[(topic, partition)].append(value)


def merge(*parts: PerPartition) -> PerPartition:
    out: PerPartition = defaultdict(list)
    for part in parts:
        for tp, values in part.items():
            out[tp].extend(values)
    return out


def as_dict(d: PerPartition) -> dict[tuple[str, int], list[bytes]]:
    return {tp: v for tp, v in d.items() if v}


def read_confluent(cluster: MockCluster, isolation: str, topics: tuple[str, ...] = TOPICS,
                   timeout: float = 30.0) -> PerPartition:
    """Every data record of the topics, in partition order, read with librdkafka up to the end it reports
    (partition EOF: the high watermark, or the last stable offset at read_committed)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "txn-readback",
                         "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation,
                         "log_level": 3})
    out: PerPartition = defaultdict(list)
    try:
        tps = [(t, p) for t in topics for p in range(PARTITIONS)]
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(tps):
            assert time.monotonic() < deadline, f"partitions not read to their end: {set(tps) - at_end}"
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                tp = (str(m.topic()), int(m.partition() or 0))
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    at_end.add(tp)
                    continue
                assert tp not in at_end, f"{tp}: a record after the partition's end"
                out[tp].append(m.value() or b"")
        return out
    finally:
        consumer.close()


def read_kafka_python(cluster: MockCluster, isolation: str, topics: tuple[str, ...] = TOPICS,
                      timeout: float = 30.0) -> PerPartition:
    """The same with kafka-python (CRCs checked), reading until each position reaches the end offset it is
    given for its isolation level (ListOffsets latest: the last stable offset at read_committed)."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level=isolation,
                             check_crcs=True, enable_auto_commit=False)
    out: PerPartition = defaultdict(list)
    try:
        tps = [KpTopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "kafka-python did not reach the end offsets"
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                out[(tp.topic, tp.partition)].extend(m.value for m in msgs)
        return out
    finally:
        consumer.close()


def markers(cluster: MockCluster, topic: str, partition: int) -> list[int]:
    """CONTROL_COMMIT / CONTROL_ABORT of each control batch, in log order."""
    out = []
    for batch in cluster.batches(topic, partition):
        if batch.is_control:
            assert batch.is_transactional and batch.attributes & 0x30 == 0x30
            assert len(batch.records) == 1
            out.append(control_record_type(batch.records[0].key))
    return out


@pytest.fixture
def cleanup() -> Iterator[list[Any]]:
    """Clients to close at the end (producers are flushed with a short deadline; a fenced one raises)."""
    clients: list[Any] = []
    yield clients
    for c in clients:
        if isinstance(c, Consumer):
            c.close()
            continue
        try:
            c.flush(1)
        except KafkaException as e:
            assert e.args[0].fatal(), e


# --- commit and abort ----------------------------------------------------------------------------------


def test_read_committed_sees_exactly_the_committed_records(cluster: MockCluster, cleanup: list[Any]) -> None:
    producer = txn_producer(cluster, "txn-commit-abort")
    cleanup.append(producer)
    producer.init_transactions(30)
    assert cluster.transaction_state("txn-commit-abort") == "Empty"
    committed: PerPartition = defaultdict(list)
    aborted: PerPartition = defaultdict(list)
    outcomes = ["commit", "abort", "commit", "abort", "abort", "commit"]
    for round_, outcome in enumerate(outcomes):
        producer.begin_transaction()
        sent = committed if outcome == "commit" else aborted
        produce_round(producer, f"r{round_}-{outcome}", 120, sent)
        if outcome == "commit":
            producer.commit_transaction(30)
            assert cluster.transaction_state("txn-commit-abort") == "CompleteCommit"
        else:
            assert producer.flush(30) == 0  # the records are in the log before the abort
            producer.abort_transaction(30)
            assert cluster.transaction_state("txn-commit-abort") == "CompleteAbort"
    history = cluster.transaction_history("txn-commit-abort")
    assert history.count("PrepareCommit") == history.count("CompleteCommit") == 3
    assert history.count("PrepareAbort") == history.count("CompleteAbort") == 3

    # Every partition holds one marker per transaction, of its kind, after that transaction's records.
    want_markers = [CONTROL_COMMIT if o == "commit" else CONTROL_ABORT for o in outcomes]
    for topic in TOPICS:
        for p in range(PARTITIONS):
            assert markers(cluster, topic, p) == want_markers, (topic, p)
            assert cluster.last_stable_offset(topic, p) == cluster.high_watermark(topic, p)
            assert len(cluster.aborted_transactions(topic, p)) == 3

    everything = as_dict(merge(committed, aborted))
    # All data records, in log order: rounds follow one another on each partition.
    by_log = {tp: [r.value or b"" for r in cluster.records(*tp)] for tp in everything}
    assert {tp: sorted(v) for tp, v in by_log.items()} == {tp: sorted(v) for tp, v in everything.items()}

    assert as_dict(read_confluent(cluster, "read_committed")) == as_dict(committed)
    assert as_dict(read_kafka_python(cluster, "read_committed")) == as_dict(committed)
    # read_uncommitted sees aborted records too, and no control record comes out as data.
    assert as_dict(read_confluent(cluster, "read_uncommitted")) == by_log
    assert as_dict(read_kafka_python(cluster, "read_uncommitted")) == by_log


def test_open_transaction_is_held_back_until_it_commits(cluster: MockCluster, cleanup: list[Any]) -> None:
    producer = txn_producer(cluster, "txn-open")
    cleanup.append(producer)
    producer.init_transactions(30)
    first: PerPartition = defaultdict(list)
    producer.begin_transaction()
    produce_round(producer, "first", 48, first)
    producer.commit_transaction(30)
    ends = {(t, p): cluster.high_watermark(t, p) for t in TOPICS for p in range(PARTITIONS)}

    second: PerPartition = defaultdict(list)
    producer.begin_transaction()
    produce_round(producer, "open", 48, second)
    assert producer.flush(30) == 0
    assert cluster.transaction_state("txn-open") == "Ongoing"
    for tp, end in ends.items():
        # The open transaction starts right after the first one's marker: that is the last stable offset.
        assert cluster.last_stable_offset(*tp) == end < cluster.high_watermark(*tp)
    assert as_dict(read_confluent(cluster, "read_committed")) == as_dict(first)
    assert as_dict(read_kafka_python(cluster, "read_committed")) == as_dict(first)
    # ListOffsets latest at read_committed answers the last stable offset.
    kp = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level="read_committed")
    try:
        tps = [KpTopicPartition(t, p) for t, p in ends]
        assert {(tp.topic, tp.partition): o for tp, o in kp.end_offsets(tps).items()} == ends
    finally:
        kp.close()

    producer.commit_transaction(30)
    assert as_dict(read_confluent(cluster, "read_committed")) == as_dict(merge(first, second))


def test_a_consumer_waiting_at_the_last_stable_offset_gets_the_records_when_they_commit(
        cluster: MockCluster, cleanup: list[Any]) -> None:
    producer = txn_producer(cluster, "txn-wait")
    cleanup.append(producer)
    producer.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "txn-wait-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 3,
                         "fetch.wait.max.ms": 5000})
    cleanup.append(consumer)
    consumer.assign([TopicPartition(A, 0, OFFSET_BEGINNING)])
    producer.begin_transaction()
    for i in range(10):
        producer.produce(A, value=b"w%d" % i, partition=0)
    assert producer.flush(30) == 0
    # A Fetch sent after the records landed finds nothing below the last stable offset: the mock holds it
    # (up to fetch.wait.max.ms, 5 s) and the consumer has nothing to hand out.
    flushed = time.monotonic()
    wait_for(lambda: any(r.time > flushed for r in cluster.requests("Fetch")), 10, "a fetch after the flush")
    assert consumer.consume(num_messages=100, timeout=0.2) == []
    producer.commit_transaction(30)
    committed_at = time.monotonic()
    got: list[bytes] = []
    deadline = committed_at + 10
    while len(got) < 10 and time.monotonic() < deadline:
        got.extend(m.value() or b"" for m in consumer.consume(num_messages=100, timeout=0.1) if m.error() is None)
    assert got == [b"w%d" % i for i in range(10)]
    # The held Fetch was answered when the commit marker moved the last stable offset, not at its 5 s deadline.
    assert time.monotonic() - committed_at < 4.0


def test_kafka_python_transactional_producer_too(cluster: MockCluster) -> None:
    """A second, independent transactional producer implementation (kafka-python's) against the same mock."""
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="txn-kafka-python")
    committed: PerPartition = defaultdict(list)
    try:
        producer.init_transactions()
        for round_, commit in enumerate((True, False, True)):
            producer.begin_transaction()
            for i in range(60):
                topic, partition = TOPICS[i % 2], (i // 2) % PARTITIONS
                value = f"kp{round_}-{i}".encode()
                producer.send(topic, value=value, partition=partition)
                if commit:
                    committed[(topic, partition)].append(value)
            producer.send_offsets_to_transaction(
                {KpTopicPartition(IN, 3): OffsetAndMetadata(100 + round_, "", -1)}, "txn-kafka-python-group")
            if commit:
                producer.commit_transaction()
            else:
                producer.flush()
                producer.abort_transaction()
    finally:
        producer.close()
    assert cluster.transaction_state("txn-kafka-python") == "CompleteCommit"
    assert cluster.committed_offsets("txn-kafka-python-group") == {(IN, 3): 102}
    assert as_dict(read_confluent(cluster, "read_committed")) == as_dict(committed)
    assert as_dict(read_kafka_python(cluster, "read_committed")) == as_dict(committed)


# --- fencing -------------------------------------------------------------------------------------------


def test_a_second_producer_with_the_same_id_fences_the_first(cluster: MockCluster, cleanup: list[Any]) -> None:
    first = txn_producer(cluster, "txn-fence")
    cleanup.append(first)
    first.init_transactions(30)
    pid, epoch = cluster.transaction_producer("txn-fence") or (-1, -1)
    first.begin_transaction()
    produce_round(first, "zombie-open", 24, defaultdict(list))
    assert first.flush(30) == 0
    assert cluster.transaction_state("txn-fence") == "Ongoing"

    second = txn_producer(cluster, "txn-fence")
    cleanup.append(second)
    second.init_transactions(30)
    # The first producer's open transaction was aborted, and the id's epoch moved on (Kafka bumps it once to
    # fence and abort, once more for the new producer).
    assert cluster.transaction_producer("txn-fence") == (pid, epoch + 2)
    assert "PrepareAbort" in cluster.transaction_history("txn-fence")
    live: PerPartition = defaultdict(list)
    second.begin_transaction()
    produce_round(second, "live", 24, live)

    # The zombie carries on: nothing it sends now may become visible, and its commit fails for good.
    produce_round(first, "zombie-after-fence", 24, defaultdict(list))
    with pytest.raises(KafkaException) as failed:
        first.commit_transaction(30)
    error = failed.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error

    second.commit_transaction(30)
    assert as_dict(read_confluent(cluster, "read_committed")) == as_dict(live)
    assert as_dict(read_kafka_python(cluster, "read_committed")) == as_dict(live)


# --- offsets in transactions ---------------------------------------------------------------------------


def committed_with_confluent(cluster: MockCluster, group: str, partitions: list[int]) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "log_level": 3})
    try:
        got = consumer.committed([TopicPartition(IN, p) for p in partitions], timeout=10)
        for tp in got:
            assert tp.error is None, tp.error
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def test_send_offsets_commit_only_with_the_transaction(cluster: MockCluster, cleanup: list[Any]) -> None:
    group = "txn-offsets-group"
    source = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                       "enable.auto.commit": False, "log_level": 3})
    cleanup.append(source)
    producer = txn_producer(cluster, "txn-offsets")
    cleanup.append(producer)
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(A, value=b"with-aborted-offsets", partition=0)
    producer.send_offsets_to_transaction([TopicPartition(IN, 0, 10), TopicPartition(IN, 1, 20)],
                                         source.consumer_group_metadata(), 30)
    assert cluster.committed_offsets(group) == {}  # staged, not committed
    producer.abort_transaction(30)
    assert cluster.committed_offsets(group) == {}
    assert committed_with_confluent(cluster, group, [0, 1]) == {0: -1001, 1: -1001}  # OFFSET_INVALID: none

    producer.begin_transaction()
    producer.produce(A, value=b"with-committed-offsets", partition=0)
    producer.send_offsets_to_transaction([TopicPartition(IN, 0, 30), TopicPartition(IN, 1, 40)],
                                         source.consumer_group_metadata(), 30)
    assert cluster.committed_offsets(group) == {}
    producer.commit_transaction(30)
    assert cluster.committed_offsets(group) == {(IN, 0): 30, (IN, 1): 40}
    assert committed_with_confluent(cluster, group, [0, 1, 2]) == {0: 30, 1: 40, 2: -1001}
    # kafka-python's group coordinator client reads them the same.
    kp = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group, enable_auto_commit=False)
    try:
        assert kp.committed(KpTopicPartition(IN, 1)) == 40
    finally:
        kp.close()


# --- timeouts ------------------------------------------------------------------------------------------


def test_a_transaction_left_open_past_its_timeout_is_aborted(cluster: MockCluster, cleanup: list[Any]) -> None:
    producer = txn_producer(cluster, "txn-timeout", **{"transaction.timeout.ms": 1500, "socket.timeout.ms": 1000})
    cleanup.append(producer)
    producer.init_transactions(30)
    assert cluster.transaction_producer("txn-timeout") is not None
    _, epoch = cluster.transaction_producer("txn-timeout") or (-1, -1)
    producer.begin_transaction()
    produce_round(producer, "timed-out", 24, defaultdict(list))
    assert producer.flush(30) == 0
    wait_for(lambda: cluster.transaction_state("txn-timeout") == "CompleteAbort", 15, "timeout abort")
    # Kafka bumps the epoch as it aborts, so the producer that let the transaction expire is fenced.
    assert (cluster.transaction_producer("txn-timeout") or (-1, -1))[1] == epoch + 1
    for topic in TOPICS:
        for p in range(PARTITIONS):
            assert markers(cluster, topic, p) == [CONTROL_ABORT]
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)
    assert as_dict(read_confluent(cluster, "read_committed")) == {}
    assert as_dict(read_kafka_python(cluster, "read_committed")) == {}


# --- coordinator errors and moves ----------------------------------------------------------------------


def test_retriable_coordinator_errors_are_retried_to_a_commit(cluster: MockCluster, cleanup: list[Any]) -> None:
    producer = txn_producer(cluster, "txn-retry")
    cleanup.append(producer)
    source = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "txn-retry-group",
                       "enable.auto.commit": False, "log_level": 3})
    cleanup.append(source)
    cluster.push_request_errors("FindCoordinator", ["COORDINATOR_NOT_AVAILABLE"])
    cluster.push_request_errors("InitProducerId", ["COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS"])
    producer.init_transactions(30)
    cluster.push_request_errors("AddPartitionsToTxn", ["COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS",
                                                       "NOT_COORDINATOR"])
    cluster.push_request_errors("AddOffsetsToTxn", ["CONCURRENT_TRANSACTIONS", "NOT_COORDINATOR"])
    cluster.push_request_errors("TxnOffsetCommit", ["COORDINATOR_LOAD_IN_PROGRESS"])
    cluster.push_request_errors("EndTxn", ["COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS",
                                           "NOT_COORDINATOR"])
    sent: PerPartition = defaultdict(list)
    producer.begin_transaction()
    produce_round(producer, "retried", 60, sent)
    producer.send_offsets_to_transaction([TopicPartition(IN, 2, 7)], source.consumer_group_metadata(), 30)
    producer.commit_transaction(60)
    for api in ("FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
                "EndTxn"):
        assert cluster.pending_faults(api) == 0, api
    assert cluster.transaction_state("txn-retry") == "CompleteCommit"
    assert cluster.committed_offsets("txn-retry-group") == {(IN, 2): 7}
    assert as_dict(read_confluent(cluster, "read_committed")) == as_dict(sent)


def test_a_moved_coordinator_is_found_again(cluster: MockCluster, cleanup: list[Any]) -> None:
    producer = txn_producer(cluster, "txn-moved")
    cleanup.append(producer)
    producer.init_transactions(30)
    old = cluster.coordinator("txn", "txn-moved")
    new = next(b for b in cluster.broker_ids if b != old)
    sent: PerPartition = defaultdict(list)
    producer.begin_transaction()
    produce_round(producer, "before-move", 24, sent)
    assert producer.flush(30) == 0
    cluster.set_coordinator("txn", "txn-moved", new)
    produce_round(producer, "after-move", 24, sent)
    producer.commit_transaction(30)
    # The old coordinator was asked first and said NOT_COORDINATOR; the client looked it up again.
    assert [r.broker_id for r in cluster.requests("EndTxn")] == [old, new]
    assert as_dict(read_confluent(cluster, "read_committed")) == as_dict(sent)
