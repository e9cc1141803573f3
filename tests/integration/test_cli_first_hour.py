"""What a new user meets in the first hour with the command line (issue 28): Ctrl-C, the broker dying under
`kafkajet broker`, topic names, the options every command shares. Each runs the real command in a subprocess."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.ports import refusing_port
from tests.helpers.terminal import default_ctrl_c
from tests.helpers.waiting import read_line, wait_for

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkajet", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def start(*args: str, stdin: int = subprocess.DEVNULL) -> subprocess.Popen[str]:
    """The command in a process group of its own, as a shell starts a foreground job."""
    return subprocess.Popen([sys.executable, "-m", "kafkajet", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=stdin, text=True, start_new_session=True,
                            preexec_fn=default_ctrl_c)


@pytest.mark.parametrize("command", [
    ["produce", "--topic", "t"],
    ["perf", "--topic", "t", "--num-records", "10", "--record-size", "10"],
    ["topics", "--list"],
    ["consume", "--topic", "t"],
    ["demo"],
])
def test_a_refused_address_is_reported_at_once_for_every_bootstrap_server(command: list[str]) -> None:
    # Nothing listens on either port: the tools keep Java's wait (max.block.ms, the call's timeout), but say
    # at once what they are waiting for, instead of a silent minute.
    with refusing_port() as first, refusing_port() as second:
        servers = [f"127.0.0.1:{first}", f"localhost:{second}"]
        proc = start(command[0], "--bootstrap-server", ",".join(servers), *command[1:], stdin=subprocess.PIPE)
        assert proc.stdin is not None and proc.stderr is not None
        try:
            proc.stdin.write("a record\n")  # for produce; kept open, so it waits for metadata
            proc.stdin.flush()
            said: list[str] = []
            deadline = time.monotonic() + 30
            while not all(any(server in line and "Connection refused" in line for line in said) for server in servers):
                assert time.monotonic() < deadline, f"not both refusals within 30 s: {said}"
                said.append(read_line(proc.stderr, deadline - time.monotonic(), "a connection failure on stderr"))
            assert proc.poll() is None  # said while it still waits, not in the error at the end
        finally:
            stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM first, so a tool stops the broker it started (a broker outlives a tool killed outright)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def ctrl_c(proc: subprocess.Popen[str]) -> None:
    """What a terminal does on Ctrl-C: SIGINT to every process of the foreground process group."""
    os.killpg(proc.pid, signal.SIGINT)


def test_ctrl_c_in_perf_on_the_embedded_broker_stops_at_once_with_nothing_failed() -> None:
    # 1 KiB records without a limit: the buffer is full of records in flight when Ctrl-C comes. A broker in
    # the terminal's process group died with the tool and they waited 10 s, then failed.
    proc = start("perf", "--topic", "perf-ctrl-c", "--num-records", "100000000", "--record-size", "1000",
                 "--reporting-interval", "300")
    assert proc.stdout is not None
    try:
        first = read_line(proc.stdout, 90, "the perf tool's first window line")
        assert "records sent" in first, first
        interrupted_at = time.monotonic()
        ctrl_c(proc)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        stop(proc)
    took = time.monotonic() - interrupted_at
    assert proc.returncode == 130, stderr
    assert "interrupted: " in stderr and " acknowledged, 0 failed, " in stderr, stderr
    # The broker stayed up for the close: no connection the producer had was cut or refused.
    assert "kafkajet.network" not in stderr, stderr
    assert took < 8.0, f"{took:.1f} s from Ctrl-C to exit (the old tool waited its 10 s close timeout)"


def test_broker_that_dies_under_the_broker_command_is_reported_and_exits_1() -> None:
    proc = start("broker")
    assert proc.stdout is not None
    try:
        line = read_line(proc.stdout, 60, "the broker's listening line")
        assert "listening on 127.0.0.1:" in line, line
        pid = int(line.split("(pid ")[1].split(";")[0])
        os.kill(pid, signal.SIGKILL)  # the broker dies; the command must not call that "broker stopped"
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 1, stdout + stderr
    assert "broker stopped" not in stdout
    assert "the broker exited by itself (killed by signal 9, SIGKILL)" in stderr, stderr


def test_ctrl_c_stops_the_broker_command_cleanly() -> None:
    proc = start("broker")
    assert proc.stdout is not None
    try:
        line = read_line(proc.stdout, 60, "the broker's listening line")
        pid = int(line.split("(pid ")[1].split(";")[0])
        ctrl_c(proc)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert (proc.returncode, stdout.strip(), stderr) == (130, "broker stopped", ""), (proc.returncode, stdout, stderr)
    with pytest.raises(ProcessLookupError):  # reaped: stop() ended it, in its own session or not
        os.kill(pid, 0)


def test_the_broker_command_on_a_port_in_use_says_so_in_one_line_before_claiming_to_listen() -> None:
    # Once, its readiness check reached the other process: "listening", then Tansu's panic with colour codes.
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        r = cli("broker", "--port", str(port))
    assert (r.returncode, r.stdout) == (1, ""), r
    assert r.stderr == f"python -m kafkajet broker: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_a_broker_command_killed_outright_takes_its_broker_with_it() -> None:
    # The broker runs in its own session (Ctrl-C is the tool's to handle): only its parent's death reaches it.
    proc = start("broker")
    assert proc.stdout is not None
    try:
        line = read_line(proc.stdout, 60, "the broker's listening line")
        port = int(line.split("listening on 127.0.0.1:")[1].split()[0])
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)

        def port_free() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) != 0

        wait_for(port_free, 20, f"the orphaned broker to let go of port {port}")
    finally:
        stop(proc)


def test_a_terminal_hang_up_stops_the_broker_it_started() -> None:
    # The broker has its own session, so the terminal's SIGHUP reaches only the tool, which must stop it.
    proc = start("broker")
    assert proc.stdout is not None
    try:
        line = read_line(proc.stdout, 60, "the broker's listening line")
        pid = int(line.split("(pid ")[1].split(";")[0])
        os.killpg(proc.pid, signal.SIGHUP)
        proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 128 + signal.SIGHUP
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize(("name", "problem"), [
    ("bad topic!", "topic name 'bad topic!' is illegal: it contains ' ', '!'"),
    ("..", 'a topic name cannot be "." or ".."'),
    ("x" * 250, "a topic name can't be longer than 249 characters (250 given)"),
])
def test_topics_create_refuses_names_kafka_refuses(broker: EmbeddedBroker, name: str, problem: str) -> None:
    r = cli("topics", "--bootstrap-server", broker.bootstrap_servers, "--create", "--topic", name)
    assert r.returncode == 2, r.stdout + r.stderr
    assert problem in r.stderr and "Traceback" not in r.stderr
    with Admin(broker.bootstrap_servers) as admin:
        assert name not in admin.list_topics(30)


def test_topics_create_warns_of_period_underscore_collisions_and_describe_prints_no_none(
        broker: EmbeddedBroker, topic_name: str) -> None:
    name = f"{topic_name}_a.b-c"  # legal: created, with Java's warning
    r = cli("topics", "--bootstrap-servers", broker.bootstrap_servers, "--create", "--topic", name)
    assert r.returncode == 0, r.stderr
    assert "topics with a period ('.') or underscore ('_') could collide" in r.stderr
    r = cli("topics", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--topic", name)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Topic: {name}\t") and "None" not in r.stdout, r.stdout


def test_topics_describe_heads_each_topic_as_kafkas_tool_does_configs_included(
        broker: EmbeddedBroker, topic_name: str) -> None:
    from kafkajet.testing import ApacheKafka

    # A compacted topic, as the Schema Registry's _schemas: its cleanup.policy is what a user looks for.
    r = cli("topics", "--bootstrap-server", broker.bootstrap_servers, "--create", "--topic", topic_name,
            "--partitions", "2", "--config", "cleanup.policy=compact")
    assert r.returncode == 0, r.stderr
    r = cli("topics", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--topic", topic_name)
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[0]
    if isinstance(broker, ApacheKafka):
        java = broker.run_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap_servers,
                               "--describe", "--topic", topic_name)
        assert java.returncode == 0, java.stderr.decode()
        # Java's head line's fields, the topic id (Metadata v10+) and Configs (every setting not at Kafka's
        # default) in the broker's order included.
        java_head = java.stdout.decode().splitlines()[0]
        fields = dict(f.split(": ", 1) for f in head.split("\t"))
        java_fields = dict(f.split(": ", 1) for f in java_head.split("\t"))
        assert fields == java_fields, (head, java_head)
        assert "cleanup.policy=compact" in fields["Configs"].split(","), head
    else:  # Tansu keeps no topic settings: the field is there, empty
        topic_id = head.split("\t")[1]
        assert topic_id.startswith("TopicId: ") and len(topic_id) == len("TopicId: ") + 22, head
        assert head == f"Topic: {topic_name}\t{topic_id}\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: ", head


def test_topics_create_if_not_exists_on_an_existing_topic_says_nothing_or_the_partition_difference(
        broker: EmbeddedBroker, topic_name: str) -> None:
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    assert cli("topics", *bs, "--create", "--topic", topic_name, "--partitions", "2").returncode == 0
    for partitions in ((), ("--partitions", "2")):  # as Kafka's tool: nothing said, exit 0
        r = cli("topics", *bs, "--create", "--if-not-exists", "--topic", topic_name, *partitions)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), r
    for asked in ("1", "4"):  # fewer, more: said at once, not after a 30 s wait for partitions that never come
        started = time.monotonic()
        r = cli("topics", *bs, "--create", "--if-not-exists", "--topic", topic_name, "--partitions", asked)
        assert time.monotonic() - started < 15
        assert (r.returncode, r.stdout) == (0, ""), r
        assert r.stderr == (f"WARNING: topic {topic_name} exists already with 2 partitions, not {asked}: "
                            "left as it is\n")
    with Admin(broker.bootstrap_servers) as admin:
        assert len(admin.describe_topics(topic_name)[topic_name].partitions) == 2


def test_an_unknown_setting_exits_2_in_produce_and_perf_alike() -> None:
    produce = cli("produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                  "--producer-property", "linger.mss=0")
    perf = cli("perf", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--num-records", "1",
               "--record-size", "1", "--producer-props", "linger.mss=0")
    for r in (produce, perf):
        assert r.returncode == 2, r.stdout + r.stderr
        assert "unknown producer setting 'linger.mss'; did you mean 'linger.ms'?" in r.stderr


@pytest.mark.parametrize("command", ["produce", "topics", "perf", "demo"])
def test_every_command_takes_both_spellings_of_bootstrap_server(command: str) -> None:
    r = cli(command, "--help")
    assert r.returncode == 0, r.stderr
    assert re.search(r"--bootstrap-server\b(?!s)", r.stdout) and "--bootstrap-servers" in r.stdout, r.stdout


@pytest.mark.parametrize(("command", "words"), [
    ("broker", "Start the Tansu broker"),
    ("demo", "kafkajet sink"),
    ("config", "Print every setting a client takes"),
])
def test_every_command_has_a_help_description(command: str, words: str) -> None:
    r = cli(command, "--help")
    assert r.returncode == 0 and words in r.stdout, r.stdout


def test_demos_one_line_help_describes_the_pipeline_it_runs() -> None:
    r = cli("--help")
    text = " ".join(r.stdout.split())  # argparse wraps the help lines
    summary = text.split(" demo ", 1)[1].split(" perf ", 1)[0]
    assert "Spark pipeline" in summary and "exactly once" not in summary, summary


def test_demo_checks_its_input_file_before_starting_anything(tmp_path: Path) -> None:
    started = time.monotonic()
    r = cli("demo", "--input", str(tmp_path / "nosuch.parquet"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().endswith(f"error: --input '{tmp_path / 'nosuch.parquet'}': no such file"), r.stderr
    assert "embedded broker" not in r.stdout and "Traceback" not in r.stderr and "Spark" not in r.stderr
    assert time.monotonic() - started < 30


def test_demo_refuses_a_setting_no_client_takes_before_starting_anything() -> None:
    r = cli("demo", "--bootstrap-server", "127.0.0.1:1", "--command-property", "security.protocl=SSL")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "did you mean 'security.protocol'" in r.stderr and "Traceback" not in r.stderr
    r = cli("demo", "--command-property", "security.protocol=SSL")
    assert r.returncode == 2 and "give --bootstrap-server too" in r.stderr, r.stderr
