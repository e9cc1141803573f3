"""definitely_unreachable(): what lets the Spark sink fail at once, naming the address, for a wrong address,
while a server that accepts connections, or one that is merely slow to answer, is left to the client's wait."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from kafkajet.network.blocking import definitely_unreachable
from kafkajet.testing.ports import free_port


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: bound, then released (connecting to it is refused)."""
    return free_port()


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def test_every_server_refusing_is_told_with_each_address(closed_port: int) -> None:
    start = time.monotonic()
    why = definitely_unreachable(f"127.0.0.1:{closed_port},no-such-host.invalid:9092", window_s=0.5)
    assert why is not None
    assert f"connect to 127.0.0.1:{closed_port} refused" in str(why)
    assert "cannot resolve no-such-host.invalid:9092" in str(why)
    # Tried through the window (a broker restarting gets that long), then given up: not a minute's wait.
    assert 0.5 <= time.monotonic() - start < 5


def test_one_server_that_accepts_is_enough(closed_port: int, listening_port: int) -> None:
    assert definitely_unreachable(f"127.0.0.1:{closed_port},127.0.0.1:{listening_port}", window_s=0.5) is None


def test_a_server_that_comes_up_within_the_window_is_reachable(closed_port: int) -> None:
    import threading

    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

        def start_listening() -> None:
            server.bind(("127.0.0.1", closed_port))
            server.listen(8)

        timer = threading.Timer(0.3, start_listening)
        timer.start()
        try:
            assert definitely_unreachable(f"127.0.0.1:{closed_port}", window_s=5) is None
        finally:
            timer.join()
