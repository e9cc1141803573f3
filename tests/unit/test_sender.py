"""The Sender driven pass by pass with a fake network and a fake clock, as Java's SenderTest drives its Sender.

No threads and no sleeps: each test appends records, calls `run_once(now)`, looks at the requests the sender
sent, answers them, and checks what happened to the records, to the millisecond where time matters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkajet.errors import (
    AuthenticationError,
    ClusterAuthorizationFailedError,
    DeliveryTimeoutError,
    DuplicateSequenceNumberError,
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
    RebootstrapRequiredError,
    TopicAuthorizationFailedError,
    TransactionAbortedError,
)
from kafkajet.network.versions import negotiate
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.futures import RecordFuture
from kafkajet.producer.idempotence import MAX_EPOCH, IdempotenceManager
from kafkajet.producer.metadata import Metadata
from kafkajet.producer.metrics import ProducerMetrics
from kafkajet.producer.sender import MAX_POLL_MS, Sender
from kafkajet.producer.transactions import State, TransactionManager
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkajet.records import decode_batches
from tests.helpers.fake_network import (
    FakeClock,
    FakeNetworkClient,
    SentRequest,
    init_producer_id_body,
    metadata_body,
    produce_body,
)

TOPIC = "t"
NODES = {0: ("127.0.0.1", 9092), 1: ("127.0.0.1", 9093)}
RETRY_BACKOFF_MS = 100.0
COORDINATOR = 2  # the transaction coordinator: a broker the metadata answers do not list


# A broker that lists v0-v9 of every API.
BROKER_VERSIONS = {int(api): (0, 9) for api in ApiKey}


@dataclass
class RecordingClient(FakeNetworkClient):
    """The fake network, also recording each poll's timeout and each request's version, with what a
    transactional sender calls besides: the brokers' API versions and the coordinators' addresses."""

    polls: list[float] = field(default_factory=list)
    versions: list[tuple[ApiKey, int | None]] = field(default_factory=list)
    added: dict[int, tuple[str, int]] = field(default_factory=dict)

    def poll(self, timeout_ms: float, now: float) -> list[Any]:
        self.polls.append(timeout_ms)
        return super().poll(timeout_ms, now)

    def send(self, node_id: int, api_key: int, body: dict[str, Any], now: float, *, version: int | None = None,
             expect_response: bool = True, context: Any = None) -> int:
        self.versions.append((ApiKey(api_key), version))
        return super().send(node_id, api_key, body, now, version=version, expect_response=expect_response,
                            context=context)

    # Strict about what the real client needs: the time of each call, a node, an API key.
    def ready(self, node_id: int, now: float) -> bool:
        assert isinstance(now, float), now
        return super().ready(node_id, now)

    def connection_delay(self, node_id: int, now: float) -> float:
        assert isinstance(now, float), now
        return super().connection_delay(node_id, now)

    def least_loaded_node(self, now: float) -> int | None:
        assert isinstance(now, float), now
        return super().least_loaded_node(now)

    def api_version(self, node_id: int, api: int) -> int:
        assert node_id in self.nodes and isinstance(api, ApiKey), (node_id, api)
        return negotiate(BROKER_VERSIONS, api)  # the real client's rule, its caps included

    def add_node(self, node_id: int, host: str, port: int) -> None:
        self.added[node_id] = (host, port)
        self.nodes[node_id] = (host, port)


@dataclass
class Rig:
    sender: Sender
    client: RecordingClient
    clock: FakeClock
    accumulator: RecordAccumulator
    metadata: Metadata
    idempotence: IdempotenceManager | None
    fatal: list[KafkaError]
    txn: TransactionManager | None = None

    def append(self, value: bytes = b"v", partition: int = 0) -> RecordFuture:
        fut, _ = self.accumulator.append(TOPIC, partition, 0, None, value, None, None)
        return fut

    def run(self, advance_ms: float = 0.0) -> None:
        self.sender.run_once(self.clock.advance(advance_ms))

    def connect(self, leaders: list[int] | None = None) -> None:
        """Answer the sender's Metadata request (and InitProducerId, with idempotence) so produce can start."""
        self.run()
        self.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: leaders or [0, 0]}))
        self.run()
        if self.idempotence is not None:
            self.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(1000, 0))
            self.run()

    def produces(self) -> list[SentRequest]:
        return [r for r in self.client.requests if r.api_key == ApiKey.PRODUCE]


def make_rig(*, linger_ms: float = 0.0, idempotent: bool = False, retries: int = 2**31 - 1,
             delivery_timeout_ms: float = 120_000.0, batch_size: int = 16384, guarantee_order: bool = False,
             max_in_flight: int = 5, acks: int = -1, interceptors: list[Any] | None = None,
             transactional: bool = False) -> Rig:
    clock = FakeClock()
    client = RecordingClient(nodes=dict(NODES), max_in_flight=max_in_flight)
    metadata = Metadata(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=RETRY_BACKOFF_MS,
                        retry_backoff_max_ms=1000)
    metadata.add_topic(TOPIC, clock.now)
    idem = IdempotenceManager() if idempotent or transactional else None
    txn = TransactionManager("tx", 60_000, idem, RETRY_BACKOFF_MS) if idem is not None and transactional else None
    pool = BufferPool(32 * 1024 * 1024, batch_size)
    accumulator = RecordAccumulator(
        batch_size=batch_size, compression=0, linger_ms=linger_ms, retry_backoff_ms=RETRY_BACKOFF_MS,
        retry_backoff_max_ms=1000, delivery_timeout_ms=delivery_timeout_ms, pool=pool, idempotence=idem,
        clock=clock, guarantee_order=guarantee_order)
    if txn is not None:  # as the Producer wires them
        accumulator.send_allowed = txn.is_send_allowed
        accumulator.transactional = True
    fatal: list[KafkaError] = []
    sender = Sender(client=client, metadata=metadata, accumulator=accumulator, idempotence=idem,  # type: ignore[arg-type]
                    metrics=ProducerMetrics(), acks=acks, retries=retries, interceptors=interceptors, request_timeout_ms=30_000,
                    max_request_size=1024 * 1024, retry_backoff_ms=RETRY_BACKOFF_MS, allow_auto_create_topics=True,
                    clock=clock, on_fatal=fatal.append, transactions=txn)
    return Rig(sender, client, clock, accumulator, metadata, idem, fatal, txn)


def batch_header(req: SentRequest, partition: int = 0) -> Any:
    """The record batch a Produce request carries for `partition` of TOPIC, decoded."""
    for t in req.body["topic_data"]:
        for p in t["partition_data"]:
            if t["name"] == TOPIC and p["index"] == partition:
                (batch,) = decode_batches(bytes(p["records"]))
                return batch
    raise AssertionError(f"no batch for {TOPIC}-{partition} in the request")


# --- metadata, linger ---------------------------------------------------------------------------------------


def test_metadata_comes_before_the_first_produce() -> None:
    rig = make_rig()
    rig.append()
    rig.run()
    assert [r.api_key for r in rig.client.requests] == [ApiKey.METADATA]
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 1]}))
    rig.run()  # takes the answer in
    rig.run()
    assert len(rig.produces()) == 1 and rig.produces()[0].node == 0


def test_a_batch_waits_linger_ms_to_the_millisecond() -> None:
    rig = make_rig(linger_ms=100)
    rig.connect()
    fut = rig.append()
    rig.run(99)
    assert rig.produces() == []
    rig.run(1)
    assert len(rig.produces()) == 1
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=7))
    rig.run()
    assert fut.result(timeout=0).offset == 7


def test_a_full_batch_goes_before_linger_ms() -> None:
    rig = make_rig(linger_ms=10_000, batch_size=256)
    rig.connect()
    for _ in range(8):  # two full 256-byte batches and a third just begun
        rig.append(b"x" * 50)
    rig.run()
    sent = [batch_header(r).records_count for r in rig.produces()]
    assert sent == [3, 3]  # the full ones go now; the third waits for linger.ms


# --- retries and errors ---------------------------------------------------------------------------------------


def test_a_retriable_error_is_retried_after_the_backoff_not_before() -> None:
    rig = make_rig()
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    rig.run(RETRY_BACKOFF_MS * 0.8 - 1)  # the backoff has +-20% jitter: this is before its earliest end
    assert len(rig.produces()) == 1 and not fut.done()
    rig.run(RETRY_BACKOFF_MS * 0.4 + 2)  # past its latest end
    assert len(rig.produces()) == 2
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], base_offset=3))
    rig.run()
    assert fut.result(timeout=0).offset == 3


def test_a_non_retriable_error_fails_the_records_at_once() -> None:
    rig = make_rig()
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], InvalidRecordError.code))
    rig.run()
    with pytest.raises(InvalidRecordError):
        fut.result(timeout=0)
    rig.run(10_000)
    assert len(rig.produces()) == 1


def test_retries_zero_fails_a_retriable_error() -> None:
    rig = make_rig(retries=0)
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    with pytest.raises(NotLeaderOrFollowerError):
        fut.result(timeout=0)


