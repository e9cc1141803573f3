"""The mock's coordinators at the wire: raw requests, one Kafka behaviour per test, including what librdkafka
never sends (KIP-360 bumps, batched AddPartitionsToTxn and OffsetFetch, stale epochs at each version)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet.errors import error_for_name
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkajet.records import CONTROL_ABORT, CONTROL_COMMIT, control_record_type, decode_batches, encode_batch
from kafkajet.testing import MockCluster
from kafkajet.testing.mock.transactions import TransactionCoordinator, TxnState
from tests.mock.test_mock_cluster_protocol import RawClient

pytestmark = pytest.mark.mock_cluster(brokers=3, auto_create_topics=False, topics={"t": 3})
TXN = "raw-txn"


def code(name: str) -> int:
    return error_for_name(name).code


class Txn:
    """Raw clients to a transactional id's coordinator and to partition t-0's leader."""

    def __init__(self, cluster: MockCluster, txn_id: str = TXN) -> None:
        self.cluster = cluster
        self.txn_id = txn_id
        self.coord = RawClient(cluster.address(cluster.coordinator("txn", txn_id)))
        self.leader = RawClient(cluster.address(cluster.leader("t", 0)))
        self.pid, self.epoch = -1, -1

    def init(self, version: int = 4, pid: int = -1, epoch: int = -1, timeout_ms: int = 60_000) -> dict[str, Any]:
        body = self.coord.request(ApiKey.INIT_PRODUCER_ID, version, {
            "transactional_id": self.txn_id, "transaction_timeout_ms": timeout_ms, "producer_id": pid,
            "producer_epoch": epoch})
        if body["error_code"] == 0:
            self.pid, self.epoch = body["producer_id"], body["producer_epoch"]
        return body

    def add(self, partitions: dict[str, list[int]], version: int = 3, epoch: int | None = None) -> dict[Any, int]:
        body = self.coord.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, {
            "v3_and_below_transactional_id": self.txn_id, "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch if epoch is None else epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in partitions.items()]})
        return {(t["name"], p["partition_index"]): p["partition_error_code"]
                for t in body["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}

    def produce(self, values: list[bytes], seq: int, epoch: int | None = None) -> int:
        records = encode_batch([(1000, None, v, None) for v in values], producer_id=self.pid,
                               producer_epoch=self.epoch if epoch is None else epoch, base_sequence=seq,
                               transactional=True)
        body = self.leader.request(ApiKey.PRODUCE, 8, {
            "transactional_id": self.txn_id, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]})
        return int(body["responses"][0]["partition_responses"][0]["error_code"])

    def end(self, commit: bool, version: int = 2, epoch: int | None = None) -> int:
        body = self.coord.request(ApiKey.END_TXN, version, {
            "transactional_id": self.txn_id, "producer_id": self.pid,
            "producer_epoch": self.epoch if epoch is None else epoch, "committed": commit})
        return int(body["error_code"])

    def close(self) -> None:
        self.coord.close()
        self.leader.close()


@pytest.fixture
def txn(cluster: MockCluster) -> Iterator[Txn]:
    t = Txn(cluster)
    yield t
    t.close()


def fetch(client: RawClient, offset: int, isolation: int) -> dict[str, Any]:
    body = client.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "epoch": -1, "topics": [{"name": "t", "fetch_partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
             "max_bytes": 1 << 20}]}], "forgotten": [], "rack_id": ""})
    return dict(body["responses"][0]["partition_responses"][0])


# --- FindCoordinator -----------------------------------------------------------------------------------


def test_find_coordinator_is_deterministic_and_moves_on_request(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(1))
    for key_type, kind in ((0, "group"), (1, "txn")):
        answers = {client.request(ApiKey.FIND_COORDINATOR, 2, {"key": f"k{i}", "key_type": key_type})["node_id"]
                   for i in range(3) for _ in range(2)}
        assert answers <= set(cluster.broker_ids)
        got = client.request(ApiKey.FIND_COORDINATOR, 2, {"key": "k0", "key_type": key_type})
        assert got["error_code"] == 0 and got["node_id"] == cluster.coordinator(kind, "k0")
        assert cluster.address(got["node_id"]) == f"{got['host']}:{got['port']}"
    # Keys spread over the brokers, and v0 (no key type) asks for a group coordinator.
    assert len({cluster.coordinator("txn", f"id-{i}") for i in range(30)}) == 3
    assert client.request(ApiKey.FIND_COORDINATOR, 0, {"key": "g"})["node_id"] == cluster.coordinator("group", "g")
    assert client.request(ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 7})["error_code"] == code(
        "INVALID_REQUEST")
    other = next(b for b in cluster.broker_ids if b != cluster.coordinator("txn", TXN))
    cluster.set_coordinator("txn", TXN, other)
    assert client.request(ApiKey.FIND_COORDINATOR, 2, {"key": TXN, "key_type": 1})["node_id"] == other


def test_a_broker_that_is_not_the_coordinator_says_so(cluster: MockCluster) -> None:
    wrong = next(b for b in cluster.broker_ids if b != cluster.coordinator("txn", TXN))
    client = RawClient(cluster.address(wrong))
    body = client.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": TXN, "transaction_timeout_ms": 1000})
    assert body["error_code"] == code("NOT_COORDINATOR")
    assert client.request(ApiKey.END_TXN, 2, {"transactional_id": TXN, "producer_id": 1, "producer_epoch": 0,
                                              "committed": True})["error_code"] == code("NOT_COORDINATOR")
    wrong_group = next(b for b in cluster.broker_ids if b != cluster.coordinator("group", "g"))
    body = RawClient(cluster.address(wrong_group)).request(ApiKey.OFFSET_FETCH, 8, {
        "groups": [{"group_id": "g", "topics": None}], "require_stable": False})
    assert body["groups"][0]["error_code"] == code("NOT_COORDINATOR")


# --- InitProducerId --------------------------------------------------------------------------------------


def test_init_producer_id_bumps_the_epoch_and_fences(cluster: MockCluster, txn: Txn) -> None:
    assert txn.init(timeout_ms=0)["error_code"] == code("INVALID_TRANSACTION_TIMEOUT")
    first = txn.init()
    assert first["error_code"] == 0 and first["producer_epoch"] == 0
    pid = first["producer_id"]
    assert txn.init()["producer_epoch"] == 1 and txn.pid == pid
    # KIP-360: naming the current epoch bumps it; naming the one before is a retry of that bump.
    assert txn.init(pid=pid, epoch=1)["producer_epoch"] == 2
    assert txn.init(pid=pid, epoch=1)["producer_epoch"] == 2
    assert cluster.transaction_producer(TXN) == (pid, 2)
    # An older epoch or another producer id is a fenced producer: PRODUCER_FENCED from v4 (KIP-588).
    assert txn.init(version=4, pid=pid, epoch=0)["error_code"] == code("PRODUCER_FENCED")
    assert txn.init(version=3, pid=pid, epoch=0)["error_code"] == code("INVALID_PRODUCER_EPOCH")
    assert txn.init(version=4, pid=pid + 77, epoch=2)["error_code"] == code("PRODUCER_FENCED")


def test_init_producer_id_aborts_an_ongoing_transaction_first(cluster: MockCluster, txn: Txn) -> None:
    txn.init()
    assert txn.add({"t": [0]}) == {("t", 0): 0}
    assert txn.produce([b"doomed"], 0) == 0
    # As Kafka: fence (epoch + 1), abort with that epoch, answer CONCURRENT_TRANSACTIONS; the retry bumps again.
    again = Txn(cluster)
    assert again.init()["error_code"] == code("CONCURRENT_TRANSACTIONS")
    assert cluster.transaction_state(TXN) == "CompleteAbort"
    marker = [b for b in cluster.batches("t", 0) if b.is_control]
    assert len(marker) == 1 and marker[0].producer_epoch == 1
    assert control_record_type(marker[0].records[0].key) == CONTROL_ABORT
    assert again.init()["producer_epoch"] == 2
    assert txn.produce([b"zombie"], 1) == code("INVALID_PRODUCER_EPOCH")
    again.close()


def test_an_exhausted_epoch_gets_a_new_producer_id() -> None:
    ids = iter(range(500, 600))

    class NoMarkers:
        def write_txn_marker(self, *args: Any) -> None: ...
        def complete_txn_offsets(self, *args: Any) -> None: ...

    coordinator = TransactionCoordinator(lambda: next(ids), NoMarkers())
    first = coordinator.init_producer_id("x", 1000, -1, -1, 0.0)
    assert (first.producer_id, first.producer_epoch) == (500, 0)
    coordinator.transactions["x"].producer_epoch = 32766
    renewed = coordinator.init_producer_id("x", 1000, 500, 32766, 0.0)
    assert (renewed.error, renewed.producer_id, renewed.producer_epoch) == (None, 501, 0)
    assert coordinator.transactions["x"].state is TxnState.EMPTY


# --- AddPartitionsToTxn, Produce, EndTxn ---------------------------------------------------------------


def test_add_partitions_checks_partitions_and_epochs(cluster: MockCluster, txn: Txn) -> None:
    txn.init()
    assert txn.add({"t": [0, 7], "nope": [0]}) == {
        ("t", 0): code("OPERATION_NOT_ATTEMPTED"), ("t", 7): code("UNKNOWN_TOPIC_OR_PARTITION"),
        ("nope", 0): code("UNKNOWN_TOPIC_OR_PARTITION")}
    assert cluster.transaction_state(TXN) == "Empty"
    assert txn.add({"t": [0]}, version=3, epoch=txn.epoch + 5) == {("t", 0): code("PRODUCER_FENCED")}
    assert txn.add({"t": [0]}, version=1, epoch=txn.epoch + 5) == {("t", 0): code("INVALID_PRODUCER_EPOCH")}
    assert txn.add({"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
    assert cluster.transaction_state(TXN) == "Ongoing"
    assert cluster.transaction_partitions(TXN) == {("t", 0), ("t", 1)}
    stranger = Txn(cluster, "never-initialised")
    stranger.pid, stranger.epoch = 4242, 0
    assert stranger.add({"t": [0]}) == {("t", 0): code("INVALID_PRODUCER_ID_MAPPING")}
    stranger.close()


def test_add_partitions_batched_v4_and_verify_only(cluster: MockCluster, txn: Txn) -> None:
    txn.init()
    txn.add({"t": [0]})
    body = txn.coord.request(ApiKey.ADD_PARTITIONS_TO_TXN, 5, {"transactions": [
        {"transactional_id": TXN, "producer_id": txn.pid, "producer_epoch": txn.epoch, "verify_only": True,
         "topics": [{"name": "t", "partitions": [0, 1]}]}]})
    assert body["error_code"] == 0
    (result,) = body["results_by_transaction"]
    got = {p["partition_index"]: p["partition_error_code"] for p in result["topic_results"][0]["results_by_partition"]}
    assert got == {0: 0, 1: code("INVALID_TXN_STATE")}
    assert cluster.transaction_partitions(TXN) == {("t", 0)}  # verify_only adds nothing
    body = txn.coord.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [
        {"transactional_id": TXN, "producer_id": txn.pid, "producer_epoch": txn.epoch, "verify_only": False,
         "topics": [{"name": "t", "partitions": [1]}]}]})
    assert body["results_by_transaction"][0]["topic_results"][0]["results_by_partition"][0][
        "partition_error_code"] == 0
    assert cluster.transaction_partitions(TXN) == {("t", 0), ("t", 1)}


def test_transactional_produce_needs_the_partition_in_the_transaction(cluster: MockCluster, txn: Txn) -> None:
    txn.init()
    # Kafka's partition verification (3.6+): not added -> INVALID_TXN_STATE, nothing appended.
    assert txn.produce([b"early"], 0) == code("INVALID_TXN_STATE")
    assert cluster.high_watermark("t", 0) == 0
    txn.add({"t": [0]})
    assert txn.produce([b"a", b"b"], 0) == 0
    assert txn.produce([b"stale"], 2, epoch=txn.epoch - 1) == code("INVALID_PRODUCER_EPOCH")
    assert cluster.last_stable_offset("t", 0) == 0 and cluster.high_watermark("t", 0) == 2


def test_end_txn_writes_markers_and_answers_retries(cluster: MockCluster, txn: Txn) -> None:
    txn.init()
    assert txn.end(commit=True) == code("INVALID_TXN_STATE")  # Empty: nothing to end
    txn.add({"t": [0, 2]})
    assert txn.produce([b"a", b"b"], 0) == 0
    assert txn.end(commit=True, version=2, epoch=txn.epoch - 1) == code("PRODUCER_FENCED")
    assert txn.end(commit=True, version=1, epoch=txn.epoch - 1) == code("INVALID_PRODUCER_EPOCH")
    assert txn.end(commit=True) == 0
    assert cluster.transaction_history(TXN)[-3:] == ["Ongoing", "PrepareCommit", "CompleteCommit"]
    # A retried EndTxn of the completed transaction succeeds again; the other kind cannot be had.
    assert txn.end(commit=True) == 0
    assert txn.end(commit=False) == code("INVALID_TXN_STATE")
    for partition in (0, 2):
        (marker,) = [b for b in cluster.batches("t", partition) if b.is_control]
        assert marker.attributes & 0x30 == 0x30 and marker.is_transactional
        assert (marker.producer_id, marker.producer_epoch) == (txn.pid, txn.epoch)
        assert control_record_type(marker.records[0].key) == CONTROL_COMMIT
        assert marker.records[0].key == b"\x00\x00\x00\x01"
        assert marker.records[0].value == b"\x00\x00\x00\x00\x00\x00"  # version 0, coordinator epoch 0
    assert cluster.last_stable_offset("t", 0) == cluster.high_watermark("t", 0) == 3
    # The same epoch goes on with its sequence into the next transaction.
    txn.add({"t": [0]})
    assert txn.produce([b"c"], 2) == 0


def test_markers_wait_with_txn_marker_delay(cluster: MockCluster, txn: Txn) -> None:
    cluster.config.txn_marker_delay_ms = 300
    txn.init()
    txn.add({"t": [0]})
    assert txn.end(commit=True) == 0
    assert cluster.transaction_state(TXN) == "PrepareCommit"
    assert txn.add({"t": [1]}) == {("t", 1): code("CONCURRENT_TRANSACTIONS")}
    assert txn.end(commit=True) == code("CONCURRENT_TRANSACTIONS")
    cluster.wait_until(lambda: cluster.transaction_state(TXN) == "CompleteCommit", 5, "markers written")
    assert txn.add({"t": [1]}) == {("t", 1): 0}


def test_read_committed_fetch_stops_at_the_lso_and_lists_aborted_transactions(cluster: MockCluster,
                                                                              txn: Txn) -> None:
    txn.init()
    txn.add({"t": [0]})
    txn.produce([b"a0", b"a1"], 0)                      # offsets 0-1, aborted at 2
    assert txn.end(commit=False) == 0
    txn.add({"t": [0]})
    txn.produce([b"c0"], 2)                             # offset 3, committed at 4
    assert txn.end(commit=True) == 0
    txn.add({"t": [0]})
    txn.produce([b"open"], 3)                           # offset 5, open
    committed = fetch(txn.leader, 0, isolation=1)
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (6, 5)
    assert committed["aborted_transactions"] == [{"producer_id": txn.pid, "first_offset": 0}]
    assert max(b.base_offset + b.last_offset_delta for b in decode_batches(committed["record_set"])) == 4
    # From past the aborted transaction on, it is not listed any more.
    assert fetch(txn.leader, 3, isolation=1)["aborted_transactions"] == []
    uncommitted = fetch(txn.leader, 0, isolation=0)
    assert (uncommitted["high_watermark"], uncommitted["last_stable_offset"]) == (6, 5)
    assert uncommitted["aborted_transactions"] is None
    assert max(b.base_offset + b.last_offset_delta for b in decode_batches(uncommitted["record_set"])) == 5
    latest = txn.leader.request(ApiKey.LIST_OFFSETS, 8, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    assert latest["topics"][0]["partitions"][0]["offset"] == 5


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(cluster: MockCluster, txn: Txn) -> None:
    txn.init(timeout_ms=200)
    txn.add({"t": [0]})
    txn.produce([b"late"], 0)
    cluster.wait_until(lambda: cluster.transaction_state(TXN) == "CompleteAbort", 5, "timeout abort")
    assert cluster.aborted_transactions("t", 0) == [(txn.pid, 0, 1)]
    assert txn.end(commit=True) == code("PRODUCER_FENCED")
    assert txn.produce([b"later"], 1) == code("INVALID_PRODUCER_EPOCH")


# --- group coordinator ---------------------------------------------------------------------------------


def group_client(cluster: MockCluster, group: str) -> RawClient:
    return RawClient(cluster.address(cluster.coordinator("group", group)))


@pytest.mark.parametrize("version", [0, 1, 2, 5, 7, 8, 9])
def test_offset_commit_and_fetch_at_every_layout(cluster: MockCluster, version: int) -> None:
    client = group_client(cluster, "g")
    body = client.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 17, "committed_metadata": "m"},
                {"partition_index": 9, "committed_offset": 1, "committed_metadata": None}]}]})
    errors = {p["partition_index"]: p["error_code"] for p in body["topics"][0]["partitions"]}
    assert errors == {0: 0, 9: code("UNKNOWN_TOPIC_OR_PARTITION")}
    assert cluster.committed_offsets("g") == {("t", 0): 17}
    fetch_version = min(version, SUPPORTED_VERSIONS[ApiKey.OFFSET_FETCH][1])
    if fetch_version >= 8:
        got = client.request(ApiKey.OFFSET_FETCH, fetch_version, {"groups": [
            {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
            {"group_id": "g", "topics": None}]})
        asked, everything = got["groups"]
        parts = asked["topics"][0]["partitions"]
        assert [p["partition_index"] for p in everything["topics"][0]["partitions"]] == [0]
    else:
        got = client.request(ApiKey.OFFSET_FETCH, fetch_version, {
            "group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]})
        parts = got["topics"][0]["partitions"]
    assert [(p["committed_offset"], p["metadata"], p["error_code"]) for p in parts] == [(17, "m", 0), (-1, "", 0)]


def test_txn_offset_commit_is_staged_until_the_transaction_ends(cluster: MockCluster, txn: Txn) -> None:
    txn.init()
    group = group_client(cluster, "tg")

    def txn_commit(offset: int) -> int:
        body = group.request(ApiKey.TXN_OFFSET_COMMIT, 3, {
            "transactional_id": TXN, "group_id": "tg", "producer_id": txn.pid, "producer_epoch": txn.epoch,
            "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "topics": [
                {"name": "t", "partitions": [{"partition_index": 1, "committed_offset": offset,
                                              "committed_metadata": ""}]}]})
        return int(body["topics"][0]["partitions"][0]["error_code"])

    def stable_fetch() -> dict[str, Any]:
        body = group.request(ApiKey.OFFSET_FETCH, 7, {"group_id": "tg", "topics": [
            {"name": "t", "partition_indexes": [1]}], "require_stable": True})
        return dict(body["topics"][0]["partitions"][0])

    assert txn_commit(5) == code("INVALID_TXN_STATE")  # AddOffsetsToTxn first
    for commit, offset in ((False, 5), (True, 6)):
        added = txn.coord.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
            "transactional_id": TXN, "producer_id": txn.pid, "producer_epoch": txn.epoch, "group_id": "tg"})
        assert added["error_code"] == 0
        assert txn_commit(offset) == 0
        assert cluster.committed_offsets("tg") == {}  # staged only
        assert stable_fetch()["error_code"] == code("UNSTABLE_OFFSET_COMMIT")
        assert txn.end(commit=commit) == 0
    assert cluster.committed_offsets("tg") == {("t", 1): 6}
    assert stable_fetch()["committed_offset"] == 6


# --- forced errors -------------------------------------------------------------------------------------


COORDINATOR_REQUESTS: dict[ApiKey, dict[str, Any]] = {
    ApiKey.FIND_COORDINATOR: {"key": "k", "key_type": 1},
    ApiKey.ADD_PARTITIONS_TO_TXN: {"v3_and_below_transactional_id": TXN, "v3_and_below_producer_id": 1,
                                   "v3_and_below_producer_epoch": 0,
                                   "v3_and_below_topics": [{"name": "t", "partitions": [0]}],
                                   "transactions": [{"transactional_id": TXN, "producer_id": 1,
                                                     "producer_epoch": 0, "topics": []}]},
    ApiKey.ADD_OFFSETS_TO_TXN: {"transactional_id": TXN, "producer_id": 1, "producer_epoch": 0, "group_id": "g"},
    ApiKey.END_TXN: {"transactional_id": TXN, "producer_id": 1, "producer_epoch": 0, "committed": True},
    ApiKey.TXN_OFFSET_COMMIT: {"transactional_id": TXN, "group_id": "g", "producer_id": 1, "producer_epoch": 0,
                               "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                                        "committed_offset": 1,
                                                                        "committed_metadata": None}]}]},
    ApiKey.OFFSET_COMMIT: {"group_id": "g", "member_id": "", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}]},
    ApiKey.OFFSET_FETCH: {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}],
                          "groups": [{"group_id": "g", "topics": None}]},
    ApiKey.INIT_PRODUCER_ID: {"transactional_id": TXN, "transaction_timeout_ms": 1000},
}


@pytest.mark.parametrize("api", list(COORDINATOR_REQUESTS), ids=lambda a: a.name)
def test_forced_errors_answer_every_coordinator_api_at_every_version(cluster: MockCluster, api: ApiKey) -> None:
    client = RawClient(cluster.address(1))
    lo, hi = SUPPORTED_VERSIONS[api]
    for version in range(lo, hi + 1):
        cluster.push_request_errors(api, ["COORDINATOR_LOAD_IN_PROGRESS"])
        body = client.request(api, version, COORDINATOR_REQUESTS[api])
        assert code("COORDINATOR_LOAD_IN_PROGRESS") in set(_error_codes(body)), (api.name, version, body)


def _error_codes(value: Any) -> Iterator[int]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("error_code", "partition_error_code"):
                yield v
            else:
                yield from _error_codes(v)
    elif isinstance(value, list):
        for v in value:
            yield from _error_codes(v)
