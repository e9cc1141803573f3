"""The MockCluster's SASL server against independent clients (kafka-python, confluent-kafka/librdkafka) before
kafkajet relies on it, and on the wire: what is allowed before authentication, error answers, the legacy v0
framing, session lifetimes and re-authentication (KIP-368). The wire tests drive kafkajet's own sans-I/O
mechanisms (kafkajet.security.sasl) the way the network client does."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError as KpKafkaError

from kafkajet.errors import AuthenticationError, error_for_name
from kafkajet.protocol import ApiKey, decode_response, encode_request
from kafkajet.security.sasl import authentication_error, sasl_client_from_config
from kafkajet.testing import MockCluster

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USER, PASSWORD = "alice", "alice-secret"
TOPIC = "secured"
N = 50


def code(name: str) -> int:
    return error_for_name(name).code


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(brokers=1, sasl_mechanisms=MECHANISMS, sasl_users={USER: PASSWORD}) as c:
        c.create_topic(TOPIC, partitions=1)
        yield c


def kp_sasl(mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism, "sasl_plain_username": USER,
            "sasl_plain_password": password}


def ck_sasl(mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": USER,
            "sasl.password": password, "log_level": 0}


def values(cluster: MockCluster) -> list[bytes | None]:
    return [r.value for r in cluster.records(TOPIC, 0)]


def poll_until(producer: CkProducer, predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        producer.poll(0.05)


# --- independent clients ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_authenticates_produces_and_reads_back(cluster: MockCluster, mechanism: str) -> None:
    sent = [f"kp-{mechanism}-{i}".encode() for i in range(N)]
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, max_block_ms=10_000,
                      request_timeout_ms=10_000, **kp_sasl(mechanism))
    try:
        futures = [p.send(TOPIC, value=v) for v in sent]
        p.flush(10)
        for f in futures:
            f.get(timeout=0)
    finally:
        p.close(timeout=10)
    assert values(cluster) == sent

    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False,
                      **kp_sasl(mechanism))
    try:
        tp = KpTopicPartition(TOPIC, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(got) < N:
            assert time.monotonic() < deadline, f"kafka-python read {len(got)} of {N}"
            for msgs in c.poll(timeout_ms=200).values():
                got.extend(m.value for m in msgs)
    finally:
        c.close()
    assert got == sent
    ok = [a for a in cluster.sasl_authentications() if a.ok]
    assert ok and {(a.mechanism, a.principal) for a in ok} == {(mechanism, USER)}
    assert {r.principal for r in cluster.requests("Produce")} == {USER}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_authenticates_produces_and_reads_back(cluster: MockCluster, mechanism: str) -> None:
    sent = [f"ck-{mechanism}-{i}".encode() for i in range(N)]
    errors: list[Any] = []
    p = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "error_cb": errors.append,
                    **ck_sasl(mechanism)})
    for v in sent:
        p.produce(TOPIC, value=v, on_delivery=lambda err, _msg: err is None or errors.append(err))
    assert p.flush(10) == 0
    assert errors == []
    assert values(cluster) == sent

    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "sasl-readback",
                  "enable.auto.commit": False, **ck_sasl(mechanism)})
    try:
        c.assign([CkTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 10
        while len(got) < N:
            assert time.monotonic() < deadline, f"confluent-kafka read {len(got)} of {N}"
            for m in c.consume(N, 0.2):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    assert got == sent
    assert {(a.mechanism, a.principal, a.ok) for a in cluster.sasl_authentications()} == {(mechanism, USER, True)}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_wrong_password_fails(cluster: MockCluster, mechanism: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kafka")
    # kafka-python does not raise the authentication error from its bootstrap; it logs it and times out.
    with pytest.raises(KpKafkaError):
        p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, bootstrap_timeout_ms=1500,
                          max_block_ms=1500, **kp_sasl(mechanism, "wrong-password"))
        p.close(timeout=5)
    assert "invalid credentials" in caplog.text
    refused = cluster.sasl_authentications()
    assert refused and all(not a.ok and a.principal is None and a.mechanism == mechanism for a in refused)
    assert cluster.requests("Metadata") == [] and values(cluster) == []


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_wrong_password_fails(cluster: MockCluster, mechanism: str) -> None:
    errors: list[Any] = []
    p = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "error_cb": errors.append,
                    **ck_sasl(mechanism, "wrong-password")})
    reports: list[Any] = []
    p.produce(TOPIC, value=b"never", on_delivery=lambda err, msg: reports.append(err))
    poll_until(p, lambda: errors, 10, "an error callback")
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "invalid credentials" in auth[0].str() and mechanism in auth[0].str()
    assert "wrong-password" not in auth[0].str()
    assert reports == [], "the record should still be queued, not delivered"
    p.purge()
    poll_until(p, lambda: reports, 10, "the purged record's delivery report")
    # Purged from the queue: it was never sent, so never delivered.
    assert [e.code() for e in reports] == [KafkaError._PURGE_QUEUE]
    assert values(cluster) == []


def test_confluent_mechanism_the_cluster_does_not_enable() -> None:
    with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], sasl_users={USER: PASSWORD}) as cluster:
        errors: list[Any] = []
        p = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "error_cb": errors.append,
                        **ck_sasl("SCRAM-SHA-512")})
        p.produce(TOPIC, value=b"never")
        poll_until(p, lambda: errors, 10, "an error callback")
        text = " ".join(e.str() for e in errors)
        assert "Unsupported SASL mechanism" in text and "PLAIN" in text
        p.purge()


def test_independent_clients_reauthenticate_when_the_session_lifetime_passes() -> None:
    with MockCluster(brokers=1, sasl_mechanisms=MECHANISMS, sasl_users={USER: PASSWORD},
                     sasl_session_lifetime_ms=400) as cluster:
        cluster.create_topic(TOPIC)
        p = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=10_000,
                          **kp_sasl("SCRAM-SHA-256"))
        try:
            p.send(TOPIC, value=b"kp-1").get(timeout=10)
            cluster.wait_until(lambda: any(a.reauth for a in cluster.sasl_authentications()), 10,
                               "a kafka-python re-authentication")
            p.send(TOPIC, value=b"kp-2").get(timeout=10)
        finally:
            p.close(timeout=10)
        before = len(cluster.sasl_authentications())
        ck = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, **ck_sasl("PLAIN")})
        ck.produce(TOPIC, value=b"ck-1")
        assert ck.flush(10) == 0
        poll_until(ck, lambda: any(a.reauth for a in cluster.sasl_authentications()[before:]), 10,
                   "a librdkafka re-authentication")
        ck.produce(TOPIC, value=b"ck-2")
        assert ck.flush(10) == 0
        assert values(cluster) == [b"kp-1", b"kp-2", b"ck-1", b"ck-2"]
        assert all(a.ok and a.principal == USER for a in cluster.sasl_authentications())


# --- on the wire, with kafkajet's sans-I/O mechanisms -------------------------------------------------------


class Wire:
    """One blocking connection speaking the Kafka protocol (every read has a timeout)."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def request(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        self.sock.sendall(encode_request(api, version, self.correlation_id, "wire-test", body))
        correlation_id, response = decode_response(api, version, self.read_frame())
        assert correlation_id == self.correlation_id
        return response

    def send_raw(self, token: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(token)) + token)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    def assert_closed(self) -> None:
        try:
            assert self.sock.recv(1) == b"", "the broker sent more instead of closing"
        except ConnectionResetError:
            pass


