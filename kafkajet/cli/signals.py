"""Signal handlers a command installs for its run and puts back afterwards."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def signal_handlers(handlers: dict[signal.Signals, Callable[[int, Any], object]]) -> Iterator[None]:
    """Install these handlers for the block, then put back the ones they replaced, also when it raises: main()
    runs in-process too (tests, embedding programs), whose own handling must outlive the command."""
    previous: dict[signal.Signals, Any] = {}
    try:
        for signum, handler in handlers.items():
            previous[signum] = signal.signal(signum, handler)
        yield
    finally:
        for signum, handler in reversed(previous.items()):
            # None: it was set outside Python and cannot be put back from here; the default is the nearest
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
