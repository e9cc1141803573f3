"""Waiting on a condition with a deadline: the one way tests wait (never a sleep followed by an assert)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import IO


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.01) -> None:
    """Return as soon as predicate() is true; fail naming `what` if it is not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)


def read_line(stream: IO[str], timeout: float, what: str) -> str:
    """One line from a child's pipe, failing (instead of blocking the suite) if none comes within `timeout`."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not box:
        raise AssertionError(f"{what}: no line within {timeout} s")
    return box[0]
