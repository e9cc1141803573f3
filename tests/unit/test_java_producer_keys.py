"""Every key of the Java 4.4 producer (tests/unit/data/java-producer-keys-4.4.0.tsv, printed from the
kafka-clients jar by tools/JavaConfigKeys.java) is either in kafkajet's producer table, with Java's default,
or refused with a reason; a Java producer.properties using PEM stores loads."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from kafkajet import ConfigError
from kafkajet.cli.client_options import parse_properties
from kafkajet.config import ADMIN, PRODUCER, REFUSED, parse_client_config, parse_producer_config
from kafkajet.security.tls import build_ssl_context
from tests.helpers.tls_proxy import CertificateAuthority

DATA = Path(__file__).parent / "data" / "java-producer-keys-4.4.0.tsv"

# Where kafkajet's default is not Java's, and why (anything else must agree).
DEFAULTS_DIFFER = {
    "acks": "the table holds the number: -1 is all",
    "bootstrap.servers": "required in both",
    "client.id": "producer-N, as Java names a client without one",
    "client.rack": "None: no rack, what Java's empty string means",
    "compression.gzip.level": "None is each codec's default level, the same as Java's",
    "compression.lz4.level": "None is each codec's default level, the same as Java's",
    "compression.zstd.level": "None is each codec's default level, the same as Java's",
    "key.serializer": "bytes as they are: Java has no default",
    "value.serializer": "bytes as they are: Java has no default",
    "sasl.login.connect.timeout.ms": "Java's null leaves the JVM's HTTP timeout; kafkajet bounds the request",
    "sasl.login.read.timeout.ms": "Java's null leaves the JVM's HTTP timeout; kafkajet bounds the request",
    "sasl.mechanism": "Java's GSSAPI default is only used with SASL; kafkajet asks for the mechanism",
    "send.buffer.bytes": "the OS's autotuned buffer (see the key's comment)",
}


def java_keys() -> dict[str, tuple[str, str]]:
    lines = DATA.read_text().splitlines()
    assert lines[0].startswith("# kafka-clients 4.4.0 "), "the list names the Kafka version it came from"
    return {name: (kind, default) for name, kind, default in (line.split("\t") for line in lines[1:])}


def _java_spelling(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def test_every_java_producer_key_is_taken_or_refused_with_a_reason() -> None:
    keys = java_keys()
    assert len(keys) == 120
    table = PRODUCER.by_name
    missing = sorted(k for k in keys if k not in table and k not in REFUSED)
    assert missing == []
    assert sorted(set(table) & set(REFUSED)) == []
    assert sorted(set(REFUSED) - set(keys)) == [], "only Java's keys are refused by name"
    for name, why in REFUSED.items():
        with pytest.raises(ConfigError) as e:
            parse_producer_config({"bootstrap.servers": "h:1", name: "x"})
        assert str(e.value) == f"{name} is not supported: {why}"
        assert "\n" not in why


def test_taken_java_keys_default_as_java() -> None:
    table = PRODUCER.by_name
    differ = {name: (_java_spelling(table[name].default), java)
              for name, (_, java) in java_keys().items()
              if name in table and _java_spelling(table[name].default) != java}
    assert sorted(differ) == sorted(DEFAULTS_DIFFER)


def test_java_default_values_given_explicitly_are_taken() -> None:
    """A properties file that spells out Java's defaults (as tools that dump a config do) loads."""
    given = {name: ("" if java == "null" else java) for name, (_, java) in java_keys().items()
             if name in PRODUCER.by_name and name not in DEFAULTS_DIFFER and java != "null"}
    cfg = parse_producer_config({"bootstrap.servers": "h:1", **given})
    assert cfg["metadata.recovery.strategy"] == "rebootstrap"
    assert cfg["ssl.truststore.type"] == "JKS"
    assert cfg["metric.reporters"] == ["org.apache.kafka.common.metrics.JmxReporter"]


