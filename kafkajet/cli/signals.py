"""Signal handlers a command installs for its run and puts back afterwards."""

from __future__ import annotations

import contextlib
import signal
import time
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


class SignalFlag:
    """A request to stop that a signal handler sets and the main thread reads.

    Not a threading.Event: Event.set() takes the lock that Event.wait() holds between its checks, and a Python
    handler runs on the main thread between any two of its bytecodes, so a handler setting an Event that the
    main thread is waiting on can wait for a lock its own thread holds, for good (seen: a Ctrl-C that never
    ended `consume`, a SIGTERM that would have left `broker` running). Setting a bool takes no lock."""

    SLICE_S = 0.05  # how long wait() can take to notice: the handler runs inside the sleep, which then goes on

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout_s: float) -> bool:
        """True once set, False after timeout_s without."""
        deadline = time.monotonic() + timeout_s
        while not self._set:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, self.SLICE_S))
        return self._set