def test_a_disconnect_retries_the_batch_on_the_next_connection() -> None:
    rig = make_rig()
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.disconnect(0)
    rig.run()
    assert not fut.done()
    rig.client.up(0)
    rig.run(RETRY_BACKOFF_MS * 0.8 - 1)
    assert len(rig.produces()) == 1  # a disconnect is retried after the backoff too
    rig.run(RETRY_BACKOFF_MS * 0.4 + 2)
    assert len(rig.produces()) == 2
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], base_offset=1))
    rig.run()
    assert fut.result(timeout=0).offset == 1


def test_a_leader_that_refuses_connections_makes_the_sender_ask_for_new_metadata() -> None:
    """Apache Kafka, a leader SIGKILLed while its partition's batches wait: the connect attempts are refused,
    nothing is in flight to fail, and only new metadata names the new leader (Java's handleServerDisconnect)."""
    rig = make_rig()
    rig.connect(leaders=[0, 0])
    assert rig.client.pending(ApiKey.METADATA) == []
    rig.client.refuse(0)
    fut = rig.append()
    rig.run()
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    (refresh,) = rig.client.pending(ApiKey.METADATA)
    assert refresh.node == 1
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [1, 1]}))
    rig.run()  # the answer is read
    rig.run()  # the batch drains to the new leader
    (produce,) = rig.produces()
    assert produce.node == 1
    rig.client.respond(ApiKey.PRODUCE, produce_body(produce, base_offset=7))
    rig.run()
    assert fut.result(timeout=0).offset == 7


def test_a_queued_batch_expires_at_delivery_timeout_ms() -> None:
    rig = make_rig(delivery_timeout_ms=5_000)
    rig.connect()
    rig.client.disconnect(0)
    fut = rig.append()
    rig.run(4_999)
    assert not fut.done()
    rig.run(1)
    with pytest.raises(DeliveryTimeoutError, match="5000 ms has passed since batch creation"):
        fut.result(timeout=0)


def test_each_request_carries_its_completion_handler() -> None:
    """Java's RequestCompletionHandler: what to do with an answer travels with the request, so the answer
    of every kind of request reaches its handler; nothing is dispatched by a tag that could fail to match."""
    rig = make_rig(idempotent=True)
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=7))
    rig.run()
    assert fut.result(timeout=0).offset == 7
    kinds = {r.api_key for r in rig.client.requests}
    assert kinds == {ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID, ApiKey.PRODUCE}
    assert all(callable(r.context) for r in rig.client.requests), [r.context for r in rig.client.requests]
    # Answered, each through its own handler: metadata is no longer in flight and the producer id is set.
    assert rig.idempotence is not None and rig.idempotence.has_producer_id
    rig.metadata.request_update()
    rig.run(advance_ms=RETRY_BACKOFF_MS)
    assert len(rig.client.pending(ApiKey.METADATA)) == 1  # a new one could be sent: the first was handled


def test_duplicate_sequence_number_is_success() -> None:
    rig = make_rig(idempotent=True)
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], DuplicateSequenceNumberError.code))
    rig.run()
    assert fut.exception(timeout=0) is None


def test_message_too_large_splits_the_batch_and_sends_both_halves() -> None:
    rig = make_rig()
    rig.connect()
    futs = [rig.append(b"r%d" % i) for i in range(10)]
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], MessageTooLargeError.code))
    rig.run()
    rig.run()
    halves = rig.produces()[1:]
    assert len(halves) == 2  # both halves are ready at once (a split is not a retry: no backoff)
    counts = sorted(batch_header(r).records_count for r in halves)
    assert counts == [5, 5]
    for r in halves:
        rig.client.respond(ApiKey.PRODUCE, produce_body(r, base_offset=0))
    rig.run()
    assert all(f.exception(timeout=0) is None for f in futs)


# --- idempotence -------------------------------------------------------------------------------------------


def test_init_producer_id_comes_before_produce_and_produce_carries_it() -> None:
    rig = make_rig(idempotent=True)
    rig.append()
    rig.run()
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.run()
    assert rig.produces() == []
    init = rig.client.pending(ApiKey.INIT_PRODUCER_ID)
    assert len(init) == 1 and (init[0].body["producer_id"], init[0].body["producer_epoch"]) == (-1, -1)
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(1000, 4))
    rig.run()
    rig.run()
    b = batch_header(rig.produces()[0])
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (1000, 4, 0)


def test_a_failed_numbered_batch_bumps_the_epoch_locally_without_init_producer_id() -> None:
    # Java's bumpIdempotentEpochAndResetIdIfNeeded: same id, epoch + 1, sequences from 0.
    rig = make_rig(idempotent=True)
    rig.connect()
    rig.append(b"a")
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], InvalidRecordError.code))
    rig.run()
    fut = rig.append(b"b")
    rig.run()
    b = batch_header(rig.produces()[1])
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (1000, 1, 0)
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.INIT_PRODUCER_ID]) == 1
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1]))
    rig.run()
    assert fut.exception(timeout=0) is None


def test_an_expired_numbered_batch_bumps_the_epoch_locally() -> None:
    rig = make_rig(idempotent=True, delivery_timeout_ms=5_000)
    rig.connect()
    first = rig.append(b"a")
    rig.run()  # sequence 0 is in flight
    rig.client.disconnect(0)
    rig.run()
    rig.run(5_000)
    assert isinstance(first.exception(timeout=0), DeliveryTimeoutError)
    rig.client.up(0)
    rig.append(b"b")
    rig.run()
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.run()
    b = batch_header(rig.produces()[-1])
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (1000, 1, 0)
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.INIT_PRODUCER_ID]) == 1


def test_an_exhausted_epoch_asks_for_a_new_producer_id() -> None:
    rig = make_rig(idempotent=True)
    rig.run()
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.run()
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(1000, MAX_EPOCH))
    rig.run()
    rig.append(b"a")
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], InvalidRecordError.code))
    rig.run()
    rig.append(b"b")
    rig.run()
    init = rig.client.pending(ApiKey.INIT_PRODUCER_ID)
    assert len(init) == 1 and (init[0].body["producer_id"], init[0].body["producer_epoch"]) == (-1, -1)
    assert len(rig.produces()) == 1  # nothing goes under the old id meanwhile
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(2000, 0))
    rig.run()
    rig.run()
    b = batch_header(rig.produces()[1])
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (2000, 0, 0)


def test_a_fatal_init_producer_id_error_fails_queued_records_and_reports_once() -> None:
    rig = make_rig(idempotent=True)
    futs = [rig.append(b"a"), rig.append(b"b", partition=1)]
    rig.run()
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 1]}))
    rig.run()
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(error_code=ClusterAuthorizationFailedError.code))
    rig.run()
    for f in futs:
        assert isinstance(f.exception(timeout=0), ClusterAuthorizationFailedError)
    assert len(rig.fatal) == 1 and isinstance(rig.fatal[0], ClusterAuthorizationFailedError)
    late = rig.append(b"raced in")  # appended while the error was being raised: it still gets an outcome
    rig.run()
    assert isinstance(late.exception(timeout=0), ClusterAuthorizationFailedError)
    assert rig.produces() == []


# --- ordering --------------------------------------------------------------------------------------------


def test_with_one_in_flight_a_partition_is_muted_even_towards_a_new_leader() -> None:
    rig = make_rig(guarantee_order=True, max_in_flight=1, batch_size=256)
    rig.connect(leaders=[0, 0])
    first = [rig.append(b"x" * 50) for _ in range(3)]  # one full 256-byte batch
    rig.run()  # the first batch is in flight to node 0
    assert len(rig.produces()) == 1
    second = [rig.append(b"y" * 50) for _ in range(3)]
    # The leader moves to node 1, which has a free connection: still nothing of partition 0 may go there.
    rig.metadata.request_update()
    rig.run(RETRY_BACKOFF_MS)
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [1, 1]}))
    rig.run()
    rig.run()
    assert len(rig.produces()) == 1, "a second batch of a muted partition left before the first resolved"
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    assert len(rig.produces()) == 1, "the second batch overtook the first, which is waiting to be retried"
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    # The retried first batch goes before the second, to the new leader.
    assert [r.node for r in rig.produces()] == [0, 1]
    assert batch_header(rig.produces()[1]).records_count == len(first)
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], base_offset=0))
    rig.run()  # takes the answer in: the partition is unmuted
    rig.run()
    assert len(rig.produces()) == 3 and rig.produces()[2].node == 1
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[2], base_offset=4))
    rig.run()
    assert [f.result(timeout=0).offset for f in first + second] == [0, 1, 2, 4, 5, 6]


def test_without_muting_a_second_batch_may_go_while_the_first_is_in_flight() -> None:
    # The control for the test above: with five in flight, the second batch leaves at once.
    rig = make_rig(batch_size=256)
    rig.connect()
    for _ in range(3):
        rig.append(b"x" * 50)
    rig.run()
    for _ in range(3):
        rig.append(b"y" * 50)
    rig.run()
    assert len(rig.produces()) == 2


# --- produce requests and their answers -----------------------------------------------------------------------