def sasl_login(wire: Wire, cfg: dict[str, Any], version: int = 2) -> dict[str, Any]:
    """The exchange the network client runs: SaslHandshake v1, then SaslAuthenticate until step() is done."""
    client = sasl_client_from_config(cfg, "127.0.0.1")
    handshake = wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": client.mechanism})
    assert handshake["error_code"] == 0, handshake
    out: bytes | None = client.start()
    response: dict[str, Any] = {}
    while out is not None:
        response = wire.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": out})
        if response["error_code"]:
            raise authentication_error(client.mechanism, response["error_message"])
        out = client.step(response["auth_bytes"])
    assert client.complete
    return response


def cfg_for(mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": password}


@pytest.fixture
def wire(cluster: MockCluster) -> Iterator[Wire]:
    w = Wire(cluster.bootstrap_servers)
    yield w
    w.close()


def metadata(wire: Wire) -> dict[str, Any]:
    return wire.request(ApiKey.METADATA, 1, {"topics": [{"name": TOPIC}]})


def api_keys(wire: Wire) -> set[int]:
    return {k["api_key"] for k in wire.request(ApiKey.API_VERSIONS, 0, {})["api_keys"]}


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafkajet_mechanisms_authenticate_over_sasl_authenticate(cluster: MockCluster, wire: Wire,
                                                                 mechanism: str, version: int) -> None:
    assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= api_keys(wire)
    last = sasl_login(wire, cfg_for(mechanism), version)
    if version >= 1:
        assert last["session_lifetime_ms"] == 0
    assert metadata(wire)["topics"][0]["error_code"] == 0
    assert cluster.requests("Metadata")[-1].principal == USER


def test_requests_before_authentication_close_the_connection(cluster: MockCluster, wire: Wire) -> None:
    api_keys(wire)  # allowed
    wire.sock.sendall(encode_request(ApiKey.METADATA, 1, 99, "wire-test", {"topics": None}))
    wire.assert_closed()
    w2 = Wire(cluster.bootstrap_servers)  # after the handshake, only SaslAuthenticate is allowed
    try:
        assert w2.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        w2.sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 99, "wire-test", {}))
        w2.assert_closed()
    finally:
        w2.close()
    assert cluster.requests("Metadata") == []


def test_unknown_mechanism_lists_the_enabled_ones_then_closes(wire: Wire) -> None:
    answer = wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
    assert answer == {"error_code": code("UNSUPPORTED_SASL_MECHANISM"), "mechanisms": MECHANISMS}
    wire.assert_closed()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_is_answered_then_the_connection_closed(cluster: MockCluster, wire: Wire,
                                                               mechanism: str) -> None:
    with pytest.raises(AuthenticationError, match="invalid credentials") as e:
        sasl_login(wire, cfg_for(mechanism, "wrong-password"))
    assert mechanism in str(e.value) and "wrong-password" not in str(e.value)
    wire.assert_closed()
    [refused] = cluster.sasl_authentications()
    assert not refused.ok and refused.principal is None and refused.mechanism == mechanism


