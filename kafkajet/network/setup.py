"""The setup of one broker connection, sans-I/O: connect -> [TLS] -> ApiVersions -> [SASL] -> ready.

No sockets and no clock here (h11 style): the owner reports what happened (`connecting`, `connected`,
`tls_done`, a response's payload) with its own `now`, and gets back what to do next: a request to send
(`SendRequest`), the TLS handshake to run (`START_TLS`), or None once the connection is ready. Any failure
raises a KafkaError, after which the owner closes the connection. The non-blocking BrokerConnection and the
BlockingConnection both drive this one machine, so a handshake step or a SASL rule is written once.

Rules kept here:
* ApiVersions comes first, as in Java, so that the SASL request versions are negotiated; an ApiVersions
  version the broker refuses is retried lower (KIP-511, `versions.handle_api_versions_response`), at most
  MAX_API_VERSIONS_ATTEMPTS times.
* socket.connection.setup.timeout.ms bounds the TCP connect and the TLS handshake; what follows is bounded
  by request.timeout.ms, as every request is.
* Re-authentication (KIP-368): when the broker gives the SASL session a lifetime, the connection is due for
  a new SaslHandshake + SaslAuthenticate at a random 85-95 % of it, counted from when the last
  SaslAuthenticate was sent (the broker's clock started before we read its answer).
"""

from __future__ import annotations

import enum
import logging
import random
from dataclasses import dataclass
from typing import Any

from kafkajet.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    ProtocolError,
    RebootstrapRequiredError,
)
from kafkajet.network.connection import CorruptStreamError
from kafkajet.network.sasl_exchange import SaslExchange
from kafkajet.network.versions import (
    MAX_API_VERSIONS_ATTEMPTS,
    FinalizedFeatures,
    VersionRanges,
    api_versions_request_body,
    handle_api_versions_response,
    max_api_versions_version,
    negotiate,
)
from kafkajet.protocol import ApiKey, decode_response
from kafkajet.security.connection import ConnectionSecurity

log = logging.getLogger("kafkajet.network")


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    TLS_HANDSHAKE = "tls_handshake"
    API_VERSIONS = "api_versions"
    AUTHENTICATING = "authenticating"
    READY = "ready"


# The transport is up: bytes of Kafka requests may flow.
CONNECTED_STATES = (ConnectionState.API_VERSIONS, ConnectionState.AUTHENTICATING, ConnectionState.READY)
# Bounded by the connection setup timeout rather than by request.timeout.ms.
SETUP_TIMED_STATES = (ConnectionState.CONNECTING, ConnectionState.TLS_HANDSHAKE)


# The correlation id of ApiVersions, a connection's first request (any id is valid: the broker echoes it). Its
# bytes are newlines: a line-based server on a wrong port, such as an HTTP/1 server that waits for the end of
# the request line (Python's http.server, kafkajet's Schema Registry), answers at once, and the framing's text
# check (connection.NotKafkaError) names it. Otherwise only a client id 10 characters long (its length prefix
# is a newline: "producer-1") got an answer, and every other connection waited out its request timeout.
PROBE_CORRELATION_ID = 0x0A0A0A0A


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send this request of the setup; its response goes back to `SetupMachine.on_response`."""

    api_key: ApiKey
    version: int
    body: dict[str, Any]

    @property
    def correlation_id(self) -> int | None:
        """The id this request carries, or None for the connection's next one."""
        return PROBE_CORRELATION_ID if self.api_key == ApiKey.API_VERSIONS else None

    @property
    def step(self) -> str:
        """The setup step, as error messages name it."""
        return "ApiVersions" if self.api_key == ApiKey.API_VERSIONS else self.api_key.name


