"""Ports the testing tools give the servers they start."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import kafkajet.testing.ports as ports
from kafkajet.testing.ports import free_port


def test_a_free_port_is_one_no_outgoing_connection_can_take() -> None:
    # The kernel gives outgoing connections local ports from this range; a server's port picked inside it can be
    # taken by any client's connect() before the server binds it.
    first, last = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    picked = {free_port() for _ in range(50)}
    assert not [p for p in picked if first <= p <= last]
    assert len(picked) > 40  # spread at random, so that two workers' picks seldom meet


def test_a_free_port_skips_one_a_server_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", free_port())) as held:
        taken, other = held.getsockname()[1], free_port()
        picks = iter([taken, other])
        monkeypatch.setattr(ports.random, "randint", lambda low, high: next(picks))
        assert free_port() == other
