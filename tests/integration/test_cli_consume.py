"""`kafkajet consume` (kafka-console-consumer) run as users run it, a subprocess, against the real broker: the
records it prints were written by an independent client (confluent-kafka), and the offsets it commits are read
back with confluent-kafka too."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import committed_offsets
from tests.helpers.terminal import default_ctrl_c
from tests.helpers.waiting import read_line, wait_for
from tests.integration.test_cli import ROOT, cli

TS = 1_700_000_000_000


def _create(broker: EmbeddedBroker, topic: str, partitions: int = 1) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic, num_partitions=partitions, timeout_s=30, configs={"retention.ms": "-1"})  # TS is 2023


def _write(broker: EmbeddedBroker, topic: str, records: list[dict[str, object]]) -> None:
    """Each record (value, and optionally key, partition, headers, timestamp) with confluent-kafka, acked."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    errors: list[object] = []
    for r in records:
        p.produce(topic, on_delivery=lambda err, _msg: errors.append(err) if err else None, **r)  # type: ignore[arg-type]
    assert p.flush(30) == 0
    assert not errors, errors


def _committed(broker: EmbeddedBroker, group: str, topic: str) -> list[int]:
    return committed_offsets(broker.bootstrap_servers, group, topic, 1)


def _consume(broker: EmbeddedBroker, topic: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("consume", "--bootstrap-server", broker.bootstrap_servers, "--topic", topic, *args)


def _start(broker: EmbeddedBroker, topic: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kafkajet", "consume", "--bootstrap-server",
                             broker.bootstrap_servers, "--topic", topic, *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_ctrl_c)


def test_consume_prints_what_was_written_with_the_formatter_properties(broker: EmbeddedBroker,
                                                                         topic_name: str) -> None:
    _create(broker, topic_name)
    _write(broker, topic_name, [
        {"key": b"k1", "value": b"first", "headers": [("h1", b"v1"), ("h2", b"")], "timestamp": TS},
        {"value": b"\xffbad utf-8", "timestamp": TS + 1},
        {"key": b"k3", "value": None, "headers": [("only", None)], "timestamp": TS + 2},
    ])
    r = _consume(broker, topic_name, "--from-beginning", "--max-messages", "3",
                 "--property", "print.key=true", "--property", "print.headers=true",
                 "--property", "print.timestamp=true", "--property", "print.partition=true",
                 "--property", "print.offset=true", "--property", "key.separator=|")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"CreateTime:{TS}|Partition:0|Offset:0|h1:v1,h2:|k1|first",
        f"CreateTime:{TS + 1}|Partition:0|Offset:1|NO_HEADERS|null|\ufffdbad utf-8",
        f"CreateTime:{TS + 2}|Partition:0|Offset:2|only:null|k3|null",
    ]
    assert r.stderr.splitlines()[-1] == "Processed a total of 3 messages"

    plain = _consume(broker, topic_name, "--from-beginning", "--max-messages", "2")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "first\n\ufffdbad utf-8\n"  # Kafka's default: the value alone


def test_consume_reads_from_the_end_unless_asked_for_the_beginning(broker: EmbeddedBroker, topic_name: str) -> None:
    _create(broker, topic_name)
    _write(broker, topic_name, [{"value": b"old"}])
    proc = _start(broker, topic_name, "--max-messages", "1")
    try:
        sent = [0]

        def printed_a_new_record() -> bool:
            # It takes its start at the end when it has connected: keep writing until one new record shows.
            if proc.poll() is None:
                _write(broker, topic_name, [{"value": b"new-%d" % sent[0]}])
                sent[0] += 1
            return proc.poll() is not None

        wait_for(printed_a_new_record, 60, "consume printing a record written after it started", interval=0.2)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.startswith("new-") and out.count("\n") == 1, out
    assert err.splitlines()[-1] == "Processed a total of 1 messages"


def test_consume_one_partition_from_an_offset(broker: EmbeddedBroker, topic_name: str) -> None:
    _create(broker, topic_name, partitions=2)
    _write(broker, topic_name, [{"value": b"p0-%d" % i, "partition": 0} for i in range(3)]
           + [{"value": b"p1-%d" % i, "partition": 1} for i in range(5)])
    r = _consume(broker, topic_name, "--partition", "1", "--offset", "2", "--timeout-ms", "1500",
                 "--property", "print.offset=true")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["Offset:2\tp1-2", "Offset:3\tp1-3", "Offset:4\tp1-4"]
    assert r.stderr.splitlines()[-1] == "Processed a total of 3 messages"

    earliest = _consume(broker, topic_name, "--partition", "0", "--offset", "earliest", "--max-messages", "3")
    assert earliest.stdout.splitlines() == ["p0-0", "p0-1", "p0-2"], earliest.stderr


