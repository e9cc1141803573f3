"""ApacheKafka's start when a port it picked is taken before the JVM binds it, the JVM options its nodes get, and
the Java programs it runs."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from pathlib import Path

import pytest

import kafkajet.testing.apache_kafka as apache_kafka
from kafkajet.testing.apache_kafka import C1_ONLY, TOOL_JVM_OPTIONS, ApacheKafka
from kafkajet.testing.ports import free_port
from tests.helpers.apache import running_apache_kafka
from tests.helpers.java_clients import PROGRAM as JAVA_CLIENTS


def test_a_node_whose_port_was_taken_starts_again_on_new_ports(monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    # As in CI: another process took the INTERNAL port (the second pick) between its pick and the node's bind.
    with socket.create_server(("127.0.0.1", free_port())) as held:
        taken = held.getsockname()[1]
        picks = iter([free_port(), taken])
        monkeypatch.setattr(apache_kafka, "free_port", lambda: next(picks, None) or free_port())
        with caplog.at_level(logging.WARNING, "kafkajet"), running_apache_kafka() as kafka:
            assert kafka.live_brokers() == [1]
            assert taken not in kafka._node(1).ports.values()
    assert "could not bind its port; starting again on new ports" in caplog.text


def test_a_single_file_program_is_compiled_once_and_run_as_a_class(apache_kafka: ApacheKafka) -> None:
    first = apache_kafka.java_command(str(JAVA_CLIENTS), jvm_options=TOOL_JVM_OPTIONS)
    assert str(JAVA_CLIENTS) not in first and first[-1] == "JavaClients"
    classes = Path(first[first.index("-cp") + 1].split(os.pathsep)[-1])
    assert (classes / "JavaClients.class").is_file()
    with pytest.MonkeyPatch.context() as patch:  # the second command compiles nothing
        patch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"compiled again: {a}"))
        assert apache_kafka.java_command(str(JAVA_CLIENTS)) == [*first[:1], *first[1 + len(TOOL_JVM_OPTIONS):]]
    done = subprocess.run(first, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("usage: consume BOOTSTRAP TOPIC"), done.stderr


def test_the_suites_brokers_run_with_the_jvm_options_given(apache_kafka: ApacheKafka) -> None:
    # tests/helpers/apache.py gives every cluster of the suite C1_ONLY (the suite is short of CPU): the option
    # must reach the node's JVM, after kafkajet's own, or the saving is silently gone.
    node = apache_kafka._node(1).proc
    assert node is not None and node.poll() is None, "the session's node 1 is not running"
    args = Path(f"/proc/{node.pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    assert C1_ONLY in args[:args.index("kafka.Kafka")], args
