"""`kafkajet schema-registry` as a user runs it: in the foreground, saying where it keeps schemas."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

from kafkajet.testing import EmbeddedBroker
from tests.helpers.terminal import default_ctrl_c
from tests.helpers.waiting import read_line


def run(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "kafkajet", "schema-registry", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_ctrl_c)


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    return out


def test_memory_registry_serves_confluents_client_and_says_memory() -> None:
    proc = run()
    try:
        line = read_line(proc.stdout, 60, "the registry's first line")  # type: ignore[arg-type]
        assert "memory only" in line
        url = line.split("listening on ", 1)[1].split(";", 1)[0]
        assert ConfluentClient({"url": url}).register_schema("cli-value", Schema('"string"', "AVRO")) == 1
    finally:
        out = stop(proc)
    assert "schema registry stopped" in out


def test_with_a_broker_it_keeps_ids(broker: EmbeddedBroker, topic_name: str) -> None:
    args = ("--bootstrap-servers", broker.bootstrap_servers, "--topic", f"schemas-{topic_name}")
    ids = []
    for _ in range(2):
        proc = run(*args)
        try:
            line = read_line(proc.stdout, 60, "the registry's first line")  # type: ignore[arg-type]
            assert f"topic schemas-{topic_name} on {broker.bootstrap_servers}" in line
            url = line.split("listening on ", 1)[1].split(";", 1)[0]
            client = ConfluentClient({"url": url})
            client.register_schema("other-value", Schema('"long"', "AVRO"))
            ids.append(client.register_schema("cli-value", Schema('"string"', "AVRO")))
        finally:
            stop(proc)
    assert ids[0] == ids[1] == 2


def test_ctrl_c_stops_it_with_exit_130_as_every_command() -> None:
    proc = run()
    try:
        read_line(proc.stdout, 60, "the registry's first line")  # type: ignore[arg-type]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            stop(proc)
    assert (proc.returncode, out.splitlines()[-1]) == (130, "schema registry stopped"), err
    assert err == ""  # "memory only" is in the listening line: not repeated as a WARNING
