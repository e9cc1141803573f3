"""A self-pipe (socketpair) that lets another thread interrupt a blocking selector.select()."""

from __future__ import annotations

import socket


class Waker:
    """wake() is thread-safe and coalesced: at most one byte is pending however often it is called."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        # A plain attribute is enough: the poller clears it after draining and re-checks its work after
        # select returns, so the worst race costs one spurious wake-up, never a lost one.
        self._pending = False
        self._closed = False

    def fileno(self) -> int:
        return self._reader.fileno()

    @property
    def reader(self) -> socket.socket:
        return self._reader

    def wake(self) -> None:
        if self._pending or self._closed:
            return
        self._pending = True
        try:
            self._writer.send(b"\x00")
        except (BlockingIOError, InterruptedError):
            pass  # the pipe is full, so the poller is already due to wake up
        except OSError:
            pass  # closed concurrently by close(); nothing left to wake

    def drain(self) -> None:
        try:
            while self._reader.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        # Cleared only after reading: clearing first let a wake() land its byte inside this very drain
        # and leave the flag set with an empty pipe, after which every wake() was dropped. A wake() that
        # finds the flag still set here is safe to drop: the poller evaluates its state after draining.
        self._pending = False

    def close(self) -> None:
        self._closed = True
        self._reader.close()
        self._writer.close()