def test_one_request_per_leader_carries_acks_timeout_and_every_ready_partition() -> None:
    rig = make_rig()
    rig.connect(leaders=[0, 0])
    rig.append(b"a", 0)
    rig.append(b"b", 1)
    rig.run()
    (req,) = rig.produces()
    assert req.body["acks"] == -1 and req.body["timeout_ms"] == 30_000 and req.body["transactional_id"] is None
    assert sorted(req.produce_partitions) == [(TOPIC, 0), (TOPIC, 1)]
    assert rig.sender.metrics.totals["record-send-total"] == 0  # counted when acknowledged


def test_batches_for_different_leaders_go_in_separate_requests() -> None:
    rig = make_rig()
    rig.connect(leaders=[0, 1])
    rig.append(b"a", 0)
    rig.append(b"b", 1)
    rig.run()
    assert sorted((r.node, tuple(r.produce_partitions)) for r in rig.produces()) == [
        (0, ((TOPIC, 0),)), (1, ((TOPIC, 1),))]


def test_acks_zero_completes_records_without_an_offset_once_written() -> None:
    rig = make_rig(acks=0)
    rig.connect()
    fut = rig.append()
    rig.run()
    (req,) = rig.produces()
    assert req.body["acks"] == 0 and not req.expect_response
    rig.run()
    md = fut.result(timeout=0)
    assert md.offset == -1 and md.timestamp == 0
    assert rig.sender.metrics.totals["record-send-total"] == 1


def test_offsets_and_log_append_time_come_from_the_answer() -> None:
    rig = make_rig()
    rig.connect()
    futs = [rig.append(b"%d" % i) for i in range(3)]
    rig.run()
    body = produce_body(rig.produces()[0], base_offset=70)
    body["responses"][0]["partition_responses"][0]["log_append_time_ms"] = 123_456
    rig.client.respond(ApiKey.PRODUCE, body)
    rig.run()
    assert [(f.result(timeout=0).offset, f.result(timeout=0).timestamp) for f in futs] == [
        (70, 123_456), (71, 123_456), (72, 123_456)]
    assert rig.sender.metrics.totals["record-send-total"] == 3


def test_a_record_is_counted_as_sent_before_its_future_completes() -> None:
    # flush() returns when the futures complete: a record-send-total read right after it must include them
    # (it once lagged by the last batch, counted after completion).
    rig = make_rig()
    rig.connect()
    futs = [rig.append(b"%d" % i) for i in range(3)]
    seen: list[int] = []
    futs[-1].add_done_callback(lambda _: seen.append(rig.sender.metrics.totals["record-send-total"]))
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=0))
    rig.run()
    assert seen == [3]


def test_an_answer_that_leaves_out_a_partition_fails_its_records_naming_it() -> None:
    rig = make_rig()
    rig.connect()
    lost = rig.append(b"a", 0)
    kept = rig.append(b"b", 1)
    rig.run()
    body = produce_body(rig.produces()[0], base_offset=5)
    body["responses"][0]["partition_responses"] = [p for p in body["responses"][0]["partition_responses"]
                                                   if p["index"] == 1]
    rig.client.respond(ApiKey.PRODUCE, body)
    rig.run()
    with pytest.raises(KafkaError, match="the broker's response did not mention t-0"):
        lost.result(timeout=0)
    assert kept.result(timeout=0).offset == 5
    assert rig.sender.metrics.totals["record-error-total"] == 1


def test_a_stale_leader_answer_refreshes_metadata_before_the_retry() -> None:
    rig = make_rig()
    rig.connect(leaders=[0, 0])
    fut = rig.append()
    rig.run()
    rig.clock.advance(RETRY_BACKOFF_MS)  # the last refresh is a backoff old: a new one may go at once
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    rig.run()
    metadata_requests = [r for r in rig.client.requests if r.api_key == ApiKey.METADATA]
    assert len(metadata_requests) == 2  # not at metadata.max.age.ms: the answer said the leader is stale
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [1, 1]}))
    rig.run()  # the answer is read at the end of a pass
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    assert rig.produces()[-1].node == 1  # the retry follows the new leader
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[-1], base_offset=9))
    rig.run()
    assert fut.result(timeout=0).offset == 9
    assert rig.sender.metrics.totals["record-retry-total"] == 1


def test_a_connection_error_on_produce_refreshes_metadata_and_retries() -> None:
    rig = make_rig()
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.clock.advance(RETRY_BACKOFF_MS)
    rig.client.respond(ApiKey.PRODUCE, error=KafkaConnectionError("reset by peer"))
    rig.run()
    rig.run()
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.METADATA]) == 2
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    assert len(rig.produces()) == 2
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[-1], base_offset=2))
    rig.run()
    assert fut.result(timeout=0).offset == 2


def test_a_retriable_answer_after_the_delivery_timeout_fails_with_the_cause() -> None:
    rig = make_rig(delivery_timeout_ms=5_000)
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.clock.advance(5_000)
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    err = fut.exception(timeout=0)
    assert isinstance(err, DeliveryTimeoutError) and isinstance(err.cause, NotLeaderOrFollowerError)
    assert "delivery.timeout.ms passed" in str(err)


def test_a_retriable_answer_just_inside_the_delivery_timeout_is_retried() -> None:
    rig = make_rig(delivery_timeout_ms=5_000)
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.clock.advance(4_999)
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    assert not fut.done()


def test_retries_are_counted_per_batch_up_to_the_setting() -> None:
    rig = make_rig(retries=2)
    rig.connect()
    fut = rig.append()
    rig.run()
    for attempt in range(3):
        rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[-1], NotLeaderOrFollowerError.code))
        rig.run()
        if attempt < 2:
            assert not fut.done()
            for _ in range(3):  # answer the metadata refresh, then wait out the backoff
                for _req in rig.client.pending(ApiKey.METADATA):
                    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
                rig.run(1_000)
    assert len(rig.produces()) == 3
    with pytest.raises(NotLeaderOrFollowerError):
        fut.result(timeout=0)


class Recorder:
    def __init__(self) -> None:
        self.acks: list[tuple[Any, Any]] = []

    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        self.acks.append((metadata, error))


class Raising:
    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        raise ValueError("interceptor bug")


def test_interceptors_hear_every_record_once_with_its_metadata_or_error() -> None:
    seen = Recorder()
    rig = make_rig(interceptors=[Raising(), seen])
    rig.connect()
    rig.append(b"abc", 0)
    fut, _ = rig.accumulator.append(TOPIC, 0, 77, b"kk", b"defg", None, None)
    doomed = rig.append(b"x", 1)
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=10,
                                                     errors={(TOPIC, 1): InvalidRecordError.code}))
    rig.run()
    ok = [(md.offset, md.timestamp, md.serialized_key_size, md.serialized_value_size) for md, e in seen.acks
          if e is None]
    assert ok == [(10, 0, -1, 3), (11, 77, 2, 4)]
    failed = [(md, type(e)) for md, e in seen.acks if e is not None]
    assert failed == [(None, InvalidRecordError)]
    assert fut.result(timeout=0).offset == 11 and isinstance(doomed.exception(timeout=0), InvalidRecordError)


def test_cause_for_names_a_missing_leader_or_the_leaders_connection() -> None:
    rig = make_rig()
    rig.connect(leaders=[0, -1])
    rig.append(b"a", 0)
    rig.append(b"b", 1)
    batches = {b.partition: b for b in rig.accumulator.incomplete_batches()}
    assert "no leader known for t-1" in str(rig.sender.cause_for(batches[1]))
    assert rig.sender.cause_for(batches[0]) is None
    rig.client.down.add(0)
    assert "node 0 is down" in str(rig.sender.cause_for(batches[0]))


def test_rebootstrap_required_in_a_metadata_answer_rebootstraps_and_keeps_the_old_view() -> None:
    """KIP-1102: a Metadata answer whose top-level error is REBOOTSTRAP_REQUIRED (v13+) is not adopted; the
    client goes back to bootstrap.servers, and the request is retried after the backoff."""
    rig = make_rig()
    rig.run()
    rig.client.respond(ApiKey.METADATA, {**metadata_body({7: ("elsewhere", 1)}, {TOPIC: [7]}),
                                         "error_code": RebootstrapRequiredError.code})
    rig.run()
    assert rig.client.rebootstraps == ["node 0 answered Metadata with REBOOTSTRAP_REQUIRED"]
    assert 7 not in rig.client.nodes
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.METADATA]) == 2


def test_a_failed_metadata_answer_is_retried_after_the_backoff() -> None:
    rig = make_rig()
    rig.run()
    rig.client.respond(ApiKey.METADATA, error=KafkaConnectionError("refused"))
    rig.run()
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.METADATA]) == 1
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.METADATA]) == 2


# --- closing ------------------------------------------------------------------------------------------------


def test_initiate_close_closes_the_accumulator_stops_the_loop_and_wakes_the_thread() -> None:
    rig = make_rig()
    rig.sender.initiate_close()
    assert rig.accumulator.closed is True and rig.sender._running is False and rig.sender._forced is False
    assert rig.client.wakeups == 1


def test_after_force_close_a_retriable_error_fails_the_batch_instead_of_retrying() -> None:
    rig = make_rig()
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.sender.force_close()
    assert rig.accumulator.closed is True and rig.sender._running is False and rig.client.wakeups == 1
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    with pytest.raises(NotLeaderOrFollowerError):
        fut.result(timeout=0)


