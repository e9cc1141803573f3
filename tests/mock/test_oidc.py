"""OIDC client credentials by configuration, end to end: a local identity provider (kafkajet.testing.oidc)
minting RS256 JWTs, the MockCluster checking signature, expiry, audience and scope, and the producer
fetching, caching, sharing and refreshing its token, re-authenticating its open connections (KIP-368)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kafkajet import AuthenticationError, Producer
from kafkajet.testing.mock.cluster import MockCluster
from kafkajet.testing.mock.sasl import TokenValidator
from kafkajet.testing.oidc import OidcProvider
from tests.helpers.requires import require
from tests.helpers.waiting import wait_for

SECRET = "app-Client-S3cret"


class RecordingValidator:
    """The provider's validator, noting for each accepted token how much of its life was left."""

    def __init__(self, inner: TokenValidator) -> None:
        self._inner = inner
        self.seen: list[tuple[str, float]] = []  # (token, seconds left when presented)
        self.whose: dict[str, str] = {}  # token -> the principal it names
        self.lock = threading.Lock()

    def __call__(self, token: str, extensions: Mapping[str, str]) -> tuple[str, float | None]:
        principal, exp = self._inner(token, extensions)
        assert exp is not None
        with self.lock:
            self.seen.append((token, exp - time.time()))
            self.whose[token] = principal
        return principal, exp


@pytest.fixture
def idp() -> Iterator[OidcProvider]:
    with OidcProvider(clients={"app": SECRET}, audience="kafka", scopes=("kafka", "other")) as p:
        yield p


def _cfg(cluster: MockCluster, idp: OidcProvider, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": idp.token_url, "sasl.oauthbearer.client.id": "app",
            "sasl.oauthbearer.client.secret": SECRET, "sasl.oauthbearer.scope": "kafka", **extra}


def test_one_token_fetch_serves_every_connection(idp: OidcProvider) -> None:
    validator = RecordingValidator(idp.validator(scope="kafka"))
    with MockCluster(brokers=3, sasl_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_validator=validator) as cluster:
        cluster.create_topic("t", partitions=6)
        with Producer(_cfg(cluster, idp)) as producer:
            futures = [producer.send("t", b"v", partition=i % 6) for i in range(60)]
            assert all(f.result(timeout=30).offset >= 0 for f in futures)
        auths = cluster.sasl_authentications()
    assert {a.broker_id for a in auths} == {1, 2, 3}
    assert all(a.ok and a.principal == "app" for a in auths) and len(auths) >= 4  # bootstrap + 3 brokers
    assert idp.token_requests == 1  # one fetch for every connection of the client
    assert len({token for token, _ in validator.seen}) == 1


def test_every_client_logs_in_at_construction_and_fails_there_when_the_provider_cannot(idp: OidcProvider) -> None:
    """As Java's clients, whose constructor logs in (OAuthBearerLoginModule): the first token is fetched before
    the constructor returns, so the sender thread never waits on the identity provider for it, and a provider
    that cannot give one within sasl.login.retry.backoff.max.ms fails the constructor with its cause."""
    from kafkajet.admin import Admin
    from kafkajet.fetch import FetchClient
    from kafkajet.security.token_refresh import TokenFetchError

    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"],
                     sasl_oauthbearer_validator=idp.validator(scope="kafka")) as cluster:
        cluster.create_topic("t", partitions=1)
        cfg = _cfg(cluster, idp, **{"sasl.login.retry.backoff.max.ms": 300})
        clients: tuple[Any, ...] = (Producer, Admin, FetchClient)
        start = idp.token_requests
        for make in clients:
            before = idp.token_requests
            client = make(cfg)
            try:
                assert idp.token_requests == before + 1, make  # fetched by the constructor itself
            finally:
                client.close()
        # A sender thread may connect before close() on a busy machine: with the constructor's token, never
        # with one it fetched itself.
        assert idp.token_requests == start + len(clients)
        assert all(a.ok for a in cluster.sasl_authentications())
        idp.down = True
        for make in clients:
            failed = idp.failed_requests
            with pytest.raises(TokenFetchError, match=r"token request to http://127\.0\.0\.1:\d+/token failed: HTTP 503"):
                make(cfg)
            assert idp.failed_requests >= failed + 2  # retried within the budget before giving up
        idp.down = False
        with Producer(cfg) as producer:  # a constructor that failed left nothing behind to get in the way
            assert producer.send("t", b"x").result(timeout=30).offset == 0


