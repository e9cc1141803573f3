"""One broker connection and its setup machine: connect -> [TLS handshake] -> ApiVersions -> [SASL] -> ready.

BrokerConnection is one node's state; ConnectionSetup holds the steps that take a new socket to READY. The
NetworkClient (client.py) owns the registry of connections, the selector, the timers and closing, and mixes
the setup in; the decisions of each step (which ApiVersions version next, the SASL exchange) are sans-I/O in
versions.py and sasl_exchange.py, shared with the blocking connection.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import random
import selectors
import socket
from typing import TYPE_CHECKING

from kafkajet.addresses import format_address
from kafkajet.errors import KafkaConnectionError, KafkaError, ProtocolError, SslAuthenticationError
from kafkajet.network.connection import Connection, CorruptStreamError, InFlightRequest
from kafkajet.network.sasl_exchange import SaslExchange, SaslRequest
from kafkajet.network.versions import (
    MAX_API_VERSIONS_ATTEMPTS,
    VersionRanges,
    api_versions_request_body,
    handle_api_versions_response,
    max_api_versions_version,
    negotiate,
)
from kafkajet.protocol import ApiKey, decode_response, encode_request
from kafkajet.security.connection import ConnectionSecurity

if TYPE_CHECKING:
    import ssl  # noqa: F401  (imported where TLS is used)

log = logging.getLogger("kafkajet.network")

CONNECT_IN_PROGRESS = {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, errno.EAGAIN}


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    TLS_HANDSHAKE = "tls_handshake"
    API_VERSIONS = "api_versions"
    AUTHENTICATING = "authenticating"
    READY = "ready"


class InternalRequest:
    """Marks requests the client sends for itself (ApiVersions, SASL); they never reach the caller."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<internal {self.name}>"


API_VERSIONS_REQUEST = InternalRequest("ApiVersions")
SASL_REQUEST = InternalRequest("SASL")


class BrokerConnection:
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


CONNECTED_STATES = (ConnectionState.API_VERSIONS, ConnectionState.AUTHENTICATING, ConnectionState.READY)
SETUP_TIMED_STATES = (ConnectionState.CONNECTING, ConnectionState.TLS_HANDSHAKE)


def connect_error(node: BrokerConnection, err: int) -> KafkaConnectionError:
    return KafkaConnectionError(f"connection to {node.describe()} failed: [Errno {err}] {os.strerror(err)}")


def describe_versions(ranges: VersionRanges) -> str:
    parts = []
    for api in ApiKey:
        if int(api) in ranges:
            try:
                parts.append(f"{api.name}=v{negotiate(ranges, api)}")
            except KafkaError:
                parts.append(f"{api.name}=unsupported")
    return ", ".join(parts)


class ConnectionSetup:
    """The setup steps of the NetworkClient, one method per state transition (mixed into NetworkClient)."""

    # Provided by NetworkClient.
    client_id: str
    security: ConnectionSecurity
    setup_timeout_ms: float
    send_buffer_bytes: int
    receive_buffer_bytes: int
    max_response_size: int
    _selector: selectors.BaseSelector
    _rng: random.Random

    def _fail_setup(self, node: BrokerConnection, now: float, error: KafkaError) -> None:
        raise NotImplementedError

    def _close(self, node: BrokerConnection, now: float, error: KafkaError, *, failure: bool,
               record: bool = True) -> None:
        raise NotImplementedError

    def _update_interest(self, node: BrokerConnection) -> None:
        raise NotImplementedError

    def _next_correlation_id(self) -> int:
        raise NotImplementedError

    def _connect(self, node: BrokerConnection, now: float) -> None:
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
        if err and err not in CONNECT_IN_PROGRESS:
            sock.close()
            self._fail_setup(node, now, connect_error(node, err))
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

    def _finish_connect(self, node: BrokerConnection, now: float) -> None:
        assert node.sock is not None
        err = node.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._close(node, now, connect_error(node, err), failure=True)
            return
        self._on_transport_connected(node, now)

    def _on_transport_connected(self, node: BrokerConnection, now: float) -> None:
        log.debug("connected to %s", node.describe())
        if self.security.ssl_context is not None:
            self._start_tls(node, now)
            return
        node.setup_deadline_ms = float("inf")
        self._start_api_versions(node, now, max_api_versions_version())

    def _start_tls(self, node: BrokerConnection, now: float) -> None:
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
        from kafkajet.security.tls import NOT_TLS_HINT  # loaded already: the context above is TLS

        # The cause a caller's wait (max.block.ms) names if it ends before the handshake does, however short.
        node.last_error = KafkaConnectionError(f"TLS handshake with {node.describe()} not answered; {NOT_TLS_HINT}")
        self._drive_tls(node, now)

    def _drive_tls(self, node: BrokerConnection, now: float) -> None:
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

    def _start_api_versions(self, node: BrokerConnection, now: float, version: int) -> None:
        assert node.conn is not None
        node.state = ConnectionState.API_VERSIONS
        node.api_versions_attempts += 1
        correlation_id = self._next_correlation_id()
        frame = encode_request(ApiKey.API_VERSIONS, version, correlation_id, self.client_id,
                               api_versions_request_body())
        node.conn.send_request(frame, correlation_id=correlation_id, api_key=int(ApiKey.API_VERSIONS),
                               api_version=version, now=now, context=API_VERSIONS_REQUEST)
        self._update_interest(node)

    def _on_api_versions(self, node: BrokerConnection, req: InFlightRequest, payload: bytes, now: float) -> None:
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
                      describe_versions(outcome.ranges))
        if self.security.sasl is not None:
            self._start_sasl(node, now)
        else:
            self._ready(node, now)

    def _ready(self, node: BrokerConnection, now: float) -> None:
        node.state = ConnectionState.READY
        node.failed_attempts = 0
        node.last_error = None
        node.last_activity_ms = now
        node.reauth_due = False
        log.debug("%s ready", node.describe())

    def _start_sasl(self, node: BrokerConnection, now: float) -> None:
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

    def _send_sasl(self, node: BrokerConnection, request: SaslRequest, now: float) -> None:
        assert node.conn is not None
        correlation_id = self._next_correlation_id()
        frame = encode_request(request.api_key, request.version, correlation_id, self.client_id, request.body)
        node.conn.send_request(frame, correlation_id=correlation_id, api_key=int(request.api_key),
                               api_version=request.version, now=now, context=SASL_REQUEST)
        self._update_interest(node)

    def _on_sasl(self, node: BrokerConnection, req: InFlightRequest, payload: bytes, now: float) -> None:
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