# --- what the pass waits for ------------------------------------------------------------------------------------


def test_the_poll_waits_for_linger_then_no_more_than_max_poll_ms() -> None:
    rig = make_rig(linger_ms=100)
    rig.connect()
    rig.append()
    rig.run(30)
    assert rig.client.polls[-1] == 70  # the batch is due in 70 ms: the poll must not sleep past it
    rig.run(70)
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0]))
    rig.run()
    rig.run()
    assert rig.client.polls[-1] == MAX_POLL_MS  # nothing due: the longest sleep, not metadata.max.age.ms
    assert min(rig.client.polls) >= 0.0


def test_the_poll_waits_for_a_connection_delay_when_no_leader_connection_is_ready() -> None:
    rig = make_rig(linger_ms=0)
    rig.connect()
    rig.client.down.add(0)
    rig.append()
    rig.run()
    assert rig.client.polls[-1] == 50.0  # FakeNetworkClient's connection delay for a down node


def test_a_throttled_answer_holds_that_nodes_next_produce_until_the_window_ends() -> None:
    # Java's SenderTest.testQuotaMetrics and NetworkClient.maybeThrottle: the node is muted for the throttle
    # time from the answer's arrival; the sender sleeps exactly that long instead of spinning, then sends.
    rig = make_rig(linger_ms=0)
    rig.connect()
    first = rig.append()
    rig.run()
    (req,) = rig.produces()
    rig.client.respond(ApiKey.PRODUCE, {**produce_body(req, base_offset=0), "throttle_time_ms": 300})
    rig.run()  # the answer arrives in this pass's poll, at clock.now
    assert first.result(timeout=0).offset == 0
    second = rig.append()
    rig.run()
    assert len(rig.produces()) == 1
    assert rig.client.polls[-1] == 300.0
    rig.run(299)
    assert len(rig.produces()) == 1
    assert rig.client.polls[-1] == 1.0
    rig.run(1)
    assert len(rig.produces()) == 2
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], base_offset=1))
    rig.run()
    assert second.result(timeout=0).offset == 1
    m = rig.sender.metrics.snapshot()
    # Java's sensor is fed by every answer: Metadata (none named: 0), Produce 300, Produce 0.
    assert m["produce-throttle-time-max"] == 300.0
    assert m["produce-throttle-time-avg"] == 100.0


def test_metadata_waits_for_the_connection_delay_of_a_node_not_ready() -> None:
    rig = make_rig()
    rig.client.down.update({1})
    rig.client.max_in_flight = 0  # node 0 is up but has no room: no connection delay, so nothing to wait for
    rig.run()
    assert [r.api_key for r in rig.client.requests] == []
    assert rig.client.polls[-1] == MAX_POLL_MS


def test_a_metadata_request_asks_for_the_topics_and_auto_creation() -> None:
    rig = make_rig()
    rig.run()
    (req,) = rig.client.pending(ApiKey.METADATA)
    # The body every client sends (cluster.metadata_request_body): only these two fields vary.
    assert [t["name"] for t in req.body["topics"]] == [TOPIC] and req.body["allow_auto_topic_creation"] is True
    rig.run()
    assert len(rig.client.pending(ApiKey.METADATA)) == 1  # one in flight at a time
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 1]}))
    rig.run()
    assert rig.metadata.cluster.leader_for(TOPIC, 1) == 1 and rig.client.nodes == NODES


def test_a_down_node_metadata_is_asked_of_sets_the_error_callers_see() -> None:
    rig = make_rig()
    rig.client.down.update({0, 1})
    rig.client.least_loaded_node = lambda now: 0  # type: ignore[method-assign]
    rig.run()
    assert rig.client.requests == []
    assert "node 0 is down" in str(rig.metadata.last_error)
    assert rig.client.polls[-1] == 50.0


def test_no_node_for_metadata_waits_the_retry_backoff() -> None:
    rig = make_rig()
    rig.client.down.update({0, 1})
    rig.run()
    assert rig.client.requests == [] and rig.client.polls[-1] == RETRY_BACKOFF_MS


def test_an_empty_metadata_answer_counts_as_a_failure() -> None:
    rig = make_rig()
    rig.run()
    rig.client.respond(ApiKey.METADATA, None)
    rig.run()
    assert "empty metadata response" in str(rig.metadata.last_error)
    assert rig.metadata.cluster.leader_for(TOPIC, 0) is None


# --- idempotence: producer id ---------------------------------------------------------------------------------


def test_init_producer_id_waits_for_its_backoff_after_a_retriable_error() -> None:
    rig = make_rig(idempotent=True)
    rig.run()
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.run()
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, error=KafkaConnectionError("reset"))
    rig.run()
    rig.run(RETRY_BACKOFF_MS - 1)
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.INIT_PRODUCER_ID]) == 1
    assert rig.client.polls[-1] == 1.0  # the retry is due in 1 ms
    rig.run(1)
    init = rig.client.pending(ApiKey.INIT_PRODUCER_ID)
    assert len(init) == 1 and init[0].body == {"transactional_id": None, "transaction_timeout_ms": 2147483647,
                                               "producer_id": -1, "producer_epoch": -1}


def test_init_producer_id_with_no_node_waits_the_retry_backoff() -> None:
    rig = make_rig(idempotent=True)
    rig.client.down.update({0, 1})
    rig.run()
    assert rig.client.requests == [] and rig.client.polls[-1] == RETRY_BACKOFF_MS


def test_init_producer_id_waits_for_a_connection_delay() -> None:
    rig = make_rig(idempotent=True)
    rig.run()  # Metadata to node 0 (left unanswered: no metadata wait), InitProducerId to node 1
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, error=KafkaConnectionError("reset"))
    rig.run()
    rig.client.down.add(1)
    rig.client.least_loaded_node = lambda now: 1  # type: ignore[method-assign]
    rig.run(RETRY_BACKOFF_MS)
    assert rig.client.pending(ApiKey.INIT_PRODUCER_ID) == [] and rig.client.polls[-1] == 50.0


def test_a_fatal_error_reaches_idempotence_metadata_waiters_and_every_batch() -> None:
    rig = make_rig(idempotent=True)
    futs = [rig.append(b"a")]
    rig.run()
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.run()
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(error_code=ClusterAuthorizationFailedError.code))
    rig.run()
    err = rig.sender.fatal_error
    assert isinstance(err, ClusterAuthorizationFailedError) and "InitProducerId" in str(err)
    assert rig.idempotence is not None and rig.idempotence.fatal_error is err
    assert rig.fatal == [err]
    with pytest.raises(ClusterAuthorizationFailedError):
        rig.metadata.wait_for_topic("other", 0, lambda: None, clock=rig.clock)
    assert futs[0].exception(timeout=0) is err
    rig.run(10_000)
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.INIT_PRODUCER_ID]) == 1


def test_fatal_keeps_its_cause() -> None:
    rig = make_rig()
    cause = KafkaConnectionError("first")
    err = KafkaError("fatal")
    rig.sender._fatal(err, cause)
    assert err.__cause__ is cause and rig.sender.fatal_error is err


# --- authentication ---------------------------------------------------------------------------------------------


def test_an_authentication_failure_fails_waiting_batches_and_bumps_the_epoch_for_a_numbered_one() -> None:
    rig = make_rig(idempotent=True)
    rig.connect()
    fut = rig.append()
    rig.run()  # numbered and in flight
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()  # waiting for its retry, numbered
    error = AuthenticationError("bad password")
    rig.client._auth_failures.append(error)
    rig.run()
    assert fut.exception(timeout=0) is error
    assert rig.metadata.authentication_error is error
    assert rig.idempotence is not None and rig.idempotence.bump_requested


def test_an_authentication_failure_with_nothing_numbered_waiting_bumps_no_epoch() -> None:
    rig = make_rig(idempotent=True)
    rig.connect()
    fut = rig.append()
    rig.client._auth_failures.append(AuthenticationError("bad password"))
    rig.client.down.add(0)
    rig.run()
    assert isinstance(fut.exception(timeout=0), AuthenticationError)
    assert rig.idempotence is not None and not rig.idempotence.bump_requested


# --- failures and retries, by their side effects ----------------------------------------------------------------


def test_a_failed_record_has_no_offset_and_counts_as_an_error() -> None:
    rig = make_rig()
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], InvalidRecordError.code))
    rig.run()
    assert isinstance(fut.exception(timeout=0), InvalidRecordError)
    assert rig.sender.metrics.totals["record-error-total"] == 1
    assert rig.sender.metrics.totals["record-retry-total"] == 0


def test_a_retry_counts_its_records_and_an_idempotent_retry_stays_among_the_unresolved() -> None:
    rig = make_rig(idempotent=True)
    rig.connect()
    rig.append(b"a")
    rig.append(b"b")
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    assert rig.sender.metrics.totals["record-retry-total"] == 2
    # Java's inflightBatchesBySequence: a retry waiting in its deque is still its partition's oldest batch.
    assert rig.idempotence is not None and rig.idempotence.first_in_flight_sequence((TOPIC, 0)) == 0
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    b = batch_header(rig.produces()[1])
    assert (b.base_sequence, b.records_count) == (0, 2)  # the retry keeps its numbers


