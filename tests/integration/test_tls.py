"""TLS against the real broker behind a TLS terminator (tests/helpers/tls_proxy.py), and the ssl.* configuration.

The embedded Tansu broker cannot serve TLS, so each broker here advertises the address of a TlsProxy in
front of it; certificates come from a throwaway CA made with `cryptography`.
"""

from __future__ import annotations

import logging
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from kafkajet import AuthenticationError, ConfigError, KafkaError, KafkaTimeoutError, Producer
from kafkajet.admin import Admin
from kafkajet.cluster import metadata_request_body
from kafkajet.errors import SslAuthenticationError
from kafkajet.fetch import FetchClient
from kafkajet.network import NetworkClient
from kafkajet.network.blocking import BlockingConnection
from kafkajet.protocol import ApiKey
from kafkajet.security.connection import connection_security
from kafkajet.security.tls import build_ssl_context
from kafkajet.testing import EmbeddedBroker
from kafkajet.testing.mock.cluster import MockCluster
from kafkajet.testing.ports import free_port
from tests.helpers.tls_proxy import CertificateAuthority, TlsProxy

FAST_FAIL = {"max.block.ms": 15000, "reconnect.backoff.max.ms": 200, "request.timeout.ms": 10000,
             "delivery.timeout.ms": 20000}


@dataclass
class Pki:
    ca_file: Path
    ca_pem: str
    server: tuple[Path, Path]
    wrong_ca_file: Path
    mismatch: tuple[Path, Path]  # valid, from the right CA, but for another host name
    client: tuple[Path, Path]
    client_pem: tuple[str, str]
    client_encrypted: tuple[Path, Path]  # key encrypted with "keypass"
    stranger: tuple[Path, Path]  # a client certificate from an untrusted CA


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, other = CertificateAuthority("kafkajet test CA"), CertificateAuthority("some other CA")
    (d / "ca.pem").write_text(ca.cert_pem)
    (d / "wrong-ca.pem").write_text(other.cert_pem)
    client = ca.issue("kafkajet-client", client=True)
    return Pki(
        ca_file=d / "ca.pem",
        ca_pem=ca.cert_pem,
        server=ca.issue("broker", dns=("localhost",), ips=("127.0.0.1",)).write(d, "server"),
        wrong_ca_file=d / "wrong-ca.pem",
        mismatch=ca.issue("elsewhere", dns=("broker.example.com",)).write(d, "mismatch"),
        client=client.write(d, "client"),
        client_pem=(client.cert, client.key),
        client_encrypted=client.write(d, "client-enc", password="keypass"),
        stranger=other.issue("stranger", client=True).write(d, "stranger"),
    )


def _tls_broker(pki: Pki, *, require_client_cert: bool) -> Iterator[tuple[EmbeddedBroker, TlsProxy]]:
    port = free_port()
    with EmbeddedBroker(advertised_listener=f"127.0.0.1:{port}") as broker:
        proxy = TlsProxy(port, ("127.0.0.1", broker.port), *pki.server,
                         client_ca_file=pki.ca_file if require_client_cert else None)
        with proxy:
            yield broker, proxy


@pytest.fixture(scope="module")
def tls(pki: Pki) -> Iterator[TlsProxy]:
    for _, proxy in _tls_broker(pki, require_client_cert=False):
        yield proxy


@pytest.fixture(scope="module")
def mtls(pki: Pki) -> Iterator[TlsProxy]:
    for _, proxy in _tls_broker(pki, require_client_cert=True):
        yield proxy


def _ssl(proxy: TlsProxy, pki: Pki, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": proxy.address, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_file),
            **extra}


