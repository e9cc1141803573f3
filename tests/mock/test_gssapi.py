"""Kerberos (GSSAPI) end to end: a local MIT KDC (kafkajet.testing.kdc), the MockCluster accepting with the
brokers' service keytab, and the producer logging in from a client keytab, once per client, renewing its
login before the ticket expires while its connections re-authenticate (KIP-368). kafka-python's GSSAPI is
the referee for the acceptor; librdkafka in the confluent-kafka wheel is built without GSSAPI."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet import AuthenticationError, ConfigError, KafkaError, Producer
from kafkajet.testing.kdc import LocalKdc
from kafkajet.testing.mock.cluster import MockCluster
from kafkajet.testing.mock.gssapi import GssapiServer
from tests.helpers.ports import refusing_port
from tests.helpers.requires import require
from tests.helpers.waiting import wait_for

require("gssapi")


@pytest.fixture
def brokers(kdc: LocalKdc) -> str:
    return kdc.service_keytab("kafka", ("127.0.0.1", "localhost"))


@pytest.fixture
def cluster(brokers: str) -> Iterator[MockCluster]:
    with MockCluster(brokers=3, sasl_mechanisms=["GSSAPI", "PLAIN"], sasl_gssapi_keytab=brokers) as c:
        c.create_topic("t", partitions=3)
        yield c


def _cfg(cluster: MockCluster, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI", "max.block.ms": 15000, **extra}


def _keys(kdc: LocalKdc, name: str, keytab: str) -> dict[str, Any]:
    return {"sasl.kerberos.principal": kdc.principal(name), "sasl.kerberos.keytab": keytab}


@pytest.mark.parametrize("form", ["keys", "jaas"])
def test_keytab_login_authenticates_every_connection_with_one_login(kdc: LocalKdc, cluster: MockCluster,
                                                                     form: str) -> None:
    name = f"alice-{form}"
    keytab = kdc.add_principal(name)
    settings = _keys(kdc, name, keytab) if form == "keys" else {"sasl.jaas.config": (
        f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
        f'keyTab="{keytab}" principal="{kdc.principal(name)}";')}
    with Producer(_cfg(cluster, **settings)) as producer:
        futures = [producer.send("t", str(i).encode(), partition=i % 3) for i in range(30)]
        assert [f.result(timeout=30).offset for f in futures] == [i // 3 for i in range(30)]
    auths = cluster.sasl_authentications()
    assert {a.broker_id for a in auths} == {1, 2, 3}
    assert all(a.ok and a.mechanism == "GSSAPI" and a.principal == name for a in auths), auths
    # One login (TGT) for the client, shared by its connections; a service ticket per broker host.
    assert kdc.issued(kdc.principal(name)) == 1
    assert kdc.issued(kdc.principal(name), kdc.principal("kafka/127.0.0.1")) >= 1
    assert [r.value for r in cluster.records("t", 1)] == [str(i).encode() for i in range(1, 30, 3)]


def test_an_unknown_principal_fails_the_construction_naming_principal_and_realm(
        kdc: LocalKdc, cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    keytab = kdc.add_principal("carol")
    kdc.kadmin(f"delprinc -force {kdc.principal('carol')}")  # the keytab outlives the KDC's principal
    for principal in (kdc.principal("carol"), "carol"):  # without its realm: krb5.conf's default_realm
        with caplog.at_level(logging.DEBUG, logger="kafkajet.security"), pytest.raises(AuthenticationError) as info:
            Producer(_cfg(cluster, **{"sasl.kerberos.principal": principal, "sasl.kerberos.keytab": keytab}))
        text = str(info.value)
        assert f"cannot log in as carol@KAFKAJET.TEST with the keytab {keytab}" in text, text
        assert "not found in Kerberos database" in text, text
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]  # a refusal is final, not retried


def test_a_keytab_without_the_principal_or_with_a_stale_key_is_refused(kdc: LocalKdc, cluster: MockCluster) -> None:
    dave = kdc.add_principal("dave")
    kdc.add_principal("erin")
    with pytest.raises(AuthenticationError) as info:  # dave's keytab has no key for erin
        Producer(_cfg(cluster, **_keys(kdc, "erin", dave)))
    assert "erin@KAFKAJET.TEST" in str(info.value) and dave in str(info.value)
    stale = dave + ".old"
    with open(dave, "rb") as src, open(stale, "wb") as dst:
        dst.write(src.read())
    kdc.kadmin(f"cpw -randkey {kdc.principal('dave')}")  # the KDC's key moves on; the copy keeps the old one
    with pytest.raises(AuthenticationError) as info:
        Producer(_cfg(cluster, **_keys(kdc, "dave", stale)))
    assert "dave@KAFKAJET.TEST" in str(info.value) and "KAFKAJET.TEST" in str(info.value)


@pytest.mark.parametrize("form", ["keys", "jaas"])
def test_a_service_name_the_realm_does_not_know_fails_the_send_naming_it(kdc: LocalKdc, cluster: MockCluster,
                                                                         form: str) -> None:
    keytab = kdc.add_principal(f"frank-{form}")
    settings = {**_keys(kdc, f"frank-{form}", keytab), "sasl.kerberos.service.name": "nokafka"} if form == "keys" \
        else {"sasl.jaas.config": f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
                                  f'keyTab="{keytab}" principal="{kdc.principal(f"frank-{form}")}" serviceName="nokafka";'}
    with Producer(_cfg(cluster, **settings, **{"max.block.ms": 5000})) as producer, \
            pytest.raises(KafkaError) as info:
        producer.send("t", b"x").result(timeout=30)
    text = str(info.value)
    assert "nokafka@127.0.0.1" in text and f"frank-{form}@KAFKAJET.TEST" in text, text
    if form == "jaas":  # given twice, differently: refused, as Java does
        with pytest.raises(ConfigError, match="service.name and the serviceName in sasl.jaas.config disagree"):
            Producer(_cfg(cluster, **settings, **{"sasl.kerberos.service.name": "kafka"}))


def test_login_renewed_before_the_ticket_expires_under_load_without_losing_a_record(kdc: LocalKdc,
                                                                                     brokers: str) -> None:
    # Tickets of 6 s, Java's default renewal window (0.8 + up to 0.05 jitter), sessions of 1.5 s: every
    # re-authentication after the first 6 s needs a ticket the renewal got.
    life = 6.0
    keytab = kdc.add_principal("grace", max_life=f"{int(life)} seconds")
    with MockCluster(brokers=2, sasl_mechanisms=["GSSAPI"], sasl_gssapi_keytab=brokers,
                     sasl_session_lifetime_ms=1500) as cluster:
        cluster.create_topic("t", partitions=2)
        settings = _cfg(cluster, **_keys(kdc, "grace", keytab), **{"sasl.kerberos.min.time.before.relogin": 1000})
        start = time.monotonic()
        with Producer(settings) as producer:
            futures = []
            i = 0

            def enough() -> bool:
                return kdc.issued(kdc.principal("grace")) >= 3 and time.monotonic() - start > 2.5 * life

            deadline = time.monotonic() + 90
            while not enough():
                assert time.monotonic() < deadline, "no third login within 90 s"
                futures.append(producer.send("t", str(i).encode(), partition=i % 2))
                i += 1
                time.sleep(0.02)
            offsets = [f.result(timeout=30).offset for f in futures]
            login = producer._client.security.token_source
            ticket, renewal = login._token, login.refresh_at
        auths = cluster.sasl_authentications()
    # The KDC's short ticket, renewed in Java's window: 0.8 of its life plus up to 0.05 jitter.
    assert ticket is not None and renewal is not None
    assert ticket.expires_at - ticket.issued_at == pytest.approx(life, abs=1.5)
    share = (renewal - ticket.issued_at) / (ticket.expires_at - ticket.issued_at)
    assert 0.8 <= share <= 0.85 + 0.01, share
    assert all(a.ok for a in auths), [a.error for a in auths if not a.ok]
    assert sum(a.reauth for a in auths) >= 6
    assert sorted(offsets) == sorted(list(range((i + 1) // 2)) + list(range(i // 2)))
    assert [r.value for r in cluster.records("t", 0)] == [str(n).encode() for n in range(0, i, 2)]


def _kinit(kdc: LocalKdc, keytab: str, name: str, cache: str) -> None:
    """The user's own kinit (or its cron): a TGT into `cache`, from outside the client."""
    import subprocess

    subprocess.run(["kinit", "-kt", keytab, "-c", cache, kdc.principal(name)], check=True, timeout=30,
                   env={**kdc.env, "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("form", ["jaas", "krb5ccname"])
def test_a_kinit_ticket_cache_serves_every_connection_without_a_keytab(kdc: LocalKdc, cluster: MockCluster,
                                                                        tmp_path: Any, form: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's useTicketCache=true (ticketCache= naming it), or librdkafka's way with no keytab (KRB5CCNAME):
    the client uses the TGT a kinit put there and never logs in to the KDC itself."""
    name = f"olga-{form}"
    keytab = kdc.add_principal(name)
    cache = tmp_path / "ccache"
    _kinit(kdc, keytab, name, f"FILE:{cache}")
    if form == "jaas":
        monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/not-this-one")
        settings = {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true "
                                        f'ticketCache="{cache}" principal="{kdc.principal(name)}";'}
    else:
        monkeypatch.setenv("KRB5CCNAME", f"FILE:{cache}")
        settings = {}  # no principal either: the cache's own
    with Producer(_cfg(cluster, **settings)) as producer:
        futures = [producer.send("t", str(i).encode(), partition=i % 3) for i in range(9)]
        assert [f.result(timeout=30).offset for f in futures] == [i // 3 for i in range(9)]
    auths = cluster.sasl_authentications()
    assert {a.broker_id for a in auths} == {1, 2, 3}
    assert all(a.ok and a.principal == name for a in auths), auths
    assert kdc.issued(kdc.principal(name)) == 1  # the kinit's login only
    assert kdc.issued(kdc.principal(name), kdc.principal("kafka/127.0.0.1")) >= 1
    # A principal the cache does not hold is refused at construction, naming both.
    with pytest.raises(AuthenticationError, match=r"no usable Kerberos ticket for nobody@KAFKAJET.TEST in .*ccache"):
        Producer(_cfg(cluster, **{"sasl.kerberos.principal": kdc.principal("nobody")},
                      **({} if form == "krb5ccname" else {"sasl.jaas.config": settings["sasl.jaas.config"].replace(
                          f'principal="{kdc.principal(name)}"', "")})))


def test_a_ticket_cache_renewed_by_the_users_kinit_keeps_the_client_going(kdc: LocalKdc, brokers: str,
                                                                          tmp_path: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Renewal is the kinit's (Java's renewTGT=false): tickets of 6 s, a cron-like kinit every 2 s, sessions
    of 1.5 s, and Java's default min.time.before.relogin (60 s): every re-authentication after the first 6 s
    needs the TGT the user's kinit put in the cache since, which a client that copied the cache at its
    login would not have."""
    import threading

    life = 6.0
    keytab = kdc.add_principal("pia", max_life=f"{int(life)} seconds")
    cache = f"FILE:{tmp_path}/ccache"
    first_tgt = time.monotonic()
    _kinit(kdc, keytab, "pia", cache)
    monkeypatch.setenv("KRB5CCNAME", cache)
    stop = threading.Event()

    def cron() -> None:
        while not stop.wait(2.0):
            _kinit(kdc, keytab, "pia", cache)

    renewer = threading.Thread(target=cron, name="users-kinit", daemon=True)
    with MockCluster(brokers=2, sasl_mechanisms=["GSSAPI"], sasl_gssapi_keytab=brokers,
                     sasl_session_lifetime_ms=1500) as cluster:
        cluster.create_topic("t", partitions=2)
        renewer.start()
        try:
            start = time.monotonic()
            with Producer(_cfg(cluster)) as producer:
                futures, i = [], 0
                deadline = time.monotonic() + 90
                while time.monotonic() - start < 2.5 * life:
                    assert time.monotonic() < deadline
                    futures.append(producer.send("t", str(i).encode(), partition=i % 2))
                    i += 1
                    time.sleep(0.02)
                offsets = [f.result(timeout=30).offset for f in futures]
        finally:
            stop.set()
            renewer.join(30)
        auths = cluster.sasl_authentications()
    assert all(a.ok for a in auths), [a.error for a in auths if not a.ok]
    late = [a for a in auths if a.reauth and a.time - first_tgt > life + 1]
    assert len(late) >= 2, auths  # re-authentications that the first TGT could not have served
    assert sorted(offsets) == sorted(list(range((i + 1) // 2)) + list(range(i // 2)))
    assert kdc.issued(kdc.principal("pia")) >= 4  # all of them the kinit's


def test_referee_kafka_python_gssapi_against_the_same_acceptor(kdc: LocalKdc, cluster: MockCluster,
                                                               tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's own GSSAPI (its SASL code, a kinit ticket cache) is accepted by the mock as ours is,
    and both clients' records are in the one log."""
    import subprocess

    kafka = require("kafka")
    keytab = kdc.add_principal("heidi")
    cache = f"FILE:{tmp_path}/ccache"
    subprocess.run(["kinit", "-kt", keytab, "-c", cache, kdc.principal("heidi")], check=True, timeout=30,
                   env={**kdc.env, "PATH": "/usr/bin:/bin"})
    monkeypatch.setenv("KRB5CCNAME", cache)
    referee = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                  sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka")
    try:
        referee.send("t", b"from-kafka-python", partition=0).get(timeout=30)
    finally:
        referee.close(timeout=10)
    with Producer(_cfg(cluster, **_keys(kdc, "heidi", keytab))) as producer:
        producer.send("t", b"from-kafkajet", partition=0).result(timeout=30)
    wait_for(lambda: len(cluster.records("t", 0)) == 2, 10, "both records")
    assert [r.value for r in cluster.records("t", 0)] == [b"from-kafka-python", b"from-kafkajet"]
    heidi = [a for a in cluster.sasl_authentications() if a.principal == "heidi"]
    assert heidi and all(a.ok for a in heidi)


def test_spark_options_and_cli_properties_carry_kerberos_through(kdc: LocalKdc, cluster: MockCluster,
                                                                 tmp_path: Any) -> None:
    from kafkajet.cli.main import main
    from kafkajet.fetch import FetchClient
    from kafkajet.spark.sink_options import producer_config
    from kafkajet.spark.source_options import parse_source_options

    keytab = kdc.add_principal("ivan")
    cluster.create_topic("one", partitions=1)
    settings = {k: str(v) for k, v in _cfg(cluster, **_keys(kdc, "ivan", keytab),
                                           **{"sasl.kerberos.service.name": "kafka"}).items()
                if k != "max.block.ms"}  # a producer-only key the source refuses
    # Spark's sink: kafka.* options become the producer's settings.
    sink = producer_config({"topic": "t", **{f"kafka.{k}": v for k, v in settings.items()}})
    with Producer(sink) as producer:
        producer.send("one", b"from-spark-sink").result(timeout=30)
    # Spark's source: kafka.* security options reach the fetch client of every task.
    source = parse_source_options({"subscribe": "one", **{f"kafka.{k}": v for k, v in settings.items()}},
                                  streaming=False)
    with FetchClient(source.fetch_config) as fetch:
        assert fetch.offsets("one", 0) == (0, 1)
    # The CLI: the client-options (Java properties) file, here with Java's JAAS line.
    jaas = (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="{keytab}" '
            f'principal="{kdc.principal("ivan")}";')
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
                          f"sasl.jaas.config={jaas}\n")
    lines = tmp_path / "lines.txt"
    lines.write_text("from-cli\n")
    assert main(["produce", "--bootstrap-server", cluster.bootstrap_servers, "--topic", "one",
                 "--file", str(lines), "--producer.config", str(properties)]) == 0
    assert [r.value for r in cluster.records("one", 0)] == [b"from-spark-sink", b"from-cli"]
    assert {a.principal for a in cluster.sasl_authentications()} == {"ivan"}
    assert kdc.issued(kdc.principal("ivan")) == 3  # one login per client: the sink's, the source's, the CLI's


def test_closing_the_client_ends_its_background_renewal(kdc: LocalKdc, cluster: MockCluster) -> None:
    keytab = kdc.add_principal("judy")
    producer = Producer(_cfg(cluster, **_keys(kdc, "judy", keytab)))
    producer.send("t", b"x").result(timeout=30)
    login = producer._client.security.token_source
    timer = login._timer  # waiting for the renewal, hours away
    assert timer is not None and timer.is_alive()
    producer.close()
    wait_for(lambda: not timer.is_alive(), 10, "the renewal timer ends with the producer")
    assert login._timer is None


class _Broker(GssapiServer):
    """The mock's acceptor with its security layer offer replaced (if `offer`), keeping the client's answer."""

    def __init__(self, keytab: str, offer: bytes | None = None) -> None:
        super().__init__(keytab)
        self._offer = offer
        self.choice = b""

    def _offer_layer(self) -> bytes:
        if self._offer is None:
            return super()._offer_layer()
        self._client, self._state = str(self._context.initiator_name), "layer-sent"
        return bytes(self._context.wrap(self._offer, False).message)

    def _check_choice(self, message: bytes) -> None:
        self.choice = bytes(self._context.unwrap(message).message)  # a token unwraps once only
        self.principal = self._client.split("@")[0]


def _exchange(client: Any, server: Any) -> None:
    message: bytes | None = client.start()
    while message is not None:
        message = client.step(server.evaluate(message))
        if client.complete:
            assert server.evaluate(message or b"") == b"" and server.complete
            return


def test_the_client_chooses_no_security_layer_and_refuses_a_broker_that_requires_one(kdc: LocalKdc,
                                                                                       brokers: str) -> None:
    from kafkajet.security.sasl import sasl_client_from_config

    keytab = kdc.add_principal("kim")
    cfg = {"sasl.mechanism": "GSSAPI", **_keys(kdc, "kim", keytab)}
    server = _Broker(brokers)
    _exchange(sasl_client_from_config(cfg, "127.0.0.1"), server)
    # RFC 4752 3.1: mask 1 (no security layer), maximum size 0 (none without a layer), no authorization id.
    assert server.choice == b"\x01\x00\x00\x00" and server.principal == "kim"
    with pytest.raises(AuthenticationError, match="requires a security layer"):
        _exchange(sasl_client_from_config(cfg, "127.0.0.1"), _Broker(brokers, offer=b"\x06\x01\x00\x00"))
    with pytest.raises(AuthenticationError, match="protocol violation: the security layer message has 5 bytes"):
        _exchange(sasl_client_from_config(cfg, "127.0.0.1"), _Broker(brokers, offer=b"\x01\x01\x00\x00\x00"))
    # A client that asks for localhost reaches kafka/localhost@REALM, in the same service keytab.
    server = _Broker(brokers)
    _exchange(sasl_client_from_config(cfg, "localhost"), server)
    assert server.complete


def test_a_kdc_that_cannot_be_reached_is_retried_then_named(kdc: LocalKdc, cluster: MockCluster, tmp_path: Any,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Unlike a refusal, an unreachable KDC may pass: the login is retried within sasl.login.retry.backoff.max.ms
    (as a token fetch is), and the error says the KDC could not be contacted."""
    import logging

    keytab = kdc.add_principal("lena")
    with refusing_port() as dead:
        conf = tmp_path / "krb5.conf"
        conf.write_text(open(kdc.env["KRB5_CONFIG"]).read().replace(f"127.0.0.1:{kdc.port}", f"127.0.0.1:{dead}"))
        monkeypatch.setenv("KRB5_CONFIG", str(conf))
        start = time.monotonic()
        with caplog.at_level(logging.DEBUG, logger="kafkajet.security"), pytest.raises(AuthenticationError) as info:
            Producer(_cfg(cluster, **_keys(kdc, "lena", keytab), **{"sasl.login.retry.backoff.ms": 50,
                                                                      "sasl.login.retry.backoff.max.ms": 600}))
    assert time.monotonic() - start < 30
    text = str(info.value)
    assert "lena@KAFKAJET.TEST" in text and "Cannot contact any KDC for realm 'KAFKAJET.TEST'" in text, text
    retries = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) >= 2, caplog.text


def test_admin_and_its_blocking_connections_authenticate_with_gssapi(kdc: LocalKdc, cluster: MockCluster) -> None:
    from kafkajet.admin import Admin

    keytab = kdc.add_principal("mallory")
    settings = {k: v for k, v in _cfg(cluster, **_keys(kdc, "mallory", keytab)).items() if k != "max.block.ms"}
    with Admin(settings) as admin:
        assert "t" in admin.list_topics(timeout_s=20)
    assert {a.principal for a in cluster.sasl_authentications() if a.ok} == {"mallory"}