def test_consume_with_a_group_commits_what_it_printed_and_resumes_there(broker: EmbeddedBroker,
                                                                        topic_name: str) -> None:
    _create(broker, topic_name)
    _write(broker, topic_name, [{"value": b"v%d" % i} for i in range(5)])
    group = topic_name + "-g"
    first = _consume(broker, topic_name, "--group", group, "--from-beginning", "--max-messages", "2")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["v0", "v1"]
    assert _committed(broker, group, topic_name) == [2]  # the next to read: nothing unprinted is committed

    # No --from-beginning: a group's committed offset is where it goes on, not the end of the log.
    rest = _consume(broker, topic_name, "--group", group, "--timeout-ms", "1500")
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.splitlines() == ["v2", "v3", "v4"]
    assert _committed(broker, group, topic_name) == [5]


def test_consume_settings_from_a_consumer_config_file(broker: EmbeddedBroker, topic_name: str,
                                                     tmp_path: Path) -> None:
    _create(broker, topic_name)
    _write(broker, topic_name, [{"value": b"a"}, {"value": b"b"}])
    props = tmp_path / "consumer.properties"
    props.write_text(f"group.id={topic_name}-cfg\nauto.offset.reset=earliest\nkey.deserializer=x.Y\n")
    r = _consume(broker, topic_name, "--consumer.config", str(props), "--consumer-property", "client.id=cli-consume",
                 "--max-messages", "2", "--timeout-ms", "10000")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["a", "b"]
    assert _committed(broker, f"{topic_name}-cfg", topic_name) == [2]


def test_ctrl_c_ends_consume_with_130_commits_and_counts(broker: EmbeddedBroker, topic_name: str) -> None:
    _create(broker, topic_name)
    _write(broker, topic_name, [{"value": b"only"}])
    group = topic_name + "-int"
    proc = _start(broker, topic_name, "--from-beginning", "--group", group)
    try:
        assert proc.stdout is not None
        assert read_line(proc.stdout, 60, "consume's first record") == "only\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "Processed a total of 1 messages" and "Traceback" not in err, err
    assert _committed(broker, group, topic_name) == [1]


def test_consume_timeout_ends_it_when_nothing_arrives(broker: EmbeddedBroker, topic_name: str) -> None:
    _create(broker, topic_name)
    started = time.monotonic()
    r = _consume(broker, topic_name, "--from-beginning", "--timeout-ms", "500")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr.splitlines()[-1] == "Processed a total of 0 messages"
    assert time.monotonic() - started < 30


@pytest.mark.broker_kinds("apache", reason="Tansu does not send the aborted-transactions list: aborted records "
                                           "stay visible to read_committed readers")
def test_consume_read_committed_leaves_out_aborted_transactions(broker: EmbeddedBroker, topic_name: str) -> None:
    from confluent_kafka import Producer

    _create(broker, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"txn-{topic_name}"})
    p.init_transactions(30)
    for value, commit in ((b"committed", True), (b"aborted", False), (b"after", True)):
        p.begin_transaction()
        p.produce(topic_name, value)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    committed = _consume(broker, topic_name, "--from-beginning", "--isolation-level", "read_committed",
                         "--timeout-ms", "1500")
    assert committed.returncode == 0, committed.stderr
    assert committed.stdout.splitlines() == ["committed", "after"]
    everything = _consume(broker, topic_name, "--from-beginning", "--timeout-ms", "1500")
    assert everything.stdout.splitlines() == ["committed", "aborted", "after"]


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's own option parsing and wording, refused before a broker is asked"))
def test_consume_usage_mistakes_exit_2(broker: EmbeddedBroker, topic_name: str) -> None:
    for args, says in ((("--offset", "3"), "--offset needs --partition"),
                       (("--partition", "0", "--group", "g"), "cannot be given together"),
                       (("--property", "print.colour=true"), "not a formatter property"),
                       (("--property", "print.key=yes"), "expected true or false"),
                       (("--partition", "0", "--offset", "-1"), "non-negative")):
        r = _consume(broker, topic_name, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert says in r.stderr and "Traceback" not in r.stderr, r.stderr