def test_a_failed_numbered_batch_names_itself_in_the_bump_reason() -> None:
    rig = make_rig(idempotent=True)
    rig.connect()
    rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], InvalidRecordError.code))
    rig.run()
    assert rig.idempotence is not None and rig.idempotence.bump_reason.startswith("batch for t-0 failed: ")


def test_interceptors_hear_of_a_null_value_as_size_minus_one() -> None:
    seen = Recorder()
    rig = make_rig(interceptors=[seen])
    rig.connect()
    rig.accumulator.append(TOPIC, 0, 5, b"k", None, None, None)
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=3))
    rig.run()
    ((md, err),) = seen.acks
    assert err is None and (md.offset, md.serialized_key_size, md.serialized_value_size) == (3, 1, -1)


def test_every_interceptor_hears_every_record_even_after_one_raised() -> None:
    seen = Recorder()
    rig = make_rig(interceptors=[Raising(), seen, Raising()])
    rig.connect()
    rig.append(b"a")
    rig.append(b"b")
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], base_offset=0))
    rig.run()
    assert [md.offset for md, _ in seen.acks] == [0, 1]


# --- transactions -----------------------------------------------------------------------------------------------


def txn_rig(**kwargs: Any) -> tuple[Rig, TransactionManager]:
    """A transactional rig after init_transactions(): the coordinator is node COORDINATOR."""
    rig = make_rig(transactional=True, **kwargs)
    txn = rig.txn
    assert txn is not None
    init = txn.initialize()
    rig.run()
    (find,) = rig.client.pending(ApiKey.FIND_COORDINATOR)
    assert find.body == {"key": "tx", "key_type": 1} and rig.client.pending(ApiKey.INIT_PRODUCER_ID) == []
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.client.respond(ApiKey.FIND_COORDINATOR, {"error_code": 0, "node_id": COORDINATOR, "host": "10.0.0.2",
                                                 "port": 9094})
    rig.run()
    assert rig.client.added == {COORDINATOR: ("10.0.0.2", 9094)}
    rig.run()
    (req,) = rig.client.pending(ApiKey.INIT_PRODUCER_ID)
    assert req.node == COORDINATOR
    assert rig.client.versions[-1] == (ApiKey.INIT_PRODUCER_ID, SUPPORTED_VERSIONS[ApiKey.INIT_PRODUCER_ID][1])
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(1000, 3))
    rig.run()
    assert init.is_done and init.error is None and txn.state is State.READY
    return rig, txn


def add_partitions_answer(*partitions: int, code: int = 0) -> dict[str, Any]:
    return {"error_code": 0, "results_by_topic_v3_and_below": [{"name": TOPIC, "results_by_partition": [
        {"partition_index": p, "partition_error_code": code} for p in partitions]}]}


def test_a_transaction_adds_its_partition_before_produce_then_commits() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    fut = rig.append()
    rig.run()
    (add,) = rig.client.pending(ApiKey.ADD_PARTITIONS_TO_TXN)
    # The broker lists v0-v9; clients send AddPartitionsToTxn v3 at most (v4+ is the brokers' own form).
    assert add.node == COORDINATOR and rig.client.versions[-1] == (ApiKey.ADD_PARTITIONS_TO_TXN, 3)
    assert rig.produces() == []  # not before the coordinator added the partition
    assert rig.client.polls[-1] == MAX_POLL_MS  # the answer wakes the poll
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(0))
    rig.run()
    rig.run()
    (produce,) = rig.produces()
    assert produce.body["transactional_id"] == "tx"
    b = batch_header(produce)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (1000, 3, 0, True)
    rig.client.respond(ApiKey.PRODUCE, produce_body(produce, base_offset=4))
    rig.run()
    assert fut.result(timeout=0).offset == 4
    commit = txn.begin_commit()
    rig.run()
    (end,) = rig.client.pending(ApiKey.END_TXN)
    assert end.node == COORDINATOR and end.body["committed"] is True
    rig.client.respond(ApiKey.END_TXN, {"error_code": 0})
    rig.run()
    assert commit.is_done and commit.error is None and txn.state is State.READY
    # The coordinator's requests, too, carry their handlers (the transaction manager's steps).
    assert {ApiKey.FIND_COORDINATOR, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.END_TXN} <= {r.api_key for r in rig.client.requests}
    assert all(callable(r.context) for r in rig.client.requests)


def test_a_commit_sends_what_waits_for_linger_at_once_and_the_next_transaction_lingers_again() -> None:
    rig, txn = txn_rig(linger_ms=10_000)
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    rig.append()
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(0))
    rig.run()
    rig.run(10)
    assert rig.produces() == []  # lingering
    commit = txn.begin_commit()
    rig.run()
    assert len(rig.produces()) == 1  # the commit flushed it
    assert rig.client.pending(ApiKey.END_TXN) == []  # EndTxn waits for the batch
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0]))
    rig.run()
    rig.run()
    rig.client.respond(ApiKey.END_TXN, {"error_code": 0})
    rig.run()
    assert commit.is_done and commit.error is None
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    rig.append()
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(0))
    rig.run()
    rig.run(10)
    assert len(rig.produces()) == 1  # no flush any more: linger.ms applies again
    assert rig.accumulator._flushes == 0


def test_an_abortable_error_fails_the_unsent_batches_with_its_cause() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN,
                       add_partitions_answer(0, code=TopicAuthorizationFailedError.code))
    rig.run()
    rig.run()
    assert txn.state is State.ABORTABLE_ERROR
    assert isinstance(fut.exception(timeout=0), TopicAuthorizationFailedError)
    assert rig.produces() == []
    assert rig.idempotence is not None and not rig.idempotence.bump_requested  # nothing numbered was lost
    abort = txn.begin_abort()
    rig.run()
    assert abort.is_done and abort.error is None  # the coordinator never heard of it: no EndTxn
    assert rig.client.pending(ApiKey.END_TXN) == []


def test_an_abort_fails_queued_batches_as_aborted_and_a_numbered_one_bumps_the_epoch() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    first = rig.append(b"a")
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(0))
    rig.run()
    rig.run()  # numbered, in flight
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()  # waits for its retry with its sequence numbers
    abort = txn.begin_abort()
    rig.run()
    err = first.exception(timeout=0)
    assert isinstance(err, TransactionAbortedError) and "transaction was aborted" in str(err)
    assert rig.idempotence is not None and rig.idempotence.bump_requested
    rig.run()
    (end,) = rig.client.pending(ApiKey.END_TXN)
    assert end.body["committed"] is False
    rig.client.respond(ApiKey.END_TXN, {"error_code": 0})
    rig.run()
    rig.run()
    (bump,) = rig.client.pending(ApiKey.INIT_PRODUCER_ID)
    assert (bump.body["producer_id"], bump.body["producer_epoch"]) == (1000, 3)
    assert not abort.is_done


def test_a_coordinator_that_is_down_is_forgotten_and_looked_up_again_after_the_backoff() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    rig.append()
    rig.client.down.add(COORDINATOR)
    rig.run()
    assert rig.client.pending(ApiKey.ADD_PARTITIONS_TO_TXN) == []
    assert rig.client.polls[-1] == 50.0  # its connection delay, below the retry backoff
    assert ("txn", "tx") not in txn.coordinators
    rig.client.up(COORDINATOR)
    rig.run(RETRY_BACKOFF_MS - 1)
    assert rig.client.pending(ApiKey.FIND_COORDINATOR) == []
    rig.run(1)
    assert len(rig.client.pending(ApiKey.FIND_COORDINATOR)) == 1


def test_a_coordinator_that_metadata_no_longer_lists_is_looked_up_again() -> None:
    # A killed coordinator, fenced by the controller, drops out of metadata: the client forgets the node and
    # has no error for it. Kept, the EndTxn would wait for it until transaction.timeout.ms (seen on 3 brokers).
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    rig.append()
    del rig.client.nodes[COORDINATOR]
    rig.run()
    assert rig.client.pending(ApiKey.ADD_PARTITIONS_TO_TXN) == []
    assert ("txn", "tx") not in txn.coordinators
    rig.run(RETRY_BACKOFF_MS)
    assert len(rig.client.pending(ApiKey.FIND_COORDINATOR)) == 1


def test_a_coordinator_not_ready_without_an_error_is_kept_and_waits_at_most_the_backoff() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    rig.append()
    rig.client.max_in_flight = 0  # not ready, no error: the connection is just busy
    rig.run()
    assert rig.client.pending(ApiKey.ADD_PARTITIONS_TO_TXN) == []
    assert txn.coordinators[("txn", "tx")] == COORDINATOR
    assert rig.client.polls[-1] == 1.0  # a zero connection delay still waits a millisecond, never spins


def test_find_coordinator_with_no_broker_waits_the_retry_backoff() -> None:
    rig = make_rig(transactional=True)
    assert rig.txn is not None
    rig.txn.initialize()
    rig.client.down.update({0, 1})
    rig.run()
    assert rig.client.requests == [] and rig.client.polls[-1] == RETRY_BACKOFF_MS