def _read_back(proxy: TlsProxy, pki: Pki, topic: str, expected: int, *, client: tuple[Path, Path] | None = None,
               timeout_s: float = 60.0) -> list[tuple[int, bytes | None, bytes | None]]:
    """kafka-python over TLS, verifying the broker against our CA, with assigned partitions (no group)."""
    extra = {} if client is None else {"ssl_certfile": str(client[0]), "ssl_keyfile": str(client[1])}
    consumer = KafkaConsumer(bootstrap_servers=proxy.address, security_protocol="SSL", ssl_cafile=str(pki.ca_file),
                             ssl_check_hostname=True, check_crcs=True, enable_auto_commit=False, **extra)
    try:
        deadline = time.monotonic() + timeout_s
        parts = None
        while parts is None:
            assert time.monotonic() < deadline, f"topic {topic} never appeared"
            consumer.topics()
            parts = consumer.partitions_for_topic(topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[tuple[int, bytes | None, bytes | None]] = []
        while len(out) < expected:
            assert time.monotonic() < deadline, f"read {len(out)} of {expected} records"
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                out.extend((tp.partition, m.key, m.value) for m in msgs)
        return out
    finally:
        consumer.close()


# --- against the broker -----------------------------------------------------------------------------------


def test_produce_over_tls_and_read_back(tls: TlsProxy, pki: Pki, topic_name: str) -> None:
    with Admin(_ssl(tls, pki)) as admin:
        admin.create_topics(topic_name, num_partitions=2, timeout_s=30)
    with Producer(_ssl(tls, pki), linger_ms=20) as producer:
        futures = [producer.send(topic_name, value=f"v{i}".encode(), key=f"k{i}".encode()) for i in range(200)]
        offsets = [f.result(timeout=30) for f in futures]
    assert {m.partition for m in offsets} == {0, 1}
    got = _read_back(tls, pki, topic_name, 200)
    assert sorted(v for _, _, v in got) == sorted(f"v{i}".encode() for i in range(200))
    # The blocking path (Admin, Spark's reader) reads over TLS too.
    with FetchClient({**_ssl(tls, pki), "bootstrap.servers": tls.address, "request.timeout.ms": 30000}) as fetch:
        records = [r for p in fetch.partitions(topic_name)
                   for r in fetch.fetch_range(topic_name, p, 0, fetch.offsets(topic_name, p)[1])]
    assert sorted(r.value for r in records) == sorted(f"v{i}".encode() for i in range(200))


def test_ca_given_as_pem_text(tls: TlsProxy, pki: Pki, topic_name: str) -> None:
    cfg = {"bootstrap.servers": tls.address, "security.protocol": "SSL", "ssl.truststore.certificates": pki.ca_pem}
    with Producer(cfg) as producer:
        assert producer.send(topic_name, b"x").result(timeout=30).offset == 0


def test_wrong_ca_fails_with_the_verification_reason(tls: TlsProxy, pki: Pki, topic_name: str) -> None:
    cfg = {**_ssl(tls, pki), "ssl.ca.location": str(pki.wrong_ca_file), **FAST_FAIL}
    started = time.monotonic()
    with Producer(cfg) as producer, pytest.raises(SslAuthenticationError) as info:
        producer.send(topic_name, b"x")
    assert time.monotonic() - started < 10, "an untrusted certificate must fail at once, not at max.block.ms"
    text = str(info.value)
    assert f"TLS handshake with node -1 ({tls.address}) failed" in text
    assert "certificate verify failed: unable to get local issuer certificate" in text
    with pytest.raises(SslAuthenticationError, match="unable to get local issuer certificate"):
        Admin(_ssl(tls, pki, **{"ssl.ca.location": str(pki.wrong_ca_file)})).list_topics(timeout_s=10)


def test_system_trust_store_alone_does_not_trust_a_private_ca(tls: TlsProxy, topic_name: str) -> None:
    with pytest.raises(SslAuthenticationError, match="certificate verify failed"):
        BlockingConnection("127.0.0.1", tls.port, timeout_s=10,
                           security=connection_security({"security.protocol": "SSL"}))


def test_hostname_mismatch_fails(pki: Pki, tls: TlsProxy, topic_name: str) -> None:
    port = free_port()
    with TlsProxy(port, ("127.0.0.1", int(tls.backend[1])), *pki.mismatch):
        cfg = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
               "ssl.ca.location": str(pki.ca_file), **FAST_FAIL}
        with Producer(cfg) as producer, pytest.raises(SslAuthenticationError) as info:
            producer.send(topic_name, b"x")
        assert "Hostname mismatch" in str(info.value) or "IP address mismatch" in str(info.value), info.value


