"""One broker connection: its non-blocking socket, its framing (`Connection`) and its setup machine.

BrokerConnection does the I/O of one node and feeds what happens to the sans-I/O SetupMachine (setup.py),
which decides the steps of the setup; the NetworkClient (client.py) owns the registry of these objects, the
selector, the timers and closing. Every step that can fail returns the KafkaError to close the connection
with (None when all is well): closing fails the requests in flight and starts the reconnect backoff, which
is the client's business.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import selectors
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkajet.addresses import format_address
from kafkajet.errors import KafkaConnectionError, KafkaError, ProtocolError, SslAuthenticationError
from kafkajet.network.connection import (
    DEFAULT_MAX_RESPONSE_SIZE,
    Connection,
    CorruptStreamError,
    InFlightRequest,
    NotKafkaError,
)
from kafkajet.network.setup import (
    CONNECTED_STATES,
    SETUP_TIMED_STATES,
    ConnectionState,
    SendRequest,
    SetupMachine,
    StartTls,
)
from kafkajet.network.throttle import client_throttle_ms
from kafkajet.network.tls_io import is_ssl_error, join_for_tls, tls_error, tls_send_error, tls_would_block
from kafkajet.network.traffic import Traffic
from kafkajet.protocol import ApiKey, decode_response, encode_request
from kafkajet.security.connection import PLAINTEXT, ConnectionSecurity

log = logging.getLogger("kafkajet.network")

CONNECT_IN_PROGRESS = {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, errno.EAGAIN}
RECV_SIZE = 256 * 1024
# One poll reads at most this many chunks per socket, so one busy broker cannot starve the others.
MAX_READS_PER_POLL = 16

class _SetupRequest:
    """Marks the requests of the setup (ApiVersions, SASL): answered inside the connection, never to a caller."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<setup request>"


SETUP_REQUEST = _SetupRequest()

@dataclass(slots=True)
class ClientResponse:
    """A caller's request that finished: answered (body), failed (error), or written (fire-and-forget)."""

    node_id: int
    api_key: int
    api_version: int
    correlation_id: int
    body: dict[str, Any] | None
    error: KafkaError | None
    context: Any
    latency_ms: float


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """What every connection of one client shares."""

    client_id: str = "kafkajet"
    security: ConnectionSecurity = PLAINTEXT
    send_buffer_bytes: int = -1
    receive_buffer_bytes: int = -1
    max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE
    rng: random.Random = field(default_factory=random.Random)


