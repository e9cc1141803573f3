"""What a client's connections carried, counted as Java's Selector counts it (its producer-metrics connection
and I/O names, and producer-node-metrics per node): once per request written and per response read, never per
record."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kafkajet.stats import Windowed

WINDOW_S = 30.0


class Traffic:
    """Counts of one node's connections (or, with no parent, the client's): each event on a node's counts goes
    to its parent too. Written by the network thread, read by metrics() on any thread: hence the lock."""

    __slots__ = ("_lock", "_clock", "parent", "_sent", "_received", "_created", "_closed", "request_total",
                 "response_total", "outgoing_bytes", "incoming_bytes", "created_total", "closed_total", "_auth", "_auth_failed",
                 "_reauth", "_reauth_failed", "_io_wait", "_io")

    def __init__(self, parent: Traffic | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.parent = parent
        now = clock()
        self._sent = Windowed(WINDOW_S, now)  # one sample a request: its size
        self._received = Windowed(WINDOW_S, now)  # one sample a response: its size
        self._created = Windowed(WINDOW_S, now)
        self._closed = Windowed(WINDOW_S, now)
        self.request_total = 0
        self.response_total = 0
        self.outgoing_bytes = 0
        self.incoming_bytes = 0
        self.created_total = 0
        self.closed_total = 0
        self._auth = Windowed(WINDOW_S, now)
        self._auth_failed = Windowed(WINDOW_S, now)
        self._reauth = Windowed(WINDOW_S, now)  # one sample a renewal: its latency in ms
        self._reauth_failed = Windowed(WINDOW_S, now)
        self._io_wait = Windowed(WINDOW_S, now)  # one sample a poll: ns blocked in select()
        self._io = Windowed(WINDOW_S, now)  # one sample a poll: ns doing the I/O select() found

    def request_written(self, size: int) -> None:
        """A request's frame (size prefix included) is fully written."""
        with self._lock:
            self._sent.record(size, 1, self._clock())
            self.request_total += 1
            self.outgoing_bytes += size
        if self.parent is not None:
            self.parent.request_written(size)

    def response_read(self, size: int) -> None:
        """A response's frame (size prefix included) is fully read."""
        with self._lock:
            self._received.record(size, 1, self._clock())
            self.response_total += 1
            self.incoming_bytes += size
        if self.parent is not None:
            self.parent.response_read(size)

    def connection_created(self) -> None:
        with self._lock:
            self._created.record(1, 1, self._clock())
            self.created_total += 1
        if self.parent is not None:
            self.parent.connection_created()

    def connection_closed(self) -> None:
        with self._lock:
            self._closed.record(1, 1, self._clock())
            self.closed_total += 1
        if self.parent is not None:
            self.parent.connection_closed()

    def authenticated(self) -> None:
        """A connection became ready (TLS and SASL done where configured)."""
        self._count("_auth")

    def reauthenticated(self, latency_ms: float) -> None:
        with self._lock:
            self._reauth.record(latency_ms, 1, self._clock())
        if self.parent is not None:
            self.parent.reauthenticated(latency_ms)

    def authentication_failed(self, reauthentication: bool) -> None:
        self._count("_reauth_failed" if reauthentication else "_auth_failed")

    def _count(self, stat: str) -> None:
        with self._lock:
            getattr(self, stat).record(1, 1, self._clock())
        if self.parent is not None:
            self.parent._count(stat)

    def polled(self, wait_ms: float, io_ms: float) -> None:
        """One poll of the client's selector: how long select() blocked, then how long its I/O took."""
        with self._lock:
            now = self._clock()
            self._io_wait.record(wait_ms * 1e6, 1, now)
            self._io.record(io_ms * 1e6, 1, now)

    def snapshot(self, connections: bool) -> dict[str, float]:
        """Java's names for these counts; with `connections`, the connection ones too (client-wide only)."""
        with self._lock:
            now = self._clock()
            out = {
                "outgoing-byte-rate": self._sent.rate(now),
                "outgoing-byte-total": float(self.outgoing_bytes),
                "request-rate": self._sent.count_rate(now),
                "request-total": float(self.request_total),
                "request-size-avg": self._sent.avg(now),
                "request-size-max": self._sent.max(now),
                "incoming-byte-rate": self._received.rate(now),
                "incoming-byte-total": float(self.incoming_bytes),
                "response-rate": self._received.count_rate(now),
                "response-total": float(self.response_total),
            }
            if connections:
                out.update({
                    "connection-creation-rate": self._created.rate(now),
                    "connection-creation-total": float(self.created_total),
                    "connection-close-rate": self._closed.rate(now),
                    "connection-close-total": float(self.closed_total),
                    # Java's network-io counts its selector's completed sends and receives together.
                    "network-io-rate": self._sent.count_rate(now) + self._received.count_rate(now),
                    "network-io-total": float(self.request_total + self.response_total),
                    "successful-authentication-rate": self._auth.rate(now),
                    "successful-authentication-total": self._auth.total,
                    # A client's connections never serve re-authentication (Java counts every one here too).
                    "successful-authentication-no-reauth-total": self._auth.total,
                    "failed-authentication-rate": self._auth_failed.rate(now),
                    "failed-authentication-total": self._auth_failed.total,
                    "successful-reauthentication-rate": self._reauth.count_rate(now),
                    "successful-reauthentication-total": float(self._reauth.count_total),
                    "failed-reauthentication-rate": self._reauth_failed.rate(now),
                    "failed-reauthentication-total": self._reauth_failed.total,
                    "reauthentication-latency-avg": self._reauth.avg(now),
                    "reauthentication-latency-max": self._reauth.max(now),
                    "select-rate": self._io_wait.count_rate(now),
                    "select-total": float(self._io_wait.count_total),
                    "io-wait-time-ns-avg": self._io_wait.avg(now),
                    "io-wait-time-ns-total": self._io_wait.total,
                    "io-wait-ratio": self._io_wait.rate(now) / 1e9,
                    "io-time-ns-avg": self._io.avg(now),
                    "io-time-ns-total": self._io.total,
                    "io-ratio": self._io.rate(now) / 1e9,
                })
            return out