def test_hostname_check_can_be_turned_off_with_a_warning(pki: Pki, tls: TlsProxy,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    with TlsProxy(port, ("127.0.0.1", int(tls.backend[1])), *pki.mismatch):
        cfg = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_file),
               "ssl.endpoint.identification.algorithm": ""}
        with caplog.at_level(logging.WARNING, "kafkajet"):
            security = connection_security(cfg)
        assert "host name is not checked" in caplog.text
        with BlockingConnection("127.0.0.1", port, timeout_s=10, security=security) as conn:
            assert conn.api_versions  # the handshake passed: the CA is still verified, only the name is not


def test_mutual_tls_works(mtls: TlsProxy, pki: Pki, topic_name: str) -> None:
    cfg = _ssl(mtls, pki, **{"ssl.certificate.location": str(pki.client[0]),
                             "ssl.key.location": str(pki.client[1])})
    with Admin(cfg) as admin:
        admin.create_topics(topic_name, num_partitions=1, timeout_s=30)
    with Producer(cfg) as producer:
        results = [producer.send(topic_name, f"m{i}".encode()).result(timeout=30) for i in range(5)]
    assert [r.offset for r in results] == [0, 1, 2, 3, 4]
    assert [v for _, _, v in _read_back(mtls, pki, topic_name, 5, client=pki.client)] == [
        f"m{i}".encode() for i in range(5)]


def test_mutual_tls_with_pem_text_and_an_encrypted_key(mtls: TlsProxy, pki: Pki, topic_name: str) -> None:
    pem = _ssl(mtls, pki, **{"ssl.certificate.pem": pki.client_pem[0], "ssl.key.pem": pki.client_pem[1]})
    with Producer(pem) as producer:
        assert producer.send(topic_name, b"a", partition=0).result(timeout=30).offset == 0
    encrypted = _ssl(mtls, pki, **{"ssl.certificate.location": str(pki.client_encrypted[0]),
                                   "ssl.key.location": str(pki.client_encrypted[1]), "ssl.key.password": "keypass"})
    with Producer(encrypted) as producer:
        assert producer.send(topic_name, b"b", partition=0).result(timeout=30).offset == 1


@pytest.mark.parametrize("client", ["none", "stranger"])
def test_missing_or_untrusted_client_certificate_fails_clearly(mtls: TlsProxy, pki: Pki, topic_name: str,
                                                               client: str) -> None:
    extra = {} if client == "none" else {"ssl.certificate.location": str(pki.stranger[0]),
                                         "ssl.key.location": str(pki.stranger[1])}
    with Producer({**_ssl(mtls, pki, **extra), **FAST_FAIL}) as producer:
        with pytest.raises((SslAuthenticationError, KafkaTimeoutError)) as info:
            producer.send(topic_name, b"x")
    error = info.value
    if isinstance(error, KafkaTimeoutError):  # the refusal may surface as the cause of a setup failure
        error = error.cause  # type: ignore[assignment]
    assert isinstance(error, AuthenticationError), repr(info.value)
    assert "TLS handshake with" in str(error)
    expected = ("certificate required (it requires a client certificate" if client == "none"
                else "unknown ca (it does not trust the CA that issued our client certificate)")
    assert expected in str(error), str(error)


def test_large_records_cross_many_tls_records(tls: TlsProxy, pki: Pki, topic_name: str) -> None:
    # Requests of several 16 KiB TLS records, and batches joined for SSLSocket.send (no sendmsg there).
    values = [bytes([i]) * (300_000 + i) for i in range(6)]
    with Producer(_ssl(tls, pki), linger_ms=50, batch_size=1_000_000, compression_type="none") as producer:
        futures = [producer.send(topic_name, v, partition=0) for v in values]
        assert [f.result(timeout=60).offset for f in futures] == list(range(6))
    with FetchClient({**_ssl(tls, pki), "bootstrap.servers": tls.address, "request.timeout.ms": 30000}) as fetch:
        got = [r.value for r in fetch.fetch_range(topic_name, 0, 0, 6)]
    assert got == values


