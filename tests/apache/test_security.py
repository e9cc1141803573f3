"""Security against Apache Kafka's own implementation: PLAIN, SCRAM-SHA-256/512, TLS and mutual TLS, OAUTHBEARER
tokens that the broker validates itself (JWKS, audience, issuer), KIP-368 re-authentication with records
flowing, and ACLs under the StandardAuthorizer.

One cluster for the module, with every listener; what kafkajet writes is read back over the broker's plain
internal listener by kafka-python (an independent client, CRC checks on).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafkajet import AuthenticationError, KafkaError, Producer
from kafkajet.cli.client_options import read_properties
from kafkajet.errors import TopicAuthorizationFailedError, TransactionalIdAuthorizationFailedError
from kafkajet.testing.apache_kafka import ApacheKafka, OAuthValidation, TlsFiles
from kafkajet.testing.oidc import OidcProvider
from tests.helpers.apache import running_apache_kafka
from tests.helpers.readback import read_topic
from tests.helpers.tls_proxy import CertificateAuthority

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
REAUTH_MS = 4000
TLS_CLIENT_DENIED = "forbidden-to-tls-client"  # denied to the client certificate's principal alone


@dataclass
class Secured:
    kafka: ApacheKafka
    oidc: OidcProvider
    ca_file: Path
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    d = tmp_path_factory.mktemp("apache-pki")
    ca = CertificateAuthority("kafkajet test CA")
    (d / "ca.pem").write_text(ca.cert_pem)
    server = ca.issue("broker", dns=("localhost",), ips=("127.0.0.1",)).write(d, "server")
    client = ca.issue("tls-client", client=True).write(d, "client")
    with OidcProvider({"svc": "svc-secret"}, audience="kafka", issuer="https://idp.test") as oidc:
        with running_apache_kafka(
            listeners=("SASL_PLAINTEXT", "SASL_SSL", "SSL"),
            sasl_mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
            users=USERS,
            tls=TlsFiles(certificate=server[0], key=server[1], ca=d / "ca.pem", client_auth="requested"),
            oauth=OAuthValidation(jwks_url=oidc.jwks_url, audience="kafka", issuer="https://idp.test"),
            authorizer=True,
            broker_config={"connections.max.reauth.ms": REAUTH_MS},
        ) as kafka:
            for principal in ("User:alice", "User:tls-client", "User:svc"):
                kafka.add_acl(principal, operation="All", topic="*")
                kafka.add_acl(principal, operation="All", transactional_id="*")
                kafka.add_acl(principal, operation="All", group="*")
            kafka.add_acl("User:alice", operation="Write", topic="forbidden", deny=True)
            kafka.add_acl("User:alice", operation="Write", transactional_id="forbidden-txn", deny=True)
            kafka.add_acl("User:tls-client", operation="Write", topic=TLS_CLIENT_DENIED, deny=True)
            yield Secured(kafka, oidc, d / "ca.pem", *client)


def _produce_and_read_back(s: Secured, topic: str, config: dict[str, Any], count: int = 20) -> None:
    values = [f"{topic}-{i}".encode() for i in range(count)]
    with Producer({"max.block.ms": 30000, **config}) as p:
        for f in [p.send(topic, value=v, key=b"k") for v in values]:
            f.result(timeout=60)
    got = read_topic(s.kafka.internal_bootstrap, topic, count, timeout_s=60)
    assert sorted(r.value or b"" for r in got) == sorted(values)


def _sasl(s: Secured, protocol: str, mechanism: str, user: str = "alice", password: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": s.kafka.bootstrap(protocol), "security.protocol": protocol,
                              "sasl.mechanism": mechanism, "sasl.username": user,
                              "sasl.password": USERS[user] if password is None else password}
    if protocol.endswith("SSL"):
        config["ssl.ca.location"] = str(s.ca_file)
    return config


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512"),
])
def test_sasl_mechanisms_on_the_real_broker(secured: Secured, topic_name: str, protocol: str, mechanism: str) -> None:
    _produce_and_read_back(secured, topic_name, _sasl(secured, protocol, mechanism))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_is_refused_clearly(secured: Secured, topic_name: str, mechanism: str) -> None:
    config = _sasl(secured, "SASL_PLAINTEXT", mechanism, password="wrong")
    with Producer({**config, "max.block.ms": 10000}) as p:
        with pytest.raises(AuthenticationError) as raised:
            p.send(topic_name, value=b"x").result(timeout=30)
        m = p.metrics()
    assert "alice" in str(raised.value) or "uthentication" in str(raised.value)
    # Java's Selector counts: the refusal is a failed authentication, never a successful one.
    assert m["failed-authentication-total"] >= 1 and m["successful-authentication-total"] == 0


def test_tls_with_a_ca_the_caller_gives(secured: Secured, topic_name: str) -> None:
    _produce_and_read_back(secured, topic_name, {"bootstrap.servers": secured.kafka.bootstrap("SSL"),
                                                 "security.protocol": "SSL", "ssl.ca.location": str(secured.ca_file)})


def test_mutual_tls_principal_is_the_certificate(secured: Secured, topic_name: str) -> None:
    """With a client certificate the principal is its CN (User:tls-client), which the ACLs allow; the deny
    rule for alice shows the principal really is the certificate's."""
    config = {"bootstrap.servers": secured.kafka.bootstrap("SSL"), "security.protocol": "SSL",
              "ssl.ca.location": str(secured.ca_file), "ssl.certificate.location": str(secured.client_cert),
              "ssl.key.location": str(secured.client_key)}
    _produce_and_read_back(secured, topic_name, config)