def test_the_broker_refuses_a_token_without_the_scope_it_wants(idp: OidcProvider) -> None:
    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"],
                     sasl_oauthbearer_validator=idp.validator(scope="kafka")) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(_cfg(cluster, idp, **{"sasl.oauthbearer.scope": "other", "max.block.ms": 10000})) as p, \
                pytest.raises(AuthenticationError, match="OAUTHBEARER") as info:
            p.send("t", b"x").result(timeout=30)
        assert "lacks scope 'kafka'" in str(info.value)
        assert [a.ok for a in cluster.sasl_authentications()][:1] == [False]


def test_the_broker_refuses_a_token_for_another_audience(idp: OidcProvider) -> None:
    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"],
                     sasl_oauthbearer_validator=idp.validator(audience="another-cluster")) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(_cfg(cluster, idp, **{"max.block.ms": 10000})) as p, \
                pytest.raises(AuthenticationError, match="not for audience"):
            p.send("t", b"x").result(timeout=30)


# Short-lived tokens; Java's min period and buffer (60 s, 300 s) turned off so that the window factor rules.
# Factor 0.5 without jitter: the refresh (at 50 %) is well before the re-authentication (85-95 % of a
# session the broker caps at the token's expiry), however loaded the machine.
SHORT = {"sasl.login.refresh.window.factor": 0.5, "sasl.login.refresh.window.jitter": 0.0,
         "sasl.login.refresh.min.period.seconds": 0, "sasl.login.refresh.buffer.seconds": 0,
         "sasl.login.retry.backoff.ms": 100, "sasl.login.retry.backoff.max.ms": 1000}


def _send_until(producer: Producer, done: Any, timeout: float) -> list[Any]:
    """Send one record per partition of "t" every 20 ms until done(); every future, to check them all."""
    futures = []
    deadline = time.monotonic() + timeout
    i = 0
    while not done():
        assert time.monotonic() < deadline, "the condition did not come in time"
        futures.append(producer.send("t", str(i).encode(), partition=i % 2))
        i += 1
        time.sleep(0.02)
    return futures


