"""NetworkClient: one non-blocking connection per broker under `selectors`, as Java's NetworkClient.

Used by a single thread (the producer's sender); only wakeup() may be called from other threads. Every
method that depends on time takes `now` in milliseconds from the caller's clock; poll() advances it by
the real time spent in select(), so a test may run the client on a shifted (fake) clock.

Per-node state machine::

    DISCONNECTED -> CONNECTING -> [TLS_HANDSHAKE] -> API_VERSIONS -> [AUTHENTICATING] -> READY
         ^_____________ any failure, timeout, idle expiry or disconnect() _____________|

TLS_HANDSHAKE runs for security.protocol SSL and SASL_SSL, AUTHENTICATING (SaslHandshake + SaslAuthenticate)
for SASL_*; ApiVersions comes before SASL as in Java, so the SASL request versions are negotiated.
The steps are decided by the sans-I/O SetupMachine (setup.py); BrokerConnection (node.py) does their I/O.

CONNECTING and TLS_HANDSHAKE end at the connection setup timeout: socket.connection.setup.timeout.ms,
doubled per consecutive failed connect of the node up to socket.connection.setup.timeout.max.ms, with
±20 % jitter (Java's ClusterConnectionStates); a connect that gets through starts the next one at the base.

Re-authentication (KIP-368): when the broker gives the SASL session a lifetime, the connection is marked
due at a random 85-95 % of it. From then on it takes no new requests; once the requests already in flight
are answered it goes back to AUTHENTICATING for a new SaslHandshake + SaslAuthenticate on the same socket,
then to READY. Nothing in flight is lost and responses never interleave with the SASL exchange.

Quotas (KIP-219): an answer naming a throttle time, at a version from which the client waits it out
(throttle.py), mutes its node until then, as Java's ClusterConnectionStates.throttle: the node is not ready,
takes no request and is not the least loaded; poll_delay() says how long the wait is.

Rebootstrap (KIP-899, KIP-1102), with metadata.recovery.strategy=rebootstrap as Java's NetworkClient: the
bootstrap list is used again when every broker of the last metadata is backing off after a failure, when
none of them has been ready for metadata.recovery.rebootstrap.trigger.ms while a node was wanted (a broker
that accepts connections and never answers holds no backoff), or when a broker answers REBOOTSTRAP_REQUIRED
(rebootstrap()). The known brokers stay known: the next metadata answer replaces them. With
metadata.recovery.strategy=none the bootstrap list serves only until the first metadata answer.
"""

from __future__ import annotations

import logging
import random
import selectors
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkajet.addresses import format_address, parse_servers
from kafkajet.backoff import ExponentialBackoff
from kafkajet.clock import now_ms
from kafkajet.errors import (
    AuthenticationError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    RebootstrapRequiredError,
    RequestTimedOutError,
)
from kafkajet.network.connection import DEFAULT_MAX_RESPONSE_SIZE, InFlightRequest, NotKafkaError
from kafkajet.network.node import BrokerConnection, ClientResponse, ConnectionSettings
from kafkajet.network.setup import CONNECTED_STATES, SETUP_TIMED_STATES, ConnectionState
from kafkajet.network.traffic import Traffic
from kafkajet.network.versions import NO_FEATURES, FinalizedFeatures, VersionRanges, negotiate
from kafkajet.network.waker import Waker
from kafkajet.protocol import ApiKey, encode_request_buffers
from kafkajet.security.connection import PLAINTEXT, ConnectionSecurity

log = logging.getLogger("kafkajet.network")

