"""Ports for tests that need an address where connections are refused."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for as long as the block lasts: bound, never listening. A port
    bound and released instead is free for any server the suite starts beside the test (a broker in another
    pytest-xdist worker took one, and a write "to nowhere" succeeded)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])
