"""Ports on 127.0.0.1 for servers the testing tools start (brokers, a KDC, Spark's master)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Below the kernel's ephemeral range, so that no outgoing connection can take the port before the server binds it.
_LOWEST = 10_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_TRIES = 200
# How often a server the testing tools start is started again on new ports when one was taken before its bind.
START_ATTEMPTS = 3


def free_port() -> int:
    """A port on 127.0.0.1 that a server started soon after can bind.

    Not bind(0)'s answer: that port lies in the range the kernel also gives every outgoing connection, so between
    this call and the server's bind any client's connect() may take it. That happened under four pytest-xdist
    workers: an Apache Kafka node failed with "Socket server failed to bind to 127.0.0.1:33309: Address already
    in use", and the session's broker with it. Below the ephemeral range only another free_port() call picks the
    port, at random among thousands, and the bind check skips a port a running server holds.
    """
    low, high = _below_ephemeral()
    if high - low >= 1000:
        for _ in range(_TRIES):
            port = random.randint(low, high)  # noqa: S311 - spreading picks, not a secret
            if _bindable(port):
                return port
    with socket.socket() as s:  # no room below the range (or not Linux): the kernel's pick
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _below_ephemeral() -> tuple[int, int]:
    try:
        first = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return (0, 0)
    return (_LOWEST, first - 1)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