def test_token_refreshed_before_expiry_and_open_connections_reauthenticate(idp: OidcProvider) -> None:
    idp.token_lifetime_s = 4
    validator = RecordingValidator(idp.validator(scope="kafka"))
    with MockCluster(brokers=2, sasl_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_validator=validator) as cluster:
        cluster.create_topic("t", partitions=2)
        with Producer(_cfg(cluster, idp, **SHORT)) as producer:
            def enough() -> bool:
                return sum(a.reauth and a.ok for a in cluster.sasl_authentications()) >= 4 and \
                    idp.token_requests >= 3
            futures = _send_until(producer, enough, 60)
            offsets = [f.result(timeout=30).offset for f in futures]
        auths = cluster.sasl_authentications()
    assert all(a.ok for a in auths), [a.error for a in auths if not a.ok]
    assert sorted(offsets) == sorted(list(range((len(futures) + 1) // 2)) + list(range(len(futures) // 2)))
    assert [r.value for r in cluster.records("t", 0)] == [str(i).encode() for i in range(0, len(futures), 2)]
    # Each re-authentication presented a fresh token: the refresh came before the session's end, not after.
    left = [seconds for _, seconds in validator.seen]
    assert min(left) > 0.3 * idp.token_lifetime_s, left
    # One fetch per refresh for the whole client, not one per connection.
    tokens = {token for token, _ in validator.seen}
    # (A refresh may have fetched one more that no connection presented before the producer closed.)
    assert len(tokens) <= idp.token_requests <= len(tokens) + 1
    assert len(validator.seen) >= 2 * len(tokens) - 1  # each token served several connections


def test_identity_provider_outage_is_retried_without_losing_a_record(idp: OidcProvider) -> None:
    idp.token_lifetime_s = 6
    validator = RecordingValidator(idp.validator(scope="kafka"))
    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_validator=validator) as cluster:
        cluster.create_topic("t", partitions=2)
        with Producer(_cfg(cluster, idp, **SHORT)) as producer:
            producer.send("t", b"first", partition=0).result(timeout=30)
            idp.down = True  # the refresh (at 3 s) meets an outage
            # Longer than one round of retries (5 attempts within retry.backoff.max.ms = 1 s): the refresh
            # must be tried again later, while the old token still serves.
            futures = _send_until(producer, lambda: idp.failed_requests >= 7, 30)
            idp.down = False
            futures += _send_until(producer, lambda: sum(a.reauth for a in cluster.sasl_authentications()) >= 2,
                                   30)
            offsets = [f.result(timeout=30).offset for f in futures]
    assert len(offsets) == len(futures)
    assert len(cluster.records("t", 0)) + len(cluster.records("t", 1)) == len(futures) + 1
    assert idp.token_requests >= 2 and idp.failed_requests >= 7
    # The retry got the new token in before the old one ran out: no re-authentication had to use a dying one.
    left = [seconds for _, seconds in validator.seen]
    assert min(left) > 0.3 * idp.token_lifetime_s, left


def test_referee_confluent_kafka_with_the_same_identity_provider_and_cluster(idp: OidcProvider) -> None:
    """librdkafka's own OIDC (sasl.oauthbearer.method=oidc) against the same endpoint and acceptor, side by
    side with kafkajet, both through a token refresh and re-authentication."""
    confluent_kafka = require("confluent_kafka")
    idp.token_lifetime_s = 5
    validator = RecordingValidator(idp.validator(scope="kafka"))
    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_validator=validator) as cluster:
        cluster.create_topic("t", partitions=2)
        ours = _cfg(cluster, idp, **SHORT)
        idp.clients["referee"] = SECRET  # its own client id: the broker's records tell the two apart
        theirs = {k: v for k, v in ours.items() if not k.startswith("sasl.login.")}
        theirs["sasl.oauthbearer.client.id"] = "referee"
        errors: list[str] = []
        referee = confluent_kafka.Producer({**theirs, "error_cb": lambda e: errors.append(str(e))})
        delivered: list[Any] = []

        def tokens_of(principal: str) -> set[str]:
            with validator.lock:
                return {t for t, _ in validator.seen if validator.whose[t] == principal}

        with Producer(ours) as producer:
            def both_reauthenticated() -> bool:
                reauthenticated = {a.principal for a in cluster.sasl_authentications() if a.reauth and a.ok}
                return reauthenticated >= {"app", "referee"} and len(tokens_of("referee")) >= 2

            futures = []
            deadline = time.monotonic() + 60
            i = 0
            while not both_reauthenticated():
                assert time.monotonic() < deadline, "no re-authentication of both clients within 60 s"
                futures.append(producer.send("t", f"kj{i}".encode(), partition=0))
                referee.produce("t", f"rd{i}".encode(), partition=1,
                                on_delivery=lambda err, msg: delivered.append(err))
                referee.poll(0)
                i += 1
                time.sleep(0.02)
            assert referee.flush(30) == 0
            assert all(f.result(timeout=30) for f in futures)
        auths = cluster.sasl_authentications()
    assert all(a.ok for a in auths), [a.error for a in auths if not a.ok]
    # kafkajet presented a fresh token at each re-authentication. librdkafka is held to less: it refreshes at 80 %
    # of a token's life and re-authenticates at 90 % of the session, so on a busy machine it may re-authenticate
    # with its old token's last half second (0.48 s seen); that is its timing, not the provider's. It must still
    # have fetched a second token from the same endpoint and had every one accepted.
    kafkajet_left = [seconds for token, seconds in validator.seen if validator.whose[token] == "app"]
    assert min(kafkajet_left) > 0.3 * idp.token_lifetime_s, kafkajet_left
    assert len(tokens_of("referee")) >= 2
    assert delivered == [None] * i
    assert [r.value for r in cluster.records("t", 0)] == [f"kj{n}".encode() for n in range(i)]
    assert [r.value for r in cluster.records("t", 1)] == [f"rd{n}".encode() for n in range(i)]
    assert not [e for e in errors if "auth" in e.lower()], errors


def test_spark_options_and_cli_properties_carry_oidc_through(idp: OidcProvider, tmp_path: Any) -> None:
    from kafkajet.cli.main import main
    from kafkajet.fetch import FetchClient
    from kafkajet.spark.sink_options import producer_config
    from kafkajet.spark.source_options import parse_source_options

    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"],
                     sasl_oauthbearer_validator=idp.validator(scope="kafka")) as cluster:
        cluster.create_topic("t", partitions=1)
        settings = {k: str(v) for k, v in _cfg(cluster, idp).items()}
        # Spark's sink: kafka.* options become the producer's settings.
        sink = producer_config({"topic": "t", **{f"kafka.{k}": v for k, v in settings.items()}})
        with Producer(sink) as producer:
            producer.send("t", b"from-spark-sink").result(timeout=30)
        # Spark's source: kafka.* security options reach the fetch client of every task.
        source = parse_source_options({"subscribe": "t", **{f"kafka.{k}": v for k, v in settings.items()}},
                                      streaming=False)
        with FetchClient(source.fetch_config) as fetch:
            assert fetch.offsets("t", 0) == (0, 1)
        # The CLI: the client-options (Java properties) file.
        properties = tmp_path / "client.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items() if k != "bootstrap.servers"))
        lines = tmp_path / "lines.txt"
        lines.write_text("from-cli\n")
        assert main(["produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "t",
                     "--file", str(lines), "--producer.config", str(properties)]) == 0
        assert [r.value for r in cluster.records("t", 0)] == [b"from-spark-sink", b"from-cli"]
        assert {a.principal for a in cluster.sasl_authentications()} == {"app"}
    assert idp.token_requests == 3  # one per client: the sink's producer, the source's fetcher, the CLI's