class StartTls:
    """Run the TLS handshake on the connected socket, then report `tls_done`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "START_TLS"


START_TLS = StartTls()

Action = SendRequest | StartTls | None


class SetupMachine:
    """The setup steps of one connection to `broker` (a description used in messages), reused across
    reconnections: `connecting()` starts a new attempt, `reset()` ends one."""

    __slots__ = ("broker", "host", "security", "_rng", "state", "setup_deadline_ms", "setup_timeout_ms",
                 "api_versions", "features", "reauth_at_ms", "reauth_due", "_api_versions_attempts", "_sasl",
                 "cluster_check")

    def __init__(self, broker: str, host: str, security: ConnectionSecurity, rng: random.Random | None = None) -> None:
        self.broker = broker
        self.host = host  # what the SASL mechanism is told (Kerberos-style service names, OAUTHBEARER scopes)
        self.security = security
        self._rng = rng or random.Random()
        self.state = ConnectionState.DISCONNECTED
        self.setup_deadline_ms = float("inf")
        self.setup_timeout_ms = 0.0
        self.api_versions: VersionRanges | None = None
        self.features: FinalizedFeatures | None = None
        self.reauth_at_ms = float("inf")
        self.reauth_due = False
        self._api_versions_attempts = 0
        self._sasl: SaslExchange | None = None
        # (cluster id, node id) this connection must reach, sent in ApiVersions v5 so that a 4.4 broker refuses
        # a misrouted connection with REBOOTSTRAP_REQUIRED (KIP-1242); None: no check (bootstrap connections).
        self.cluster_check: tuple[str, int] | None = None

    # --- events -----------------------------------------------------------------------------------

    def connecting(self, now: float, setup_timeout_ms: float) -> None:
        """A TCP connect has started; it and the TLS handshake must be done within setup_timeout_ms."""
        self.reset()
        self.state = ConnectionState.CONNECTING
        self.setup_timeout_ms = setup_timeout_ms
        self.setup_deadline_ms = now + setup_timeout_ms

    def connected(self, now: float) -> SendRequest | StartTls:
        """The TCP connection is established."""
        self._expect(ConnectionState.CONNECTING, "connected")
        log.debug("connected to %s", self.broker)
        if self.security.ssl_context is not None:
            # The handshake keeps the connection setup deadline.
            self.state = ConnectionState.TLS_HANDSHAKE
            return START_TLS
        return self._start_api_versions()

    def tls_done(self, now: float) -> SendRequest:
        self._expect(ConnectionState.TLS_HANDSHAKE, "tls_done")
        return self._start_api_versions()

    def on_response(self, api_key: int, version: int, payload: bytes, sent_at_ms: float, now: float) -> SendRequest | None:
        """The response (size prefix removed) to the last SendRequest: the next request, or None when the
        connection is ready. KafkaError when the broker is unusable; CorruptStreamError for bytes that do
        not parse."""
        if self.state is ConnectionState.API_VERSIONS and api_key == ApiKey.API_VERSIONS:
            return self._on_api_versions(version, payload)
        if self.state is ConnectionState.AUTHENTICATING and self._sasl is not None:
            return self._on_sasl(api_key, version, payload, sent_at_ms)
        raise CorruptStreamError(f"{self.broker}: unexpected {ApiKey(api_key).name} response during setup "
                                 f"(state {self.state.value})")

    def check_reauthentication(self, now: float) -> bool:
        """True when the ready connection's SASL session is due for renewal: it then takes no new requests,
        and the owner calls reauthenticate() once those in flight are answered."""
        if self.state is not ConnectionState.READY:
            return False  # not yet authenticated, or the renewal is under way
        if not self.reauth_due and now >= self.reauth_at_ms:
            self.reauth_due = True
        return self.reauth_due

    def reauthenticate(self) -> SendRequest:
        """A new SASL exchange on the ready connection (KIP-368), without ApiVersions."""
        self._expect(ConnectionState.READY, "reauthenticate")
        log.debug("%s: SASL session lifetime nearly over; re-authenticating", self.broker)
        return self._start_sasl()

    def setup_timed_out(self, now: float) -> KafkaError | None:
        """The error to close with when the connect or TLS handshake overran its deadline, else None."""
        if self.state not in SETUP_TIMED_STATES or now <= self.setup_deadline_ms:
            return None
        if self.state is ConnectionState.TLS_HANDSHAKE:
            from kafkajet.security.tls import NOT_TLS_HINT  # loaded already: this connection speaks TLS

            step, hint = "TLS handshake with", f"; {NOT_TLS_HINT}"
        else:
            step, hint = "connection to", ""
        return KafkaConnectionError(f"{step} {self.broker} not done within {self.setup_timeout_ms:.0f} ms "
                                    f"(socket.connection.setup.timeout.ms){hint}")

    def reset(self) -> None:
        """The connection closed: everything negotiated on it is forgotten."""
        self.state = ConnectionState.DISCONNECTED
        self.setup_deadline_ms = float("inf")
        self.api_versions = None
        self.features = None
        self.reauth_at_ms = float("inf")
        self.reauth_due = False
        self._api_versions_attempts = 0
        self._sasl = None

    # --- steps ------------------------------------------------------------------------------------

    def _start_api_versions(self, version: int | None = None) -> SendRequest:
        self.setup_deadline_ms = float("inf")
        self.state = ConnectionState.API_VERSIONS
        self._api_versions_attempts += 1
        return SendRequest(ApiKey.API_VERSIONS, max_api_versions_version() if version is None else version,
                           api_versions_request_body(self.cluster_check))

    def _on_api_versions(self, version: int, payload: bytes) -> SendRequest | None:
        try:
            outcome = handle_api_versions_response(payload, version)
        except Exception as e:  # also a decoder bug: it must not escape into the caller's thread
            error: KafkaError
            if isinstance(e, RebootstrapRequiredError) and self.cluster_check is not None:
                cluster_id, node_id = self.cluster_check
                error = KafkaConnectionError(f"{self.broker} is not node {node_id} of cluster {cluster_id} "
                                             "(REBOOTSTRAP_REQUIRED: the address now serves another broker)")
            elif isinstance(e, KafkaError) and not isinstance(e, ProtocolError):
                error = KafkaConnectionError(f"ApiVersions with {self.broker} failed: {e}")
            else:
                error = CorruptStreamError(f"bad ApiVersions response from {self.broker}: {e}")
            raise error from e
        if outcome.retry_version is not None:
            if self._api_versions_attempts >= MAX_API_VERSIONS_ATTEMPTS:
                raise KafkaConnectionError(f"{self.broker} keeps rejecting our ApiVersions versions")
            log.debug("%s does not support ApiVersions v%d; retrying at v%d", self.broker, version,
                      outcome.retry_version)
            return self._start_api_versions(outcome.retry_version)
        assert outcome.ranges is not None
        self.api_versions = outcome.ranges
        self.features = outcome.features
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: ApiVersions v%d; versions chosen: %s", self.broker, version,
                      describe_versions(outcome.ranges))
        if self.security.sasl is not None:
            return self._start_sasl()
        self._ready()
        return None

    def _start_sasl(self) -> SendRequest:
        factory = self.security.sasl
        assert factory is not None and self.api_versions is not None
        self.state = ConnectionState.AUTHENTICATING
        self.reauth_at_ms = float("inf")
        # A new mechanism object per exchange: SCRAM needs a fresh nonce, OAUTHBEARER a fresh token.
        self._sasl = SaslExchange(factory(self.host), self.broker, self.api_versions)
        request = self._sasl.start()
        return SendRequest(request.api_key, request.version, request.body)

    def _on_sasl(self, api_key: int, version: int, payload: bytes, sent_at_ms: float) -> SendRequest | None:
        exchange = self._sasl
        assert exchange is not None
        try:
            _, body = decode_response(ApiKey(api_key), version, payload)
        except Exception as e:
            raise CorruptStreamError(f"bad {ApiKey(api_key).name} response from {self.broker}: {e}") from e
        request = exchange.on_response(api_key, body)
        if request is not None:
            return SendRequest(request.api_key, request.version, request.body)
        after = exchange.reauthenticate_after_ms(self._rng)
        self.reauth_at_ms = float("inf") if after is None else sent_at_ms + after
        self._sasl = None
        if after is not None:
            log.debug("%s: SASL %s authenticated; session lifetime %d ms, re-authenticating in %.0f ms",
                      self.broker, exchange.mechanism, exchange.session_lifetime_ms, after)
        else:
            log.debug("%s: SASL %s authenticated", self.broker, exchange.mechanism)
        self._ready()
        return None

    def _ready(self) -> None:
        self.state = ConnectionState.READY
        self.reauth_due = False
        log.debug("%s ready", self.broker)

    def _expect(self, state: ConnectionState, event: str) -> None:
        if self.state is not state:
            raise IllegalStateError(f"{self.broker}: {event} in state {self.state.value}")


def describe_versions(ranges: VersionRanges) -> str:
    parts = []
    for api in ApiKey:
        if int(api) in ranges:
            try:
                parts.append(f"{api.name}=v{negotiate(ranges, api)}")
            except KafkaError:
                parts.append(f"{api.name}=unsupported")
    return ", ".join(parts)
