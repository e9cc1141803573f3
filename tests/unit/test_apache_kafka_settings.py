"""kafkajet.testing.ApacheKafka before any JVM starts: what it asks of the machine, and the settings it writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkajet.testing.apache_kafka import (
    ApacheKafka,
    ApacheKafkaUnavailable,
    OAuthValidation,
    TlsFiles,
    _Node,
    find_kafka_libs,
    kafka_version,
    random_cluster_id,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("how", ["argument", "variable"])
def test_missing_jars_say_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "variable":
        monkeypatch.setenv("KAFKAJET_KAFKA_LIBS", str(tmp_path))
    else:
        monkeypatch.delenv("KAFKAJET_KAFKA_LIBS", raising=False)
    with pytest.raises(ApacheKafkaUnavailable) as raised:
        find_kafka_libs(tmp_path if how == "argument" else None)
    message = str(raised.value)
    assert str(tmp_path) in message and "make kafka" in message
    assert f".cache/apache-kafka-{kafka_version()}" in message  # the folder `make kafka` fills, by name
    assert ("KAFKAJET_KAFKA_LIBS" in message) == (how == "variable")
    assert "\n" not in message  # one line, as a failing test shows it


def test_an_installed_kafkajet_names_the_variable_and_the_folder_make_kafka_fills(tmp_path: Path) -> None:
    # The package alone in a folder on the path, as pip installs it into site-packages: no clone around it.
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "kafkajet", site / "kafkajet", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "KAFKAJET_KAFKA_LIBS"}
    code = ("from kafkajet.testing import ApacheKafka\n"
            "from kafkajet.testing.apache_kafka import ApacheKafkaUnavailable, find_kafka_libs\n"
            "import kafkajet, sys\n"
            "assert kafkajet.__file__.startswith(sys.argv[1]), kafkajet.__file__\n"
            "try:\n"
            "    with ApacheKafka():\n"
            "        pass\n"
            "except ApacheKafkaUnavailable as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(site)], env={**env, "PYTHONPATH": str(site)}, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    message = r.stdout.strip()
    # Once: "not in <site-packages>/.cache/...: run `make kafka` in the kafkajet clone", wrong after doing so.
    assert message.startswith("Apache Kafka's jars: KAFKAJET_KAFKA_LIBS is not set; set it to the folder "
                              "`make kafka` fills in a clone of kafkajet "
                              f"(<clone>/.cache/apache-kafka-{kafka_version()}, "), message
    assert str(site) not in message and "libs/ folder of an Apache Kafka download" in message
    # And the variable is all it takes: the folder `make kafka` filled, named from the installed package.
    filled = ROOT / ".cache" / f"apache-kafka-{kafka_version()}"
    r = subprocess.run([sys.executable, "-c", "from kafkajet.testing.apache_kafka import find_kafka_libs; "
                        "print(find_kafka_libs())"], env={**env, "PYTHONPATH": str(site), "KAFKAJET_KAFKA_LIBS":
                                                          str(filled)},
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, str(filled)), r.stderr


def test_a_cluster_id_never_starts_with_a_dash() -> None:
    # 0xF8 encodes as "-" first: the storage tool would take such an id for an option and refuse to format.
    draws = iter([b"\xf8" + bytes(15), b"\xf8" + bytes(15), bytes(range(16))])
    assert random_cluster_id(lambda: next(draws)) == "AAECAwQFBgcICQoLDA0ODw"
    ids = {random_cluster_id() for _ in range(500)}
    assert len(ids) == 500 and all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_the_version_is_named_once_in_the_pom() -> None:
    pom = (Path(__file__).resolve().parents[2] / "jvm" / "pom.xml").read_text()
    assert f"<kafka.version>{kafka_version()}</kafka.version>" in pom
    assert pom.count("4.4.0") == 1
    # The testing page names the folder `make kafka` fills, for KAFKAJET_KAFKA_LIBS: it follows the pom.
    page = (ROOT / "docs" / "testing.md").read_text()
    assert f"`<clone>/.cache/apache-kafka-{kafka_version()}`" in page


def _settings(kafka: ApacheKafka, tmp_path: Path) -> dict[int, dict[str, str]]:
    """The properties each node would be started with (what start() writes), without starting it."""
    for node_id in range(1, kafka.brokers + 1):
        ports = {"CONTROLLER": 9000 + node_id, "INTERNAL": 9100 + node_id}
        ports.update({p: 9200 + 10 * i + node_id for i, p in enumerate(kafka._settings.listeners)})
        kafka._nodes[node_id] = _Node(node_id, ports, tmp_path)
    return {n.node_id: kafka._node_settings(n) for n in kafka._nodes.values()}


def test_three_nodes_keep_coordinator_state_through_the_loss_of_one(tmp_path: Path) -> None:
    nodes = _settings(ApacheKafka(brokers=3), tmp_path)
    for props in nodes.values():
        assert props["process.roles"] == "broker,controller"
        assert props["controller.quorum.voters"] == "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
        assert props["offsets.topic.replication.factor"] == "3"
        assert props["transaction.state.log.replication.factor"] == "3"
        assert props["transaction.state.log.min.isr"] == "2"
    (tmp_path / "one").mkdir()
    one = _settings(ApacheKafka(brokers=1), tmp_path / "one")[1]
    assert one["offsets.topic.replication.factor"] == "1" and one["transaction.state.log.min.isr"] == "1"


def test_listeners_sasl_and_passed_through_settings(tmp_path: Path) -> None:
    tls = TlsFiles(certificate=tmp_path / "c.pem", key=tmp_path / "k.pem", ca=tmp_path / "ca.pem",
                   client_auth="required")
    (tmp_path / "c.pem").write_text("CERT\n")
    (tmp_path / "k.pem").write_text("KEY\n")
    kafka = ApacheKafka(listeners=("SASL_SSL", "PLAINTEXT"), sasl_mechanisms=("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"),
                        users={"u": "p"}, tls=tls, authorizer=True,
                        oauth=OAuthValidation("http://127.0.0.1:1/jwks", "kafka", "https://idp"),
                        broker_config={"min.insync.replicas": 1, "group.initial.rebalance.delay.ms": 3000})
    props = _settings(kafka, tmp_path)[1]
    assert props["listeners"].split(",") == ["CONTROLLER://127.0.0.1:9001", "INTERNAL://127.0.0.1:9101",
                                             "SASL_SSL://127.0.0.1:9201", "PLAINTEXT://127.0.0.1:9211"]
    assert "CONTROLLER" not in props["advertised.listeners"]
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-512,OAUTHBEARER"
    assert props["listener.name.sasl_ssl.plain.sasl.jaas.config"].endswith('required user_u="p";')
    assert "ScramLoginModule" in props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert props["listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class"].endswith(
        "OAuthBearerValidatorCallbackHandler")
    assert props["sasl.oauthbearer.expected.audience"] == "kafka"
    assert props["ssl.client.auth"] == "required" and props["ssl.truststore.location"] == str(tmp_path / "ca.pem")
    assert (tmp_path / "keystore.pem").read_text() == "KEY\nCERT\n"  # Kafka's PEM keystore: key, then chain
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["min.insync.replicas"] == "1" and props["group.initial.rebalance.delay.ms"] == "3000"
    assert kafka.bootstrap("plaintext") == "127.0.0.1:9211" and kafka.bootstrap_servers == "127.0.0.1:9201"


@pytest.mark.parametrize(("kwargs", "names"), [
    ({"brokers": 2}, "brokers=2"),
    ({"listeners": ("HTTP",)}, "HTTP"),
    ({"listeners": ("SSL",)}, "tls=TlsFiles"),
    ({"sasl_mechanisms": ("GSSAPI",)}, "GSSAPI"),
    ({"sasl_mechanisms": ("OAUTHBEARER",)}, "OAuthValidation"),
])
def test_a_cluster_it_cannot_run_is_refused_naming_why(kwargs: dict[str, object], names: str) -> None:
    with pytest.raises(ValueError, match=names):
        ApacheKafka(**kwargs)  # type: ignore[arg-type]


def test_the_packages_kafka_version_is_the_one_maven_fetches() -> None:
    # An installed package runs KAFKA_VERSION's jars; a clone's `make kafka` fetches jvm/pom.xml's.
    import re

    from kafkajet.testing.apache_kafka import KAFKA_VERSION

    pom = (Path(__file__).resolve().parents[2] / "jvm" / "pom.xml").read_text()
    assert re.findall(r"<kafka\.version>([^<]+)</kafka\.version>", pom) == [KAFKA_VERSION]