_MAX_CORRELATION_ID = 2**31 - 1
# Java's ClusterConnectionStates: the connection setup timeout doubles per failed connect, with ±20 % jitter.
_SETUP_TIMEOUT_MULTIPLIER = 2
_SETUP_TIMEOUT_JITTER = 0.2


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
        socket_connection_setup_timeout_max_ms: float = 30000,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        security: ConnectionSecurity | None = None,
        metadata_recovery_strategy: str = "rebootstrap",
        rebootstrap_trigger_ms: float = 300000,
        metadata_cluster_check: bool = True,
    ) -> None:
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be at least 1")
        self.client_id = client_id
        self.request_timeout_ms = float(request_timeout_ms)
        self.max_in_flight = int(max_in_flight_requests_per_connection)
        self.connections_max_idle_ms = float(connections_max_idle_ms)
        self.security = security or PLAINTEXT
        self._rng = random.Random()
        self._settings = ConnectionSettings(client_id, self.security, int(send_buffer_bytes),
                                            int(receive_buffer_bytes), int(max_response_size), self._rng)
        self._backoff = ExponentialBackoff(reconnect_backoff_ms, 2, reconnect_backoff_max_ms, 0.2, self._rng)
        self._setup_timeout = ExponentialBackoff(socket_connection_setup_timeout_ms, _SETUP_TIMEOUT_MULTIPLIER,
                                                 socket_connection_setup_timeout_max_ms, _SETUP_TIMEOUT_JITTER,
                                                 self._rng)
        self._nodes: dict[int, BrokerConnection] = {}
        # Kept when a node leaves the metadata, as Java keeps its sensors: totals never go back.
        self.traffic = Traffic()
        self._node_traffic: dict[int, Traffic] = {}
        self._selector = selectors.DefaultSelector()
        self._waker = Waker()
        self._selector.register(self._waker.reader, selectors.EVENT_READ, None)
        self._pending: list[ClientResponse] = []
        self._auth_failures: list[AuthenticationError] = []
        self._server_disconnects = 0
        self._features = NO_FEATURES
        self._correlation_id = 0
        self._closed = False
        self._rebootstrap = metadata_recovery_strategy == "rebootstrap"
        self._rebootstrap_trigger_ms = float(rebootstrap_trigger_ms)
        # Since when a node has been wanted and no broker of the last metadata was ready (None: one is).
        self._known_unready_since: float | None = None
        # Rebootstrapping: nodes are taken from the bootstrap list until the next metadata names brokers.
        self._rebootstrapping = False
        # As Java: the cluster check is part of rebootstrapping, and off without it.
        self._cluster_check = metadata_cluster_check and self._rebootstrap
        self._cluster_id: str | None = None
        # Nodes that closed the connection on an ApiVersions carrying the cluster id (Tansu takes v5 but not a
        # cluster id in it): they are asked without it from then on, quietly, as brokers without v5 are.
        self._no_cluster_check: set[int] = set()
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
            self._nodes[next_id] = self._new_node(next_id, host, port, bootstrap=True)
            next_id -= 1

    def set_nodes(self, nodes: Mapping[int, tuple[str, int]], cluster_id: str | None = None) -> None:
        """Adopt the brokers from a metadata response; connections to vanished or moved nodes are closed.
        `cluster_id` (the response's) is what connections to them expect from then on (KIP-1242)."""
        now = self._now()
        if nodes:
            self._rebootstrapping = False
            self._known_unready_since = None
            self._cluster_id = cluster_id
        for node_id, (host, port) in nodes.items():
            if node_id < 0:
                continue
            node = self._nodes.get(node_id)
            if node is None:
                self._nodes[node_id] = self._new_node(node_id, host, port, bootstrap=False)
            elif (node.host, node.port) != (host, port):
                self._close(node, now, KafkaConnectionError(
                    f"{node.describe()} moved to {format_address(host, port)}"), failure=False)
                node.move(host, port)
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
            self._nodes[node_id] = self._new_node(node_id, host, port, bootstrap=False)

    def _new_node(self, node_id: int, host: str, port: int, *, bootstrap: bool) -> BrokerConnection:
        traffic = self._node_traffic.get(node_id)
        if traffic is None:
            traffic = self._node_traffic[node_id] = Traffic(self.traffic)
        return BrokerConnection(node_id, host, port, bootstrap, self._settings, self._next_correlation_id, traffic)

    def traffic_snapshot(self) -> dict[str, float]:
        """Java's Selector metrics by their names: client-wide, then per node as node-<id>.<name>, and the
        connections open now (connection-count)."""
        out = self.traffic.snapshot(connections=True)
        out["connection-count"] = float(sum(1 for n in list(self._nodes.values()) if n.sock is not None))
        for node_id, traffic in list(self._node_traffic.items()):
            for name, value in traffic.snapshot(connections=False).items():
                out[f"node-{node_id}.{name}"] = value
        return out

    def nodes(self) -> dict[int, tuple[str, int]]:
        return {n.node_id: (n.host, n.port) for n in self._nodes.values()}

    def knows(self, node_id: int) -> bool:
        """False once metadata no longer lists the node (set_nodes forgot it): nothing will connect to it."""
        return node_id in self._nodes

    def state(self, node_id: int) -> ConnectionState:
        node = self._nodes.get(node_id)
        return ConnectionState.DISCONNECTED if node is None else node.state

    # --- readiness --------------------------------------------------------------------------------

    def is_ready(self, node_id: int, now: float) -> bool:
        """As ready(), without side effects."""
        node = self._nodes.get(node_id)
        return node is not None and self._can_send(node, now)

    def ready(self, node_id: int, now: float) -> bool:
        """True if a request can be sent to the node now; otherwise start connecting if backoff allows."""
        self._last_now = now
        node = self._nodes.get(node_id)
        if node is None or self._closed:
            return False
        if self._can_send(node, now):
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

    def throttle_delay(self, node_id: int, now: float) -> float:
        """Milliseconds left of the quota throttle the node's last throttled answer announced, else 0."""
        node = self._nodes.get(node_id)
        return 0.0 if node is None else max(0.0, node.throttle_until_ms - now)

    def poll_delay(self, node_id: int, now: float) -> float:
        """How long a caller waiting to send to the node may sleep (Java's pollDelayMs): the rest of its
        throttle while connected and throttled, else connection_delay()."""
        node = self._nodes.get(node_id)
        if node is not None and node.state in CONNECTED_STATES and node.throttle_until_ms > now:
            return node.throttle_until_ms - now
        return self.connection_delay(node_id, now)

    def last_error(self, node_id: int) -> KafkaError | None:
        """Why the node's last connection attempt or connection failed; None once it is ready again."""
        node = self._nodes.get(node_id)
        return None if node is None else node.last_error

    def api_version(self, node_id: int, api_key: int) -> int:
        """The version send() uses by default: the highest both we and the broker support, within the
        client's caps (versions.CLIENT_MAX_VERSIONS)."""
        node = self._nodes.get(node_id)
        ranges = None if node is None else node.setup.api_versions
        if node is None or ranges is None:
            raise IllegalStateError(f"no negotiated API versions for node {node_id}: it is not connected")
        cached = node.versions_cache.get(api_key)
        if cached is None:
            cached = node.versions_cache[api_key] = negotiate(ranges, api_key)
        return cached

    def authentication_failures(self) -> list[AuthenticationError]:
        """Authentication failures (TLS or SASL) since the last call, oldest first; each one is reported once."""
        out, self._auth_failures = self._auth_failures, []
        return out

    def server_disconnects(self) -> int:
        """How many connections failed or were ended by the other side since the last call (then zero).

        Java's DefaultMetadataUpdater.handleServerDisconnect: a broker that refuses or drops a connection may
        be one the cluster has moved away from, so the owner of the metadata asks for an update."""
        count, self._server_disconnects = self._server_disconnects, 0
        return count

    def broker_api_versions(self, node_id: int) -> VersionRanges | None:
        """The broker's advertised (min, max) per api key, once ApiVersions has completed."""
        ranges = None if (node := self._nodes.get(node_id)) is None else node.setup.api_versions
        return None if ranges is None else dict(ranges)

    def finalized_features(self) -> FinalizedFeatures:
        """The latest finalized features any broker has answered in ApiVersions (highest epoch), kept across
        reconnections as Java's ApiVersions keeps them; NO_FEATURES before any (or from brokers that never
        finalize features: epoch -1)."""
        for node in self._nodes.values():
            features = node.setup.features
            if features is not None and features.epoch > self._features.epoch:
                self._features = features
        return self._features

    def least_loaded_node(self, now: float) -> int | None:
        """A ready node with the fewest requests in flight, else one connecting, else one connectable.

        Nodes in reconnect backoff are skipped; None means every candidate is backing off.
        """
        known = [n for n in self._nodes.values() if not n.bootstrap]
        bootstrap = [n for n in self._nodes.values() if n.bootstrap]
        if known and self._rebootstrap and not self._rebootstrapping and self._trigger_due(known, now):
            self.rebootstrap(f"no broker of the last metadata ready for "
                             f"{self._rebootstrap_trigger_ms:.0f} ms (metadata.recovery.rebootstrap.trigger.ms)")
        if known and not self._rebootstrapping:
            found = self._least_loaded(known, now)
            if found is None and any(self._throttled(n, now) for n in known):
                return None  # a quota's wait, not a failure: the bootstrap list would only dodge the quota
            if found is not None or not self._rebootstrap:
                return found
            # Every known broker failed and is backing off: go back to the bootstrap list (Java's
            # rebootstrap when no node is available or ready), quietly: this is routine after a restart.
        return self._least_loaded(bootstrap, now)

    def rebootstrap(self, why: str) -> None:
        """Take nodes from bootstrap.servers until the next metadata names the brokers (REBOOTSTRAP_REQUIRED,
        or the trigger); nothing happens with metadata.recovery.strategy=none."""
        if not self._rebootstrap or self._rebootstrapping:
            return
        log.info("rebootstrapping from bootstrap.servers: %s", why)
        self._rebootstrapping = True

    def _trigger_due(self, known: Sequence[BrokerConnection], now: float) -> bool:
        if any(n.state is ConnectionState.READY for n in known):
            self._known_unready_since = None
            return False
        if self._known_unready_since is None:
            self._known_unready_since = now
        return now - self._known_unready_since >= self._rebootstrap_trigger_ms

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
        if node is None or not self._can_send(node, now):
            if node is not None and self._throttled(node, now):
                raise IllegalStateError(f"cannot send to node {node_id}: it is throttled by a quota for "
                                        f"{node.throttle_until_ms - now:.0f} ms more")
            state = "unknown" if node is None else node.state.value
            raise IllegalStateError(f"cannot send to node {node_id}: it is not ready (state {state})")
        assert node.conn is not None
        api = ApiKey(api_key)
        if version is None:
            version = self.api_version(node_id, api)
        correlation_id = self._next_correlation_id()
        # The order requests leave in, for whoever needs it (a test checking that a leader hint's retry goes
        # before any Metadata request); a disabled debug log costs one level check per request.
        log.debug("sending %s v%d to node %d, correlation id %d", api.name, version, node_id, correlation_id)  # pragma: no mutate (log text)
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
        selected = now_ms()
        now += selected - started
        self._last_now = now
        for key, mask in events:
            node = key.data
            if node is None:
                self._waker.drain()
                continue
            if key.fd != node.fd:
                continue  # closed earlier in this loop
            state = node.setup.state
            if state is ConnectionState.CONNECTING:
                self._step(node, node.finish_connect(now), now)
                continue
            if state is ConnectionState.TLS_HANDSHAKE:
                self._step(node, node.drive_tls(now), now)
                continue
            if mask & selectors.EVENT_READ:
                self._read(node, now)
            if mask & selectors.EVENT_WRITE and node.sock is not None and node.setup.state in CONNECTED_STATES:
                self._write(node, now)
        for node in buffered:
            # Decrypted bytes left inside the TLS layer: the selector cannot see them, so read them here.
            if node.sock is not None and node.state in CONNECTED_STATES:
                self._read(node, now)
        self._expire(now)
        self.traffic.polled(selected - started, now_ms() - selected)
        out, self._pending = self._pending, []
        return out

    def write_pending(self, now: float) -> None:
        """Write queued requests as far as the sockets take them now, without waiting (poll() does this
        first too); a connection whose output is all written can take its next request at once."""
        for node in list(self._nodes.values()):
            if node.conn is not None and node.conn.has_pending_output and node.setup.state in CONNECTED_STATES:
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
        self.security.close()

    def _tls_buffered(self) -> list[BrokerConnection]:
        if self.security.ssl_context is None:
            return []  # plaintext producers never load OpenSSL (about 6 MB)
        return [n for n in self._nodes.values() if n.tls and n.tls_buffered()]

    # --- I/O --------------------------------------------------------------------------------------

    def _connect(self, node: BrokerConnection, now: float) -> None:
        # Java's rule: the check for nodes the metadata named, once a cluster id is known.
        check = (self._cluster_check and not node.bootstrap and self._cluster_id is not None
                 and node.node_id not in self._no_cluster_check)
        node.setup.cluster_check = (self._cluster_id, node.node_id) if check and self._cluster_id else None
        error = node.connect(now, self._setup_timeout.backoff(node.failed_connects))
        if node.sock is None:
            assert error is not None
            self._count_failure(node, ConnectionState.CONNECTING, now, error)  # refused before a socket
            return
        self._step(node, error, now)

    def _step(self, node: BrokerConnection, error: KafkaError | None, now: float) -> None:
        """After a step of the node's setup: close it on failure, else follow its selector interest."""
        if error is not None:
            self._close(node, now, error, failure=True)
        else:
            self._update_interest(node)

    def _write(self, node: BrokerConnection, now: float) -> None:
        error = node.write(now, self._pending)
        if error is not None:
            self._close(node, now, error, failure=True)

    def _read(self, node: BrokerConnection, now: float) -> None:
        error = node.read(now, self._pending)
        if error is not None:
            self._close(node, now, error, failure=True)
        elif not node.bootstrap:
            self._known_unready_since = None  # a broker of the last metadata answers

    # --- timers -----------------------------------------------------------------------------------

    def _next_deadline(self, now: float) -> float:
        deadline = float("inf")
        for node in self._nodes.values():
            if node.conn is None:
                continue
            setup = node.setup
            if setup.state in SETUP_TIMED_STATES:
                deadline = min(deadline, setup.setup_deadline_ms)
            oldest = node.conn.oldest_send_time()
            if oldest is not None:
                deadline = min(deadline, oldest + self.request_timeout_ms)
            elif setup.state is ConnectionState.READY:
                deadline = min(deadline, node.last_activity_ms + self.connections_max_idle_ms)
            if setup.state is ConnectionState.READY and not setup.reauth_due:
                deadline = min(deadline, setup.reauth_at_ms - 1.0)
        # Expiry is "older than", so wake just after the deadline, not on it.
        return deadline + 1.0

    def _expire(self, now: float) -> None:
        for node in list(self._nodes.values()):
            conn = node.conn
            if conn is None:
                continue
            setup = node.setup
            if setup.state in SETUP_TIMED_STATES:
                timed_out = setup.setup_timed_out(now)
                if timed_out is not None:
                    self._close(node, now, timed_out, failure=True)
                    continue
            # Once due, the connection takes no new requests: those in flight finish first.
            if now >= setup.reauth_at_ms and setup.check_reauthentication(now):
                if conn.in_flight_count == 0 and not conn.has_pending_output:
                    self._step(node, node.reauthenticate(now), now)
                    continue
            oldest = conn.oldest_send_time()
            if oldest is not None and now - oldest > self.request_timeout_ms:
                self._close_timed_out(node, now)
            elif (oldest is None and setup.state is ConnectionState.READY
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
        self._close(node, now, timed_out, failure=True,
                    request_error=lambda req: timed_out if req.send_time_ms < cutoff else collateral)

    # --- closing ----------------------------------------------------------------------------------

    def _close(self, node: BrokerConnection, now: float, error: KafkaError, *, failure: bool, record: bool = True,
               request_error: Callable[[InFlightRequest], KafkaError] | None = None) -> None:
        """Close the socket and fail every unfinished request of `node` exactly once with `error` (or what
        request_error says for it)."""
        was = node.state
        if node.events:
            self._selector.unregister(node.fd)
        self._pending.extend(node.response(req, None, error if request_error is None else request_error(req), now)
                             for req in node.close())
        if failure:
            self._count_failure(node, was, now, error if record else None)
        else:
            log.debug("closed %s: %s", node.describe(), error)

    def _count_failure(self, node: BrokerConnection, was: ConnectionState, now: float,
                       error: KafkaError | None) -> None:
        """A failed attempt at `node` whose connection was in state `was`: what the next attempt does
        differently, then the backoff before it."""
        if was is ConnectionState.CONNECTING:
            node.addr_index += 1  # the next attempt tries the next resolved address
        if was in SETUP_TIMED_STATES:
            node.failed_connects += 1  # the next connect gets a longer setup timeout
        node.last_attempt_ms = now
        node.reconnect_backoff_ms = self._backoff.backoff(node.failed_attempts)
        if isinstance(error, AuthenticationError | NotKafkaError):
            # Wrong credentials, an untrusted certificate or another service's port do not fix themselves:
            # never hammer the server.
            node.reconnect_backoff_ms = max(node.reconnect_backoff_ms, self._backoff.max_ms)
        if isinstance(error, AuthenticationError):
            self._auth_failures.append(error)
            node.traffic.authentication_failed(reauthentication=node.reauth_started_ms is not None)
        node.reauth_started_ms = None
        if error is not None:
            self._server_disconnects += 1
        quiet = False
        if (was is ConnectionState.API_VERSIONS and node.setup.cluster_check is not None and error is not None
                and not isinstance(error.__cause__, RebootstrapRequiredError)):
            log.debug("%s closed the connection on ApiVersions with the cluster check; asking without it",
                      node.describe())
            self._no_cluster_check.add(node.node_id)
            quiet = True  # our request's doing, and the next attempt differs: not the user's problem
        if error is not None and isinstance(error.__cause__, RebootstrapRequiredError) and self._rebootstrap:
            # The broker at this address is not the node the metadata named (KIP-1242): the whole view of the
            # cluster is suspect, so every connection to it goes and the bootstrap list is asked again.
            for other in self._nodes.values():
                if not other.bootstrap and other is not node and other.sock is not None:
                    self._close(other, now, KafkaConnectionError(f"closing {other.describe()} to rebootstrap"),
                                failure=False)
            self.rebootstrap(f"cluster metadata mismatch for cluster {self._cluster_id} and {node.describe()}")
        if not quiet:
            node.failed_attempts += 1
        if error is not None:
            node.last_error = error
        # One warning per run of failures; repeats (and client-initiated disconnects) only at debug.
        level = logging.WARNING if error is not None and node.failed_attempts == 1 and not quiet else logging.DEBUG
        if isinstance(error, AuthenticationError):
            level = logging.ERROR  # as Java: needs the user's attention, and repeats at most once a backoff
        log.log(level, "%s; next attempt in %.0f ms", _naming(node, error), node.reconnect_backoff_ms)

    # --- helpers ----------------------------------------------------------------------------------

    def _can_send(self, node: BrokerConnection, now: float) -> bool:
        # As Java: no new request until the previous one is fully written, at most max in flight, and none
        # while a quota throttles the node.
        conn = node.conn
        setup = node.setup
        return (
            setup.state is ConnectionState.READY
            and not setup.reauth_due
            and conn is not None
            and not conn.has_pending_output
            and conn.in_flight_count < self.max_in_flight
            and node.throttle_until_ms <= now
        )

    @staticmethod
    def _throttled(node: BrokerConnection, now: float) -> bool:
        return node.state is ConnectionState.READY and node.throttle_until_ms > now

    def _user_in_flight(self, node: BrokerConnection) -> int:
        # Only READY connections carry caller requests; before that the only request is our ApiVersions.
        conn = node.conn
        return conn.in_flight_count if conn is not None and node.setup.state is ConnectionState.READY else 0

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
            if self._throttled(node, now):
                continue  # as Java's leastLoadedNode: neither ready nor connecting
            if self._can_send(node, now):
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
        if node.sock is None or self._closed:
            return
        want = node.interest()
        if want == node.events:
            return
        if node.events:
            self._selector.modify(node.fd, want, node)
        else:
            self._selector.register(node.fd, want, node)
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


def _naming(node: BrokerConnection, error: KafkaError | None) -> str:
    """The error's text, naming the broker once: the errors the connection and its setup make (SASL, TLS,
    socket) already start from it or name it, and prefixing it again read "node -1 (h:p): node -1 (h:p): ..."."""
    where = node.describe()
    if error is None:
        return f"{where}: disconnected"
    text = str(error)
    return text if where in text else f"{where}: {text}"