def test_a_fenced_transactional_producer_fails_the_batch_and_the_producer() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(0))
    rig.run()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], ProducerFencedError.code))
    rig.run()
    assert isinstance(fut.exception(timeout=0), ProducerFencedError)
    assert len(rig.produces()) == 1  # not retried
    assert txn.state is State.FATAL_ERROR and isinstance(rig.sender.fatal_error, ProducerFencedError)


def txn_rig_producing() -> tuple[Rig, TransactionManager]:
    """A transaction with partition 0 added (AddPartitionsToTxn answered) and a first record's Produce sent."""
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    rig.append(b"a", 0)
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(0))
    rig.run()
    rig.run()
    return rig, txn


def test_while_a_coordinator_request_is_sent_or_in_flight_no_produce_goes() -> None:
    # Java's maybeSendAndPollTransactionalRequest: a pass that sent or awaits a coordinator request sends no
    # produce data, even for partitions already in the transaction.
    rig, txn = txn_rig_producing()
    assert len(rig.produces()) == 1
    # Acknowledged, so partition 0's next batch may go while another is in flight (may_pipeline).
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0]))
    rig.run()
    rig.append(b"a2", 0)
    rig.run()
    assert len(rig.produces()) == 2
    txn.maybe_add_partition((TOPIC, 1))
    rig.append(b"b", 0)
    rig.append(b"c", 1)
    rig.run()  # AddPartitionsToTxn for partition 1 goes: nothing else in this pass
    assert len(rig.client.pending(ApiKey.ADD_PARTITIONS_TO_TXN)) == 1 and len(rig.produces()) == 2
    rig.run()  # awaiting its answer
    assert len(rig.produces()) == 2
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(1))
    rig.run()
    rig.run()
    assert len(rig.produces()) == 3 and sorted(rig.produces()[2].produce_partitions) == [(TOPIC, 0), (TOPIC, 1)]
    assert rig.produces()[2].sent_ms == rig.clock.now


def test_a_coordinator_that_cannot_be_reached_does_not_hold_back_produce() -> None:
    rig, txn = txn_rig_producing()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0]))
    rig.run()
    txn.maybe_add_partition((TOPIC, 1))
    rig.append(b"b", 0)
    rig.append(b"c", 1)
    rig.client.down.add(COORDINATOR)
    rig.run()  # AddPartitionsToTxn cannot go; partition 0's batch may
    assert rig.client.pending(ApiKey.ADD_PARTITIONS_TO_TXN) == []
    assert [r.produce_partitions for r in rig.produces()] == [[(TOPIC, 0)], [(TOPIC, 0)]]


def test_a_coordinator_request_without_an_answer_is_looked_up_and_sent_again_after_the_backoff() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    rig.append()
    rig.run()
    rig.client.disconnect(COORDINATOR)
    rig.client.up(COORDINATOR)
    rig.run()  # no answer: the coordinator is forgotten, the request waits for the backoff
    assert ("txn", "tx") not in txn.coordinators
    rig.run(RETRY_BACKOFF_MS)
    rig.client.respond(ApiKey.FIND_COORDINATOR, {"error_code": 0, "node_id": COORDINATOR, "host": "10.0.0.2",
                                                 "port": 9094})
    rig.run()
    rig.run()
    assert len(rig.client.pending(ApiKey.ADD_PARTITIONS_TO_TXN)) == 1


def test_a_batch_retried_while_an_abort_begins_fails_as_aborted_not_with_the_abortable_error() -> None:
    rig, txn = txn_rig()
    txn.begin()
    txn.maybe_add_partition((TOPIC, 0))
    fut = rig.append(b"a", 0)
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_answer(0))
    rig.run()
    rig.run()  # in flight
    txn.maybe_add_partition((TOPIC, 1))
    rig.run()
    rig.client.respond(ApiKey.ADD_PARTITIONS_TO_TXN,
                       add_partitions_answer(1, code=TopicAuthorizationFailedError.code))
    rig.run()
    assert txn.state is State.ABORTABLE_ERROR
    txn.begin_abort()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    rig.run()
    err = fut.exception(timeout=0)
    assert isinstance(err, TransactionAbortedError), err
    assert str(err) == "Failing batch since transaction was aborted"


def test_init_producer_id_retries_a_retriable_broker_error() -> None:
    from kafkajet.errors import CoordinatorLoadInProgressError

    rig = make_rig(idempotent=True)
    rig.run()
    rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0, 0]}))
    rig.client.respond(ApiKey.INIT_PRODUCER_ID,
                       init_producer_id_body(error_code=CoordinatorLoadInProgressError.code))
    rig.run()
    assert rig.sender.fatal_error is None and rig.fatal == []
    rig.run(RETRY_BACKOFF_MS)
    assert len(rig.client.pending(ApiKey.INIT_PRODUCER_ID)) == 1


def test_a_fatal_init_producer_id_error_says_what_was_asked() -> None:
    rig = make_rig(idempotent=True)
    rig.run()
    rig.client.respond(ApiKey.INIT_PRODUCER_ID, init_producer_id_body(error_code=ClusterAuthorizationFailedError.code))
    rig.run()
    assert str(rig.sender.fatal_error).endswith(
        ": InitProducerId: could not obtain a producer id for idempotence")


def test_init_producer_id_to_a_busy_node_waits_for_its_connection_delay_only_when_there_is_one() -> None:
    rig = make_rig(idempotent=True, max_in_flight=0)  # no node has room: ready() is False, delay 0
    rig.run()
    assert rig.client.requests == [] and rig.client.polls[-1] == MAX_POLL_MS  # woken by a connection, not spun
    rig.client.connection_delay = lambda node, now: 0.5  # type: ignore[method-assign]
    rig.run()
    assert rig.client.polls[-1] == 0.5


def test_a_retried_batch_that_expires_names_the_error_of_its_last_attempt() -> None:
    rig = make_rig(delivery_timeout_ms=5_000)
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], NotLeaderOrFollowerError.code))
    rig.run()
    rig.client.down.add(0)
    rig.run(5_000)
    err = fut.exception(timeout=0)
    assert isinstance(err, DeliveryTimeoutError) and isinstance(err.cause, NotLeaderOrFollowerError)


def test_a_failed_batch_carries_no_offset_and_no_log_append_time() -> None:
    rig = make_rig()
    rig.connect()
    rig.append()
    (batch,) = rig.accumulator.incomplete_batches()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], InvalidRecordError.code))
    rig.run()
    assert (batch.base_offset, batch.log_append_time) == (-1, -1) and isinstance(batch.error, InvalidRecordError)


# --- sequence errors (idempotence) ------------------------------------------------------------------------------


def answer_out_of_order(rig: Rig, req: SentRequest, code: int, message: str | None = None) -> None:
    """Answer `req` now, ahead of older requests still unanswered."""
    body = produce_body(req, code)
    if message is not None:
        body["responses"][0]["partition_responses"][0]["error_message"] = message
    req.answered = True
    rig.client._ready.append(rig.client._response(req, body, None))


def test_out_of_order_sequence_for_the_next_expected_batch_fails_it_and_bumps_the_epoch() -> None:
    from kafkajet.errors import OutOfOrderSequenceNumberError

    rig = make_rig(idempotent=True)
    rig.connect()
    fut = rig.append()
    rig.run()
    answer_out_of_order(rig, rig.produces()[0], OutOfOrderSequenceNumberError.code, "seq 0 expected 3")
    rig.run()
    err = fut.exception(timeout=0)
    assert isinstance(err, OutOfOrderSequenceNumberError) and str(err).endswith(": t-0: seq 0 expected 3")
    assert rig.idempotence is not None and rig.idempotence.bump_requested
    rig.append(b"next")
    rig.run()
    b = batch_header(rig.produces()[-1])
    assert (b.producer_epoch, b.base_sequence) == (1, 0) and len(rig.produces()) == 2


def test_an_error_without_a_message_names_only_the_partition() -> None:
    rig = make_rig()
    rig.connect()
    fut = rig.append()
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], InvalidRecordError.code))
    rig.run()
    assert str(fut.exception(timeout=0)).endswith(": t-0")


def test_unknown_producer_id_for_the_next_expected_batch_retries_it_under_a_new_epoch() -> None:
    from kafkajet.errors import UnknownProducerIdError

    rig = make_rig(idempotent=True)
    rig.connect()
    fut = rig.append()
    rig.run()
    answer_out_of_order(rig, rig.produces()[0], UnknownProducerIdError.code)
    rig.run()
    assert not fut.done()
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    assert len(rig.produces()) == 2
    b = batch_header(rig.produces()[1])
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (1000, 1, 0)
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], base_offset=8))
    rig.run()
    assert fut.result(timeout=0).offset == 8