@pytest.mark.parametrize(("key", "value", "says"), [
    ("interceptor.classes", "com.example.Audit", "give interceptors= objects"),
    ("metric.reporters", "io.confluent.metrics.reporter.ConfluentMetricsReporter", "producer.metrics()"),
    ("config.providers", "file", "resolve ${provider:path:key} values"),
    ("partitioner.class", "com.example.MyPartitioner", "a Python callable"),
    ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", "OpenSSL's default suites"),
    ("sasl.login.callback.handler.class", "com.example.Handler", "sasl.oauthbearer.token.provider"),
    ("buffer.memory.allocation.strategy", "incremental", "not supported"),
    ("transaction.two.phase.commit.enable", "true", "KIP-939"),
    ("bootstrap.resolve.timeout.ms", "30000", "when the client is built"),
])
def test_a_jvm_only_value_is_refused_saying_what_to_use(key: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(key)}={re.escape(value)}: .*{re.escape(says)}"):
        parse_producer_config({"bootstrap.servers": "h:1", key: value})


def test_a_jks_store_is_refused_naming_the_conversion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl.truststore.location: a JKS truststore \(Java's default when "
                                          r"ssl.truststore.type is not set\).*ssl.truststore.type=PEM"):
        parse_producer_config({"bootstrap.servers": "h:1", "security.protocol": "SSL",
                               "ssl.truststore.location": str(tmp_path / "t.jks")})
    with pytest.raises(ConfigError, match=r"ssl.keystore.location: a PKCS12 keystore is a JVM format"):
        parse_client_config(ADMIN, {"bootstrap.servers": "h:1", "security.protocol": "SSL",
                                    "ssl.keystore.type": "pkcs12", "ssl.keystore.location": "k.p12"})


def test_partitioner_class_round_robin_is_partitioner_round_robin() -> None:
    cfg = parse_producer_config({"bootstrap.servers": "h:1",
                                 "partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner"})
    assert cfg["partitioner"] == "round_robin"


def _write_pem_stores(d: Path) -> tuple[CertificateAuthority, Path, Path]:
    ca = CertificateAuthority("java-names CA")
    (d / "ca.pem").write_text(ca.cert_pem)
    client = ca.issue("java-client", client=True)
    (d / "keystore.pem").write_text(client.key + client.cert)
    return ca, d / "ca.pem", d / "keystore.pem"


def test_pem_stores_under_java_names_build_the_tls_context(tmp_path: Path) -> None:
    ca, truststore, keystore = _write_pem_stores(tmp_path)
    props = parse_properties(f"""\
bootstrap.servers=localhost:9093
security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location={truststore}
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
ssl.protocol=TLSv1.2
""")
    ctx = build_ssl_context(parse_producer_config(props))
    assert [c["subject"] for c in ctx.get_ca_certs() if c["subject"] == ((("commonName", "java-names CA"),),)]
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2


def _continued(pem: str) -> str:
    """PEM as a Java properties value: each line ended by a backslash (so the file's lines join into one)."""
    return " \\\n    ".join(pem.strip().splitlines())


def test_inline_pem_stores_from_a_properties_file_build_the_tls_context(tmp_path: Path) -> None:
    ca = CertificateAuthority("inline CA")
    client = ca.issue("inline-client", client=True)
    props = parse_properties(f"""\
bootstrap.servers=localhost:9093
security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.certificates={_continued(ca.cert_pem)}
ssl.keystore.type=PEM
ssl.keystore.certificate.chain={_continued(client.cert)}
ssl.keystore.key={_continued(client.key)}
""")
    assert "\n" not in props["ssl.keystore.key"]
    ctx = build_ssl_context(parse_producer_config(props))
    assert [c for c in ctx.get_ca_certs() if c["subject"] == ((("commonName", "inline CA"),),)]


def test_a_store_under_both_names_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ssl.truststore.location .* or ssl.ca.location, not both"):
        parse_producer_config({"bootstrap.servers": "h:1", "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                               "ssl.truststore.location": "a.pem", "ssl.ca.location": "b.pem"})
    with pytest.raises(ConfigError, match="set either ssl.key.pem or ssl.keystore.key, not both"):
        parse_producer_config({"bootstrap.servers": "h:1", "security.protocol": "SSL", "ssl.keystore.key": "k",
                               "ssl.key.pem": "k", "ssl.certificate.pem": "c"})
