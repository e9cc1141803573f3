"""SASL from the client side: the producer and the admin client against the MockCluster's SASL server
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), failures that fail fast, KIP-368 re-authentication, and the sans-I/O
exchange against hand-made responses (OAUTHBEARER, protocol violations)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet import AuthenticationError, ConfigError, Producer
from kafkajet.admin import Admin
from kafkajet.cluster import metadata_request_body
from kafkajet.errors import SaslAuthenticationError
from kafkajet.network import NetworkClient
from kafkajet.network.sasl_exchange import SaslExchange
from kafkajet.protocol import ApiKey
from kafkajet.security.connection import connection_security
from kafkajet.security.sasl import OAuthBearerClient
from kafkajet.testing.mock.cluster import MockCluster

PASSWORD = "alice-Pa55word"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
# Generous enough for a loaded machine, far below the defaults a wrong implementation would wait out
# (max.block.ms 60 s, delivery.timeout.ms 120 s).
PROMPT_S = 10.0


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(brokers=2, sasl_mechanisms=MECHANISMS, sasl_users={"alice": PASSWORD}) as c:
        c.create_topic("t", partitions=2)
        yield c


def _sasl(cluster: MockCluster, mechanism: str, password: str = PASSWORD, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password, **extra}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_producer_authenticates_with_each_mechanism(cluster: MockCluster, mechanism: str) -> None:
    with Producer(_sasl(cluster, mechanism)) as producer:
        results = [producer.send("t", f"v{i}".encode(), partition=i % 2).result(timeout=30) for i in range(10)]
    assert [r.offset for r in results] == [i // 2 for i in range(10)]
    assert [r.value for r in cluster.records("t", 0)] == [f"v{i}".encode() for i in range(0, 10, 2)]
    auths = cluster.sasl_authentications()
    assert auths and all(a.ok and a.mechanism == mechanism and a.principal == "alice" for a in auths)
    # Every broker connection authenticated before its first real request.
    assert {a.broker_id for a in auths} >= {cluster.leader("t", 0), cluster.leader("t", 1)}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_admin_authenticates_with_each_mechanism(cluster: MockCluster, mechanism: str) -> None:
    with Admin(_sasl(cluster, mechanism)) as admin:
        admin.create_topics("made-by-admin", num_partitions=3, timeout_s=30)
        assert admin.describe_topics("made-by-admin")["made-by-admin"].partitions
    assert cluster.topics()["made-by-admin"] == 3


def test_jaas_config_in_java_syntax(cluster: MockCluster) -> None:
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
            f'password="{PASSWORD}";')
    cfg = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
           "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}
    with Producer(cfg) as producer:
        assert producer.send("t", b"x", partition=1).result(timeout=30).offset == 0


def test_wrong_password_raises_from_send_at_once(cluster: MockCluster) -> None:
    started = time.monotonic()
    with Producer(_sasl(cluster, "SCRAM-SHA-256", "not-the-password")) as producer:
        with pytest.raises(SaslAuthenticationError) as info:
            producer.send("t", b"x")
        elapsed = time.monotonic() - started
        assert elapsed < PROMPT_S, f"took {elapsed:.1f} s: an authentication failure must not wait out max.block.ms"
        assert "SCRAM-SHA-256 authentication failed on node -" in str(info.value)
        # No reconnect loop hammering a broker: at least reconnect.backoff.max.ms (1 s) between its attempts.
        # Three attempts on one broker give two gaps to measure; fewer would make the check below vacuous.
        cluster.wait_until(lambda: max(Counter(a.broker_id for a in cluster.sasl_authentications()).values(),
                                       default=0) >= 3, timeout=15, what="three authentication attempts")
    auths = cluster.sasl_authentications()
    assert auths and all(not a.ok for a in auths)
    for broker in {a.broker_id for a in auths}:
        times = [a.time for a in auths if a.broker_id == broker]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert all(g > 0.9 for g in gaps), f"broker {broker} attempts {gaps} s apart"
    assert max(len([a for a in auths if a.broker_id == b]) for b in {a.broker_id for a in auths}) >= 3


def test_an_authentication_failure_names_the_broker_once(caplog: pytest.LogCaptureFixture) -> None:
    """The connection's errors already name the broker; the log line and the error the caller gets must not
    put "node 1 (host:port): " in front of them a second time."""
    calls = []

    def refuses() -> str:
        # The constructor's login call (Java's) gets a token; the connection's call is the one refused, as
        # when an identity provider stops answering after the client started.
        calls.append(1)
        if len(calls) == 1:
            return "first-token"
        raise AuthenticationError("the identity provider says no")

    texts = []
    with MockCluster(brokers=1, sasl_mechanisms=["PLAIN", "OAUTHBEARER"], sasl_users={"alice": PASSWORD}) as cluster, \
            caplog.at_level(logging.ERROR, logger="kafkajet.network"):
        cluster.create_topic("t", partitions=1)
        oauth = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.provider": refuses}
        for cfg in (_sasl(cluster, "PLAIN", "nope"), oauth):
            with Producer(cfg) as producer, pytest.raises(AuthenticationError) as info:
                producer.send("t", b"x")
            texts.append(str(info.value))
    failures = [r.getMessage() for r in caplog.records if r.name == "kafkajet.network"]
    assert any("says no" in t for t in failures) and any("PLAIN authentication failed" in t for t in failures)
    for text in texts + failures:
        names = re.findall(r"node -?\d+ \([^)]*\)", text)
        assert names and len(names) == len(set(names)), text


def test_a_users_token_provider_is_called_at_construction_and_its_failure_fails_the_constructor() -> None:
    """Java's OAuthBearerLoginModule.login() calls the login callback handler in the client's constructor
    (LoginManager), for the token and the extensions: so does kafkajet with sasl.oauthbearer.token.provider."""
    from kafkajet.fetch import FetchClient

    class Provider:
        def __init__(self, token: Any = "tok", fail: Exception | None = None,
                     extensions: dict[str, str] | None = None) -> None:
            self.calls = 0
            self.threads: list[threading.Thread] = []  # who called: the constructor's thread, or the sender's
            self._token, self._fail, self._extensions = token, fail, extensions or {}

        def token(self) -> Any:
            self.calls += 1
            self.threads.append(threading.current_thread())
            if self._fail is not None:
                raise self._fail
            return self._token

        def extensions(self) -> dict[str, str]:
            return self._extensions

    seen: list[str] = []

    def validator(token: str, extensions: Any) -> tuple[str, float | None]:
        seen.append(token)
        return "alice", None

    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_validator=validator) as cluster:
        cluster.create_topic("t", partitions=1)
        base = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER"}
        clients: tuple[Any, ...] = (Producer, Admin, FetchClient)
        for make in clients:
            provider = Provider()
            client = make({**base, "sasl.oauthbearer.token.provider": provider})
            try:
                # Called once by the constructor itself (this thread); later calls are connections' own.
                assert provider.threads[:1] == [threading.current_thread()], make
                assert provider.threads.count(threading.current_thread()) == 1, make
            finally:
                client.close()
        down = RuntimeError("identity provider unreachable")
        for make in clients:
            with pytest.raises(AuthenticationError, match=r"token provider failed at the client's login "
                                                          r"\(RuntimeError\)") as info:
                make({**base, "sasl.oauthbearer.token.provider": Provider(fail=down)})
            assert info.value.__cause__ is down  # the user's own error, chained as Java's LoginException does
        for bad in (Provider(token="has space"), Provider(extensions={"auth": "x"})):
            with pytest.raises(AuthenticationError, match="no valid bearer token|invalid extension name"):
                Producer({**base, "sasl.oauthbearer.token.provider": bad})
        provider = Provider()
        with Producer({**base, "sasl.oauthbearer.token.provider": provider}) as producer:
            producer.send("t", b"x").result(timeout=PROMPT_S)
        assert provider.calls >= 2 and seen == ["tok"] * len(seen) and seen  # connections still ask it


def test_admin_wrong_password_fails_fast(cluster: MockCluster) -> None:
    started = time.monotonic()
    with Admin(_sasl(cluster, "PLAIN", "nope")) as admin, pytest.raises(SaslAuthenticationError,
                                                                      match="PLAIN authentication failed"):
        admin.list_topics(timeout_s=30)
    assert time.monotonic() - started < PROMPT_S


def test_mechanism_not_enabled_names_what_the_broker_offers() -> None:
    with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], sasl_users={"alice": PASSWORD}) as cluster:
        with Producer(_sasl(cluster, "SCRAM-SHA-512")) as producer:
            with pytest.raises(SaslAuthenticationError,
                               match=r"SASL mechanism SCRAM-SHA-512 is not enabled on node -1 .* offers: PLAIN"):
                producer.send("t", b"x")


def test_sasl_against_a_listener_without_sasl_says_so() -> None:
    with MockCluster(brokers=1) as cluster, Producer(_sasl(cluster, "PLAIN")) as producer:
        with pytest.raises(SaslAuthenticationError, match="SASL is not enabled on this listener"):
            producer.send("t", b"x")


def test_reauthentication_keeps_the_connection_and_loses_nothing() -> None:
    # 20 s sessions: re-authentication is due at 85-95 % of the lifetime and waits for the requests in flight,
    # so the lifetime must leave those a round trip even on a loaded CI machine, where this in-process broker
    # shares the GIL with the producer (1 s left 50-150 ms; 3 s left 150-450 ms and 6 s left 300-900 ms, which
    # clean-clone CI runs beside other jobs overran: the broker closed the session; 10 s, leaving 0.5-1.5 s, was
    # overrun at a load of 15 on 2 cores). One re-authentication is the subject; two doubled the test's time.
    with MockCluster(brokers=1, sasl_mechanisms=["SCRAM-SHA-512"], sasl_users={"alice": PASSWORD},
                     sasl_session_lifetime_ms=20_000) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(_sasl(cluster, "SCRAM-SHA-512"), linger_ms=0) as producer:
            futures: list[Any] = []
            deadline = time.monotonic() + 60
            # Keep records in flight across several session lifetimes: bursts, not one record at a time.
            while not any(a.reauth and a.ok for a in cluster.sasl_authentications()):
                assert time.monotonic() < deadline, "no re-authentication happened"
                futures += [producer.send("t", f"r{len(futures) + i}".encode()) for i in range(50)]
                futures[-50].result(timeout=30)
            results = [f.result(timeout=30) for f in futures]
        assert [r.offset for r in results] == list(range(len(futures)))
        assert [r.value for r in cluster.records("t", 0)] == [f"r{i}".encode() for i in range(len(futures))]
        auths = cluster.sasl_authentications()
        assert all(a.ok for a in auths)
        # Re-authentication on the same connection: the broker closes a connection whose session ran out,
        # so a client that did not re-authenticate would show up here as fresh (non-reauth) exchanges.
        assert sum(not a.reauth for a in auths) <= 2, auths


def test_reauthentication_waits_for_requests_in_flight() -> None:
    """KIP-368 on the NetworkClient: requests in flight when the session is due finish first; no new request
    is taken until the new SaslHandshake + SaslAuthenticate are done on the same connection."""
    with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], sasl_users={"alice": PASSWORD},
                     sasl_session_lifetime_ms=400) as cluster:
        security = connection_security(_sasl(cluster, "PLAIN"))
        with NetworkClient(security=security) as client:
            client.add_bootstrap(cluster.bootstrap_servers)

            def now() -> float:
                return time.monotonic() * 1000

            deadline = time.monotonic() + 20
            while not client.ready(-1, now()):
                assert time.monotonic() < deadline, client.last_error(-1)
                client.poll(50, now())
            authenticated_at = time.monotonic()
            cluster.set_rtt(1, 600)  # answers arrive after the session is due (340-380 ms)
            ids = []
            for _ in range(3):  # one request at a time is written; all three end up in flight together
                while not client.ready(-1, now()):
                    assert time.monotonic() < deadline
                    client.poll(0, now())
                ids.append(client.send(-1, ApiKey.METADATA, metadata_request_body([]), now()))
            assert client.in_flight_count(-1) == 3
            answered: list[Any] = []
            refused_while_due = False
            while len(answered) < 3:
                assert time.monotonic() < deadline
                answered += client.poll(50, now())
                if time.monotonic() - authenticated_at > 0.4 and not answered:
                    refused_while_due = refused_while_due or not client.ready(-1, now())
            assert sorted(r.correlation_id for r in answered) == sorted(ids)
            assert all(r.error is None for r in answered), [r.error for r in answered]
            assert refused_while_due, "a connection due for re-authentication must take no new requests"
            cluster.set_rtt(1, 0)
            while not any(a.reauth for a in cluster.sasl_authentications()):
                assert time.monotonic() < deadline, "no re-authentication"
                client.poll(50, now())
            while not client.ready(-1, now()):
                assert time.monotonic() < deadline
                client.poll(50, now())
            client.send(-1, ApiKey.METADATA, metadata_request_body([]), now())
            after: list[Any] = []
            while not after:
                assert time.monotonic() < deadline
                after = client.poll(50, now())
            assert after[0].error is None
        auths = cluster.sasl_authentications()
        assert [a.reauth for a in auths][:2] == [False, True] and all(a.ok for a in auths)


def test_admin_connections_reauthenticate_too() -> None:
    with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], sasl_users={"alice": PASSWORD},
                     sasl_session_lifetime_ms=1000) as cluster, Admin(_sasl(cluster, "PLAIN")) as admin:
        deadline = time.monotonic() + 20
        calls = 0
        while not any(a.reauth for a in cluster.sasl_authentications()):
            assert time.monotonic() < deadline, "the admin connection never re-authenticated"
            admin.list_topics(timeout_s=10)
            calls += 1
        admin.list_topics(timeout_s=10)  # still usable after the renewal
        assert sum(not a.reauth for a in cluster.sasl_authentications()) == 1, "expected one connection only"


def test_failed_reauthentication_fails_pending_records_promptly() -> None:
    with MockCluster(brokers=1, sasl_mechanisms=["PLAIN"], sasl_users={"alice": PASSWORD},
                     sasl_session_lifetime_ms=500) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(_sasl(cluster, "PLAIN"), linger_ms=0) as producer:
            assert producer.send("t", b"first").result(timeout=30).offset == 0
            cluster.set_sasl_user("alice", "rotated-password")
            started = time.monotonic()
            done = threading.Event()
            futures = []
            while not done.is_set():  # sends until a record fails: the re-authentication was refused
                assert time.monotonic() - started < PROMPT_S, "records kept waiting after authentication failed"
                try:
                    fut = producer.send("t", b"later")
                except AuthenticationError:
                    break
                futures.append(fut)
                try:
                    fut.result(timeout=PROMPT_S)
                except AuthenticationError:
                    done.set()
            assert time.monotonic() - started < PROMPT_S
            with pytest.raises(AuthenticationError):
                producer.send("t", b"after").result(timeout=PROMPT_S)


def test_a_sasl_protocol_violation_fails_authentication_and_closes(cluster: MockCluster) -> None:
    # A PLAIN server must answer with empty bytes; anything else is a violation, not a retry-until-timeout.
    cluster.control("SaslAuthenticate", lambda header, body, broker: {
        "error_code": 0, "error_message": None, "auth_bytes": b"junk", "session_lifetime_ms": 0})
    started = time.monotonic()
    with Producer(_sasl(cluster, "PLAIN")) as producer:
        with pytest.raises(AuthenticationError, match="protocol violation"):
            producer.send("t", b"x")
    assert time.monotonic() - started < PROMPT_S
    assert cluster.records("t", 0) == []


# --- the sans-I/O exchange --------------------------------------------------------------------------------

VERSIONS = {int(ApiKey.SASL_HANDSHAKE): (0, 1), int(ApiKey.SASL_AUTHENTICATE): (0, 2)}


class FakePlain:
    mechanism = "PLAIN"

    def __init__(self) -> None:
        self.complete = False

    def start(self) -> bytes:
        self.complete = True
        return b"\0u\0p"

    def step(self, server_message: bytes) -> bytes | None:
        return None


def test_exchange_requests_and_session_lifetime() -> None:
    ex = SaslExchange(FakePlain(), "node 1", VERSIONS)
    first = ex.start()
    assert (first.api_key, first.version, first.body) == (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    auth = ex.on_response(ApiKey.SASL_HANDSHAKE, {"error_code": 0, "mechanisms": ["PLAIN"]})
    assert auth is not None and auth.api_key is ApiKey.SASL_AUTHENTICATE and auth.version == 2
    assert auth.body == {"auth_bytes": b"\0u\0p"}
    assert ex.on_response(ApiKey.SASL_AUTHENTICATE, {"error_code": 0, "auth_bytes": b"",
                                                     "session_lifetime_ms": 10000}) is None
    assert ex.done and ex.session_lifetime_ms == 10000


@pytest.mark.parametrize("response", [
    (ApiKey.SASL_AUTHENTICATE, {"error_code": 0, "auth_bytes": b"unexpected"}),  # data after completion
    (ApiKey.PRODUCE, {"error_code": 0}),  # a response to something we never sent
])
def test_protocol_violations_are_authentication_errors(response: tuple[ApiKey, dict[str, Any]]) -> None:
    ex = SaslExchange(FakePlain(), "node 1", VERSIONS)
    ex.start()
    ex.on_response(ApiKey.SASL_HANDSHAKE, {"error_code": 0, "mechanisms": ["PLAIN"]})
    with pytest.raises(AuthenticationError, match="node 1"):
        ex.on_response(*response)


def test_handshake_v0_only_brokers_are_refused() -> None:
    with pytest.raises(SaslAuthenticationError, match="only supports SaslHandshake v0"):
        SaslExchange(FakePlain(), "node 1", {**VERSIONS, int(ApiKey.SASL_HANDSHAKE): (0, 0)}).start()


def test_oauthbearer_failure_is_reported_without_the_token() -> None:
    token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.c2VjcmV0LXRva2Vu"
    ex = SaslExchange(OAuthBearerClient(lambda: token), "node 1", VERSIONS)
    ex.start()
    first = ex.on_response(ApiKey.SASL_HANDSHAKE, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]})
    assert first is not None and token.encode() in first.body["auth_bytes"]
    # RFC 7628: the server's error challenge is answered with %x01, then the broker fails the exchange.
    ack = ex.on_response(ApiKey.SASL_AUTHENTICATE,
                         {"error_code": 0, "auth_bytes": b'{"status":"invalid_token"}'})
    assert ack is not None and ack.body == {"auth_bytes": b"\x01"}
    with pytest.raises(SaslAuthenticationError) as info:
        ex.on_response(ApiKey.SASL_AUTHENTICATE, {"error_code": 58, "error_message": "invalid token",
                                                  "auth_bytes": b""})
    assert token not in str(info.value) and token not in repr(info.value)


def test_sasl_config_cross_checks() -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL"}
    with pytest.raises(ConfigError, match="needs sasl.mechanism"):
        Producer(base)
    with pytest.raises(ConfigError, match="sasl.password is not set"):
        Producer({**base, "sasl.mechanism": "PLAIN", "sasl.username": "u"})
    with pytest.raises(ConfigError, match="needs sasl.oauthbearer.token.provider"):
        Producer({**base, "sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match="cannot prompt"):
        Producer({**base, "sasl.mechanism": "GSSAPI",
                  "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=false;"})
    with pytest.raises(ConfigError, match="cannot read the keytab file /nonexistent/client.keytab"):
        Producer({**base, "sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": "alice@EXAMPLE.COM",
                  "sasl.kerberos.keytab": "/nonexistent/client.keytab"})