@pytest.mark.parametrize("error", ["OutOfOrderSequenceNumberError", "InvalidProducerEpochError"])
def test_a_sequence_error_behind_an_unresolved_batch_is_retried_not_failed(error: str) -> None:
    import kafkajet.errors as errors

    code = getattr(errors, error).code
    rig = make_rig(idempotent=True, batch_size=256)
    rig.connect()
    rig.append(b"acknowledged")  # so that the partition's batches may pipeline
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0]))
    rig.run()
    first = [rig.append(b"x" * 50) for _ in range(3)]  # one full batch
    rig.run()
    second = rig.append(b"y")
    rig.run()
    assert len(rig.produces()) == 3
    answer_out_of_order(rig, rig.produces()[2], code)  # the second answers first: the first is unresolved
    rig.run()
    assert not second.done(), "a batch behind an unresolved one must wait for it, not fail"
    assert rig.idempotence is not None and not rig.idempotence.bump_requested
    assert rig.sender.metrics.totals["record-retry-total"] == 1
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], base_offset=1))
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    rig.run()
    assert [f.result(timeout=0).offset for f in first] == [1, 2, 3]
    b = batch_header(rig.produces()[-1])
    assert b.base_sequence == 4 and b.records_count == 1  # the same numbers again
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[-1], base_offset=4))
    rig.run()
    assert second.result(timeout=0).offset == 4


def test_message_too_large_for_a_single_record_fails_it_and_two_records_split() -> None:
    rig = make_rig()
    rig.connect()
    lone = rig.append(b"big")
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], MessageTooLargeError.code))
    rig.run()
    assert isinstance(lone.exception(timeout=0), MessageTooLargeError)
    pair = [rig.append(b"a"), rig.append(b"b")]
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1], MessageTooLargeError.code))
    rig.run()
    rig.run()
    assert sum(batch_header(r).records_count for r in rig.produces()[2:]) == 2
    assert not any(f.done() for f in pair)  # split and sent again, not failed


def test_a_batch_refused_as_too_large_after_delivery_timeout_fails_instead_of_splitting() -> None:
    rig = make_rig(delivery_timeout_ms=5_000)
    rig.connect()
    pair = [rig.append(b"a"), rig.append(b"b")]
    rig.run()
    rig.clock.advance(5_000)  # the answer comes after delivery.timeout.ms
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], MessageTooLargeError.code))
    rig.run()
    assert all(isinstance(f.exception(timeout=0), MessageTooLargeError) for f in pair)
    assert rig.sender.metrics.totals["batch-split-total"] == 0


def test_an_idempotent_split_renumbers_under_a_new_epoch() -> None:
    rig = make_rig(idempotent=True)
    rig.connect()
    futs = [rig.append(b"r%d" % i) for i in range(10)]
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0], MessageTooLargeError.code))
    rig.run()
    assert rig.idempotence is not None and rig.idempotence.in_flight_count((TOPIC, 0)) == 0
    rig.run()
    # Under the new epoch the broker may hold no state for this producer: the second half waits for the first.
    assert len(rig.produces()) == 2
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[1]))
    rig.run()
    rig.run()
    halves = [batch_header(r) for r in rig.produces()[1:]]
    assert [(b.producer_epoch, b.base_sequence, b.records_count) for b in halves] == [(1, 0, 5), (1, 5, 5)]
    assert not all(f.done() for f in futs)


def test_interceptors_get_topic_partition_and_no_offsets_under_acks_zero() -> None:
    seen = Recorder()
    rig = make_rig(acks=0, interceptors=[seen])
    rig.connect()
    rig.accumulator.append(TOPIC, 1, 11, None, b"a", None, None)
    rig.accumulator.append(TOPIC, 1, 12, None, b"b", None, None)
    rig.run()
    rig.run()
    assert [(md.topic, md.partition, md.offset, md.timestamp) for md, _ in seen.acks] == [
        (TOPIC, 1, -1, 11), (TOPIC, 1, -1, 12)]


def test_interceptors_get_the_brokers_log_append_time_when_it_set_one() -> None:
    seen = Recorder()
    rig = make_rig(interceptors=[seen])
    rig.connect()
    rig.accumulator.append(TOPIC, 0, 11, None, b"a", None, None)
    rig.run()
    body = produce_body(rig.produces()[0], base_offset=5)
    body["responses"][0]["partition_responses"][0]["log_append_time_ms"] = 777
    rig.client.respond(ApiKey.PRODUCE, body)
    rig.run()
    assert [(md.offset, md.timestamp) for md, _ in seen.acks] == [(5, 777)]


def test_metadata_due_in_under_a_millisecond_is_not_sent_early() -> None:
    rig = make_rig()
    rig.connect()
    requests = len(rig.client.requests)
    rig.run(300_000 - 0.5)  # metadata.max.age.ms is 300 s: due in half a millisecond
    assert len(rig.client.requests) == requests
    assert rig.client.polls[-1] == 0.5
    rig.run(0.5)
    assert len(rig.client.pending(ApiKey.METADATA)) == 1


def test_queue_time_ends_when_the_request_leaves_not_when_the_pass_began() -> None:
    rig = make_rig(batch_size=256)
    rig.connect()
    began = rig.clock.now
    rig.clock.advance(40)  # the pass read its time, then the caller filled a batch before it drained
    rig.append(b"x" * 300)
    rig.sender.run_once(began)
    assert len(rig.produces()) == 1
    s = rig.sender.metrics.snapshot()
    assert s["record-queue-time-max"] == 0 and s["record-queue-time-avg"] == 0  # not -40


# --- a partition as Apache Kafka appends an idempotent producer's batches ---------------------------------------


class KafkaPartitionLog:
    """One partition with Apache Kafka 4.4's checks of an idempotent producer (ProducerAppendInfo.checkSequence):
    for a producer it holds no state for, any first sequence is a new start (KIP-360); a higher epoch must start
    at 0; a repeat of an appended batch is answered as success; any other gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
    Its first `refusals` produces are answered NOT_LEADER_OR_FOLLOWER (a leader not yet ready to write), and a
    batch over `max_message_bytes` MESSAGE_TOO_LARGE."""

    def __init__(self, *, max_message_bytes: int = 1 << 20, refusals: int = 0) -> None:
        self.values: list[bytes | None] = []
        self.max_message_bytes = max_message_bytes
        self.refusals = refusals
        self.epoch = -1
        self.last_sequence = -1
        self.appended: dict[tuple[int, int], int] = {}  # (epoch, base sequence) -> base offset

    def append(self, wire: bytes) -> tuple[int, int]:
        """The error code and base offset the broker answers for one batch."""
        from kafkajet.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError

        if self.refusals:
            self.refusals -= 1
            return NotLeaderOrFollowerError.code, -1
        if len(wire) > self.max_message_bytes:
            return MessageTooLargeError.code, -1
        (b,) = decode_batches(wire)
        if (b.producer_epoch, b.base_sequence) in self.appended:
            return 0, self.appended[(b.producer_epoch, b.base_sequence)]
        if b.producer_epoch < self.epoch:
            return InvalidProducerEpochError.code, -1
        new_start = self.epoch == -1 or (b.producer_epoch > self.epoch and b.base_sequence == 0)
        if not new_start and not (b.producer_epoch == self.epoch and b.base_sequence == self.last_sequence + 1):
            return OutOfOrderSequenceNumberError.code, -1
        self.epoch, self.last_sequence = b.producer_epoch, b.base_sequence + b.records_count - 1
        self.appended[(b.producer_epoch, b.base_sequence)] = len(self.values)
        self.values.extend(r.value for r in b.records)
        return 0, self.appended[(b.producer_epoch, b.base_sequence)]


def run_against(rig: Rig, logs: dict[int, KafkaPartitionLog], futures: list[RecordFuture]) -> None:
    """Answer the sender's requests as the broker would, oldest first, until every record has its outcome."""
    for _ in range(2000):
        if all(f.done() for f in futures):
            return
        for _meta in rig.client.pending(ApiKey.METADATA):
            rig.client.respond(ApiKey.METADATA, metadata_body(NODES, {TOPIC: [0] * len(logs)}))
        pending = rig.client.pending(ApiKey.PRODUCE)
        if not pending:
            rig.run(RETRY_BACKOFF_MS)
            continue
        parts = []
        for t in pending[0].body["topic_data"]:
            for p in t["partition_data"]:
                code, offset = logs[p["index"]].append(bytes(p["records"]))
                parts.append({"index": p["index"], "error_code": code, "base_offset": offset,
                              "log_append_time_ms": -1, "log_start_offset": 0})
        rig.client.respond(ApiKey.PRODUCE, {"responses": [{"name": TOPIC, "partition_responses": parts}]})
        rig.run()
    raise AssertionError("the records did not all get an outcome")


def test_a_split_first_batch_keeps_its_records_ahead_of_the_batches_sent_after_it() -> None:
    # The broker refuses the partition's first batch as too large; batches sent after it must not land first
    # (Apache Kafka would take them as a new start), and the split must not reorder or lose anything: every
    # small record stored once, in send order, and the one record over the limit failing alone.
    rig = make_rig(idempotent=True, batch_size=100_000)
    log = KafkaPartitionLog(max_message_bytes=5_000)
    rig.connect()
    futures: list[RecordFuture] = []
    sent: list[bytes] = []
    for group in range(5):  # five batches, each drained as soon as it is appended: pipelined when allowed
        for i in range(20):
            value = b"L" * 6_000 if (group, i) == (0, 10) else b"%d-%d" % (group, i)
            futures.append(rig.append(value))
            sent.append(value)
        rig.run()
    run_against(rig, {0: log}, futures)
    big = sent.index(b"L" * 6_000)
    assert isinstance(futures[big].exception(timeout=0), MessageTooLargeError)
    assert all(f.exception(timeout=0) is None for i, f in enumerate(futures) if i != big)
    assert log.values == [v for v in sent if v != sent[big]]


