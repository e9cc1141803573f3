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

import logging
import random
import selectors
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkajet.addresses import format_address, parse_servers
from kafkajet.clock import now_ms
from kafkajet.errors import (
    AuthenticationError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    ProtocolError,
    RequestTimedOutError,
)
from kafkajet.network.backoff import ExponentialBackoff
from kafkajet.network.connection import (
    DEFAULT_MAX_RESPONSE_SIZE,
    CorruptStreamError,
    InFlightRequest,
)
from kafkajet.network.node import (
    API_VERSIONS_REQUEST,
    CONNECTED_STATES,
    SASL_REQUEST,
    SETUP_TIMED_STATES,
    BrokerConnection,
    ConnectionSetup,
    ConnectionState,
    InternalRequest,
)
from kafkajet.network.tls_io import is_ssl_error, join_for_tls, tls_error, tls_send_error, tls_would_block
from kafkajet.network.versions import (
    VersionRanges,
    negotiate,
)
from kafkajet.network.waker import Waker
from kafkajet.protocol import ApiKey, decode_response, encode_request_buffers
from kafkajet.security.connection import PLAINTEXT, ConnectionSecurity

if TYPE_CHECKING:
    pass  # imported where TLS is used: plaintext producers never load OpenSSL (about 6 MB)

log = logging.getLogger("kafkajet.network")

_RECV_SIZE = 256 * 1024
# One poll reads at most this many chunks per socket, so one busy broker cannot starve the others.
_MAX_READS_PER_POLL = 16
_MAX_CORRELATION_ID = 2**31 - 1


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


