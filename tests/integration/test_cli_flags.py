"""The command line's shared spellings (--bootstrap-server and its plural, -v after the command, a description in
every --help) and `topics --alter`, which says plainly that it is not supported, run as a subprocess."""

from __future__ import annotations

import pytest

from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.integration.test_cli import cli

COMMANDS = ("produce", "consume", "topics", "groups", "schema-registry", "broker", "demo", "perf", "config")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_has_its_usage_line_and_a_description(command: str) -> None:
    r = cli(command, "--help")
    assert r.returncode == 0, r.stderr
    usage, _, rest = r.stdout.partition("\n\n")
    assert usage.startswith(f"usage: python -m kafkajet {command} ")
    description = rest.split("\n\n")[0]
    assert description and not description.startswith(("options:", "positional")), r.stdout
    if command not in ("broker", "config"):  # the others talk to a cluster, or may
        assert "--bootstrap-server HOST:PORT" in usage and "--bootstrap-servers" in r.stdout


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's own argument parsing"))
def test_v_is_taken_before_or_after_the_command(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic_name, timeout_s=30)
    before = cli("-v", "topics", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--topic", topic_name)
    after = cli("topics", "--describe", "--topic", topic_name, "--bootstrap-servers", broker.bootstrap_servers, "-v")
    assert before.returncode == after.returncode == 0, (before.stderr, after.stderr)
    assert before.stdout == after.stdout and topic_name in after.stdout
    consumed = cli("consume", "-v", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic_name,
                   "--from-beginning", "--timeout-ms", "200")
    assert consumed.returncode == 0, consumed.stderr
    perf = cli("perf", "--topic", topic_name, "--num-records", "5", "--record-size", "10", "-v",
               "--bootstrap-server", broker.bootstrap_servers)
    assert perf.returncode == 0, perf.stderr
    assert "5 records sent" in perf.stdout


def test_topics_alter_says_it_is_not_supported_and_changes_nothing(broker: EmbeddedBroker, topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient

    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic_name, timeout_s=30)
    base = ("topics", "--bootstrap-server", broker.bootstrap_servers, "--alter", "--topic", topic_name)
    r = cli(*base, "--partitions", "3")
    assert r.returncode == 1, r.stderr
    assert "--alter is not supported" in r.stderr and "CreatePartitions" in r.stderr and "Traceback" not in r.stderr
    r = cli(*base, "--config", "retention.ms=1000")
    assert r.returncode == 1 and "IncrementalAlterConfigs" in r.stderr, r.stderr
    r = cli(*base)
    assert r.returncode == 2 and "--alter needs --partitions N or --config" in r.stderr, r.stderr
    md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(topic_name, timeout=30)
    assert len(md.topics[topic_name].partitions) == 1


@pytest.mark.broker_kinds("tansu", reason="the subject is the option's spelling, which no broker sees")
def test_produce_takes_the_console_producers_broker_list(broker: EmbeddedBroker, topic_name: str) -> None:
    from tests.helpers.readback import read_topic

    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic_name, timeout_s=30)
    r = cli("produce", "--broker-list", broker.bootstrap_servers, "--topic", topic_name, stdin="one\ntwo\n")
    assert r.returncode == 0, r.stderr
    assert [rec.value for rec in read_topic(broker.bootstrap_servers, topic_name, 2)] == [b"one", b"two"]