def test_a_first_batch_refused_by_a_leader_not_yet_ready_loses_nothing() -> None:
    # Apache Kafka on a topic just created: the first Produce to a partition is refused NOT_LEADER_OR_FOLLOWER
    # while the batches behind it would be taken as a new start; every retry of the first is then out of order.
    rig = make_rig(idempotent=True, delivery_timeout_ms=30_000)
    logs = {0: KafkaPartitionLog(refusals=1), 1: KafkaPartitionLog(refusals=2)}
    rig.connect()
    futures: list[RecordFuture] = []
    sent: dict[int, list[bytes]] = {0: [], 1: []}
    for group in range(5):
        for p in (0, 1):
            for i in range(3):
                value = b"%d-%d-%d" % (p, group, i)
                futures.append(rig.append(value, partition=p))
                sent[p].append(value)
        rig.run()
    run_against(rig, logs, futures)
    assert [f.exception(timeout=0) for f in futures] == [None] * len(futures)
    assert {p: log.values for p, log in logs.items()} == sent


# --- per-partition epoch bumps and unresolved sequences (Java's TransactionManager, KIP-360) ----------------------


def test_a_failed_batch_bumps_its_partition_without_waiting_for_another_partitions_requests() -> None:
    from kafkajet.errors import InvalidRecordError

    rig = make_rig(idempotent=True)
    rig.connect(leaders=[0, 1])
    bad, slow = rig.append(b"bad", partition=0), rig.append(b"slow", partition=1)
    rig.run()
    (req0,) = [r for r in rig.produces() if r.node == 0]
    (req1,) = [r for r in rig.produces() if r.node == 1]
    rig.client.respond(ApiKey.PRODUCE, produce_body(req0, InvalidRecordError.code), node=0)
    rig.run()
    assert bad.done() and not slow.done()  # partition 1's request is still unanswered
    nxt = rig.append(b"next", partition=0)
    rig.run()
    rig.run()
    # Partition 0 goes on at once under the new epoch, from sequence 0; partition 1 was not made to wait for it.
    (again,) = [r for r in rig.produces() if r.node == 0 and r is not req0]
    b = batch_header(again, 0)
    assert (b.producer_epoch, b.base_sequence) == (1, 0)
    # Partition 1's batches of the old epoch finish under it, and only then does it start again at 0.
    later = rig.append(b"later", partition=1)
    rig.run()
    assert [r for r in rig.produces() if r.node == 1] == [req1]
    rig.client.respond(ApiKey.PRODUCE, produce_body(req1), node=1)
    rig.run()
    rig.run()
    assert slow.done() and slow.exception() is None
    (after,) = [r for r in rig.produces() if r.node == 1 and r is not req1]
    assert (batch_header(after, 1).producer_epoch, batch_header(after, 1).base_sequence) == (1, 0)
    assert not nxt.done() and not later.done()


def _retried_then_expired(rig: Rig) -> tuple[RecordFuture, RecordFuture, SentRequest]:
    """Partition 0: batch A (acknowledged), B sent and answered with a retriable error, C pipelined behind B;
    B then expires in its deque while C's request is still out."""
    from kafkajet.errors import NotLeaderOrFollowerError

    rig.append(b"a")
    rig.run()
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[0]))
    rig.run()
    b = rig.append(b"b" * 200)
    rig.run()
    c = rig.append(b"c" * 200)
    rig.run()
    req_b, req_c = rig.produces()[1:3]
    rig.client.respond(ApiKey.PRODUCE, produce_body(req_b, NotLeaderOrFollowerError.code))
    rig.run()
    rig.client.down.add(0)  # no connection for B's retry: it expires waiting in its deque
    rig.run(DELIVERY_TIMEOUT_FOR_UNRESOLVED)
    rig.client.up(0)
    assert b.done() and not c.done()
    return b, c, req_c


DELIVERY_TIMEOUT_FOR_UNRESOLVED = 200_000.0


def test_an_expired_batch_whose_successor_was_written_needs_no_bump() -> None:
    rig = make_rig(idempotent=True, batch_size=256)
    rig.connect()
    _, c, req_c = _retried_then_expired(rig)
    idem = rig.idempotence
    assert idem is not None
    d = rig.append(b"d")
    rig.run()
    assert rig.produces()[-1] is req_c  # nothing new while B's fate is unknown
    rig.client.respond(ApiKey.PRODUCE, produce_body(req_c))  # C written: B was written before it
    rig.run()
    rig.run()
    assert c.done() and c.exception() is None and not idem.bump_requested
    b = batch_header(rig.produces()[-1])
    assert (b.producer_epoch, b.base_sequence) == (0, 3) and not d.done()


def test_an_expired_batch_whose_successor_is_refused_bumps_its_partition_and_retries_the_successor() -> None:
    from kafkajet.errors import OutOfOrderSequenceNumberError

    rig = make_rig(idempotent=True, batch_size=256)
    rig.connect()
    _, c, req_c = _retried_then_expired(rig)
    rig.client.respond(ApiKey.PRODUCE, produce_body(req_c, OutOfOrderSequenceNumberError.code))
    rig.run()
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    rig.run()
    assert not c.done()
    b = batch_header(rig.produces()[-1])
    assert (b.producer_epoch, b.base_sequence) == (1, 0)  # C again, renumbered under the new epoch


# --- leader hints (KIP-951), topic ids (Produce v13) ---------------------------------------------------------


def test_a_refusal_naming_a_newer_leader_sends_the_retry_there_at_once() -> None:
    rig = make_rig(idempotent=True)
    rig.connect(leaders=[0, 0])
    fut = rig.append()
    rig.run()
    (first,) = rig.produces()
    rig.run(RETRY_BACKOFF_MS * 2)  # the last Metadata answer is older than its backoff: a refresh may go at once
    answer = produce_body(first, error_code=NotLeaderOrFollowerError.code)
    answer["responses"][0]["partition_responses"][0]["current_leader"] = {"leader_id": 1, "leader_epoch": 1}
    answer["node_endpoints"] = [{"node_id": 1, "host": "127.0.0.1", "port": 9093, "rack": None}]
    rig.client.respond(ApiKey.PRODUCE, answer)
    rig.run()  # takes the refusal in
    rig.run()  # no time passes: no retry backoff; the refresh the refusal asked for goes after the retry
    assert [(r.api_key, r.node) for r in rig.client.requests[-2:]] == [(ApiKey.PRODUCE, 1), (ApiKey.METADATA, 0)]
    assert rig.metadata.cluster.leader_for(TOPIC, 0) == 1
    rig.client.respond(ApiKey.PRODUCE, produce_body(rig.produces()[-1], base_offset=5))
    rig.run()
    assert fut.result(timeout=0).offset == 5


def test_a_refusal_naming_no_newer_leader_waits_for_the_backoff_and_metadata() -> None:
    rig = make_rig(idempotent=True)
    rig.connect(leaders=[0, 0])
    rig.append()
    rig.run()
    (first,) = rig.produces()
    answer = produce_body(first, error_code=NotLeaderOrFollowerError.code)
    answer["responses"][0]["partition_responses"][0]["current_leader"] = {"leader_id": 1, "leader_epoch": 0}
    rig.client.respond(ApiKey.PRODUCE, answer)
    rig.run()
    rig.run()
    assert len(rig.produces()) == 1 and rig.metadata.cluster.leader_for(TOPIC, 0) == 0


def test_produce_v13_names_topics_by_the_ids_metadata_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BROKER_VERSIONS, int(ApiKey.PRODUCE), (3, 13))  # a 4.4 broker's Produce range
    rig = make_rig()
    topic_id = bytes(range(1, 17))
    rig.run()
    answer = metadata_body(NODES, {TOPIC: [0, 0], "no-id": [0]})
    answer["topics"][0]["topic_id"] = topic_id
    rig.client.respond(ApiKey.METADATA, answer)
    rig.run()
    fut = rig.append()
    rig.run()
    (req,) = rig.produces()
    assert req.version == 13 and [t["topic_id"] for t in req.body["topic_data"]] == [topic_id]
    answer = produce_body(req, base_offset=3)
    answer["responses"][0] = {"topic_id": topic_id, "partition_responses": answer["responses"][0]["partition_responses"]}
    rig.client.respond(ApiKey.PRODUCE, answer)
    rig.run()
    assert fut.result(timeout=0).offset == 3
    # A topic without an id goes by name, at v12 (the last version that has names).
    rig.accumulator.append("no-id", 0, 0, None, b"v", None, None)
    rig.run()
    assert rig.produces()[-1].version == 12 and "topic_id" not in rig.produces()[-1].body["topic_data"][0]
