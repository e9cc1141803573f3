"""A plain blocking connection for admin-style request/response, and a bootstrap metadata helper.

Not for the producer's data path (that is NetworkClient); this serves the admin client, the CLI and tests,
where one request at a time and a timeout per call are all that is needed.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kafkajet.addresses import format_address, parse_servers
from kafkajet.backoff import ExponentialBackoff
from kafkajet.clock import now_ms
from kafkajet.cluster import metadata_request_body
from kafkajet.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RequestTimedOutError,
    SslAuthenticationError,
)
from kafkajet.network.connection import (
    DEFAULT_MAX_RESPONSE_SIZE,
    Connection,
    CorruptStreamError,
    NotKafkaError,
)
from kafkajet.network.setup import SendRequest, SetupMachine, StartTls
from kafkajet.network.versions import VersionRanges, negotiate
from kafkajet.protocol import ApiKey, decode_response, encode_request
from kafkajet.security.connection import PLAINTEXT, ConnectionSecurity

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("kafkajet.network")

_RECV_SIZE = 256 * 1024


class BlockingConnection:
    """Connects, does the TLS handshake, negotiates API versions and authenticates (SASL) in the constructor;
    every call is bounded by a timeout.

    The steps are those of the producer's connections (setup.SetupMachine), driven here with blocking I/O.
    Any failure closes the connection (its byte stream is then in an unknown state); make a new one. A SASL
    session with a lifetime is renewed (KIP-368) before the next request once 85-95 % of it has passed.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "kafkajet",
        timeout_s: float = 30.0,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        security: ConnectionSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.address = format_address(host, port)
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._conn = Connection(max_response_size)
        self._correlation_id = 0
        self._sock: socket.socket | None = None
        self.security = security or PLAINTEXT
        self._setup = SetupMachine(self.address, host, self.security)
        deadline = time.monotonic() + timeout_s
        # The whole setup shares the call's deadline, so the machine's own setup timeout never fires first.
        self._setup.connecting(now_ms(), timeout_s * 1000.0)
        self._sock = self._open(deadline)
        try:
            action = self._setup.connected(now_ms())
            if isinstance(action, StartTls):
                assert self.security.ssl_context is not None
                self._sock = self._tls_handshake(self._sock, self.security.ssl_context, deadline)
                action = self._setup.tls_done(now_ms())
            self._run(action, deadline)
        except BaseException:
            self.close()
            raise

    @property
    def closed(self) -> bool:
        return self._sock is None

    @property
    def api_versions(self) -> VersionRanges:
        """The broker's (min, max) version per api key."""
        return self._setup.api_versions or {}

    @property
    def finalized_features(self) -> Mapping[str, int]:
        """The feature levels the broker's ApiVersions answer finalizes (name -> max_version_level)."""
        return dict(self._setup.features.levels) if self._setup.features is not None else {}

    def _open(self, deadline: float) -> socket.socket:
        timeout = max(deadline - time.monotonic(), 0.001)
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except TimeoutError:
            raise KafkaConnectionError(f"connect to {self.address} timed out after {timeout:.1f} s") from None
        except ConnectionRefusedError as e:
            raise KafkaConnectionError(f"connect to {self.address} refused: {e}") from None
        except socket.gaierror as e:
            raise KafkaConnectionError(f"cannot resolve {self.address}: {e}") from None
        except OSError as e:
            raise KafkaConnectionError(f"connect to {self.address} failed: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _tls_handshake(self, sock: socket.socket, context: ssl.SSLContext, deadline: float) -> socket.socket:
        error: KafkaError
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            return context.wrap_socket(sock, server_hostname=self.host)
        except TimeoutError:
            from kafkajet.security.tls import NOT_TLS_HINT

            error = KafkaConnectionError(f"TLS handshake with {self.address} timed out; {NOT_TLS_HINT}")
        except OSError as e:
            from kafkajet.security.tls import handshake_error

            error = handshake_error(self.address, e)
        sock.close()
        self._sock = None
        raise error

    def _run(self, request: SendRequest | None, deadline: float) -> None:
        """Send each request the setup machine asks for until it says the connection is ready."""
        try:
            while request is not None:
                sent = now_ms()  # a SASL session lifetime runs from the broker's answer, after this
                payload = self._round_trip(request.api_key, request.version, request.body, deadline,
                                           step=request.step, correlation_id=request.correlation_id)
                request = self._setup.on_response(request.api_key, request.version, payload, sent, now_ms())
        except BaseException:
            self.close()
            raise

    def api_version(self, api_key: int) -> int:
        """The version request() uses for `api_key`: the highest both sides support, within the client's caps
        (versions.CLIENT_MAX_VERSIONS)."""
        return negotiate(self.api_versions, api_key)

    def supports(self, api_key: int) -> bool:
        try:
            negotiate(self.api_versions, api_key)
        except KafkaError:
            return False
        return True

    def request(self, api_key: int, body: dict[str, Any], *, version: int | None = None,
                timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request and wait for its decoded response body."""
        api = ApiKey(api_key)
        if version is None:
            version = self.api_version(api)
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        if self._sock is not None and self._setup.check_reauthentication(now_ms()):
            self._run(self._setup.reauthenticate(), deadline)  # KIP-368: nothing is in flight between two calls
        payload = self._round_trip(api, version, body, deadline, step=api.name)
        try:
            _, decoded = decode_response(api, version, payload)
        except Exception as e:  # the bytes arrived whole but do not parse: close, as the stream is suspect
            self.close()
            raise CorruptStreamError(f"cannot decode {api.name} v{version} response from {self.address}: {e}") from e
        return decoded

    def _round_trip(self, api: ApiKey, version: int, body: dict[str, Any], deadline: float, *, step: str,
                    correlation_id: int | None = None) -> bytes:
        sock = self._sock
        if sock is None:
            raise KafkaConnectionError(f"connection to {self.address} is closed")
        if correlation_id is None:
            self._correlation_id = correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api, version, correlation_id, self.client_id, body)
        self._conn.send_request(frame, correlation_id=correlation_id, api_key=int(api),
                                api_version=version, now=now_ms())
        try:
            self._set_timeout(sock, deadline, step)
            sock.sendall(frame)
            self._conn.bytes_sent(len(frame))
            while True:
                self._set_timeout(sock, deadline, step)
                data = sock.recv(_RECV_SIZE)
                if not data:
                    raise KafkaConnectionError(f"{self.address} closed the connection during {step}")
                for _, payload in self._conn.receive_data(data):
                    return payload
        except TimeoutError:
            self.close()
            raise RequestTimedOutError(f"{step} request to {self.address} timed out") from None
        except NotKafkaError as e:
            self.close()
            raise NotKafkaError(f"{self.address} is {e}") from None
        except KafkaError:
            self.close()
            raise
        except OSError as e:
            self.close()
            if self.security.ssl_context is not None:  # ssl is only loaded where TLS is configured
                import ssl

                from kafkajet.security.tls import verification_reason

                if isinstance(e, ssl.SSLError):
                    if step in ("ApiVersions", "SASL_HANDSHAKE") and not isinstance(e, ssl.SSLEOFError):
                        # TLS 1.3: the broker's refusal of our certificate arrives with its first response.
                        raise SslAuthenticationError(
                            f"TLS handshake with {self.address} failed: the broker refused the connection: "
                            f"{verification_reason(e)}") from None
                    raise KafkaConnectionError(f"TLS error on the connection to {self.address} during {step}: "
                                               f"{verification_reason(e)}") from None
            raise KafkaConnectionError(f"connection to {self.address} failed during {step}: {e}") from None

    @staticmethod
    def _set_timeout(sock: socket.socket, deadline: float, step: str) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(step)
        sock.settimeout(remaining)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BlockingConnection({self.address}, {'closed' if self.closed else 'open'})"


def warn_unreachable(logger: logging.Logger, address: tuple[str, int], error: KafkaError) -> None:
    """Say at once that `address` failed while the call goes on trying within its timeout, as the producer's
    network client does: a wrong address is told in the first second, not after a silent minute. The caller
    warns once per run of failures of an address."""
    name = format_address(*address)
    logger.warning("%s%s; retrying within the call's timeout", "" if name in str(error) else f"{name}: ", error)


def definitely_unreachable(servers: Any, window_s: float, connect_timeout_s: float = 2.0) -> KafkaConnectionError | None:
    """Why no server of `servers` can be reached, when every one fails for a reason waiting will not change
    (the connection is refused, the name does not resolve) through `window_s` of tries; None as soon as one
    accepts a TCP connection, or does not answer at all within `connect_timeout_s` (a slow or filtered network
    is left to the client's own wait). For a caller that can fail at once with the address instead of waiting
    out a timeout whose message names something else (the Spark sink's "Topic not present in metadata")."""
    addresses = parse_servers(servers)
    deadline = time.monotonic() + window_s
    pauses = ExponentialBackoff(100, 2, 1000, 0)
    rounds = 0
    while True:
        causes: list[str] = []
        for host, port in addresses:
            try:
                socket.create_connection((host, port), timeout=connect_timeout_s).close()
                return None
            except TimeoutError:
                return None
            except ConnectionRefusedError as e:
                causes.append(f"connect to {format_address(host, port)} refused ({e.strerror or e})")
            except socket.gaierror as e:
                causes.append(f"cannot resolve {format_address(host, port)} ({e.strerror or e})")
            except OSError:
                return None  # unreachable network, reset...: not certain enough to cut the wait short
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return KafkaConnectionError("; ".join(causes))
        time.sleep(min(pauses.backoff(rounds) / 1000, remaining))
        rounds += 1


def bootstrap_metadata(servers: Any, timeout_s: float, topics: list[str] | None = None, *,
                       client_id: str = "kafkajet", security: ConnectionSecurity | None = None) -> dict[str, Any]:
    """Metadata from the first bootstrap server that answers, trying each in turn until the deadline."""
    addresses = parse_servers(servers)
    names = ", ".join(format_address(h, p) for h, p in addresses)
    deadline = time.monotonic() + timeout_s
    last: KafkaError | None = None
    pauses = ExponentialBackoff(50, 2, 1000, 0)  # 50 ms doubling to 1 s, no jitter
    rounds = 0
    warned: set[tuple[str, int]] = set()
    while True:
        not_kafka = 0
        for host, port in addresses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                with BlockingConnection(host, port, client_id=client_id, timeout_s=remaining,
                                        security=security) as conn:
                    version = conn.api_version(ApiKey.METADATA)
                    return conn.request(ApiKey.METADATA, metadata_request_body(topics, version=version),
                                        version=version)
            except AuthenticationError:
                raise  # wrong credentials or an untrusted certificate: the next server will say the same
            except NotKafkaError as e:
                last, not_kafka = e, not_kafka + 1
                if not_kafka == len(addresses):
                    raise  # no server of the list is a Kafka broker: waiting will not make one
            except KafkaError as e:
                if (host, port) in warned:
                    log.debug("bootstrap server %s failed: %s", format_address(host, port), e)
                else:
                    warned.add((host, port))
                    warn_unreachable(log, (host, port), e)
                last = e
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaTimeoutError(f"no bootstrap server answered a metadata request within {timeout_s} s "
                                    f"(tried {names})", cause=last)
        # Bounded by the caller's deadline; spaces out rounds when every server is down.
        time.sleep(min(pauses.backoff(rounds) / 1000, remaining))
        rounds += 1
