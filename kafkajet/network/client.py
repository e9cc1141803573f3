"""NetworkClient: one non-blocking connection per broker under `selectors`, as Java's NetworkClient.

Used by a single thread (the producer's sender); only wakeup() may be called from other threads. Every
method that depends on time takes `now` in milliseconds from the caller's clock; poll() advances it by
the real time spent in select(), so a test may run the client on a shifted (fake) clock.

Per-node state machine::

    DISCONNECTED -> CONNECTING -> [TLS_HANDSHAKE] -> API_VERSIONS -> [AUTHENTICATING] -> READY
         ^_____________ any failure, timeout, idle expiry or disconnect() _____________|

TLS_HANDSHAKE runs for security.protocol SSL and SASL_SSL, AUTHENTICATING (SaslHandshake + SaslAuthenticate)
for SASL_*; ApiVersions comes before SASL as in Java, so the SASL request versions are negotiated.

Re-authentication (KIP-368): when the broker gives the SASL session a lifetime, the connection is marked
due at a random 85-95 % of it. From then on it takes no new requests; once the requests already in flight
are answered it goes back to AUTHENTICATING for a new SaslHandshake + SaslAuthenticate on the same socket,
then to READY. Nothing in flight is lost and responses never interleave with the SASL exchange.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import random
import selectors
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkajet.addresses import format_address, parse_servers
from kafkajet.errors import (
    AuthenticationError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    ProtocolError,
    RequestTimedOutError,
    SslAuthenticationError,
)
from kafkajet.network.backoff import ExponentialBackoff
from kafkajet.network.connection import (
    DEFAULT_MAX_RESPONSE_SIZE,
    Connection,
    CorruptStreamError,
    InFlightRequest,
)
from kafkajet.network.sasl_exchange import SaslExchange, SaslRequest
from kafkajet.network.versions import (
    MAX_API_VERSIONS_ATTEMPTS,
    VersionRanges,
    api_versions_request_body,
    handle_api_versions_response,
    max_api_versions_version,
    negotiate,
)
from kafkajet.network.waker import Waker
from kafkajet.protocol import ApiKey, decode_response, encode_request, encode_request_buffers
from kafkajet.security.connection import PLAINTEXT, ConnectionSecurity

if TYPE_CHECKING:
    import ssl  # imported where TLS is used: plaintext producers never load OpenSSL (about 6 MB)

log = logging.getLogger("kafkajet.network")

_RECV_SIZE = 256 * 1024
# One poll reads at most this many chunks per socket, so one busy broker cannot starve the others.
_MAX_READS_PER_POLL = 16
_MAX_CORRELATION_ID = 2**31 - 1
_TLS_WRITE_CHUNK = 256 * 1024  # bytes joined for one SSLSocket.send(); a copy, so bounded
_CONNECT_IN_PROGRESS = {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, errno.EAGAIN}


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    TLS_HANDSHAKE = "tls_handshake"
    API_VERSIONS = "api_versions"
    AUTHENTICATING = "authenticating"
    READY = "ready"


class _Internal:
    """Marks requests the client sends for itself (ApiVersions, SASL); they never reach the caller."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<internal {self.name}>"


_API_VERSIONS = _Internal("ApiVersions")
_SASL = _Internal("SASL")


@dataclass(slots=True)
class ClientResponse:
    node_id: int
    api_key: int
    api_version: int
    correlation_id: int
    body: dict[str, Any] | None
    error: KafkaError | None
    context: Any
    latency_ms: float


class _Node:
    __slots__ = (
        "node_id", "host", "port", "bootstrap", "state", "sock", "conn", "events", "failed_attempts",
        "reconnect_backoff_ms", "last_attempt_ms", "setup_deadline_ms", "last_error", "api_versions",
        "versions_cache", "last_activity_ms", "api_versions_attempts", "addr_index", "tls", "tls_want",
        "sasl", "reauth_at_ms", "reauth_due",
    )

    def __init__(self, node_id: int, host: str, port: int, bootstrap: bool) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.bootstrap = bootstrap
        self.state = ConnectionState.DISCONNECTED
        self.sock: socket.socket | None = None
        self.conn: Connection | None = None
        self.events = 0  # selector interest currently registered; 0 = not registered
        self.failed_attempts = 0
        self.reconnect_backoff_ms = 0.0
        self.last_attempt_ms = float("-inf")
        self.setup_deadline_ms = float("inf")
        self.last_error: KafkaError | None = None
        self.api_versions: VersionRanges | None = None
        self.versions_cache: dict[int, int] = {}
        self.last_activity_ms = 0.0
        self.api_versions_attempts = 0
        self.addr_index = 0
        self.tls = False  # sock is an SSLSocket
        self.tls_want = selectors.EVENT_WRITE  # what the TLS handshake waits for
        self.sasl: SaslExchange | None = None
        self.reauth_at_ms = float("inf")
        self.reauth_due = False

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    def describe(self) -> str:
        return f"node {self.node_id} ({self.address})"