def test_closing_the_client_ends_its_background_refresh(idp: OidcProvider) -> None:
    with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"],
                     sasl_oauthbearer_validator=idp.validator(scope="kafka")) as cluster:
        cluster.create_topic("t", partitions=1)
        producer = Producer(_cfg(cluster, idp))
        producer.send("t", b"x").result(timeout=30)
        source = producer._client.security.token_source
        timer = source._timer  # waiting for the refresh, most of an hour away
        assert timer is not None and timer.is_alive()
        producer.close()
    wait_for(lambda: not timer.is_alive(), 10, "the refresh timer ends with the producer")
    assert source._timer is None


def test_the_session_lifetime_is_capped_at_the_tokens_expiry(idp: OidcProvider) -> None:
    """As Kafka: min(connections.max.reauth.ms, the token's remaining life); with no maximum, the token's."""
    from collections import deque

    from kafkajet.testing.mock.sasl import Credentials, SaslSession

    credentials = Credentials()
    credentials.oauthbearer_validator = idp.validator()
    token = idp.mint("app", "kafka", lifetime_s=30)
    lifetimes = []
    for max_reauth_ms in (0, 5_000, 120_000):
        session = SaslSession(("OAUTHBEARER",), credentials, 1, deque())
        session.handshake("OAUTHBEARER", 1, time.monotonic())
        reply = session.authenticate(f"n,,\x01auth=Bearer {token}\x01\x01".encode(), time.monotonic(),
                                     max_reauth_ms)
        assert reply.body["error_code"] == 0
        lifetimes.append(reply.body["session_lifetime_ms"])
    assert 25_000 < lifetimes[0] <= 30_000 and lifetimes[1] == 5_000 and 25_000 < lifetimes[2] <= 30_000