def test_spark_reader_passes_the_security_options(tls: TlsProxy, pki: Pki, topic_name: str) -> None:
    from kafkajet.spark.reader import KafkaBatchReader
    from kafkajet.spark.source_options import parse_source_options

    with Producer(_ssl(tls, pki)) as producer:
        for i in range(3):
            producer.send(topic_name, f"s{i}".encode(), partition=0).result(timeout=30)
    options = {"kafka.bootstrap.servers": tls.address, "kafka.security.protocol": "SSL",
               "kafka.ssl.ca.location": str(pki.ca_file), "subscribe": topic_name}
    reader = KafkaBatchReader(parse_source_options(options, streaming=False))
    part = next(p for p in reader.partitions() if p.partition == 0)
    assert [v for rb in reader.read(part) for v in rb.column("value").to_pylist()] == [b"s0", b"s1", b"s2"]
    bad = parse_source_options({**options, "kafka.ssl.ca.location": "/nonexistent/ca.pem"}, streaming=False)
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        KafkaBatchReader(bad).partitions()  # on the driver, at planning


def test_perf_cli_takes_the_security_properties(tls: TlsProxy, pki: Pki, topic_name: str) -> None:
    def perf(ca: Path) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "kafkajet", "perf", "--topic", topic_name, "--num-records", "200",
               "--record-size", "100", "--bootstrap-server", tls.address, "--producer-props",
               "security.protocol=SSL", f"ssl.ca.location={ca}", "max.block.ms=20000"]
        return subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
                              timeout=120)

    ok = perf(pki.ca_file)
    assert ok.returncode == 0, ok.stderr
    assert "200 records sent" in ok.stdout
    bad = perf(pki.wrong_ca_file)
    assert bad.returncode != 0
    assert "certificate verify failed" in bad.stdout + bad.stderr


def test_sasl_over_tls_in_both_connection_kinds(pki: Pki) -> None:
    """SASL_SSL: TLS to the terminator, SASL with the MockCluster behind it (metadata would point past the
    terminator, so this drives the connections to it directly)."""
    with MockCluster(brokers=1, sasl_mechanisms=["SCRAM-SHA-256"], sasl_users={"alice": "pw-1"}) as cluster:
        host, port = cluster.address(1).rsplit(":", 1)
        proxy_port = free_port()
        with TlsProxy(proxy_port, (host, int(port)), *pki.server):
            security = connection_security({
                "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca_file),
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "pw-1"})
            with BlockingConnection("127.0.0.1", proxy_port, timeout_s=10, security=security) as conn:
                md = conn.request(ApiKey.METADATA, metadata_request_body([]))
                assert [b["node_id"] for b in md["brokers"]] == [1]
            with NetworkClient(security=security) as client:
                client.add_bootstrap(f"127.0.0.1:{proxy_port}")
                deadline = time.monotonic() + 10
                while not client.ready(-1, time.monotonic() * 1000):
                    assert time.monotonic() < deadline, client.last_error(-1)
                    client.poll(100, time.monotonic() * 1000)
                client.send(-1, ApiKey.METADATA, metadata_request_body([]), time.monotonic() * 1000)
                responses: list = []
                while not responses:
                    assert time.monotonic() < deadline
                    responses = client.poll(100, time.monotonic() * 1000)
                assert responses[0].error is None and responses[0].body["brokers"][0]["node_id"] == 1
        auths = cluster.sasl_authentications()
        assert len(auths) == 2 and all(a.ok and a.principal == "alice" for a in auths)


