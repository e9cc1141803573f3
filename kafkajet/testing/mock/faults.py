"""Per-request hooks (franz-go kfake style) and the queue of one-shot faults built on them.

A hook is fn(request_header, body, broker_id) -> Action. The first hook returning something other than None
decides:

    None                      handle the request normally
    dict                      answer with this response body (encoded at the request's version)
    "drop"                    close the connection without handling or answering the request
    "drop_after"              handle the request (append a Produce), then close the connection unanswered
    "ERROR_NAME"              answer every partition/topic of the request with that error, handling nothing
    after_append("ERROR")     handle the request, then answer with the error (e.g. REQUEST_TIMED_OUT after
                              the leader appended; NOT_ENOUGH_REPLICAS_AFTER_APPEND always means this)
    bytes                     write these bytes instead of a response (size prefix, header and all: garbage,
                              truncated frames, wrong correlation ids)
    callable(header) -> bytes the same, built from the request header (e.g. to get its correlation id right)
    throttled(ms)             handle the request normally, then answer with throttle_time_ms = ms: a quota the
                              client is over (KIP-219; the field exists from the version each API added it)

WHERE HOOKS RUN. A hook runs on a thread of its own, one per request it is consulted for, never on the
cluster's server thread. While it runs, its connection handles no further request (a Kafka broker, too, takes
one request per connection at a time), so answers stay in request order and a Produce behind it is not
appended before it; every other connection, of this broker and of the others, goes on being served. So a hook
may block: wait on an event, sleep to delay its answer, or call back into the cluster (broker_down(),
set_leader(), wait_until(): none of them deadlocks). What it stalls is its own connection and so everything the
client sends behind it there: a hook that waits for the client to make progress on that same connection (a
Metadata answer queued behind the InitProducerId it holds, say) waits for its timeout. Answer a retriable error
meanwhile instead (COORDINATOR_LOAD_IN_PROGRESS until the condition holds, then the real answer). Hooks of
different connections run at the same time: keep what they share thread-safe (list.append is).

Queued one-shot faults (push_request_errors and the like) are taken on the server thread, before any hook, and
never block.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkajet.errors import error_for_name
from kafkajet.protocol import ApiKey, RequestHeader


@dataclass(frozen=True, slots=True)
class Throttled:
    ms: int


RawResponse = bytes | Callable[[RequestHeader], bytes]
Action = None | dict[str, Any] | str | RawResponse | Throttled
ControlFn = Callable[[RequestHeader, dict[str, Any], int], Action]

DROP = "drop"
DROP_AFTER = "drop_after"
_AFTER_SUFFIX = ":after_append"
# Its name says the batch was written; answering it without appending would misrepresent the broker.
_ALWAYS_AFTER = frozenset({"NOT_ENOUGH_REPLICAS_AFTER_APPEND"})


def throttled(ms: int) -> Throttled:
    """An action answering normally, with a throttle time of `ms` (what a broker says to a client over its quota)."""
    if ms < 0:
        raise ValueError(f"throttled({ms}): a throttle time is not negative")
    return Throttled(int(ms))


def after_append(error: str) -> str:
    """An action answering `error` once the request was handled (the append happened)."""
    error_for_name(error)
    return error + _AFTER_SUFFIX


@dataclass(frozen=True, slots=True)
class ErrorAction:
    error: str
    handle_first: bool


def parse_error_action(action: str) -> ErrorAction:
    """Validates the name, so a typo fails in the test thread rather than as a silent pass-through."""
    name = action[: -len(_AFTER_SUFFIX)] if action.endswith(_AFTER_SUFFIX) else action
    error_for_name(name)
    return ErrorAction(name, action.endswith(_AFTER_SUFFIX) or name in _ALWAYS_AFTER)


def api_key(api: ApiKey | int | str) -> ApiKey:
    """ApiKey from ApiKey.PRODUCE, 0, "Produce", "PRODUCE", "produce" or "init_producer_id"."""
    if isinstance(api, str):
        wanted = api.replace("_", "").lower()
        for key in ApiKey:
            if key.name.replace("_", "").lower() == wanted:
                return key
        raise ValueError(f"unknown api {api!r}; known: {', '.join(k.name for k in ApiKey)}")
    return ApiKey(api)


@dataclass(frozen=True, slots=True)
class _Queued:
    action: Action
    broker_id: int | None


class Faults:
    """Thread-safe: tests add hooks while the server thread consults them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: dict[int, list[tuple[int, ControlFn]]] = {}
        self._queued: dict[int, deque[_Queued]] = {}
        self._ids = itertools.count(1)

    def add_hook(self, api: ApiKey, fn: ControlFn) -> int:
        with self._lock:
            handle = next(self._ids)
            self._hooks.setdefault(int(api), []).append((handle, fn))
            return handle

    def remove_hook(self, handle: int) -> bool:
        with self._lock:
            for hooks in self._hooks.values():
                for i, (h, _) in enumerate(hooks):
                    if h == handle:
                        del hooks[i]
                        return True
            return False

    def enqueue(self, api: ApiKey, actions: list[Action], broker_id: int | None) -> None:
        with self._lock:
            self._queued.setdefault(int(api), deque()).extend(_Queued(a, broker_id) for a in actions)

    def pending(self, api: ApiKey) -> int:
        with self._lock:
            return len(self._queued.get(int(api), ()))

    def clear(self) -> None:
        with self._lock:
            self._hooks.clear()
            self._queued.clear()

    def take_queued(self, header: RequestHeader, broker_id: int) -> Action:
        """The first one-shot fault pushed for this request's api and broker, consumed; None if there is none."""
        with self._lock:
            queue = self._queued.get(header.api_key)
            if queue:
                for i, item in enumerate(queue):
                    if item.broker_id is None or item.broker_id == broker_id:
                        del queue[i]
                        return item.action
            return None

    def has_hooks(self, api: int) -> bool:
        with self._lock:
            return bool(self._hooks.get(api))

    def run_hooks(self, header: RequestHeader, body: dict[str, Any], broker_id: int) -> Action:
        """The first action a hook returns, in the order the hooks were added (None: handle normally)."""
        with self._lock:
            hooks = [fn for _, fn in self._hooks.get(header.api_key, ())]
        # Called outside our lock: hooks are test code and may block or call back into the cluster.
        for fn in hooks:
            action = fn(header, body, broker_id)
            if action is not None:
                return action
        return None