class BrokerConnection:
    __slots__ = (
        "node_id", "host", "port", "bootstrap", "settings", "setup", "sock", "fd", "conn", "events", "tls",
        "tls_want", "failed_attempts", "failed_connects", "reconnect_backoff_ms", "last_attempt_ms", "last_error",
        "versions_cache", "last_activity_ms", "addr_index", "throttle_until_ms", "_next_id", "traffic",
        "reauth_started_ms",
    )

    def __init__(self, node_id: int, host: str, port: int, bootstrap: bool, settings: ConnectionSettings,
                 next_correlation_id: Callable[[], int], traffic: Traffic | None = None) -> None:
        self.node_id = node_id
        self.traffic = traffic or Traffic()
        # When the KIP-368 re-authentication under way began (its latency is a metric); None when none is.
        self.reauth_started_ms: float | None = None
        self.host = host
        self.port = port
        self.bootstrap = bootstrap
        self.settings = settings
        self.setup = SetupMachine(self.describe(), host, settings.security, settings.rng)
        self.sock: socket.socket | None = None
        self.fd = -1  # what the client's selector knows the socket by: the same before and after TLS wraps it
        self.conn: Connection | None = None
        self.events = 0  # selector interest currently registered; 0 = not registered
        self.tls = False  # sock is an SSLSocket
        self.tls_want = selectors.EVENT_WRITE  # what the TLS handshake waits for
        # The client's bookkeeping across connections of this node.
        self.failed_attempts = 0  # consecutive failures of any kind: the reconnect backoff grows with them
        self.failed_connects = 0  # consecutive connects (TCP + TLS) that failed: the setup timeout grows with them
        self.reconnect_backoff_ms = 0.0
        self.last_attempt_ms = float("-inf")
        self.last_error: KafkaError | None = None
        self.versions_cache: dict[int, int] = {}
        self.last_activity_ms = 0.0
        self.addr_index = 0
        # Quota throttling (KIP-219): nothing is sent before this time. Kept across reconnects, as Java's
        # ClusterConnectionStates keeps it: the quota is the client's, not the connection's.
        self.throttle_until_ms = float("-inf")
        self._next_id = next_correlation_id

    @property
    def state(self) -> ConnectionState:
        return self.setup.state

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    def describe(self) -> str:
        return f"node {self.node_id} ({self.address})"

    def move(self, host: str, port: int) -> None:
        """The node now lives at host:port (only while closed)."""
        self.host, self.port, self.addr_index = host, port, 0
        self.setup = SetupMachine(self.describe(), host, self.settings.security, self.settings.rng)

    # --- connecting -------------------------------------------------------------------------------

    def connect(self, now: float, setup_timeout_ms: float) -> KafkaError | None:
        """Start a non-blocking connect; the error when it failed at once (no socket is left open then)."""
        self.last_attempt_ms = now
        try:
            infos = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
        except OSError as e:
            return KafkaConnectionError(f"cannot resolve {self.describe()}: {e}")
        family, type_, proto, _, sockaddr = infos[self.addr_index % len(infos)]
        sock = socket.socket(family, type_, proto)
        settings = self.settings
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if settings.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, settings.send_buffer_bytes)
            if settings.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, settings.receive_buffer_bytes)
            err = sock.connect_ex(sockaddr)
        except OSError as e:
            sock.close()
            return KafkaConnectionError(f"cannot connect to {self.describe()}: {e}")
        if err and err not in CONNECT_IN_PROGRESS:
            sock.close()
            return self._connect_error(err)
        log.debug("connecting to %s (%s)", self.describe(), sockaddr)
        self.sock = sock
        self.fd = sock.fileno()
        self.conn = Connection(settings.max_response_size)
        self.setup.connecting(now, setup_timeout_ms)
        self.last_activity_ms = now
        if err == 0:
            self.traffic.connection_created()
            return self._run(self.setup.connected(now), now)
        return None

    def finish_connect(self, now: float) -> KafkaError | None:
        """The socket became writable while connecting: the connect succeeded or failed."""
        assert self.sock is not None
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            return self._connect_error(err)
        self.traffic.connection_created()
        return self._run(self.setup.connected(now), now)

    def drive_tls(self, now: float) -> KafkaError | None:
        """Take the TLS handshake as far as the socket allows."""
        import ssl

        from kafkajet.security.tls import handshake_error

        sock = self.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self.tls_want = selectors.EVENT_READ
            return None
        except ssl.SSLWantWriteError:
            self.tls_want = selectors.EVENT_WRITE
            return None
        except OSError as e:
            return handshake_error(self.describe(), e)
        log.debug("TLS handshake with %s done: %s, %s", self.describe(), sock.version(),
                  (sock.cipher() or ("?",))[0])
        return self._run(self.setup.tls_done(now), now)

    def reauthenticate(self, now: float) -> KafkaError | None:
        """Start KIP-368 re-authentication (nothing may be in flight)."""
        try:
            request = self.setup.reauthenticate()
        except KafkaError as e:
            return e
        self.reauth_started_ms = now
        return self._run(request, now)

    def _start_tls(self, now: float) -> KafkaError | None:
        sock, context = self.sock, self.settings.security.ssl_context
        assert sock is not None and context is not None
        try:
            # The SSLSocket takes over the file descriptor: the selector's registration (by fd) stays valid.
            self.sock = context.wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False)
        except (ValueError, OSError) as e:  # ssl.SSLError is an OSError
            return SslAuthenticationError(f"TLS handshake with {self.describe()} failed: {e}")
        self.tls = True
        self.tls_want = selectors.EVENT_WRITE
        from kafkajet.security.tls import NOT_TLS_HINT  # loaded already: the context above is TLS

        # The cause a caller's wait (max.block.ms) names if it ends before the handshake does, however short.
        self.last_error = KafkaConnectionError(f"TLS handshake with {self.describe()} not answered; {NOT_TLS_HINT}")
        return self.drive_tls(now)

    def _run(self, action: SendRequest | StartTls | None, now: float) -> KafkaError | None:
        """Carry out what the setup machine asked for."""
        if isinstance(action, StartTls):
            return self._start_tls(now)
        if self.setup.state not in SETUP_TIMED_STATES:
            self.failed_connects = 0  # the transport is up: the next connect starts at the base setup timeout
        if action is None:
            # Ready: Java counts a channel that needed TLS or SASL to get there (a PLAINTEXT one is ready at once).
            if self.reauth_started_ms is None:
                if self.tls or self.settings.security.sasl is not None:
                    self.traffic.authenticated()
            else:
                self.traffic.reauthenticated(now - self.reauth_started_ms)
                self.reauth_started_ms = None
            self.failed_attempts = 0
            self.last_error = None
            self.last_activity_ms = now
            return None
        assert self.conn is not None
        correlation_id = action.correlation_id if action.correlation_id is not None else self._next_id()
        frame = encode_request(action.api_key, action.version, correlation_id, self.settings.client_id, action.body)
        self.conn.send_request(frame, correlation_id=correlation_id, api_key=int(action.api_key),
                               api_version=action.version, now=now, context=SETUP_REQUEST)
        return None

    def _connect_error(self, err: int) -> KafkaConnectionError:
        return KafkaConnectionError(f"connection to {self.describe()} failed: [Errno {err}] {os.strerror(err)}")

    # --- I/O of a connected socket ----------------------------------------------------------------

    def interest(self) -> int:
        """The selector events this connection waits for."""
        state = self.setup.state
        if state is ConnectionState.CONNECTING:
            return selectors.EVENT_WRITE
        if state is ConnectionState.TLS_HANDSHAKE:
            return self.tls_want
        conn = self.conn
        if conn is not None and conn.has_pending_output:
            return selectors.EVENT_READ | selectors.EVENT_WRITE
        return selectors.EVENT_READ

    def write(self, now: float, out: list[ClientResponse]) -> KafkaError | None:
        """Write queued requests as far as the socket takes them; fire-and-forget requests now fully written
        go to `out`. Returns the error to close with."""
        conn, sock = self.conn, self.sock
        assert conn is not None and sock is not None
        while conn.has_pending_output:
            buffers = conn.data_to_send()
            try:
                if len(buffers) == 1:
                    n = sock.send(buffers[0])
                elif self.tls:
                    n = sock.send(join_for_tls(buffers))  # SSLSocket has no sendmsg()
                else:
                    n = sock.sendmsg(buffers)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                if self.tls and tls_would_block(e):
                    break
                error = tls_send_error(self, e) if self.tls else None
                return error or KafkaConnectionError(f"connection to {self.describe()} failed while sending: {e}")
            self.last_activity_ms = now
            for req in conn.bytes_sent(n):
                self.traffic.request_written(req.size)
                if not req.expect_response:
                    out.append(self.response(req, None, None, now))
            if n < sum(len(b) for b in buffers):
                break  # the socket buffer is full; the selector tells us when it drains
        return None

    def read(self, now: float, out: list[ClientResponse]) -> KafkaError | None:
        """Read what the socket has (up to MAX_READS_PER_POLL chunks); the callers' requests answered go to
        `out`. Returns the error to close with."""
        for _ in range(MAX_READS_PER_POLL):
            sock = self.sock
            assert sock is not None
            try:
                data = sock.recv(RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as e:
                if self.tls and tls_would_block(e):
                    return None
                return self._read_error(e)
            if not data:
                return self._closed_by_broker()
            self.last_activity_ms = now
            error = self._on_data(data, now, out)
            if error is not None:
                return error
            # A TLS read returns at most one record (16 KiB): short reads say nothing there, so TLS goes on
            # until the socket would block (what is left after the cap is read by the next poll).
            if len(data) < RECV_SIZE and not self.tls:
                break
        return None

    def _on_data(self, data: bytes, now: float, out: list[ClientResponse]) -> KafkaError | None:
        assert self.conn is not None
        broken: CorruptStreamError | None = None
        try:
            completed = self.conn.receive_data(data)
        except ProtocolError as e:
            # Responses that came intact before the corruption are answered first; only then does the close
            # fail what is still in flight. Dropping them would leave their requests with no outcome at all.
            completed = e.completed if isinstance(e, CorruptStreamError) else []
            broken = (NotKafkaError(f"{self.describe()} is {e}") if isinstance(e, NotKafkaError)
                      else CorruptStreamError(f"corrupt response stream from {self.describe()}: {e}"))
        for _, payload in completed:
            self.traffic.response_read(len(payload) + 4)  # as Java counts it: with the size prefix
        for i, (req, payload) in enumerate(completed):
            if req.context is SETUP_REQUEST:
                try:
                    action = self.setup.on_response(req.api_key, req.api_version, payload, req.send_time_ms, now)
                except KafkaError as e:
                    return e
                error = self._run(action, now)
                if error is not None:
                    return error
                continue
            try:
                _, body = decode_response(ApiKey(req.api_key), req.api_version, payload)
            except Exception as e:  # malformed bytes, or a decoder bug: either way the stream is suspect
                error = CorruptStreamError(
                    f"cannot decode {ApiKey(req.api_key).name} v{req.api_version} response from "
                    f"{self.describe()}: {e}")
                out.append(self.response(req, None, error, now))
                out.extend(self.response(later, None, error, now) for later, _ in completed[i + 1:]
                           if later.context is not SETUP_REQUEST)
                return error
            self._maybe_throttle(req, body, now)
            out.append(self.response(req, body, None, now))
        return broken

    def _maybe_throttle(self, req: InFlightRequest, body: dict[str, Any], now: float) -> None:
        throttle_ms = client_throttle_ms(req.api_key, req.api_version, body)
        # A window never shrinks: a later answer naming a shorter one does not lift the earlier one early.
        if throttle_ms and now + throttle_ms > self.throttle_until_ms:
            self.throttle_until_ms = now + throttle_ms
            log.debug("%s throttled for %d ms by its %s v%d answer (quota)", self.describe(), throttle_ms,
                      ApiKey(req.api_key).name, req.api_version)

    def response(self, req: InFlightRequest, body: dict[str, Any] | None, error: KafkaError | None,
                 now: float) -> ClientResponse:
        return ClientResponse(self.node_id, req.api_key, req.api_version, req.correlation_id, body, error,
                              req.context, now - req.send_time_ms)

    def _read_error(self, e: OSError) -> KafkaError:
        if self.tls:
            if is_ssl_error(e):
                return tls_error(self, e, "reading")  # type: ignore[arg-type]
        return KafkaConnectionError(f"connection to {self.describe()} failed while reading: {e}")

    def _closed_by_broker(self) -> KafkaError:
        hint = ""
        if self.tls and self.setup.state is ConnectionState.API_VERSIONS:
            # What a TLS 1.3 broker that refuses our certificate looks like when it sends no alert.
            hint = (" right after the TLS handshake (did it refuse our client certificate? "
                    + ("check it)" if self.settings.security.client_certificate else "none is configured)"))
        return KafkaConnectionError(f"connection to {self.describe()} was closed by the broker{hint}")

    def tls_buffered(self) -> bool:
        """Decrypted bytes wait inside the TLS layer, where the selector cannot see them."""
        import ssl

        return isinstance(self.sock, ssl.SSLSocket) and self.setup.state in CONNECTED_STATES and self.sock.pending() > 0

    # --- closing ----------------------------------------------------------------------------------

    def close(self) -> list[InFlightRequest]:
        """Close the socket (the client has unregistered it); returns the callers' requests that were
        unfinished, oldest first."""
        if self.sock is not None:
            self.sock.close()
            self.traffic.connection_closed()
        aborted = [] if self.conn is None else [r for r in self.conn.abort_all() if r.context is not SETUP_REQUEST]
        self.sock = None
        self.fd = -1
        self.conn = None
        self.events = 0
        self.tls = False
        self.setup.reset()
        self.versions_cache.clear()
        return aborted