class NetworkClient(ConnectionSetup):
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
        self._nodes: dict[int, BrokerConnection] = {}
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
            self._nodes[next_id] = BrokerConnection(next_id, host, port, bootstrap=True)
            next_id -= 1

    def set_nodes(self, nodes: Mapping[int, tuple[str, int]]) -> None:
        """Adopt the brokers from a metadata response; connections to vanished or moved nodes are closed."""
        now = self._now()
        for node_id, (host, port) in nodes.items():
            if node_id < 0:
                continue
            node = self._nodes.get(node_id)
            if node is None:
                self._nodes[node_id] = BrokerConnection(node_id, host, port, bootstrap=False)
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

    def add_node(self, node_id: int, host: str, port: int) -> None:
        """Know one broker before metadata names it (a coordinator found by FindCoordinator)."""
        if node_id >= 0 and node_id not in self._nodes:
            self._nodes[node_id] = BrokerConnection(node_id, host, port, bootstrap=False)

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
        """Why the node's last connection attempt or connection failed, or why a TLS handshake in progress may
        never end; None once it is ready again."""
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
        started = now_ms()
        events = self._selector.select(None if wait == float("inf") else max(0.0, wait) / 1000.0)
        now += now_ms() - started
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
            if mask & selectors.EVENT_WRITE and node.sock is not None and node.state in CONNECTED_STATES:
                self._write(node, now)
        for node in buffered:
            # Decrypted bytes left inside the TLS layer: the selector cannot see them, so read them here.
            if node.sock is not None and node.state in CONNECTED_STATES:
                self._read(node, now)
        self._expire(now)
        out, self._pending = self._pending, []
        return out

    def write_pending(self, now: float) -> None:
        """Write queued requests as far as the sockets take them now, without waiting (poll() does this
        first too); a connection whose output is all written can take its next request at once."""
        for node in list(self._nodes.values()):
            if node.conn is not None and node.conn.has_pending_output and node.state in CONNECTED_STATES:
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

    def _tls_buffered(self) -> list[BrokerConnection]:
        if self.security.ssl_context is None:
            return []
        import ssl

        return [n for n in self._nodes.values()
                if n.tls and isinstance(n.sock, ssl.SSLSocket) and n.state in CONNECTED_STATES and n.sock.pending()]

    # --- I/O --------------------------------------------------------------------------------------

    def _write(self, node: BrokerConnection, now: float) -> None:
        conn, sock = node.conn, node.sock
        assert conn is not None and sock is not None
        while conn.has_pending_output:
            buffers = conn.data_to_send()
            try:
                if len(buffers) == 1:
                    n = sock.send(buffers[0])
                elif node.tls:
                    n = sock.send(join_for_tls(buffers))  # SSLSocket has no sendmsg()
                else:
                    n = sock.sendmsg(buffers)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                if node.tls and tls_would_block(e):
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

    def _send_error(self, node: BrokerConnection, e: OSError) -> KafkaError:
        tls_error = tls_send_error(node, e) if node.tls else None
        return tls_error or KafkaConnectionError(f"connection to {node.describe()} failed while sending: {e}")

    def _read(self, node: BrokerConnection, now: float) -> None:
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
                    if tls_would_block(e):
                        return
                    if is_ssl_error(e):
                        self._close(node, now, tls_error(node, e, "reading"), failure=True)  # type: ignore[arg-type]
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

    def _on_data(self, node: BrokerConnection, data: bytes, now: float) -> None:
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
            if req.context is API_VERSIONS_REQUEST:
                self._on_api_versions(node, req, payload, now)
            elif req.context is SASL_REQUEST:
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

    def _complete(self, node: BrokerConnection, req: InFlightRequest, body: dict[str, Any] | None,
                  error: KafkaError | None, now: float) -> None:
        self._pending.append(ClientResponse(node.node_id, req.api_key, req.api_version, req.correlation_id,
                                            body, error, req.context, now - req.send_time_ms))

    def _fail_request(self, node: BrokerConnection, req: InFlightRequest, error: KafkaError, now: float) -> None:
        if not isinstance(req.context, InternalRequest):
            self._complete(node, req, None, error, now)

    # --- timers -----------------------------------------------------------------------------------

    def _next_deadline(self, now: float) -> float:
        deadline = float("inf")
        for node in self._nodes.values():
            if node.conn is None:
                continue
            if node.state in SETUP_TIMED_STATES:
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
            if node.state in SETUP_TIMED_STATES and now > node.setup_deadline_ms:
                hint = ""
                if node.state is ConnectionState.TLS_HANDSHAKE:
                    from kafkajet.security.tls import NOT_TLS_HINT

                    hint = f"; {NOT_TLS_HINT}"
                self._close(node, now, KafkaConnectionError(
                    f"{'TLS handshake with' if hint else 'connection to'} {node.describe()} not done within "
                    f"{self.setup_timeout_ms:.0f} ms (socket.connection.setup.timeout.ms){hint}"), failure=True)
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

    def _close_timed_out(self, node: BrokerConnection, now: float) -> None:
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

    def _fail_setup(self, node: BrokerConnection, now: float, error: KafkaError) -> None:
        node.addr_index += 1  # the next attempt tries the next resolved address
        self._apply_backoff(node, now, error)

    def _close(self, node: BrokerConnection, now: float, error: KafkaError, *, failure: bool, record: bool = True) -> None:
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

    def _apply_backoff(self, node: BrokerConnection, now: float, error: KafkaError | None) -> None:
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

    def _can_send(self, node: BrokerConnection) -> bool:
        # As Java: no new request until the previous one is fully written, and at most max in flight.
        conn = node.conn
        return (
            node.state is ConnectionState.READY
            and not node.reauth_due
            and conn is not None
            and not conn.has_pending_output
            and conn.in_flight_count < self.max_in_flight
        )

    def _user_in_flight(self, node: BrokerConnection) -> int:
        # Only READY connections carry caller requests; before that the only request is our ApiVersions.
        conn = node.conn
        return conn.in_flight_count if conn is not None and node.state is ConnectionState.READY else 0

    def _backoff_remaining(self, node: BrokerConnection, now: float) -> float:
        return max(0.0, node.last_attempt_ms + node.reconnect_backoff_ms - now)

    def _least_loaded(self, nodes: Sequence[BrokerConnection], now: float) -> int | None:
        if not nodes:
            return None
        best: BrokerConnection | None = None
        best_in_flight = self.max_in_flight + 1
        connecting: BrokerConnection | None = None
        connectable: BrokerConnection | None = None
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

    def _update_interest(self, node: BrokerConnection) -> None:
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
        return now_ms() if self._last_now is None else self._last_now

    def __enter__(self) -> NetworkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