@pytest.mark.parametrize("stores", ["files", "inline"])
def test_a_java_producer_properties_file_with_pem_stores(secured: Secured, topic_name: str, tmp_path: Path,
                                                         stores: str) -> None:
    """Java's names for PEM stores (KIP-651), as a Java client's producer.properties has them: the trust store
    verifies the broker, and the key store's certificate is the principal (User:tls-client, the one refused
    TLS_CLIENT_DENIED; an anonymous client is not)."""
    if stores == "files":
        keystore = tmp_path / "keystore.pem"
        keystore.write_text(secured.client_key.read_text() + secured.client_cert.read_text())
        lines = [f"ssl.truststore.location={secured.ca_file}", f"ssl.keystore.location={keystore}"]
    else:
        def continued(path: Path) -> str:  # a long value over several lines, each ended by a backslash
            return " \\\n    ".join(path.read_text().strip().splitlines())
        lines = [f"ssl.truststore.certificates={continued(secured.ca_file)}",
                 f"ssl.keystore.certificate.chain={continued(secured.client_cert)}",
                 f"ssl.keystore.key={continued(secured.client_key)}"]
    properties = tmp_path / "producer.properties"
    properties.write_text("\n".join([
        "# as the Java producer takes it", f"bootstrap.servers={secured.kafka.bootstrap('SSL')}",
        "security.protocol=SSL", "ssl.truststore.type=PEM", "ssl.keystore.type=PEM", "ssl.protocol=TLSv1.3",
        "ssl.endpoint.identification.algorithm=https", "metadata.recovery.strategy=rebootstrap",
        "client.dns.lookup=use_all_dns_ips", "interceptor.classes=", *lines]) + "\n")
    config = dict(read_properties(str(properties)))
    _produce_and_read_back(secured, topic_name, config)
    with Producer({"max.block.ms": 30000, **config}) as p:
        with pytest.raises(TopicAuthorizationFailedError, match=TLS_CLIENT_DENIED):
            p.send(TLS_CLIENT_DENIED, value=b"no").result(timeout=60)


def _oidc(s: Secured) -> dict[str, Any]:
    return {"bootstrap.servers": s.kafka.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": s.oidc.token_url, "sasl.oauthbearer.client.id": "svc",
            "sasl.oauthbearer.client.secret": "svc-secret", "sasl.oauthbearer.scope": "kafka"}


