"""The network side: one thread, one selector, every broker's listening socket and connections.

Each connection answers in request order, as Kafka does: a request gets a slot when it arrives and the slot is
filled when its answer is ready (at once, after the broker's rtt, or when a held Fetch completes). A timer heap
in the loop releases delayed answers, so a slow broker never blocks the others. Control hooks (faults.py) run on
threads of their own, never on this one: while one decides a request, its connection reads no further request
(as a Kafka broker handles one request per connection at a time) and the rest of the cluster is served.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkajet.errors import ProtocolError, UnsupportedVersionError
from kafkajet.protocol import ApiKey, RequestHeader, decode_request, encode_response
from kafkajet.testing.mock.faults import DROP, DROP_AFTER, Action, Faults, Throttled, parse_error_action
from kafkajet.testing.mock.handlers import HANDLERS, api_versions_body, error_response
from kafkajet.testing.mock.requests import Answer, Request
from kafkajet.testing.mock.sasl import SASL_APIS, SaslSession
from kafkajet.testing.mock.state import ClusterState

log = logging.getLogger("kafkajet.testing.mock")

T = TypeVar("T")
_SIZE = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")
_RECV_BYTES = 256 * 1024
_HISTORY = 200_000
# How often the loop looks for timed-out transactions (Kafka: transaction.abort.timed.out.transaction.cleanup
# .interval.ms, 10 s; shorter here so tests with short transaction timeouts stay quick).
_TXN_TICK_S = 0.05
# Requests after which a held read_committed Fetch may have more to return: appends, and coordinator requests
# that write transaction markers (EndTxn; InitProducerId and others aborting or finishing a transaction).
_WAKE_FETCHES = frozenset({ApiKey.PRODUCE, ApiKey.END_TXN, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN,
                           ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.TXN_OFFSET_COMMIT})


@dataclass(frozen=True, slots=True)
class RequestRecord:
    api: str
    version: int
    broker_id: int
    time: float  # time.monotonic() when the request was read
    correlation_id: int
    client_id: str | None
    principal: str | None = None  # the SASL username the connection authenticated as


class _Slot:
    __slots__ = ("payload", "drop", "ready_at")

    def __init__(self) -> None:
        self.payload: bytes | None = None
        self.drop = False
        self.ready_at = 0.0

    @property
    def filled(self) -> bool:
        return self.payload is not None or self.drop


class _Conn:
    def __init__(self, sock: socket.socket, broker_id: int, peer: Any) -> None:
        self.sock = sock
        self.broker_id = broker_id
        self.peer = peer
        self.inbuf = bytearray()
        self.slots: deque[_Slot] = deque()
        self.out: deque[memoryview] = deque()
        self.closing = False  # no further requests are read: a drop is pending
        self.hook_running = False  # a control hook is deciding the request at hand: the next ones wait in inbuf
        self.close_when_written = False
        self.closed = False
        self.events = selectors.EVENT_READ
        self.sasl: SaslSession | None = None  # set when the cluster requires SASL


@dataclass(slots=True)
class _HeldFetch:
    conn: _Conn
    slot: _Slot
    request: Request
    deadline: float


class MockServer:
    def __init__(self, state: ClusterState, faults: Faults, host: str = "127.0.0.1") -> None:
        self._state = state
        self._faults = faults
        self._host = host
        self._sel = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timer_seq = itertools.count()
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        self._waker_w.setblocking(False)
        self._sel.register(self._waker_r, selectors.EVENT_READ, None)
        self._listeners: dict[int, socket.socket] = {}
        self._conns: set[_Conn] = set()
        self._held: list[_HeldFetch] = []
        self._history: deque[RequestRecord] = deque(maxlen=_HISTORY)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._close_lock = threading.Lock()

    # --- life cycle (test thread) ------------------------------------------------------------------

    def listen(self, broker_id: int, port: int = 0) -> int:
        """Open a broker's listening socket (before start(), or on the loop thread); returns its port."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._listeners[broker_id] = sock
        self._sel.register(sock, selectors.EVENT_READ, broker_id)
        return int(sock.getsockname()[1])

    def start(self, name: str) -> None:
        self._at(time.monotonic() + _TXN_TICK_S, self._tick_transactions)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Close everything and join the loop thread; safe to call twice and after a failed start."""
        self._stopping = True
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"mock cluster thread did not stop within {timeout} s")
        self._close_all()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        """Run fn on the loop thread (where sockets may be touched) and return its result."""
        if self._thread is None or not self._thread.is_alive():
            raise RuntimeError("the mock cluster is not running")
        done = threading.Event()
        result: list[Any] = []

        def command() -> None:
            try:
                result.append((True, fn()))
            except BaseException as e:  # handed back to the caller's thread
                result.append((False, e))
            finally:
                done.set()

        self._post(command)
        if not done.wait(timeout):
            raise TimeoutError(f"mock cluster did not run the command within {timeout} s")
        ok, value = result[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def history(self) -> list[RequestRecord]:
        return list(self._history)

    # --- broker control (loop thread, via call()) ------------------------------------------------------

    def close_broker(self, broker_id: int) -> None:
        sock = self._listeners.pop(broker_id, None)
        if sock is not None:
            self._sel.unregister(sock)
            sock.close()
        for conn in [c for c in self._conns if c.broker_id == broker_id]:
            self._close(conn, "broker down")

    def wake_held_fetches(self) -> None:
        """Answer held Fetches that now have something to return (called after appends)."""
        if not self._held:
            return
        now = time.monotonic()
        still: list[_HeldFetch] = []
        for held in self._held:
            if held.conn.closed:
                continue
            with self._state.lock:
                answer = HANDLERS[ApiKey.FETCH](self._state, held.request)
            if answer.wait_ms and now < held.deadline:
                still.append(held)
            else:
                self._fill(held.conn, held.slot, self._encode(held.conn, held.request, answer.body), now)
        self._held = still

    def _tick_transactions(self) -> None:
        """Abort transactions past their timeout even when no client sends anything."""
        with self._state.lock:
            marked = self._state.tick_transactions()
        if marked:
            self.wake_held_fetches()
            with self._state.changed:
                self._state.changed.notify_all()
        self._at(time.monotonic() + _TXN_TICK_S, self._tick_transactions)

    # --- the loop ------------------------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            self._waker_w.send(b"\x00")
        except OSError:
            pass  # full (a wake-up is pending anyway) or closed (stopping)

    def _run(self) -> None:
        try:
            while not self._stopping:
                timeout = None
                if self._timers:
                    timeout = max(self._timers[0][0] - time.monotonic(), 0.0)
                for key, mask in self._sel.select(timeout):
                    data = key.data
                    if data is None:
                        self._drain_waker()
                    elif isinstance(data, int):
                        self._accept(key.fileobj, data)  # type: ignore[arg-type]
                    else:
                        self._service(data, mask)
                self._run_commands()
                self._run_timers()
        except Exception:
            log.exception("mock cluster loop failed")
        finally:
            self._close_all()

    def _drain_waker(self) -> None:
        try:
            while self._waker_r.recv(4096):
                pass
        except OSError:
            pass

    def _run_commands(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            command()

    def _run_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, fn = heapq.heappop(self._timers)
            fn()

    def _at(self, when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (when, next(self._timer_seq), fn))

    def _accept(self, listener: socket.socket, broker_id: int) -> None:
        while True:
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.warning("broker %d: accept failed: %s", broker_id, e)
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock, broker_id, peer)
            if self._state.config.sasl_mechanisms:
                conn.sasl = SaslSession(tuple(self._state.config.sasl_mechanisms), self._state.sasl_credentials,
                                        broker_id, self._state.sasl_log)
            self._conns.add(conn)
            self._sel.register(sock, selectors.EVENT_READ, conn)
            log.debug("broker %d: connection from %s", broker_id, peer)

    def _service(self, conn: _Conn, mask: int) -> None:
        try:
            if mask & selectors.EVENT_READ:
                self._read(conn)
            if mask & selectors.EVENT_WRITE and not conn.closed:
                self._write(conn)
        except Exception:
            log.exception("broker %d: connection %s failed; closing it", conn.broker_id, conn.peer)
            self._close(conn, "internal error")

    # --- reading and handling ------------------------------------------------------------------------

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._close(conn, f"read failed: {e}")
            return
        if not data:
            self._close(conn, "client closed the connection")
            return
        if conn.closing:
            return
        conn.inbuf += data
        self._take_requests(conn)

    def _take_requests(self, conn: _Conn) -> None:
        """Handle the whole frames in conn.inbuf, in order, until one waits on a control hook."""
        buf = conn.inbuf
        pos = 0
        limit = self._state.config.max_request_bytes
        while len(buf) - pos >= 4 and not conn.closed and not conn.closing and not conn.hook_running:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > limit:
                self._close(conn, f"request frame of {size} bytes (limit {limit})")
                return
            if len(buf) - pos - 4 < size:
                break
            payload = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            if conn.sasl is not None and conn.sasl.raw:
                self._on_raw_sasl_token(conn, conn.sasl, payload)
            else:
                self._on_request(conn, payload)
        if not conn.closed:
            del buf[:pos]

    def _on_request(self, conn: _Conn, payload: bytes) -> None:
        try:
            header, body = decode_request(payload)
        except UnsupportedVersionError as e:
            self._unsupported_version(conn, payload, e)
            return
        except ProtocolError as e:
            self._close(conn, f"undecodable request: {e}")
            return
        api = header.api_key
        sasl = conn.sasl
        if sasl is not None:
            refusal = sasl.refusal(api, time.monotonic())
            if refusal is not None:
                # Kafka's authenticator closes a connection that skips or breaks the SASL exchange.
                self._close(conn, refusal)
                return
        handler = HANDLERS.get(api)  # type: ignore[call-overload]
        if handler is None and not (sasl is not None and api in SASL_APIS):
            # What a broker does with an API it does not know; clients only send what ApiVersions listed.
            self._close(conn, f"unserved api {ApiKey(api).name} v{header.api_version}")
            return
        self._history.append(RequestRecord(ApiKey(api).name, header.api_version, conn.broker_id, time.monotonic(),
                                           header.correlation_id, header.client_id,
                                           sasl.principal if sasl is not None else None))
        log.debug("broker %d: %s v%d correlation %d from %s", conn.broker_id, ApiKey(api).name,
                  header.api_version, header.correlation_id, header.client_id)
        req = Request(header, body, conn.broker_id)
        action = self._faults.take_queued(header, conn.broker_id)
        if action is None and self._faults.has_hooks(api):
            self._consult_hooks(conn, req)
            return
        self._apply(conn, req, action)
        with self._state.changed:
            self._state.changed.notify_all()

    def _consult_hooks(self, conn: _Conn, req: Request) -> None:
        """Run the hooks on a thread of their own, so a hook that blocks stalls only its connection; the loop
        applies their action and goes on with the connection's next request."""
        conn.hook_running = True

        def consult() -> None:
            try:
                action = self._faults.run_hooks(req.header, req.body, req.broker_id)
            except Exception:
                log.exception("broker %d: a control hook for %s failed; closing the connection", conn.broker_id,
                              ApiKey(req.header.api_key).name)
                self._post(lambda: self._close(conn, "control hook failed"))
                return
            self._post(lambda: self._hooks_decided(conn, req, action))

        threading.Thread(target=consult, name=f"mock-hook-{ApiKey(req.header.api_key).name}", daemon=True).start()

    def _hooks_decided(self, conn: _Conn, req: Request, action: Action) -> None:
        # Applied even if the client closed meanwhile: a broker handles a request it has read (a Produce
        # appends), only the answer has nowhere to go.
        conn.hook_running = False
        try:
            self._apply(conn, req, action)
            with self._state.changed:
                self._state.changed.notify_all()
            if not conn.closed:
                self._take_requests(conn)
        except Exception:
            log.exception("broker %d: connection %s failed; closing it", conn.broker_id, conn.peer)
            self._close(conn, "internal error")

    def _post(self, fn: Callable[[], None]) -> None:
        """Have the loop run fn (from any thread)."""
        self._commands.put(fn)
        self._wake()

    def _unsupported_version(self, conn: _Conn, payload: bytes, e: Exception) -> None:
        api, version, correlation_id = _REQUEST_HEAD.unpack_from(payload)
        if api != ApiKey.API_VERSIONS:
            self._close(conn, str(e))
            return
        # KIP-511: answer a too-new ApiVersions at v0 with UNSUPPORTED_VERSION and our ranges, so the client
        # retries with a version we speak.
        slot = self._new_slot(conn)
        body = api_versions_body("UNSUPPORTED_VERSION", sasl=conn.sasl is not None)
        frame = encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)
        log.debug("broker %d: ApiVersions v%d unsupported; answered v0", conn.broker_id, version)
        self._fill(conn, slot, frame, time.monotonic())

    def _apply(self, conn: _Conn, req: Request, action: Action) -> None:
        now = time.monotonic()
        if action is None:
            self._answer(conn, req, self._handle(conn, req), now)
        elif action == DROP:
            conn.closing = True
            slot = self._new_slot(conn)
            slot.drop = True
            self._fill(conn, slot, None, now)
        elif action == DROP_AFTER:
            self._handle(conn, req)
            conn.closing = True
            slot = self._new_slot(conn)
            slot.drop = True
            self._fill(conn, slot, None, now)
        elif isinstance(action, str):
            forced = parse_error_action(action)
            handled = self._handle(conn, req) if forced.handle_first else None
            if handled is not None and handled.body is None:
                return  # acks=0: no answer, error or not
            if req.header.api_key == ApiKey.PRODUCE and req.body.get("acks") == 0:
                return
            with self._state.lock:
                body = error_response(self._state, req, forced.error)
            self._answer(conn, req, Answer(body), now)
        elif isinstance(action, dict):
            self._answer(conn, req, Answer(action), now)
        elif isinstance(action, Throttled):
            answer = self._handle(conn, req)
            if answer.body is not None:
                answer.body["throttle_time_ms"] = action.ms
            self._answer(conn, req, answer, now)
        elif isinstance(action, bytes | bytearray):
            self._fill(conn, self._new_slot(conn), bytes(action), now)
        elif callable(action):
            self._fill(conn, self._new_slot(conn), bytes(action(req.header)), now)
        else:
            raise TypeError(f"a control hook returned {action!r}")

    def _handle(self, conn: _Conn, req: Request) -> Answer:
        if conn.sasl is not None and req.header.api_key in SASL_APIS:
            return self._handle_sasl(conn, conn.sasl, req)
        with self._state.lock:
            # A transaction past its timeout is aborted before anything else sees it.
            marked = self._state.tick_transactions()
            answer = HANDLERS[ApiKey(req.header.api_key)](self._state, req)
        if marked or req.header.api_key in _WAKE_FETCHES:
            self.wake_held_fetches()
        return answer

    def _handle_sasl(self, conn: _Conn, sasl: SaslSession, req: Request) -> Answer:
        now = time.monotonic()
        with self._state.lock:
            if req.header.api_key == ApiKey.SASL_HANDSHAKE:
                reply = sasl.handshake(req.body["mechanism"], req.version, now)
            else:
                reply = sasl.authenticate(bytes(req.body["auth_bytes"] or b""), now,
                                          self._state.config.sasl_session_lifetime_ms)
        log.debug("broker %d: %s v%d from %s -> %s", conn.broker_id, ApiKey(req.header.api_key).name, req.version,
                  conn.peer, "close" if reply.close else sasl.stage)
        return Answer(reply.body, close=reply.close)

    def _on_raw_sasl_token(self, conn: _Conn, sasl: SaslSession, token: bytes) -> None:
        """After SaslHandshake v0 the frames are bare SASL tokens, and so are the answers (KIP-43)."""
        now = time.monotonic()
        with self._state.lock:
            reply = sasl.raw_token(token, now, self._state.config.sasl_session_lifetime_ms)
        if reply is None:
            self._drop_after_answers(conn, now)
        else:
            self._fill(conn, self._new_slot(conn), _SIZE.pack(len(reply)) + reply, now)
        with self._state.changed:
            self._state.changed.notify_all()

    def _drop_after_answers(self, conn: _Conn, now: float) -> None:
        """Close once the answers already queued are written; read nothing more."""
        conn.closing = True
        if conn.closed:
            return
        slot = self._new_slot(conn)
        slot.drop = True
        self._fill(conn, slot, None, now)

    def _answer(self, conn: _Conn, req: Request, answer: Answer, now: float) -> None:
        if answer.close:
            self._answer(conn, req, Answer(answer.body, answer.wait_ms), now)
            conn.closing = True  # nothing more is read meanwhile
            delay = max(self._state.config.sasl_failure_close_delay_ms, 0) / 1000
            self._at(now + delay, lambda: self._drop_after_answers(conn, time.monotonic()))
            return
        if answer.body is None:
            return
        slot = self._new_slot(conn)
        if answer.wait_ms > 0:
            held = _HeldFetch(conn, slot, req, now + answer.wait_ms / 1000)
            self._held.append(held)
            self._at(held.deadline, lambda: self._release_held(held))
            return
        self._fill(conn, slot, self._encode(conn, req, answer.body), now)

    def _release_held(self, held: _HeldFetch) -> None:
        if held not in self._held:
            return
        self._held.remove(held)
        if held.conn.closed:
            return
        with self._state.lock:
            answer = HANDLERS[ApiKey.FETCH](self._state, held.request)
        self._fill(held.conn, held.slot, self._encode(held.conn, held.request, answer.body), time.monotonic())

    def _encode(self, conn: _Conn, req: Request, body: dict[str, Any] | None) -> bytes | None:
        h: RequestHeader = req.header
        try:
            return encode_response(h.api_key, h.api_version, h.correlation_id, body or {})
        except ProtocolError:
            log.exception("broker %d: cannot encode the %s v%d response", conn.broker_id,
                          ApiKey(h.api_key).name, h.api_version)
            return None

    # --- writing -------------------------------------------------------------------------------------

    def _new_slot(self, conn: _Conn) -> _Slot:
        slot = _Slot()
        conn.slots.append(slot)
        return slot

    def _fill(self, conn: _Conn, slot: _Slot, frame: bytes | None, now: float) -> None:
        """frame None on a slot not marked drop means the answer could not be built: close, as a broker would."""
        if conn.closed:
            return
        if frame is None:
            slot.drop = True
        else:
            slot.payload = frame
        broker = self._state.brokers.get(conn.broker_id)
        rtt = broker.rtt_ms / 1000 if broker is not None else 0.0
        slot.ready_at = now + rtt
        if rtt > 0:
            self._at(slot.ready_at, lambda: self._flush(conn))
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        if conn.closed:
            return
        now = time.monotonic()
        while conn.slots and conn.slots[0].filled and conn.slots[0].ready_at <= now:
            slot = conn.slots.popleft()
            if slot.drop:
                conn.slots.clear()
                conn.close_when_written = True
                break
            assert slot.payload is not None
            conn.out.append(memoryview(slot.payload))
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        while conn.out:
            view = conn.out[0]
            try:
                sent = conn.sock.send(view)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                self._close(conn, f"write failed: {e}")
                return
            if sent == len(view):
                conn.out.popleft()
            else:
                conn.out[0] = view[sent:]
        if not conn.out and conn.close_when_written:
            self._close(conn, "dropped by a fault")
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0)
        if events != conn.events:
            conn.events = events
            self._sel.modify(conn.sock, events, conn)

    def _close(self, conn: _Conn, why: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        log.debug("broker %d: closing connection %s: %s", conn.broker_id, conn.peer, why)
        self._conns.discard(conn)
        self._held = [h for h in self._held if h.conn is not conn]
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def _close_all(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        for conn in list(self._conns):
            self._close(conn, "cluster stopping")
        for broker_id in list(self._listeners):
            sock = self._listeners.pop(broker_id)
            try:
                self._sel.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
        for s in (self._waker_r, self._waker_w):
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        try:
            self._sel.close()
        except (OSError, RuntimeError):
            pass