def test_a_peer_that_does_not_speak_tls_is_a_clear_failure(pki: Pki) -> None:
    """A TLS protocol violation by the peer (here an HTTP answer to our ClientHello) closes the connection
    and names the TLS step."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(10)

        def answer() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        port = server.getsockname()[1]
        security = connection_security({"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_file)})
        with pytest.raises(KafkaError, match=f"TLS handshake with 127.0.0.1:{port} failed"):
            BlockingConnection("127.0.0.1", port, timeout_s=10, security=security)
        thread.join(10)


def test_a_stalled_tls_handshake_ends_at_the_setup_timeout(pki: Pki) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:  # accepts, then never answers the ClientHello
        port = server.getsockname()[1]
        security = connection_security({"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_file)})
        with NetworkClient(security=security, socket_connection_setup_timeout_ms=300,
                           socket_connection_setup_timeout_max_ms=300) as client:
            client.add_bootstrap(f"127.0.0.1:{port}")
            started = time.monotonic()
            # Until then last_error() is the provisional cause (no answer yet), for callers whose wait ends first.
            while "not done within" not in str(client.last_error(-1)):
                assert time.monotonic() - started < 10, "the handshake was never timed out"
                client.ready(-1, time.monotonic() * 1000)
                client.poll(50, time.monotonic() * 1000)
            error = client.last_error(-1)
        assert f"TLS handshake with node -1 (127.0.0.1:{port}) not done within 300 ms" in str(error)
        assert 0.25 < time.monotonic() - started < 5


# --- configuration ------------------------------------------------------------------------------------------


def test_missing_files_name_the_key_and_the_path(tmp_path: Path, pki: Pki) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=f"ssl.ca.location: file {missing} does not exist"):
        Producer(bootstrap_servers="127.0.0.1:1", security_protocol="SSL", ssl_ca_location=str(missing))
    with pytest.raises(ConfigError, match=f"ssl.key.location: file {missing} does not exist"):
        build_ssl_context({"ssl.certificate.location": str(pki.client[0]), "ssl.key.location": str(missing)})
    with pytest.raises(ConfigError, match="ssl.ca.location: .* holds no usable PEM certificate"):
        build_ssl_context({"ssl.ca.location": str(pki.client[1])})


def test_key_problems_are_config_errors_without_the_password(pki: Pki) -> None:
    enc = {"ssl.certificate.location": str(pki.client_encrypted[0]), "ssl.key.location": str(pki.client_encrypted[1])}
    with pytest.raises(ConfigError, match="is encrypted: set ssl.key.password"):
        build_ssl_context(enc)
    with pytest.raises(ConfigError, match="check ssl.key.password") as info:
        build_ssl_context({**enc, "ssl.key.password": "wrong-pass-123"})
    assert "wrong-pass-123" not in str(info.value)
    with pytest.raises(ConfigError, match="does not belong to the certificate"):
        build_ssl_context({"ssl.certificate.location": str(pki.client[0]), "ssl.key.location": str(pki.stranger[1])})


def test_enabled_protocols_set_the_version_range() -> None:
    ctx = build_ssl_context({"ssl.enabled.protocols": ["TLSv1.3"]})
    assert ctx.minimum_version is ssl.TLSVersion.TLSv1_3 and ctx.maximum_version is ssl.TLSVersion.TLSv1_3
    ctx = build_ssl_context({})
    assert ctx.minimum_version is ssl.TLSVersion.TLSv1_2 and ctx.check_hostname
    assert ctx.verify_mode is ssl.CERT_REQUIRED
    with pytest.raises(ConfigError, match="TLS 1.2 is the minimum"):
        Producer(bootstrap_servers="127.0.0.1:1", security_protocol="SSL", ssl_enabled_protocols="TLSv1.1")


def test_tls13_only_client_against_a_tls12_only_server_fails_naming_the_version(pki: Pki, tls: TlsProxy) -> None:
    port = free_port()
    proxy = TlsProxy(port, ("127.0.0.1", int(tls.backend[1])), *pki.server)
    proxy.context.maximum_version = ssl.TLSVersion.TLSv1_2
    with proxy:
        security = connection_security({"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_file),
                                         "ssl.enabled.protocols": "TLSv1.3"})
        with pytest.raises(KafkaError, match="TLS handshake with 127.0.0.1:.* failed"):
            BlockingConnection("127.0.0.1", port, timeout_s=10, security=security)


def test_ssl_cross_checks_and_ignored_keys(pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL"}
    with pytest.raises(ConfigError, match="needs its certificate"):
        Producer({**base, "ssl.key.location": str(pki.client[1])})
    with pytest.raises(ConfigError, match="set either ssl.certificate.location or ssl.certificate.pem"):
        Producer({**base, "ssl.certificate.location": str(pki.client[0]), "ssl.certificate.pem": pki.client_pem[0]})
    with pytest.raises(ConfigError, match="must be https"):
        Producer({**base, "ssl.endpoint.identification.algorithm": "ldaps"})
    with caplog.at_level(logging.WARNING, "kafkajet.config"):
        Producer(bootstrap_servers="127.0.0.1:1", ssl_ca_location=str(pki.ca_file)).close(0)
    assert "ssl.ca.location ignored: security.protocol is PLAINTEXT" in caplog.text
