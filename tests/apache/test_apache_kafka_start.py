"""ApacheKafka's start when a port it picked is taken before the JVM binds it."""

from __future__ import annotations

import logging
import socket

import pytest

import kafkajet.testing.apache_kafka as apache_kafka
from kafkajet.testing.ports import free_port
from tests.helpers.apache import running_apache_kafka


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