def test_oauthbearer_tokens_validated_by_the_broker(secured: Secured, topic_name: str) -> None:
    _produce_and_read_back(secured, topic_name, _oidc(secured))


def test_oauthbearer_token_for_another_audience_is_refused(secured: Secured, topic_name: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secured.oidc, "audience", "some-other-service")
    with Producer({**_oidc(secured), "max.block.ms": 10000}) as p, pytest.raises(AuthenticationError) as raised:
        p.send(topic_name, value=b"x").result(timeout=30)
    assert "aud" in str(raised.value).lower() or "authentication" in str(raised.value).lower()


def test_reauthentication_with_records_flowing(secured: Secured, topic_name: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """The broker closes a SASL connection that outlives connections.max.reauth.ms without re-authenticating
    (KIP-368): records sent across three session lifetimes must all arrive, on connections kept alive."""
    caplog.set_level(logging.DEBUG, logger="kafkajet.network")
    values = []
    with Producer({**_sasl(secured, "SASL_PLAINTEXT", "SCRAM-SHA-256"), "linger.ms": 0}) as p:
        deadline = time.monotonic() + 3 * REAUTH_MS / 1000
        i = 0
        while time.monotonic() < deadline:
            value = f"r{i}".encode()
            p.send(topic_name, value=value).result(timeout=30)  # paced by each acknowledgement
            values.append(value)
            i += 1
        m = p.metrics()
    reauths = [r for r in caplog.records if "re-authenticating" in r.getMessage() and "nearly over" in r.getMessage()]
    assert len(reauths) >= 2, "the producer never re-authenticated"
    # The renewals are counted apart from the first authentications, with their latency (Java's names).
    assert m["successful-reauthentication-total"] >= 2 and m["failed-reauthentication-total"] == 0
    assert m["successful-authentication-total"] >= 1 and m["reauthentication-latency-max"] > 0
    got = read_topic(secured.kafka.internal_bootstrap, topic_name, len(values), timeout_s=60)
    assert sorted(r.value or b"" for r in got) == sorted(values)


def test_a_topic_denied_by_acl_fails_only_its_own_records(secured: Secured, topic_name: str) -> None:
    allowed = topic_name
    with Producer(_sasl(secured, "SASL_PLAINTEXT", "SCRAM-SHA-512")) as p:
        denied = [p.send("forbidden", value=f"no-{i}".encode()) for i in range(5)]
        fine = [p.send(allowed, value=f"yes-{i}".encode()) for i in range(5)]
        for f in denied:
            with pytest.raises(TopicAuthorizationFailedError) as raised:
                f.result(timeout=60)
            assert "forbidden" in str(raised.value)
        for f in fine:
            f.result(timeout=60)
        # The producer is unharmed: later records to the allowed topic still go.
        p.send(allowed, value=b"after").result(timeout=60)
    got = read_topic(secured.kafka.internal_bootstrap, allowed, 6, timeout_s=60)
    assert sorted(r.value or b"" for r in got) == sorted([f"yes-{i}".encode() for i in range(5)] + [b"after"])


def test_a_transactional_id_denied_by_acl_is_fatal_and_named(secured: Secured, topic_name: str) -> None:
    config = {**_sasl(secured, "SASL_PLAINTEXT", "PLAIN"), "transactional.id": "forbidden-txn"}
    with Producer(config) as p:
        with pytest.raises(TransactionalIdAuthorizationFailedError) as raised:
            p.init_transactions(timeout=30)
        assert "forbidden-txn" in str(raised.value)
        with pytest.raises(KafkaError):
            p.send(topic_name, value=b"x")
    # Another transactional id of the same user is not harmed.
    with Producer({**_sasl(secured, "SASL_PLAINTEXT", "PLAIN"), "transactional.id": f"{topic_name}-ok"}) as ok:
        ok.init_transactions(timeout=30)
        ok.begin_transaction()
        ok.send(topic_name, value=b"committed")
        ok.commit_transaction(timeout=30)
