"""The Sender driven pass by pass with a fake network and a fake clock, as Java's SenderTest drives its Sender.

No threads and no sleeps: each test appends records, calls `run_once(now)`, looks at the requests the sender
sent, answers them, and checks what happened to the records, to the millisecond where time matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kafkajet.errors import (
    ClusterAuthorizationFailedError,
    DeliveryTimeoutError,
    DuplicateSequenceNumberError,
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
)
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.futures import RecordFuture
from kafkajet.producer.idempotence import MAX_EPOCH, IdempotenceManager
from kafkajet.producer.metadata import Metadata
from kafkajet.producer.metrics import ProducerMetrics
from kafkajet.producer.sender import Sender
from kafkajet.protocol import ApiKey
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


@dataclass
class Rig:
    sender: Sender
    client: FakeNetworkClient
    clock: FakeClock
    accumulator: RecordAccumulator
    metadata: Metadata
    idempotence: IdempotenceManager | None
    fatal: list[KafkaError]

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
             max_in_flight: int = 5, acks: int = -1, interceptors: list[Any] | None = None) -> Rig:
    clock = FakeClock()
    client = FakeNetworkClient(nodes=dict(NODES), max_in_flight=max_in_flight)
    metadata = Metadata(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=RETRY_BACKOFF_MS,
                        retry_backoff_max_ms=1000)
    metadata.add_topic(TOPIC, clock.now)
    idem = IdempotenceManager() if idempotent else None
    pool = BufferPool(32 * 1024 * 1024, batch_size)
    accumulator = RecordAccumulator(
        batch_size=batch_size, compression=0, linger_ms=linger_ms, retry_backoff_ms=RETRY_BACKOFF_MS,
        retry_backoff_max_ms=1000, delivery_timeout_ms=delivery_timeout_ms, pool=pool, idempotence=idem,
        clock=clock, guarantee_order=guarantee_order)
    fatal: list[KafkaError] = []
    sender = Sender(client=client, metadata=metadata, accumulator=accumulator, idempotence=idem,  # type: ignore[arg-type]
                    metrics=ProducerMetrics(), acks=acks, retries=retries, interceptors=interceptors, request_timeout_ms=30_000,
                    max_request_size=1024 * 1024, retry_backoff_ms=RETRY_BACKOFF_MS, allow_auto_create_topics=True,
                    clock=clock, on_fatal=fatal.append)
    return Rig(sender, client, clock, accumulator, metadata, idem, fatal)


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


def test_a_failed_metadata_answer_is_retried_after_the_backoff() -> None:
    rig = make_rig()
    rig.run()
    rig.client.respond(ApiKey.METADATA, error=KafkaConnectionError("refused"))
    rig.run()
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.METADATA]) == 1
    rig.run(RETRY_BACKOFF_MS * 1.2 + 1)
    assert len([r for r in rig.client.requests if r.api_key == ApiKey.METADATA]) == 2