class NetworkClient:
    def __init__(
        self,
        *,
        client_id: str = "kafkajet",
        request_timeout_ms: float = 30000,
        max_in_flight_requests_per_connection: int = 5,
        reconnect_backoff_ms: float = 50,
        reconnect_backoff_max_ms: float = 1000,
        connections_max_idle_ms: float = 540000,
        socket_connection_setup_timeout_ms: float = 10000,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        security: ConnectionSecurity | None = None,
    ) -> None:
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be at least 1")
        self.client_id = client_id
        self.request_timeout_ms = float(request_timeout_ms)
        self.max_in_flight = int(max_in_flight_requests_per_connection)
        self.connections_max_idle_ms = float(connections_max_idle_ms)
        self.setup_timeout_ms = float(socket_connection_setup_timeout_ms)
        self.send_buffer_bytes = int(send_buffer_bytes)
        self.receive_buffer_bytes = int(receive_buffer_bytes)
        self.max_response_size = int(max_response_size)
        self.security = security or PLAINTEXT
        self._backoff = ExponentialBackoff(reconnect_backoff_ms, 2, reconnect_backoff_max_ms, 0.2)
        self._nodes: dict[int, _Node] = {}
        self._selector = selectors.DefaultSelector()
        self._waker = Waker()
        self._selector.register(self._waker.reader, selectors.EVENT_READ, None)
        self._pending: list[ClientResponse] = []
        self._auth_failures: list[AuthenticationError] = []
        self._correlation_id = 0
        self._rng = random.Random()
        self._closed = False
        # The latest `now` a caller gave us: calls without one (set_nodes, disconnect, close) stay on the
        # caller's clock, which may be a test's fake one.
        self._last_now: float | None = None

    # --- nodes ------------------------------------------------------------------------------------

    def add_bootstrap(self, servers: Any) -> None:
        """Bootstrap servers ('h:p,h2:p', ['h:p'], [(h, p)]) become nodes -1, -2, ... in order."""
        known = {(n.host, n.port) for n in self._nodes.values() if n.bootstrap}
        next_id = -1 - sum(1 for n in self._nodes.values() if n.bootstrap)
        for host, port in parse_servers(servers):
            if (host, port) in known:
                continue
            known.add((host, port))
            self._nodes[next_id] = _Node(next_id, host, port, bootstrap=True)
            next_id -= 1

    def set_nodes(self, nodes: Mapping[int, tuple[str, int]]) -> None:
        """Adopt the brokers from a metadata response; connections to vanished or moved nodes are closed."""
        now = self._now()
        for node_id, (host, port) in nodes.items():
            if node_id < 0:
                continue
            node = self._nodes.get(node_id)
            if node is None:
                self._nodes[node_id] = _Node(node_id, host, port, bootstrap=False)
            elif (node.host, node.port) != (host, port):
                self._close(node, now, KafkaConnectionError(
                    f"{node.describe()} moved to {format_address(host, port)}"), failure=False)
                node.host, node.port, node.addr_index = host, port, 0
        for node in list(self._nodes.values()):
            if node.bootstrap:
                # Once real brokers are known the bootstrap connection is only a duplicate of one of them;
                # close it when it has nothing left to answer rather than keep it until idle expiry.
                if nodes and node.sock is not None and self._user_in_flight(node) == 0:
                    self._close(node, now, KafkaConnectionError("bootstrap connection no longer needed"),
                                failure=False)
            elif node.node_id not in nodes:
                self._close(node, now, KafkaConnectionError(
                    f"{node.describe()} is no longer in the cluster metadata"), failure=False)
                del self._nodes[node.node_id]

    def nodes(self) -> dict[int, tuple[str, int]]:
        return {n.node_id: (n.host, n.port) for n in self._nodes.values()}

    def state(self, node_id: int) -> ConnectionState:
        node = self._nodes.get(node_id)
        return ConnectionState.DISCONNECTED if node is None else node.state

    # --- readiness --------------------------------------------------------------------------------

    def is_ready(self, node_id: int, now: float) -> bool:
        """As ready(), without side effects."""
        node = self._nodes.get(node_id)
        return node is not None and self._can_send(node)

    def ready(self, node_id: int, now: float) -> bool:
        """True if a request can be sent to the node now; otherwise start connecting if backoff allows."""
        self._last_now = now
        node = self._nodes.get(node_id)
        if node is None or self._closed:
            return False
        if self._can_send(node):
            return True
        if node.state is ConnectionState.DISCONNECTED and self._backoff_remaining(node, now) <= 0:
            self._connect(node, now)
        return False

    def connection_delay(self, node_id: int, now: float) -> float:
        """Milliseconds until the node is worth trying: the rest of its reconnect backoff, else 0."""
        node = self._nodes.get(node_id)
        if node is None:
            return self._backoff.initial_ms  # unknown node: worth asking again after metadata may know it
        if node.state is ConnectionState.DISCONNECTED:
            return self._backoff_remaining(node, now)
        return 0.0

    def last_error(self, node_id: int) -> KafkaError | None:
        """Why the node's last connection attempt or connection failed; None once it is ready again."""
        node = self._nodes.get(node_id)
        return None if node is None else node.last_error

    def api_version(self, node_id: int, api_key: int) -> int:
        """The version send() uses by default: the highest both we and the broker support."""
        node = self._nodes.get(node_id)
        if node is None or node.api_versions is None:
            raise IllegalStateError(f"no negotiated API versions for node {node_id}: it is not connected")
        cached = node.versions_cache.get(api_key)
        if cached is None:
            cached = node.versions_cache[api_key] = negotiate(node.api_versions, api_key)
        return cached

    def authentication_failures(self) -> list[AuthenticationError]:
        """Authentication failures (TLS or SASL) since the last call, oldest first; each one is reported once."""
        out, self._auth_failures = self._auth_failures, []
        return out

    def broker_api_versions(self, node_id: int) -> VersionRanges | None:
        """The broker's advertised (min, max) per api key, once ApiVersions has completed."""
        node = self._nodes.get(node_id)
        return None if node is None or node.api_versions is None else dict(node.api_versions)

    def least_loaded_node(self, now: float) -> int | None:
        """A ready node with the fewest requests in flight, else one connecting, else one connectable.

        Nodes in reconnect backoff are skipped; None means every candidate is backing off.
        """
        known = [n for n in self._nodes.values() if not n.bootstrap]
        bootstrap = [n for n in self._nodes.values() if n.bootstrap]
        if known:
            found = self._least_loaded(known, now)
            # Every known broker failed: go back to the bootstrap list (Java's rebootstrap).
            return found if found is not None else self._least_loaded(bootstrap, now)
        return self._least_loaded(bootstrap, now)

    def in_flight_count(self, node_id: int | None = None) -> int:
        if node_id is not None:
            node = self._nodes.get(node_id)
            return 0 if node is None else self._user_in_flight(node)
        return sum(self._user_in_flight(n) for n in list(self._nodes.values()))

    def has_in_flight(self) -> bool:
        return bool(self._pending) or self.in_flight_count() > 0

    # --- requests ---------------------------------------------------------------------------------

    def send(
        self,
        node_id: int,
        api_key: int,
        body: dict[str, Any],
        now: float,
        *,
        version: int | None = None,
        expect_response: bool = True,
        context: Any = None,
    ) -> int:
        """Queue a request (written by poll()); returns its correlation id. IllegalStateError if not ready.

        With expect_response=False (Produce acks=0) poll() reports the request once its bytes are written.
        """
        self._last_now = now
        node = self._nodes.get(node_id)
        if node is None or not self._can_send(node):
            state = "unknown" if node is None else node.state.value
            raise IllegalStateError(f"cannot send to node {node_id}: it is not ready (state {state})")
        assert node.conn is not None
        api = ApiKey(api_key)
        if version is None:
            version = self.api_version(node_id, api)
        correlation_id = self._next_correlation_id()
        frame = encode_request_buffers(api, version, correlation_id, self.client_id, body)
        node.conn.send_request(
            frame, correlation_id=correlation_id, api_key=int(api), api_version=version, now=now,
            expect_response=expect_response, context=context,
        )
        node.last_activity_ms = now
        return correlation_id

    def poll(self, timeout_ms: float, now: float) -> list[ClientResponse]:
        """Do all pending I/O, waiting up to timeout_ms (less if a timer is due, or on wakeup()).

        Returns every request completed since the last call: answered, failed (each request of a closed
        connection exactly once) or, for fire-and-forget requests, fully written.
        """
        if self._closed:
            out, self._pending = self._pending, []
            return out
        # Writing before select saves a round trip: most requests fit the socket buffer at once.
        self.write_pending(now)
        for node in self._nodes.values():
            self._update_interest(node)
        buffered = self._tls_buffered()
        wait = 0.0 if self._pending or buffered else min(timeout_ms, self._next_deadline(now) - now)
        started = time.monotonic()
        events = self._selector.select(None if wait == float("inf") else max(0.0, wait) / 1000.0)
        now += (time.monotonic() - started) * 1000.0
        self._last_now = now
        for key, mask in events:
            node = key.data
            if node is None:
                self._waker.drain()
                continue
            if key.fileobj is not node.sock:
                continue  # closed earlier in this loop
            if node.state is ConnectionState.CONNECTING:
                self._finish_connect(node, now)
                continue
            if node.state is ConnectionState.TLS_HANDSHAKE:
                self._drive_tls(node, now)
                continue
            if mask & selectors.EVENT_READ:
                self._read(node, now)
            if mask & selectors.EVENT_WRITE and node.sock is not None and node.state in _CONNECTED:
                self._write(node, now)
        for node in buffered:
            # Decrypted bytes left inside the TLS layer: the selector cannot see them, so read them here.
            if node.sock is not None and node.state in _CONNECTED:
                self._read(node, now)
        self._expire(now)
        out, self._pending = self._pending, []
        return out

    def write_pending(self, now: float) -> None:
        """Write queued requests as far as the sockets take them now, without waiting (poll() does this
        first too); a connection whose output is all written can take its next request at once."""
        for node in list(self._nodes.values()):
            if node.conn is not None and node.conn.has_pending_output and node.state in _CONNECTED:
                self._write(node, now)

    def wakeup(self) -> None:
        """Interrupt a blocking poll(); safe from any thread, cheap when called often."""
        self._waker.wake()

    def disconnect(self, node_id: int) -> None:
        """Close the node's connection; its requests come back failed from the next poll()."""
        node = self._nodes.get(node_id)
        if node is not None and node.sock is not None:
            self._close(node, self._now(), KafkaConnectionError(
                f"connection to {node.describe()} closed by the client"), failure=True, record=False)

    def close(self) -> None:
        """Close every connection; a later poll() still returns the requests that were in flight."""
        if self._closed:
            return
        now = self._now()
        for node in self._nodes.values():
            if node.sock is not None:
                self._close(node, now, KafkaConnectionError(
                    f"connection to {node.describe()} closed: the client is closing"), failure=False)
        self._closed = True
        self._selector.close()
        self._waker.close()

    # --- connection setup -------------------------------------------------------------------------

    def _connect(self, node: _Node, now: float) -> None:
        node.last_attempt_ms = now
        try:
            infos = socket.getaddrinfo(node.host, node.port, 0, socket.SOCK_STREAM)
        except OSError as e:
            self._fail_setup(node, now, KafkaConnectionError(f"cannot resolve {node.describe()}: {e}"))
            return
        family, type_, proto, _, sockaddr = infos[node.addr_index % len(infos)]
        sock = socket.socket(family, type_, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
            err = sock.connect_ex(sockaddr)
        except OSError as e:
            sock.close()
            self._fail_setup(node, now, KafkaConnectionError(f"cannot connect to {node.describe()}: {e}"))
            return
        if err and err not in _CONNECT_IN_PROGRESS:
            sock.close()
            self._fail_setup(node, now, _connect_error(node, err))
            return
        log.debug("connecting to %s (%s)", node.describe(), sockaddr)
        node.sock = sock
        node.conn = Connection(self.max_response_size)
        node.state = ConnectionState.CONNECTING
        node.setup_deadline_ms = now + self.setup_timeout_ms
        node.last_activity_ms = now
        node.api_versions_attempts = 0
        if err == 0:
            self._on_transport_connected(node, now)
        self._update_interest(node)

    def _finish_connect(self, node: _Node, now: float) -> None:
        assert node.sock is not None
        err = node.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._close(node, now, _connect_error(node, err), failure=True)
            return
        self._on_transport_connected(node, now)

    def _on_transport_connected(self, node: _Node, now: float) -> None:
        log.debug("connected to %s", node.describe())
        if self.security.ssl_context is not None:
            self._start_tls(node, now)
            return
        node.setup_deadline_ms = float("inf")
        self._start_api_versions(node, now, max_api_versions_version())

    # --- TLS --------------------------------------------------------------------------------------

    def _start_tls(self, node: _Node, now: float) -> None:
        sock, context = node.sock, self.security.ssl_context
        assert sock is not None and context is not None
        # The handshake keeps the connection setup deadline (socket.connection.setup.timeout.ms).
        if node.events:
            self._selector.unregister(sock)
            node.events = 0
        try:
            node.sock = context.wrap_socket(sock, server_hostname=node.host, do_handshake_on_connect=False)
        except (ValueError, OSError) as e:  # ssl.SSLError is an OSError
            node.sock = None
            sock.close()
            self._close(node, now, SslAuthenticationError(
                f"TLS handshake with {node.describe()} failed: {e}"), failure=True)
            return
        node.tls = True
        node.state = ConnectionState.TLS_HANDSHAKE
        self._drive_tls(node, now)

    def _drive_tls(self, node: _Node, now: float) -> None:
        import ssl

        from kafkajet.security.tls import handshake_error

        sock = node.sock
        assert isinstance(sock, ssl.SSLSocket)
        error: KafkaError
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            node.tls_want = selectors.EVENT_READ
            self._update_interest(node)
            return
        except ssl.SSLWantWriteError:
            node.tls_want = selectors.EVENT_WRITE
            self._update_interest(node)
            return
        except OSError as e:
            error = handshake_error(node.describe(), e)
        else:
            log.debug("TLS handshake with %s done: %s, %s", node.describe(), sock.version(),
                      (sock.cipher() or ("?",))[0])
            node.setup_deadline_ms = float("inf")
            self._start_api_versions(node, now, max_api_versions_version())
            return
        self._close(node, now, error, failure=True)

    def _tls_buffered(self) -> list[_Node]:
        if self.security.ssl_context is None:
            return []
        import ssl

        return [n for n in self._nodes.values()
                if n.tls and isinstance(n.sock, ssl.SSLSocket) and n.state in _CONNECTED and n.sock.pending()]

    def _tls_error(self, node: _Node, e: ssl.SSLError, during: str) -> KafkaError:
        import ssl

        from kafkajet.security.tls import verification_reason

        reason = verification_reason(e)
        if node.state is not ConnectionState.READY and not isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            # With TLS 1.3 the broker checks our certificate after our side of the handshake is done, so
            # its refusal (an alert such as "certificate required") arrives with the first response.
            return SslAuthenticationError(f"TLS handshake with {node.describe()} failed: the broker refused "
                                          f"the connection: {reason}")
        return KafkaConnectionError(f"TLS error on the connection to {node.describe()} while {during}: {reason}")

    def _start_api_versions(self, node: _Node, now: float, version: int) -> None:
        assert node.conn is not None
        node.state = ConnectionState.API_VERSIONS
        node.api_versions_attempts += 1
        correlation_id = self._next_correlation_id()
        frame = encode_request(ApiKey.API_VERSIONS, version, correlation_id, self.client_id,
                               api_versions_request_body())
        node.conn.send_request(frame, correlation_id=correlation_id, api_key=int(ApiKey.API_VERSIONS),
                               api_version=version, now=now, context=_API_VERSIONS)
        self._update_interest(node)

    def _on_api_versions(self, node: _Node, req: InFlightRequest, payload: bytes, now: float) -> None:
        try:
            outcome = handle_api_versions_response(payload, req.api_version)
        except Exception as e:  # also a decoder bug: it must not escape into the sender thread
            error: KafkaError
            if isinstance(e, KafkaError) and not isinstance(e, ProtocolError):
                error = KafkaConnectionError(f"ApiVersions with {node.describe()} failed: {e}")
            else:
                error = CorruptStreamError(f"bad ApiVersions response from {node.describe()}: {e}")
            error.__cause__ = e
            self._close(node, now, error, failure=True)
            return
        if outcome.retry_version is not None:
            if node.api_versions_attempts >= MAX_API_VERSIONS_ATTEMPTS:
                self._close(node, now, KafkaConnectionError(
                    f"{node.describe()} keeps rejecting our ApiVersions versions"), failure=True)
                return
            log.debug("%s does not support ApiVersions v%d; retrying at v%d",
                      node.describe(), req.api_version, outcome.retry_version)
            self._start_api_versions(node, now, outcome.retry_version)
            return
        assert outcome.ranges is not None
        node.api_versions = outcome.ranges
        node.versions_cache.clear()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: ApiVersions v%d; versions chosen: %s", node.describe(), req.api_version,
                      _describe_versions(outcome.ranges))
        if self.security.sasl is not None:
            self._start_sasl(node, now)
        else:
            self._ready(node, now)

    def _ready(self, node: _Node, now: float) -> None:
        node.state = ConnectionState.READY
        node.failed_attempts = 0
        node.last_error = None
        node.last_activity_ms = now
        node.reauth_due = False
        log.debug("%s ready", node.describe())

    # --- SASL -------------------------------------------------------------------------------------

    def _start_sasl(self, node: _Node, now: float) -> None:
        factory = self.security.sasl
        assert factory is not None and node.api_versions is not None
        node.state = ConnectionState.AUTHENTICATING
        try:
            # A new mechanism object per exchange: SCRAM needs a fresh nonce, OAUTHBEARER a fresh token.
            node.sasl = SaslExchange(factory(node.host), node.describe(), node.api_versions)
            request = node.sasl.start()
        except KafkaError as e:
            self._close(node, now, e, failure=True)
            return
        self._send_sasl(node, request, now)

    def _send_sasl(self, node: _Node, request: SaslRequest, now: float) -> None:
        assert node.conn is not None
        correlation_id = self._next_correlation_id()
        frame = encode_request(request.api_key, request.version, correlation_id, self.client_id, request.body)
        node.conn.send_request(frame, correlation_id=correlation_id, api_key=int(request.api_key),
                               api_version=request.version, now=now, context=_SASL)
        self._update_interest(node)

    def _on_sasl(self, node: _Node, req: InFlightRequest, payload: bytes, now: float) -> None:
        exchange = node.sasl
        assert exchange is not None
        try:
            _, body = decode_response(ApiKey(req.api_key), req.api_version, payload)
        except Exception as e:
            error: KafkaError = CorruptStreamError(
                f"bad {ApiKey(req.api_key).name} response from {node.describe()}: {e}")
            error.__cause__ = e
            self._close(node, now, error, failure=True)
            return
        try:
            request = exchange.on_response(req.api_key, body)
        except KafkaError as e:
            self._close(node, now, e, failure=True)
            return
        if request is not None:
            self._send_sasl(node, request, now)
            return
        after = exchange.reauthenticate_after_ms(self._rng)
        # Counted from when the last SaslAuthenticate left: the broker's clock started before our `now`.
        node.reauth_at_ms = float("inf") if after is None else req.send_time_ms + after
        node.sasl = None
        if after is not None:
            log.debug("%s: SASL %s authenticated; session lifetime %d ms, re-authenticating in %.0f ms",
                      node.describe(), exchange.mechanism, exchange.session_lifetime_ms, after)
        else:
            log.debug("%s: SASL %s authenticated", node.describe(), exchange.mechanism)
        self._ready(node, now)

    # --- I/O --------------------------------------------------------------------------------------

    def _write(self, node: _Node, now: float) -> None:
        conn, sock = node.conn, node.sock
        assert conn is not None and sock is not None
        while conn.has_pending_output:
            buffers = conn.data_to_send()
            try:
                if len(buffers) == 1:
                    n = sock.send(buffers[0])
                elif node.tls:
                    n = sock.send(_join_for_tls(buffers))  # SSLSocket has no sendmsg()
                else:
                    n = sock.sendmsg(buffers)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                if node.tls and _tls_would_block(e):
                    break
                self._close(node, now, self._send_error(node, e), failure=True)
                return
            node.last_activity_ms = now
            for req in conn.bytes_sent(n):
                if not req.expect_response:
                    self._pending.append(ClientResponse(
                        node.node_id, req.api_key, req.api_version, req.correlation_id, None, None,
                        req.context, now - req.send_time_ms))
            if n < sum(len(b) for b in buffers):
                break  # the socket buffer is full; the selector tells us when it drains

    def _send_error(self, node: _Node, e: OSError) -> KafkaError:
        tls_error = self._tls_send_error(node, e) if node.tls else None
        return tls_error or KafkaConnectionError(f"connection to {node.describe()} failed while sending: {e}")

    def _tls_send_error(self, node: _Node, e: OSError) -> KafkaError | None:
        import ssl

        if node.state is not ConnectionState.READY and (
                isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError, BrokenPipeError, ConnectionResetError))):
            # A TLS 1.3 broker refuses our certificate after the handshake with an alert and a close; our first
            # write can hit the close before we read the alert. The alert says why: look for it.
            assert isinstance(node.sock, ssl.SSLSocket)
            try:
                node.sock.recv(1)
            except ssl.SSLError as alert:
                if not isinstance(alert, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLWantReadError,
                                          ssl.SSLWantWriteError)):
                    return self._tls_error(node, alert, "sending")
            except OSError:
                pass
        if isinstance(e, ssl.SSLError):
            return self._tls_error(node, e, "sending")
        return None

    def _read(self, node: _Node, now: float) -> None:
        for _ in range(_MAX_READS_PER_POLL):
            sock = node.sock
            if sock is None:
                return
            try:
                data = sock.recv(_RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if node.tls:
                    if _tls_would_block(e):
                        return
                    if _is_ssl_error(e):
                        self._close(node, now, self._tls_error(node, e, "reading"), failure=True)  # type: ignore[arg-type]
                        return
                self._close(node, now, KafkaConnectionError(
                    f"connection to {node.describe()} failed while reading: {e}"), failure=True)
                return
            if not data:
                hint = ""
                if node.tls and node.state is ConnectionState.API_VERSIONS:
                    # What a TLS 1.3 broker that refuses our certificate looks like when it sends no alert.
                    hint = (" right after the TLS handshake (did it refuse our client certificate? "
                            + ("check it)" if self.security.client_certificate else "none is configured)"))
                self._close(node, now, KafkaConnectionError(
                    f"connection to {node.describe()} was closed by the broker{hint}"), failure=True)
                return
            node.last_activity_ms = now
            self._on_data(node, data, now)
            # A TLS read returns at most one record (16 KiB): short reads say nothing there, so TLS goes on
            # until the socket would block (what is left after the cap is read by the next poll).
            if len(data) < _RECV_SIZE and not node.tls:
                return

    def _on_data(self, node: _Node, data: bytes, now: float) -> None:
        assert node.conn is not None
        broken: CorruptStreamError | None = None
        try:
            completed = node.conn.receive_data(data)
        except ProtocolError as e:
            # Responses that came intact before the corruption are answered first; only then does the close
            # fail what is still in flight. Dropping them would leave their requests with no outcome at all.
            completed = e.completed if isinstance(e, CorruptStreamError) else []
            broken = CorruptStreamError(f"corrupt response stream from {node.describe()}: {e}")
        for i, (req, payload) in enumerate(completed):
            if req.context is _API_VERSIONS:
                self._on_api_versions(node, req, payload, now)
            elif req.context is _SASL:
                self._on_sasl(node, req, payload, now)
            else:
                try:
                    _, body = decode_response(ApiKey(req.api_key), req.api_version, payload)
                except Exception as e:  # malformed bytes, or a decoder bug: either way the stream is suspect
                    error = CorruptStreamError(
                        f"cannot decode {ApiKey(req.api_key).name} v{req.api_version} response from "
                        f"{node.describe()}: {e}")
                    self._complete(node, req, None, error, now)
                    for later, _ in completed[i + 1:]:
                        self._fail_request(node, later, error, now)
                    self._close(node, now, error, failure=True)
                    return
                self._complete(node, req, body, None, now)
            if node.sock is None:
                return  # ApiVersions or SASL failed and closed the connection
        if broken is not None:
            self._close(node, now, broken, failure=True)

    def _complete(self, node: _Node, req: InFlightRequest, body: dict[str, Any] | None,
                  error: KafkaError | None, now: float) -> None:
        self._pending.append(ClientResponse(node.node_id, req.api_key, req.api_version, req.correlation_id,
                                            body, error, req.context, now - req.send_time_ms))

    def _fail_request(self, node: _Node, req: InFlightRequest, error: KafkaError, now: float) -> None:
        if not isinstance(req.context, _Internal):
            self._complete(node, req, None, error, now)

    # --- timers -----------------------------------------------------------------------------------

    def _next_deadline(self, now: float) -> float:
        deadline = float("inf")
        for node in self._nodes.values():
            if node.conn is None:
                continue
            if node.state in _SETUP_TIMED:
                deadline = min(deadline, node.setup_deadline_ms)
            oldest = node.conn.oldest_send_time()
            if oldest is not None:
                deadline = min(deadline, oldest + self.request_timeout_ms)
            elif node.state is ConnectionState.READY:
                deadline = min(deadline, node.last_activity_ms + self.connections_max_idle_ms)
            if node.state is ConnectionState.READY and not node.reauth_due:
                deadline = min(deadline, node.reauth_at_ms - 1.0)
        # Expiry is "older than", so wake just after the deadline, not on it.
        return deadline + 1.0

    def _expire(self, now: float) -> None:
        for node in list(self._nodes.values()):
            conn = node.conn
            if conn is None:
                continue
            if node.state in _SETUP_TIMED and now > node.setup_deadline_ms:
                step = "TLS handshake with" if node.state is ConnectionState.TLS_HANDSHAKE else "connection to"
                self._close(node, now, KafkaConnectionError(
                    f"{step} {node.describe()} not done within "
                    f"{self.setup_timeout_ms:.0f} ms (socket.connection.setup.timeout.ms)"), failure=True)
                continue
            if node.state is ConnectionState.READY and now >= node.reauth_at_ms:
                node.reauth_due = True  # no new requests: let those in flight finish first
                if conn.in_flight_count == 0 and not conn.has_pending_output:
                    log.debug("%s: SASL session lifetime nearly over; re-authenticating", node.describe())
                    self._start_sasl(node, now)
                    continue
            oldest = conn.oldest_send_time()
            if oldest is not None and now - oldest > self.request_timeout_ms:
                self._close_timed_out(node, now)
            elif (oldest is None and node.state is ConnectionState.READY
                  and now - node.last_activity_ms > self.connections_max_idle_ms):
                log.debug("closing %s: idle for more than %.0f ms", node.describe(), self.connections_max_idle_ms)
                self._close(node, now, KafkaConnectionError(f"connection to {node.describe()} idle"),
                            failure=False)

    def _close_timed_out(self, node: _Node, now: float) -> None:
        assert node.conn is not None
        cutoff = now - self.request_timeout_ms
        timed_out = RequestTimedOutError(
            f"request to {node.describe()} timed out after {self.request_timeout_ms:.0f} ms "
            "(request.timeout.ms); connection closed")
        collateral = KafkaConnectionError(
            f"connection to {node.describe()} closed because another request on it timed out")
        for req in node.conn.abort_all():
            self._fail_request(node, req, timed_out if req.send_time_ms < cutoff else collateral, now)
        self._close(node, now, timed_out, failure=True)

    # --- closing ----------------------------------------------------------------------------------

    def _fail_setup(self, node: _Node, now: float, error: KafkaError) -> None:
        node.addr_index += 1  # the next attempt tries the next resolved address
        self._apply_backoff(node, now, error)

    def _close(self, node: _Node, now: float, error: KafkaError, *, failure: bool, record: bool = True) -> None:
        """Close the socket and fail every unfinished request of `node` exactly once with `error`."""
        was = node.state
        if node.sock is not None:
            if node.events:
                self._selector.unregister(node.sock)
            node.sock.close()
        if node.conn is not None:
            for req in node.conn.abort_all():
                self._fail_request(node, req, error, now)
        node.sock = None
        node.conn = None
        node.events = 0
        node.tls = False
        node.sasl = None
        node.reauth_at_ms = float("inf")
        node.reauth_due = False
        node.state = ConnectionState.DISCONNECTED
        node.api_versions = None
        node.versions_cache.clear()
        node.setup_deadline_ms = float("inf")
        if failure:
            if was is ConnectionState.CONNECTING:
                node.addr_index += 1
            self._apply_backoff(node, now, error if record else None)
        else:
            log.debug("closed %s: %s", node.describe(), error)

    def _apply_backoff(self, node: _Node, now: float, error: KafkaError | None) -> None:
        node.last_attempt_ms = now
        node.reconnect_backoff_ms = self._backoff.backoff(node.failed_attempts)
        if isinstance(error, AuthenticationError):
            # Wrong credentials or an untrusted certificate do not fix themselves: never hammer the broker.
            node.reconnect_backoff_ms = max(node.reconnect_backoff_ms, self._backoff.max_ms)
            self._auth_failures.append(error)
        node.failed_attempts += 1
        if error is not None:
            node.last_error = error
        # One warning per run of failures; repeats (and client-initiated disconnects) only at debug.
        level = logging.WARNING if error is not None and node.failed_attempts == 1 else logging.DEBUG
        if isinstance(error, AuthenticationError):
            level = logging.ERROR  # as Java: needs the user's attention, and repeats at most once a backoff
        log.log(level, "%s: %s; next attempt in %.0f ms", node.describe(),
                error or "disconnected", node.reconnect_backoff_ms)

    # --- helpers ----------------------------------------------------------------------------------

    def _can_send(self, node: _Node) -> bool:
        # As Java: no new request until the previous one is fully written, and at most max in flight.
        conn = node.conn
        return (
            node.state is ConnectionState.READY
            and not node.reauth_due
            and conn is not None
            and not conn.has_pending_output
            and conn.in_flight_count < self.max_in_flight
        )

    def _user_in_flight(self, node: _Node) -> int:
        # Only READY connections carry caller requests; before that the only request is our ApiVersions.
        conn = node.conn
        return conn.in_flight_count if conn is not None and node.state is ConnectionState.READY else 0

    def _backoff_remaining(self, node: _Node, now: float) -> float:
        return max(0.0, node.last_attempt_ms + node.reconnect_backoff_ms - now)

    def _least_loaded(self, nodes: Sequence[_Node], now: float) -> int | None:
        if not nodes:
            return None
        best: _Node | None = None
        best_in_flight = self.max_in_flight + 1
        connecting: _Node | None = None
        connectable: _Node | None = None
        offset = self._rng.randrange(len(nodes))
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            in_flight = self._user_in_flight(node)
            if self._can_send(node):
                if in_flight == 0:
                    return node.node_id
                if in_flight < best_in_flight:
                    best, best_in_flight = node, in_flight
            elif node.state is not ConnectionState.DISCONNECTED:
                connecting = connecting or node
            elif node.state is ConnectionState.DISCONNECTED and self._backoff_remaining(node, now) <= 0:
                connectable = connectable or node
        chosen = best or connecting or connectable
        return None if chosen is None else chosen.node_id

    def _update_interest(self, node: _Node) -> None:
        sock = node.sock
        if sock is None or self._closed:
            return
        if node.state is ConnectionState.CONNECTING:
            want = selectors.EVENT_WRITE
        elif node.state is ConnectionState.TLS_HANDSHAKE:
            want = node.tls_want
        else:
            want = selectors.EVENT_READ
            if node.conn is not None and node.conn.has_pending_output:
                want |= selectors.EVENT_WRITE
        if want == node.events:
            return
        if node.events:
            self._selector.modify(sock, want, node)
        else:
            self._selector.register(sock, want, node)
        node.events = want

    def _next_correlation_id(self) -> int:
        self._correlation_id = 0 if self._correlation_id >= _MAX_CORRELATION_ID else self._correlation_id + 1
        return self._correlation_id

    def _now(self) -> float:
        return time.monotonic() * 1000.0 if self._last_now is None else self._last_now

    def __enter__(self) -> NetworkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CONNECTED = (ConnectionState.API_VERSIONS, ConnectionState.AUTHENTICATING, ConnectionState.READY)
_SETUP_TIMED = (ConnectionState.CONNECTING, ConnectionState.TLS_HANDSHAKE)


def _tls_would_block(e: OSError) -> bool:
    import ssl

    return isinstance(e, (ssl.SSLWantReadError, ssl.SSLWantWriteError))


def _is_ssl_error(e: OSError) -> bool:
    import ssl

    return isinstance(e, ssl.SSLError)


def _join_for_tls(buffers: list[memoryview]) -> bytes:
    """The first buffers, joined up to about _TLS_WRITE_CHUNK bytes (at least one buffer whole).

    OpenSSL wants a write it refused (WANT_WRITE) retried with at least as many bytes: the same leading
    buffers always give the same chunk, and new requests only ever add buffers behind them.
    """
    taken, size = 0, 0
    while taken < len(buffers) and (taken == 0 or size + len(buffers[taken]) <= _TLS_WRITE_CHUNK):
        size += len(buffers[taken])
        taken += 1
    return b"".join(buffers[:taken])


def _connect_error(node: _Node, err: int) -> KafkaConnectionError:
    return KafkaConnectionError(f"connection to {node.describe()} failed: [Errno {err}] {os.strerror(err)}")


def _describe_versions(ranges: VersionRanges) -> str:
    parts = []
    for api in ApiKey:
        if int(api) in ranges:
            try:
                parts.append(f"{api.name}=v{negotiate(ranges, api)}")
            except KafkaError:
                parts.append(f"{api.name}=unsupported")
    return ", ".join(parts)
