"""`kafkajet produce`, `kafkajet topics` and the command line's own options, run as users run them (a
subprocess) against the real embedded broker; what produce wrote is read back with kafka-python."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kafkajet import __version__
from kafkajet._build import describe
from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, stdin: str | bytes = b"", timeout: float = 60,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    r = subprocess.run([sys.executable, "-m", "kafkajet", *args], cwd=ROOT, input=data, capture_output=True,
                       timeout=timeout, env=env)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


def _create(broker: EmbeddedBroker, topic: str, partitions: int = 1) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic, num_partitions=partitions, timeout_s=30)


def test_produce_sends_keys_values_and_headers_exactly(broker: EmbeddedBroker, topic_name: str,
                                                       tmp_path: Path) -> None:
    _create(broker, topic_name)
    props = tmp_path / "producer.properties"
    props.write_text("# Java properties\nlinger.ms: 5\nclient.id = cli-test\n")
    lines = "h1:v1,h2:\tk1:first\nsrc:x\tk2:with:colons\n\tk3:\n"
    r = cli("produce", "--bootstrap-server", broker.bootstrap_servers, "--topic", topic_name,
            "--property", "parse.key=true", "--property", "key.separator=:",
            "--property", "parse.headers=true", "--producer.config", str(props),
            "--producer-property", "batch.size=1000", "--request-required-acks", "all",
            "--compression-codec", "lz4", stdin=lines)
    assert r.returncode == 0, r.stderr
    assert "3 records delivered, 0 failed" in r.stderr
    got = sorted(read_topic(broker.bootstrap_servers, topic_name, 3), key=lambda x: x.offset)
    assert [(x.key, x.value, x.headers) for x in got] == [
        (b"k1", b"first", (("h1", b"v1"), ("h2", b""))),
        (b"k2", b"with:colons", (("src", b"x"),)),
        (b"k3", b"", (("", None),)),
    ]


def test_produce_plain_lines_from_a_file(broker: EmbeddedBroker, topic_name: str, tmp_path: Path) -> None:
    _create(broker, topic_name, partitions=2)
    data = tmp_path / "lines.txt"
    data.write_bytes(b"one\r\ntwo\n\nthree")
    r = cli("produce", "--bootstrap-server", broker.bootstrap_servers, "--topic", topic_name, "--file", str(data))
    assert r.returncode == 0, r.stderr
    assert "4 records delivered, 0 failed" in r.stderr
    got = read_topic(broker.bootstrap_servers, topic_name, 4)
    assert sorted((x.key, x.value, x.headers) for x in got) == sorted(
        (None, v, ()) for v in (b"one", b"two", b"", b"three"))


def test_produce_without_bootstrap_server_starts_no_broker(tmp_path: Path) -> None:
    env = {**os.environ, "KAFKAJET_TANSU_BIN": str(tmp_path / "must-not-run")}
    r = cli("produce", "--topic", "t", stdin="x\n", env=env)
    assert r.returncode == 2
    assert "--bootstrap-server is required" in r.stderr and "Traceback" not in r.stderr


def test_produce_reports_failures_and_exits_non_zero(broker: EmbeddedBroker, topic_name: str) -> None:
    _create(broker, topic_name)
    r = cli("produce", "--bootstrap-server", broker.bootstrap_servers, "--topic", topic_name,
            "--producer-property", "max.request.size=200", stdin="small\n" + "x" * 1000 + "\n")
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-1] == "1 record delivered, 1 failed"  # one record, not "1 records"
    assert "kafkajet produce: error: line 2: RecordTooLargeError" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's own input and option checks and their wording, made before a record is "
    "sent"))
def test_produce_bad_line_and_bad_options_are_clear(broker: EmbeddedBroker, topic_name: str) -> None:
    base = ("produce", "--bootstrap-server", broker.bootstrap_servers, "--topic", topic_name)
    r = cli(*base, "--property", "parse.key=true", stdin="nokey\n")
    assert r.returncode == 1 and "line 1: no key separator" in r.stderr and "Traceback" not in r.stderr
    r = cli(*base, "--producer-property", "linger.msec=5")
    assert r.returncode == 2 and "unknown producer setting 'linger.msec'" in r.stderr
    assert "did you mean 'linger.ms'" in r.stderr and "Traceback" not in r.stderr
    r = cli(*base, "--property", "parse.kee=true")
    assert r.returncode == 2 and "'parse.kee' is not a line-reader property" in r.stderr
    r = cli(*base, "--no-such-option")
    assert r.returncode == 2 and "unrecognized arguments: --no-such-option" in r.stderr


def test_topics_create_list_describe_delete_round_trip(broker: EmbeddedBroker, topic_name: str,
                                                       tmp_path: Path) -> None:
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    conf = tmp_path / "admin.properties"
    conf.write_text("client.id=cli-admin\nrequest.timeout.ms=20000\n")
    r = cli("topics", *bs, "--create", "--topic", topic_name, "--partitions", "3", "--replication-factor", "1",
            "--config", "cleanup.policy=delete", "--command-config", str(conf))
    assert r.returncode == 0, r.stderr
    assert f"Created topic {topic_name}." in r.stdout
    r = cli("topics", *bs, "--list")
    assert r.returncode == 0 and topic_name in r.stdout.splitlines()
    r = cli("topics", *bs, "--describe", "--topic", topic_name)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic_name}\t") and "PartitionCount: 3\tReplicationFactor: 1" in lines[0]
    node = broker.node_id
    assert lines[1:] == [f"\tTopic: {topic_name}\tPartition: {p}\tLeader: {node}\tReplicas: {node}\tIsr: {node}"
                         for p in range(3)]
    r = cli("topics", *bs, "--create", "--topic", topic_name)
    assert r.returncode == 1 and "TopicAlreadyExistsError" in r.stderr and "Traceback" not in r.stderr
    r = cli("topics", *bs, "--delete", "--topic", topic_name)
    assert r.returncode == 0 and f"Deleted topic {topic_name}." in r.stdout
    assert topic_name not in cli("topics", *bs, "--list").stdout.splitlines()
    r = cli("topics", *bs, "--describe", "--topic", topic_name)
    assert r.returncode == 1 and f"topic '{topic_name}' does not exist" in r.stderr
    r = cli("topics", *bs, "--delete", "--topic", topic_name)
    assert r.returncode == 1 and "UnknownTopicOrPartitionError" in r.stderr and "Traceback" not in r.stderr
    # Kafka's tool says nothing here: once it printed "Deleted topic X." for a topic that was not there.
    r = cli("topics", *bs, "--delete", "--topic", topic_name, "--if-exists")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_topics_errors_are_clear(broker: EmbeddedBroker) -> None:
    r = cli("topics", "--list")
    assert r.returncode == 2 and "--bootstrap-server is required" in r.stderr
    r = cli("topics", "--bootstrap-server", broker.bootstrap_servers, "--list", "--command-property", "foo=1")
    assert r.returncode == 2 and "unknown admin setting 'foo'" in r.stderr and "Traceback" not in r.stderr
    r = cli("topics", "--bootstrap-server", broker.bootstrap_servers, "--create")
    assert r.returncode == 2 and "--create needs --topic" in r.stderr


def test_version_and_program_name() -> None:
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"kafkajet {__version__} ({describe()})"
    assert cli("--help").stdout.startswith("usage: python -m kafkajet ")
    script = subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = '/usr/bin/kafkajet'; "
                             "from kafkajet.cli.main import main; sys.exit(main(['--help']))"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert script.stdout.startswith("usage: kafkajet "), script.stdout


def test_broker_without_the_extra_prints_only_the_hint(tmp_path: Path) -> None:
    env = {**os.environ, "KAFKAJET_TANSU_BIN": str(tmp_path / "absent")}
    r = cli("broker", env=env)
    assert r.returncode == 1
    assert "pip install 'kafkajet[broker]'" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "BrokerStartError" not in r.stderr  # the hint alone, one line
    assert r.stderr.startswith("python -m kafkajet broker: error: "), r.stderr  # as every command's errors


@pytest.mark.parametrize("command", ["broker", "schema-registry"])
def test_a_taken_port_is_an_error_of_the_command(command: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        r = cli(command, "--port", str(port))
    assert r.returncode == 1
    # Once "python -m kafkajet: error: ...", where topics, produce and the rest name themselves.
    assert r.stderr.startswith(f"python -m kafkajet {command}: error: cannot listen on 127.0.0.1:{port}"), r.stderr


def test_demo_without_pyspark_says_what_to_install(tmp_path: Path) -> None:
    # A pyspark that fails to import, first on the path: what a base install looks like to the demo.
    fake = tmp_path / "pyspark"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'pyspark'\", name='pyspark')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    r = cli("demo", env=env)
    assert r.returncode == 1
    assert "pip install 'kafkajet[spark]'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("client", ["producer", "admin", "fetch"])
def test_config_prints_each_clients_table(client: str) -> None:
    r = cli("config", "--client", client)
    assert r.returncode == 0 and "`bootstrap.servers`" in r.stdout
    assert ("`linger.ms`" in r.stdout) == (client == "producer")