def test_sasl_authenticate_without_handshake_closes(cluster: MockCluster, wire: Wire) -> None:
    wire.sock.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 1, 99, "wire-test", {"auth_bytes": b"\0alice\0x"}))
    wire.assert_closed()
    assert cluster.sasl_authentications() == []


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_handshake_v0_uses_raw_token_framing(cluster: MockCluster, wire: Wire, mechanism: str) -> None:
    assert wire.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": mechanism})["error_code"] == 0
    client = sasl_client_from_config(cfg_for(mechanism), "127.0.0.1")
    out: bytes | None = client.start()
    while out is not None:
        wire.send_raw(out)
        out = client.step(wire.read_frame())
    assert client.complete
    assert metadata(wire)["topics"][0]["error_code"] == 0  # back to Kafka framing


def test_handshake_v0_failure_just_closes(wire: Wire) -> None:
    assert wire.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
    wire.send_raw(b"\0alice\0wrong")
    wire.assert_closed()


def sleep_until(when: float) -> None:
    """Session expiry is a matter of time alone: waiting for a known instant is the condition itself."""
    time.sleep(max(0.0, when - time.monotonic()))


def test_session_lifetime_expiry_and_reauthentication(cluster: MockCluster) -> None:
    cluster.config.sasl_session_lifetime_ms = 1000
    wire = Wire(cluster.bootstrap_servers)
    try:
        assert sasl_login(wire, cfg_for("SCRAM-SHA-512"))["session_lifetime_ms"] == 1000
        first_ends = time.monotonic() + 1.0  # the broker started the session before this instant
        metadata(wire)
        sleep_until(first_ends - 0.4)
        # Re-authenticate (KIP-368) before the session ends: same mechanism, same user, a new session.
        assert sasl_login(wire, cfg_for("SCRAM-SHA-512"))["session_lifetime_ms"] == 1000
        sleep_until(first_ends + 0.05)
        metadata(wire)  # still served: the second session has about 0.5 s to go
        assert [(a.ok, a.reauth) for a in cluster.sasl_authentications()] == [(True, False), (True, True)]

        cluster.config.sasl_session_lifetime_ms = 100
        sasl_login(wire, cfg_for("SCRAM-SHA-512"))
        sleep_until(time.monotonic() + 0.15)
        wire.sock.sendall(encode_request(ApiKey.METADATA, 1, 99, "wire-test", {"topics": None}))
        wire.assert_closed()  # the session ended without a re-authentication
    finally:
        wire.close()


def test_reauthentication_must_keep_mechanism_and_user(cluster: MockCluster, wire: Wire) -> None:
    cluster.set_sasl_user("bob", "bob-secret")
    sasl_login(wire, cfg_for("PLAIN"))
    answer = wire.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
    assert answer["error_code"] == code("ILLEGAL_SASL_STATE")
    wire.assert_closed()
    w2 = Wire(cluster.bootstrap_servers)
    try:
        sasl_login(w2, cfg_for("PLAIN"))
        with pytest.raises(AuthenticationError, match="principal"):
            sasl_login(w2, {"sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "bob-secret"})
        w2.assert_closed()
    finally:
        w2.close()


def test_users_can_change_while_running(cluster: MockCluster, wire: Wire) -> None:
    cluster.set_sasl_user(USER, "new-secret")
    with pytest.raises(AuthenticationError):
        sasl_login(wire, cfg_for("SCRAM-SHA-256"))
    w2 = Wire(cluster.bootstrap_servers)
    try:
        sasl_login(w2, cfg_for("SCRAM-SHA-256", "new-secret"))
    finally:
        w2.close()
    cluster.remove_sasl_user(USER)
    w3 = Wire(cluster.bootstrap_servers)
    try:
        with pytest.raises(AuthenticationError):
            sasl_login(w3, cfg_for("PLAIN", "new-secret"))
    finally:
        w3.close()


def test_without_sasl_keywords_the_cluster_takes_no_sasl() -> None:
    with MockCluster(brokers=1) as cluster:
        wire = Wire(cluster.bootstrap_servers)
        try:
            assert not {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} & api_keys(wire)
            assert metadata(wire)["topics"][0]["error_code"] == 0  # no authentication needed
            wire.sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 1, 99, "wire-test", {"mechanism": "PLAIN"}))
            wire.assert_closed()  # an API it does not serve, as before
        finally:
            wire.close()
        assert cluster.sasl_authentications() == []


def test_constructor_validates_sasl_keywords() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        MockCluster(brokers=1, sasl_mechanisms=["GSSAPI"])
    with pytest.raises(ValueError, match="sasl_mechanisms"):
        MockCluster(brokers=1, sasl_users={USER: PASSWORD})
    with pytest.raises(ValueError, match="lifetime"):
        MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], sasl_session_lifetime_ms=-1)
