"""Client-side timestamps of a producer's Produce requests and of the quota throttle windows its answers announced.

ThrottleWatch wraps the send() and poll() of a producer's NetworkClient (it watches; it changes nothing) and
records, on the client's own clock: when each Produce request was handed to the network (read fresh at the
call, so never before the client decided to send), and the window each Produce answer announced, from the
client's `now` when it read the answer (the `now` its request went out with, plus the answer's latency, which
the client measures on that same clock) for throttle_time_ms. Produce throttles on the client's side from v6
(Java's ProduceResponse.shouldClientThrottle); older answers announce no window.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from kafkajet.clock import now_ms
from kafkajet.network import ClientResponse, NetworkClient
from kafkajet.protocol import ApiKey

PRODUCE_CLIENT_THROTTLE_FROM = 6


@dataclass(frozen=True)
class Window:
    node: int
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class Send:
    node: int
    at_ms: float
    bytes: int


@dataclass
class ThrottleWatch:
    sends: list[Send] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    _sent_now: dict[tuple[int, int], float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: NetworkClient) -> None:
        send, poll = client.send, client.poll

        def watched_send(node_id: int, api_key: int, body: dict[str, Any], now: float, **kw: Any) -> int:
            at = now_ms()
            cid = send(node_id, api_key, body, now, **kw)
            if api_key == ApiKey.PRODUCE:
                size = sum(len(p["records"] or b"") for t in body["topic_data"] for p in t["partition_data"])
                with self._lock:
                    self.sends.append(Send(node_id, at, size))
                    self._sent_now[(node_id, cid)] = now
            return cid

        def watched_poll(timeout_ms: float, now: float) -> list[ClientResponse]:
            out = poll(timeout_ms, now)
            for r in out:
                if r.api_key != ApiKey.PRODUCE or r.body is None:
                    continue
                with self._lock:
                    sent_now = self._sent_now.pop((r.node_id, r.correlation_id), None)
                    throttle = r.body.get("throttle_time_ms", 0)
                    if sent_now is not None and throttle > 0 and r.api_version >= PRODUCE_CLIENT_THROTTLE_FROM:
                        start = sent_now + r.latency_ms
                        self.windows.append(Window(r.node_id, start, start + throttle))
            return out

        client.send = watched_send  # type: ignore[method-assign]
        client.poll = watched_poll  # type: ignore[method-assign]

    def sends_inside_windows(self) -> list[tuple[Send, Window]]:
        """Every Produce request that went to a node inside a window that node's answer had announced."""
        with self._lock:
            return [(s, w) for s in self.sends for w in self.windows
                    if s.node == w.node and w.start_ms < s.at_ms < w.end_ms]

    def throttled_ms(self) -> float:
        """The time covered by announced windows (overlaps counted once per node)."""
        with self._lock:
            total = 0.0
            for node in {w.node for w in self.windows}:
                end = float("-inf")
                for w in sorted((w for w in self.windows if w.node == node), key=lambda w: w.start_ms):
                    total += max(0.0, w.end_ms - max(w.start_ms, end))
                    end = max(end, w.end_ms)
            return total
