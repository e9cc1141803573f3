"""MockCluster at the wire: raw requests through the codec, one behaviour per test, plus the sequence checker."""

from __future__ import annotations

import importlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkajet.errors import error_for_name
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey, decode_response, encode_request
from kafkajet.records import encode_batch
from kafkajet.testing import MockCluster
from kafkajet.testing.mock import NO_LEADER, SequenceChecker, after_append, handlers
from kafkajet.testing.mock.handlers import advertised

PRODUCE_V = 8
FETCH_V = 11

pytestmark = pytest.mark.mock_cluster(brokers=3, auto_create_topics=False, topics={"t": 3})


def code(name: str) -> int:
    return error_for_name(name).code


class RawClient:
    """One blocking connection speaking the codec: enough to poke a broker one request at a time."""

    def __init__(self, address: str, timeout: float = 5.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0
        self.sent: list[tuple[int, int, int]] = []

    def send(self, api: ApiKey, version: int, body: dict[str, Any]) -> None:
        self.correlation_id += 1
        self.sent.append((api, version, self.correlation_id))
        self.sock.sendall(encode_request(api, version, self.correlation_id, "raw-test", body))

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def receive(self) -> dict[str, Any]:
        api, version, correlation_id = self.sent.pop(0)
        got, body = decode_response(api, version, self.recv_frame())
        assert got == correlation_id
        return body

    def request(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.send(api, version, body)
        return self.receive()

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _exact(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def leader0(cluster: MockCluster) -> Iterator[RawClient]:
    client = RawClient(cluster.address(cluster.leader("t", 0)))
    yield client
    client.close()


def batch(n: int = 3, *, pid: int = -1, epoch: int = -1, seq: int = -1, start: int = 0) -> bytes:
    return encode_batch([(1000 + i, None, b"v%d" % (start + i), None) for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce_body(records: bytes | None, *, partition: int = 0, acks: int = -1, topic: str = "t") -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def produce(client: RawClient, records: bytes | None, **kw: Any) -> dict[str, Any]:
    body = client.request(ApiKey.PRODUCE, PRODUCE_V, produce_body(records, **kw))
    part = body["responses"][0]["partition_responses"][0]
    return dict(part)


# --- versions and metadata ---------------------------------------------------------------------------


def test_api_versions_advertises_exactly_what_is_served(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(1))
    body = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    got = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert got == {int(api): versions for api, versions in advertised().items()}
    # The mock serves what kafkajet's codec speaks, except where it answers in an older producer's protocol:
    # Produce up to v11, EndTxn up to v2 and TxnOffsetCommit up to v4 (transaction version 1: no implicit
    # partition or group adds, no epoch bump), and ApiVersions up to v4 (as Tansu: no KIP-1242 cluster check,
    # so clients fall back from v5).
    older = {ApiKey.PRODUCE: (3, 11), ApiKey.END_TXN: (0, 2), ApiKey.TXN_OFFSET_COMMIT: (0, 4),
             ApiKey.API_VERSIONS: (0, 4)}
    assert {api: r for api, r in advertised().items() if r != SUPPORTED_VERSIONS[api]} == older
    # The coordinator APIs (8, 9, 10, 16, 24, 25, 26, 28) are served since the mock has coordinators.
    assert set(got) == {0, 1, 2, 3, 8, 9, 10, 16, 18, 19, 20, 22, 24, 25, 26, 28, 60}
    assert ApiKey.SASL_HANDSHAKE not in got  # not served without SASL, so not listed


def test_each_api_is_answered_in_one_handler_module_that_declares_its_versions() -> None:
    declared: dict[ApiKey, str] = {api: "__init__" for api in handlers.VERSIONS}
    for path in sorted(Path(handlers.__file__).parent.glob("*.py")):
        if path.stem == "__init__":
            continue
        assert f"{path.name} " in (handlers.__doc__ or ""), f"{path.name} is missing from the package's map"
        for api in importlib.import_module(f"{handlers.__name__}.{path.stem}").VERSIONS:
            assert api not in declared, f"{api.name} in {declared[api]} and {path.stem}"
            declared[api] = path.stem
    assert {api: advertised(sasl=True)[api] for api in declared} == advertised(sasl=True)


def test_too_new_api_versions_is_answered_at_v0_with_the_ranges(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(1))
    frame = bytearray(encode_request(ApiKey.API_VERSIONS, 3, 7, "x", {}))
    struct.pack_into(">h", frame, 6, 99)  # request version 99
    client.sock.sendall(frame)
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, client.recv_frame())
    assert correlation_id == 7
    assert body["error_code"] == code("UNSUPPORTED_VERSION")
    assert {k["api_key"] for k in body["api_keys"]} >= {0, 3, 18}


def test_unserved_api_closes_the_connection(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(1))
    # Every other API the codec knows is served now; SaslHandshake is not on a cluster without SASL.
    client.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert client.closed_by_peer()


def test_metadata_lists_brokers_leaders_and_unknown_topics(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(2))
    md = client.request(ApiKey.METADATA, 9, {"topics": [{"name": "t"}, {"name": "nope"}],
                                            "allow_auto_topic_creation": True})
    assert [(b["node_id"], f"{b['host']}:{b['port']}") for b in md["brokers"]] == [
        (i, cluster.address(i)) for i in (1, 2, 3)]
    assert md["controller_id"] == 1
    t, nope = md["topics"]
    assert [p["leader_id"] for p in t["partitions"]] == [cluster.leader("t", i) for i in range(3)]
    assert sorted({p["leader_id"] for p in t["partitions"]}) == [1, 2, 3]  # spread over the brokers
    assert nope["error_code"] == code("UNKNOWN_TOPIC_OR_PARTITION")  # auto-creation is off here
    all_topics = client.request(ApiKey.METADATA, 9, {"topics": None})
    assert [x["name"] for x in all_topics["topics"]] == ["t"]


def test_metadata_auto_creates_with_the_default_partitions() -> None:
    with MockCluster(brokers=2, default_partitions=4) as c:
        client = RawClient(c.address(1))
        md = client.request(ApiKey.METADATA, 9, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True})
        assert len(md["topics"][0]["partitions"]) == 4
        assert c.topics() == {"auto": 4}
        md = client.request(ApiKey.METADATA, 9, {"topics": [{"name": "no"}], "allow_auto_topic_creation": False})
        assert md["topics"][0]["error_code"] == code("UNKNOWN_TOPIC_OR_PARTITION")


def test_create_and_delete_topics(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(3))
    body = client.request(ApiKey.CREATE_TOPICS, 3, {"topics": [
        {"name": "new", "num_partitions": 5, "replication_factor": 2, "assignments": [], "configs": []},
        {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": "bad/name", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
    ], "timeout_ms": 1000, "validate_only": False})
    assert [r["error_code"] for r in body["topics"]] == [
        0, code("TOPIC_ALREADY_EXISTS"), code("INVALID_TOPIC_EXCEPTION")]
    assert cluster.topics()["new"] == 5
    body = client.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["new", "ghost"], "timeout_ms": 1000})
    assert [r["error_code"] for r in body["responses"]] == [0, code("UNKNOWN_TOPIC_OR_PARTITION")]
    assert "new" not in cluster.topics()


def test_kafkajet_admin_creates_and_describes() -> None:
    from kafkajet.admin import Admin

    with MockCluster(brokers=3) as c, Admin(bootstrap_servers=c.bootstrap_servers) as admin:
        admin.create_topics(["a"], num_partitions=6, replication_factor=3)
        assert c.topics() == {"a": 6}
        assert sorted(b.node_id for b in admin.describe_cluster().brokers) == [1, 2, 3]


# --- Produce -----------------------------------------------------------------------------------------


def test_produce_assigns_contiguous_offsets_and_stores_real_batches(cluster: MockCluster,
                                                                   leader0: RawClient) -> None:
    assert produce(leader0, batch(3))["base_offset"] == 0
    assert produce(leader0, batch(2, start=3))["base_offset"] == 3
    recs = cluster.records("t", 0)
    assert [(r.offset, r.value) for r in recs] == [(i, b"v%d" % i) for i in range(5)]
    assert [b.base_offset for b in cluster.batches("t", 0)] == [0, 3]
    assert cluster.high_watermark("t", 0) == 5


def test_produce_to_a_follower_is_not_leader(cluster: MockCluster) -> None:
    follower = next(b for b in cluster.broker_ids if b != cluster.leader("t", 0))
    client = RawClient(cluster.address(follower))
    assert produce(client, batch())["error_code"] == code("NOT_LEADER_OR_FOLLOWER")
    cluster.set_leader("t", 0, follower)
    assert produce(client, batch())["error_code"] == 0


def test_set_leader_moves_the_partition_and_bumps_the_epoch(cluster: MockCluster, leader0: RawClient) -> None:
    old = cluster.leader("t", 0)
    new = old % 3 + 1
    cluster.set_leader("t", 0, new)
    assert produce(leader0, batch())["error_code"] == code("NOT_LEADER_OR_FOLLOWER")
    md = leader0.request(ApiKey.METADATA, 9, {"topics": [{"name": "t"}]})
    p0 = md["topics"][0]["partitions"][0]
    assert (p0["leader_id"], p0["leader_epoch"]) == (new, 1)
    cluster.set_leader("t", 0, NO_LEADER)
    md = leader0.request(ApiKey.METADATA, 9, {"topics": [{"name": "t"}]})
    assert md["topics"][0]["partitions"][0]["error_code"] == code("LEADER_NOT_AVAILABLE")


def test_a_former_leader_names_the_new_one_from_produce_v10(cluster: MockCluster, leader0: RawClient) -> None:
    new = cluster.leader("t", 0) % 3 + 1
    cluster.set_leader("t", 0, new)
    body = leader0.request(ApiKey.PRODUCE, 10, produce_body(batch()))
    p0 = body["responses"][0]["partition_responses"][0]
    assert p0["error_code"] == code("NOT_LEADER_OR_FOLLOWER")
    assert p0["current_leader"] == {"leader_id": new, "leader_epoch": 1}
    host, port = cluster.address(new).rsplit(":", 1)
    assert body["node_endpoints"] == [{"node_id": new, "host": host, "port": int(port), "rack": None}]
    # Before v10 there is nowhere to say it: the answer is v9's.
    assert "current_leader" not in leader0.request(ApiKey.PRODUCE, 9, produce_body(batch()))[
        "responses"][0]["partition_responses"][0]
    cluster.set_leader("t", 0, NO_LEADER)  # no leader to name: the hint stays at Kafka's "unknown"
    body = leader0.request(ApiKey.PRODUCE, 11, produce_body(batch()))
    assert body["responses"][0]["partition_responses"][0]["current_leader"] == {"leader_id": -1, "leader_epoch": -1}
    assert body["node_endpoints"] == []


def test_metadata_v12_answers_topic_ids_and_takes_a_topic_by_id(cluster: MockCluster, leader0: RawClient) -> None:
    md = leader0.request(ApiKey.METADATA, 12, {"topics": [{"name": "t", "topic_id": None}]})
    topic_id = md["topics"][0]["topic_id"]
    assert len(topic_id) == 16 and any(topic_id)
    by_id = leader0.request(ApiKey.METADATA, 12, {"topics": [{"name": None, "topic_id": topic_id},
                                                             {"name": None, "topic_id": bytes(range(16))}]})
    t, ghost = by_id["topics"]
    assert (t["name"], t["topic_id"], len(t["partitions"])) == ("t", topic_id, 3)
    assert (ghost["name"], ghost["error_code"]) == (None, code("UNKNOWN_TOPIC_ID"))
    assert leader0.request(ApiKey.METADATA, 13, {"topics": None})["error_code"] == 0


def test_corrupt_batch_is_corrupt_message(cluster: MockCluster, leader0: RawClient) -> None:
    data = bytearray(batch())
    data[-1] ^= 0xFF
    assert produce(leader0, bytes(data))["error_code"] == code("CORRUPT_MESSAGE")
    assert cluster.records("t", 0) == []


def test_batch_above_the_limit_is_message_too_large() -> None:
    with MockCluster(brokers=1, max_message_bytes=2000) as c:
        c.create_topic("t")
        client = RawClient(c.address(1))
        big = encode_batch([(0, None, b"x" * 3000, None)])
        assert produce(client, big)["error_code"] == code("MESSAGE_TOO_LARGE")
        assert produce(client, batch())["error_code"] == 0


def test_unknown_partition_and_bad_acks(cluster: MockCluster, leader0: RawClient) -> None:
    assert produce(leader0, batch(), partition=9)["error_code"] == code("UNKNOWN_TOPIC_OR_PARTITION")
    assert produce(leader0, batch(), acks=2)["error_code"] == code("INVALID_REQUIRED_ACKS")


def test_acks_zero_gets_no_response(cluster: MockCluster, leader0: RawClient) -> None:
    leader0.sock.sendall(encode_request(ApiKey.PRODUCE, PRODUCE_V, 1, "x", produce_body(batch(), acks=0)))
    # The next answer on the connection is the Metadata's: nothing was written for the Produce.
    md = leader0.request(ApiKey.METADATA, 9, {"topics": [{"name": "t"}]})
    assert md["topics"][0]["name"] == "t"
    assert len(cluster.records("t", 0)) == 3


# --- idempotence -------------------------------------------------------------------------------------


def test_duplicate_batch_gets_its_original_offset(cluster: MockCluster, leader0: RawClient) -> None:
    first = batch(3, pid=7, epoch=0, seq=0)
    assert produce(leader0, first)["base_offset"] == 0
    assert produce(leader0, batch(2, pid=7, epoch=0, seq=3, start=3))["base_offset"] == 3
    again = produce(leader0, first)
    assert (again["error_code"], again["base_offset"]) == (0, 0)
    assert len(cluster.records("t", 0)) == 5


def test_duplicate_answered_as_tansu_does_when_asked() -> None:
    with MockCluster(brokers=1, duplicate_error="DUPLICATE_SEQUENCE_NUMBER") as c:
        c.create_topic("t")
        client = RawClient(c.address(1))
        produce(client, batch(3, pid=7, epoch=0, seq=0))
        assert produce(client, batch(3, pid=7, epoch=0, seq=0))["error_code"] == code("DUPLICATE_SEQUENCE_NUMBER")
        assert len(c.records("t", 0)) == 3


def test_sequence_gap_is_out_of_order(cluster: MockCluster, leader0: RawClient) -> None:
    produce(leader0, batch(3, pid=7, epoch=0, seq=0))
    assert produce(leader0, batch(1, pid=7, epoch=0, seq=4))["error_code"] == code("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert len(cluster.records("t", 0)) == 3


def test_older_epoch_is_fenced_and_a_new_epoch_restarts_at_zero(cluster: MockCluster,
                                                                 leader0: RawClient) -> None:
    produce(leader0, batch(1, pid=7, epoch=1, seq=0))
    assert produce(leader0, batch(1, pid=7, epoch=0, seq=1))["error_code"] == code("INVALID_PRODUCER_EPOCH")
    assert produce(leader0, batch(1, pid=7, epoch=2, seq=5))["error_code"] == code("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert produce(leader0, batch(1, pid=7, epoch=2, seq=0))["error_code"] == 0


def test_unknown_producer_not_starting_at_zero(cluster: MockCluster, leader0: RawClient) -> None:
    assert produce(leader0, batch(1, pid=8, epoch=0, seq=3))["error_code"] == code("UNKNOWN_PRODUCER_ID")


def test_sequence_checker_rules() -> None:
    c = SequenceChecker()
    assert c.check(1, 0, 0, 4).error is None
    c.record(1, 0, 0, 4, 100, 104)
    for i in range(1, 6):  # five more batches: the first falls out of the retained window
        first = 5 * i
        assert c.check(1, 0, first, first + 4).error is None
        c.record(1, 0, first, first + 4, 100 + first, 104 + first)
    dup = c.check(1, 0, 10, 14)
    assert dup.error is None and dup.duplicate_of is not None and dup.duplicate_of.base_offset == 110
    assert c.check(1, 0, 0, 4).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"  # too old to be recognised
    assert c.check(1, 0, 31, 31).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert c.check(1, 0, 30, 30).error is None
    # Sequences wrap at 2**31 - 1.
    w = SequenceChecker(unknown_producer_error=None)
    w.record(2, 0, 2**31 - 2, 2**31 - 1, 0, 1)
    assert w.check(2, 0, 0, 3).error is None
    assert SequenceChecker(unknown_producer_error=None).check(3, 0, 9, 9).error is None
    assert SequenceChecker(stale_epoch_error="PRODUCER_FENCED").check(-1, -1, -1, -1).error is None
    f = SequenceChecker(stale_epoch_error="PRODUCER_FENCED")
    f.record(4, 3, 0, 0, 0, 0)
    assert f.check(4, 2, 1, 1).error == "PRODUCER_FENCED"


def test_init_producer_id_hands_out_fresh_ids(cluster: MockCluster, leader0: RawClient) -> None:
    a = leader0.request(ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None, "transaction_timeout_ms": 1})
    b = leader0.request(ApiKey.INIT_PRODUCER_ID, 2, {"transactional_id": None, "transaction_timeout_ms": 1})
    assert a["error_code"] == b["error_code"] == 0
    assert a["producer_id"] != b["producer_id"] and a["producer_epoch"] == 0


# --- Fetch and ListOffsets ---------------------------------------------------------------------------


def fetch_body(offset: int, *, max_wait: int = 0, partition: int = 0, epoch: int = -1) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "epoch": -1, "topics": [{"name": "t", "fetch_partitions": [
                {"partition_index": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
                 "log_start_offset": -1, "max_bytes": 1 << 20}]}], "forgotten": [], "rack_id": ""}


def test_fetch_returns_stored_batches_from_an_offset(cluster: MockCluster, leader0: RawClient) -> None:
    from kafkajet.records import decode_batches

    produce(leader0, batch(3))
    produce(leader0, batch(3, start=3))
    part = leader0.request(ApiKey.FETCH, FETCH_V, fetch_body(4))["responses"][0]["partition_responses"][0]
    assert (part["error_code"], part["high_watermark"]) == (0, 6)
    batches = decode_batches(part["record_set"])
    assert [b.base_offset for b in batches] == [3]  # the batch holding offset 4
    part = leader0.request(ApiKey.FETCH, FETCH_V, fetch_body(7))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == code("OFFSET_OUT_OF_RANGE")
    part = leader0.request(ApiKey.FETCH, FETCH_V, fetch_body(0, epoch=5))["responses"][0]["partition_responses"][0]
    assert part["error_code"] == code("UNKNOWN_LEADER_EPOCH")


def test_empty_fetch_is_held_until_data_arrives(cluster: MockCluster, leader0: RawClient) -> None:
    producer = RawClient(cluster.address(cluster.leader("t", 0)))
    start = time.monotonic()
    leader0.send(ApiKey.FETCH, FETCH_V, fetch_body(0, max_wait=20_000))
    produce(producer, batch(2))
    part = leader0.receive()["responses"][0]["partition_responses"][0]
    assert part["high_watermark"] == 2 and part["record_set"]
    assert time.monotonic() - start < 10  # woken by the append, not by max_wait


def test_empty_fetch_answers_after_max_wait(cluster: MockCluster, leader0: RawClient) -> None:
    start = time.monotonic()
    part = leader0.request(ApiKey.FETCH, FETCH_V, fetch_body(0, max_wait=300))["responses"][0][
        "partition_responses"][0]
    assert part["record_set"] == b"" and time.monotonic() - start >= 0.29


def test_list_offsets_earliest_latest_and_by_time(cluster: MockCluster, leader0: RawClient) -> None:
    produce(leader0, batch(3))  # timestamps 1000..1002

    def lookup(ts: int, version: int = 7) -> tuple[int, int]:
        body = leader0.request(ApiKey.LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
        p = body["topics"][0]["partitions"][0]
        return p["error_code"], p["offset"]

    assert lookup(-2) == (0, 0)
    assert lookup(-1) == (0, 3)
    assert lookup(1001) == (0, 1)
    assert lookup(-3) == (0, 2)
    assert lookup(5000) == (0, -1)
    body = leader0.request(ApiKey.LIST_OFFSETS, 0, {"replica_id": -1, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]})
    assert body["topics"][0]["partitions"][0]["old_style_offsets"] == [3]


# --- faults ------------------------------------------------------------------------------------------


def test_pushed_errors_hit_the_next_requests_in_order(cluster: MockCluster, leader0: RawClient) -> None:
    cluster.push_request_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
    assert produce(leader0, batch())["error_code"] == code("NOT_LEADER_OR_FOLLOWER")
    assert produce(leader0, batch())["error_code"] == code("REQUEST_TIMED_OUT")
    assert produce(leader0, batch())["error_code"] == 0
    assert len(cluster.records("t", 0)) == 3  # errors before the append wrote nothing


def test_error_after_append_writes_then_fails(cluster: MockCluster, leader0: RawClient) -> None:
    cluster.push_request_errors("Produce", ["NOT_ENOUGH_REPLICAS_AFTER_APPEND", after_append("REQUEST_TIMED_OUT")])
    assert produce(leader0, batch())["error_code"] == code("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    assert produce(leader0, batch())["error_code"] == code("REQUEST_TIMED_OUT")
    assert len(cluster.records("t", 0)) == 6


def test_unknown_error_name_is_refused_at_once(cluster: MockCluster) -> None:
    with pytest.raises(ValueError, match="NOT_A_REAL_ERROR"):
        cluster.push_request_errors("Produce", ["NOT_A_REAL_ERROR"])


def test_errors_can_target_one_broker(cluster: MockCluster, leader0: RawClient) -> None:
    other = next(b for b in cluster.broker_ids if b != cluster.leader("t", 0))
    cluster.push_request_errors("Produce", ["REQUEST_TIMED_OUT"], broker_id=other)
    assert produce(leader0, batch())["error_code"] == 0
    assert cluster.pending_faults("Produce") == 1


def test_drop_after_append_appends_and_closes(cluster: MockCluster, leader0: RawClient) -> None:
    cluster.drop_after_append("Produce")
    leader0.send(ApiKey.PRODUCE, PRODUCE_V, produce_body(batch()))
    assert leader0.closed_by_peer()
    assert len(cluster.records("t", 0)) == 3


def test_drop_closes_without_handling(cluster: MockCluster, leader0: RawClient) -> None:
    cluster.drop_requests("Produce")
    leader0.send(ApiKey.PRODUCE, PRODUCE_V, produce_body(batch()))
    assert leader0.closed_by_peer()
    assert cluster.records("t", 0) == []


def test_control_hook_answers_and_can_be_removed(cluster: MockCluster, leader0: RawClient) -> None:
    seen: list[tuple[int, int]] = []

    def hook(header: Any, body: dict[str, Any], broker_id: int) -> Any:
        seen.append((header.api_version, broker_id))
        if body["topic_data"][0]["partition_data"][0]["index"] == 0:
            return "NOT_ENOUGH_REPLICAS"
        return None

    handle = cluster.control("Produce", hook)
    assert produce(leader0, batch())["error_code"] == code("NOT_ENOUGH_REPLICAS")
    assert seen == [(PRODUCE_V, cluster.leader("t", 0))]
    assert cluster.remove_control(handle)
    assert produce(leader0, batch())["error_code"] == 0

    cluster.control("Metadata", lambda h, b, n: {"brokers": [], "controller_id": 42, "topics": []})
    assert leader0.request(ApiKey.METADATA, 9, {"topics": None})["controller_id"] == 42


def test_a_hook_that_waits_stalls_only_its_own_connection(cluster: MockCluster, leader0: RawClient) -> None:
    leader = cluster.leader("t", 0)
    holding, release = threading.Event(), threading.Event()

    def hold_partition_0(header: Any, body: dict[str, Any], broker_id: int) -> Any:
        if body["topic_data"][0]["partition_data"][0]["index"] == 0 and not release.is_set():
            holding.set()
            release.wait(30)
        return None

    cluster.control("Produce", hold_partition_0)
    leader0.send(ApiKey.PRODUCE, PRODUCE_V, produce_body(batch(3)))
    leader0.send(ApiKey.PRODUCE, PRODUCE_V, produce_body(batch(3, start=3)))  # pipelined behind the held one
    assert holding.wait(10)
    try:
        # Every other broker, and another connection to the same one, still answer at once.
        for broker_id in cluster.broker_ids:
            other = RawClient(cluster.address(broker_id))
            try:
                assert other.request(ApiKey.METADATA, 9, {"topics": None})["brokers"]
            finally:
                other.close()
        # The held connection took nothing further: its second Produce was not appended ahead of the first.
        assert cluster.records("t", 0) == []
        assert [r.api for r in cluster.requests() if r.broker_id == leader].count("PRODUCE") == 1
    finally:
        release.set()
    # Then both are answered, in request order, and appended in that order.
    assert [leader0.receive()["responses"][0]["partition_responses"][0]["base_offset"] for _ in range(2)] == [0, 3]
    assert [r.value for r in cluster.records("t", 0)] == [b"v%d" % i for i in range(6)]


def test_injected_bytes_are_written_verbatim(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(1))
    cluster.inject_response_bytes("Metadata", b"\x00\x00\x00\x03abc")
    client.send(ApiKey.METADATA, 9, {"topics": None})
    assert client.recv_frame() == b"abc"
    # Built from the header, e.g. a frame answering the wrong correlation id.
    cluster.inject_response_bytes("Metadata", lambda h: struct.pack(">ii", 4, h.correlation_id + 1))
    client.send(ApiKey.METADATA, 9, {"topics": None})
    assert struct.unpack(">i", client.recv_frame())[0] == client.correlation_id + 1


def test_oversized_request_frame_closes_the_connection(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(1))
    client.sock.sendall(struct.pack(">i", 200 * 1024 * 1024))
    assert client.closed_by_peer()


def test_rtt_delays_one_broker_without_blocking_the_others(cluster: MockCluster) -> None:
    cluster.set_rtt(1, 400)
    slow, fast = RawClient(cluster.address(1)), RawClient(cluster.address(2))
    start = time.monotonic()
    slow.send(ApiKey.METADATA, 9, {"topics": None})
    fast.request(ApiKey.METADATA, 9, {"topics": None})
    fast_done = time.monotonic() - start
    slow.receive()
    slow_done = time.monotonic() - start
    assert slow_done >= 0.39
    # Asked after the slow request went out, the fast broker answers well inside the slow one's 400 ms: a
    # cluster that delayed every broker, or answered one request at a time, could not.
    assert fast_done < 0.2
    # Answers on one connection keep their order even when the rtt changes in between (receive() checks
    # each answer's correlation id against the oldest request).
    slow.send(ApiKey.METADATA, 9, {"topics": None})
    cluster.set_rtt(1, 0)
    slow.send(ApiKey.API_VERSIONS, 3, {})
    slow.receive()
    slow.receive()


def test_broker_down_refuses_connections_until_up(cluster: MockCluster) -> None:
    client = RawClient(cluster.address(2))
    cluster.broker_down(2)
    assert client.closed_by_peer()
    with pytest.raises(ConnectionRefusedError):
        RawClient(cluster.address(2))
    assert RawClient(cluster.address(1)).request(ApiKey.METADATA, 9, {"topics": None})["brokers"]
    cluster.broker_up(2)
    assert RawClient(cluster.address(2)).request(ApiKey.METADATA, 9, {"topics": None})["brokers"]


def test_request_history(cluster: MockCluster, leader0: RawClient) -> None:
    before = time.monotonic()
    produce(leader0, batch())
    after = time.monotonic()
    produce_requests = cluster.requests("Produce")
    assert [(r.api, r.version, r.broker_id, r.client_id) for r in produce_requests] == [
        ("PRODUCE", PRODUCE_V, cluster.leader("t", 0), "raw-test")]
    assert before <= produce_requests[0].time <= after
    assert produce_requests[0].correlation_id == leader0.correlation_id


def test_stop_closes_everything_even_when_the_body_raised() -> None:
    cluster = MockCluster(brokers=2)
    with pytest.raises(RuntimeError, match="boom"), cluster:
        address = cluster.address(1)
        client = RawClient(address)
        raise RuntimeError("boom")
    assert client.closed_by_peer()
    with pytest.raises(ConnectionRefusedError):
        RawClient(address)
    assert not cluster.running
