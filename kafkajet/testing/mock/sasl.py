"""The broker side of SASL for the mock cluster: a server mechanism for each mechanism the client speaks
(config.SASL: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER, AWS_MSK_IAM, and GSSAPI in
kafkajet.testing.mock.gssapi), the stored credentials and validators, and the per-connection state machine
of Kafka's SaslServerAuthenticator.

Per connection: [ApiVersions] -> SaslHandshake -> SaslAuthenticate... -> authenticated. Before that only
ApiVersions and SaslHandshake are served; anything else closes the connection, as Kafka does. SaslHandshake
v0 switches the connection to the legacy framing (KIP-43): size-prefixed raw SASL tokens, no Kafka headers,
until the mechanism completes; v1 carries the tokens in SaslAuthenticate requests. A failed authentication
is answered (v1) and the connection closed (MockConfig.sasl_failure_close_delay_ms later). An authenticated
connection may re-authenticate (KIP-368) with the same mechanism and principal; once a session lifetime has
passed, anything but SaslHandshake closes it."""

from __future__ import annotations

import base64
import hmac
import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkajet.config import SASL_MECHANISMS
from kafkajet.errors import error_for_name
from kafkajet.protocol import ApiKey
from kafkajet.security import scram
from kafkajet.testing.mock.gssapi import GssapiServer
from kafkajet.testing.mock.sasl_rejections import SaslRejected, invalid_credentials, malformed

SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
ITERATIONS = 4096  # Kafka's minimum for SCRAM credentials

Body = dict[str, Any]


def _code(name: str) -> int:
    return error_for_name(name).code


# --- credentials ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScramCredential:
    """What a broker stores per user and mechanism (RFC 5802): never the password itself."""

    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def scram_credential(mechanism: str, password: str, *, salt: bytes | None = None,
                     iterations: int = ITERATIONS) -> ScramCredential:
    hash_ = scram.hash_name(mechanism)
    salt = secrets.token_bytes(16) if salt is None else salt
    salted = scram.salted_password(hash_, password.encode("utf-8"), salt, iterations)
    return ScramCredential(salt, iterations, scram.stored_key(hash_, scram.client_key(hash_, salted)),
                           scram.server_key(hash_, salted))


class InvalidToken(Exception):
    """A TokenValidator's refusal; the text says what was wrong (never quoting the token)."""


# An OAUTHBEARER token and its KIP-342 extensions -> (principal, expiry in wall-clock seconds or None);
# InvalidToken to refuse. Kafka's broker plugs its validator in the same way (a callback handler).
TokenValidator = Callable[[str, Mapping[str, str]], tuple[str, float | None]]
# AWS_MSK_IAM's JSON message -> (principal, expiry); InvalidToken to refuse (kafkajet.testing.aws_msk).
NativeMskValidator = Callable[[Mapping[str, str]], tuple[str, float | None]]


class Credentials:
    """user -> password for PLAIN (Kafka's PLAIN callback compares plain passwords too), and salted SCRAM
    credentials per SCRAM mechanism; the OAUTHBEARER token validator. Guarded by the cluster lock."""

    def __init__(self, users: Mapping[str, str] | None = None, iterations: int = ITERATIONS) -> None:
        self.oauthbearer_validator: TokenValidator | None = None
        self.aws_msk_iam_validator: NativeMskValidator | None = None
        self.gssapi_keytab: str | None = None  # the brokers' service keytab (kafkajet.testing.mock.gssapi)
        self._iterations = iterations
        self._plain: dict[str, bytes] = {}
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        for user, password in (users or {}).items():
            self.set(user, password)

    def __repr__(self) -> str:
        return f"Credentials(users={sorted(self._plain)})"

    def set(self, user: str, password: str) -> None:
        if not user or not isinstance(user, str) or not isinstance(password, str):
            raise ValueError("a SASL user needs a non-empty name and a string password")
        self._plain[user] = password.encode("utf-8")
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            self._scram[(mechanism, user)] = scram_credential(mechanism, password, iterations=self._iterations)

    def set_scram_credential(self, mechanism: str, user: str, credential: ScramCredential) -> None:
        """A SCRAM credential made elsewhere (a fixed salt, as in RFC 7677's example)."""
        self._scram[(mechanism, user)] = credential

    def remove(self, user: str) -> None:
        self._plain.pop(user, None)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            self._scram.pop((mechanism, user), None)

    def users(self) -> list[str]:
        return sorted(self._plain)

    def plain_matches(self, user: str, password: bytes) -> bool:
        expected = self._plain.get(user)
        # Compared even for an unknown user, so the time taken says nothing about which users exist.
        return hmac.compare_digest(expected if expected is not None else b"\0" * 8, password) and \
            expected is not None

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._scram.get((mechanism, user))


# --- server mechanisms ------------------------------------------------------------------------------------


class ServerMechanism(Protocol):
    mechanism: str
    principal: str | None

    def evaluate(self, client_message: bytes) -> bytes:
        """The server's answer to a client message; SaslRejected to refuse."""
        ...

    @property
    def complete(self) -> bool: ...


class PlainServer:
    """RFC 4616: authzid NUL authcid NUL passwd; the authzid must be empty or the username (as Kafka)."""

    mechanism = "PLAIN"

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        self.principal: str | None = None

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def evaluate(self, client_message: bytes) -> bytes:
        if self.complete:
            raise SaslRejected("PLAIN takes one message", "ILLEGAL_SASL_STATE")
        parts = client_message.split(b"\0")
        if len(parts) != 3:
            raise malformed("PLAIN", "message: expected authzid NUL username NUL password")
        authzid_b, user_b, password = parts
        try:
            authzid, user = authzid_b.decode("utf-8"), user_b.decode("utf-8")
        except UnicodeDecodeError:
            raise malformed("PLAIN", "message: the username is not UTF-8") from None
        if not user:
            raise SaslRejected("Authentication failed: username not specified")
        if not password:
            raise SaslRejected("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslRejected("Authentication failed: Client requested an authorization id that is different "
                               "from username")
        if not self._credentials.plain_matches(user, password):
            raise invalid_credentials("PLAIN")
        self.principal = user
        return b""


class ScramServer:
    """RFC 5802 server: client-first -> server-first; client-final -> server-final (v=signature)."""

    def __init__(self, mechanism: str, credentials: Credentials, *, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = scram.hash_name(mechanism)
        self._credentials = credentials
        self._server_nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._state = "initial"  # -> sent-first -> complete | failed
        self._user = ""
        self._gs2_header = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self.principal: str | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, client_message: bytes) -> bytes:
        state = self._state
        self._state = "failed"
        try:
            if state == "initial":
                reply = self._server_first_message(client_message)
                self._state = "sent-first"
                return reply
            if state == "sent-first":
                reply = self._server_final_message(client_message)
                self._state = "complete"
                return reply
        except scram.ScramProtocolError as e:
            raise SaslRejected(f"Authentication failed: {e}") from None
        raise SaslRejected(f"{self.mechanism}: unexpected client message in state {state}", "ILLEGAL_SASL_STATE")

    def _server_first_message(self, data: bytes) -> bytes:
        text = scram.decode_message(data, "client-first message")
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise malformed(self.mechanism, "client-first message")
        cbind, authzid, bare = parts
        if cbind not in ("n", "y"):
            # "p=": the client wants channel binding, which needs the -PLUS mechanism we do not offer.
            raise malformed(self.mechanism, "client-first message: channel binding is not supported")
        if authzid and not authzid.startswith("a="):
            raise malformed(self.mechanism, "client-first message: bad authorization id")
        attrs = scram.parse_attributes(bare, "client-first message")
        if attrs[0][0] == "m":
            raise malformed(self.mechanism, "client-first message: unsupported mandatory extension")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise malformed(self.mechanism, "client-first message: expected n=, r=")
        user = scram.unescape_saslname(attrs[0][1])
        nonce = attrs[1][1]
        if not user or not scram.valid_nonce(nonce):
            raise malformed(self.mechanism, "client-first message: empty username or bad nonce")
        if authzid and scram.unescape_saslname(authzid[2:]) != user:
            raise SaslRejected("Authentication failed: Client requested an authorization id that is different "
                               "from username")
        credential = self._credentials.scram(self.mechanism, user)
        if credential is None:
            raise invalid_credentials(self.mechanism)
        self._user, self._credential, self._gs2_header = user, credential, f"{cbind},{authzid},"
        self._nonce = nonce + self._server_nonce
        self._client_first_bare = bare
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _server_final_message(self, data: bytes) -> bytes:
        text = scram.decode_message(data, "client-final message")
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise malformed(self.mechanism, "client-final message: no proof")
        attrs = scram.parse_attributes(without_proof, "client-final message")
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise malformed(self.mechanism, "client-final message: expected c=, r=")
        if scram.b64decode(attrs[0][1], "the channel binding") != self._gs2_header.encode():
            raise malformed(self.mechanism, "client-final message: channel binding does not match")
        if attrs[1][1] != self._nonce:
            raise malformed(self.mechanism, "client-final message: nonce does not match")
        proof = scram.b64decode(proof_b64, "the client proof")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = scram.hmac_(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise invalid_credentials(self.mechanism)
        client_key = scram.xor(proof, signature)
        if not hmac.compare_digest(scram.stored_key(self._hash, client_key), credential.stored_key):
            raise invalid_credentials(self.mechanism)
        self.principal = self._user
        server_signature = scram.hmac_(self._hash, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class OAuthBearerServer:
    """RFC 7628 / KIP-255 server: "n,,\x01auth=Bearer <token>[\x01k=v]\x01\x01", checked by the validator.
    A refused token is answered with the JSON error challenge; the client's "\x01" then ends the exchange
    with SASL_AUTHENTICATION_FAILED, as Kafka's OAuthBearerSaslServer does. `expires_at` (wall seconds)
    caps the session lifetime, as Kafka caps it at the token's expiry."""

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator | None) -> None:
        self._validator = validator
        self._state = "initial"  # -> complete | error-sent -> failed
        self._error = ""
        self.principal: str | None = None
        self.expires_at: float | None = None
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, client_message: bytes) -> bytes:
        if self._state == "error-sent":
            self._state = "failed"
            if client_message != b"\x01":
                raise malformed("OAUTHBEARER", "message after the error challenge: expected \\x01")
            raise SaslRejected(f"Authentication failed: {self._error}")
        if self._state != "initial":
            raise SaslRejected("OAUTHBEARER: unexpected client message", "ILLEGAL_SASL_STATE")
        token, extensions = _parse_oauthbearer(client_message)
        try:
            if self._validator is None:
                raise InvalidToken("no token validator is configured on this cluster")
            principal, expires_at = self._validator(token, extensions)
        except InvalidToken as e:
            self._state, self._error = "error-sent", str(e)
            return json.dumps({"status": "invalid_token"}).encode()
        self.principal, self.expires_at, self.extensions = principal, expires_at, extensions
        self._state = "complete"
        return b""


def _parse_oauthbearer(message: bytes) -> tuple[str, dict[str, str]]:
    try:
        text = message.decode("ascii")
    except UnicodeDecodeError:
        raise malformed("OAUTHBEARER", "message: not ASCII") from None
    header, sep, rest = text.partition("\x01")
    if not sep or not header.startswith(("n,", "y,")) or not rest.endswith("\x01\x01"):
        raise malformed("OAUTHBEARER", "message: expected a GS2 header and \\x01-separated key=value pairs")
    pairs = dict(item.partition("=")[::2] for item in rest[:-2].split("\x01"))
    auth = pairs.pop("auth", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise malformed("OAUTHBEARER", "message: no auth=Bearer <token>")
    return token, pairs


class MskIamServer:
    """aws-msk-iam-auth's native mechanism: one JSON message of SigV4 query parameters; the broker answers
    JSON with its version and a request id, or fails the exchange."""

    mechanism = "AWS_MSK_IAM"

    def __init__(self, validator: NativeMskValidator | None) -> None:
        self._validator = validator
        self.principal: str | None = None
        self.expires_at: float | None = None

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def evaluate(self, client_message: bytes) -> bytes:
        if self.complete:
            raise SaslRejected("AWS_MSK_IAM takes one message", "ILLEGAL_SASL_STATE")
        try:
            message = json.loads(client_message)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise malformed("AWS_MSK_IAM", "message: not a JSON object")
        try:
            if self._validator is None:
                raise InvalidToken("no AWS_MSK_IAM validator is configured on this cluster")
            self.principal, self.expires_at = self._validator(message)
        except InvalidToken as e:
            raise SaslRejected(f"Authentication failed: {e}") from None
        return json.dumps({"version": message.get("version"), "request-id": secrets.token_hex(8)}).encode()


# The server side of each mechanism of config.SASL, the client's table: the mock serves every one.
_SERVERS: dict[str, Callable[[str, Credentials], ServerMechanism]] = {
    "PLAIN": lambda _, credentials: PlainServer(credentials),
    "SCRAM-SHA-256": ScramServer,
    "SCRAM-SHA-512": ScramServer,
    "OAUTHBEARER": lambda _, credentials: OAuthBearerServer(credentials.oauthbearer_validator),
    "AWS_MSK_IAM": lambda _, credentials: MskIamServer(credentials.aws_msk_iam_validator),
    "GSSAPI": lambda _, credentials: GssapiServer(credentials.gssapi_keytab),
}
SERVER_MECHANISMS: tuple[str, ...] = tuple(m for m in SASL_MECHANISMS if m in _SERVERS)


def server_mechanism(mechanism: str, credentials: Credentials) -> ServerMechanism:
    return _SERVERS[mechanism](mechanism, credentials)


# --- per connection ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaslAuthRecord:
    """One SASL exchange the cluster finished: reauth True for a KIP-368 re-authentication."""

    broker_id: int
    mechanism: str
    principal: str | None  # the username that authenticated; None when refused
    ok: bool
    reauth: bool
    error: str | None
    time: float  # time.monotonic()


@dataclass(slots=True)
class SaslReply:
    body: Body
    close: bool = False


class SaslSession:
    """One connection's SASL state. Called on the server thread with the cluster lock held."""

    def __init__(self, mechanisms: tuple[str, ...], credentials: Credentials, broker_id: int,
                 records: deque[SaslAuthRecord]) -> None:
        self._mechanisms = mechanisms
        self._credentials = credentials
        self._broker_id = broker_id
        self._records = records
        self.stage = "handshake"  # -> authenticate (v1) | raw (v0) -> authenticated | failed
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.expires_at: float | None = None  # time.monotonic() when the session ends; None: never
        self.session_lifetime_ms = 0  # what the last SaslAuthenticate answer told the client
        self.authentications = 0
        self._server: ServerMechanism | None = None
        self._reauth = False

    @property
    def raw(self) -> bool:
        """True while the next frames are raw SASL tokens (after SaslHandshake v0)."""
        return self.stage == "raw"

    @property
    def authenticated(self) -> bool:
        return self.stage == "authenticated"

    def refusal(self, api: int, now: float) -> str | None:
        """Why a request of `api` must close the connection, or None if it may be served."""
        name = _api_name(api)
        if self.stage == "authenticated":
            if self.expires_at is not None and now >= self.expires_at and api != ApiKey.SASL_HANDSHAKE:
                return f"{name} after the SASL session expired (no re-authentication)"
            return None
        if self.stage == "handshake" and api in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
            return None
        if self.stage == "authenticate" and api == ApiKey.SASL_AUTHENTICATE:
            return None
        return f"{name} during SASL authentication (stage {self.stage})"

    def handshake(self, mechanism: str, version: int, now: float) -> SaslReply:
        reauth = self.stage == "authenticated"
        enabled = list(self._mechanisms)
        if self.stage not in ("handshake", "authenticated"):
            return SaslReply({"error_code": _code("ILLEGAL_SASL_STATE"), "mechanisms": enabled}, close=True)
        if reauth and (version < 1 or mechanism != self.mechanism):
            # KIP-368: re-authentication keeps the mechanism, and needs SaslAuthenticate (v1 handshake).
            self._record(mechanism, False, True, "re-authentication must use the same mechanism", now)
            return SaslReply({"error_code": _code("ILLEGAL_SASL_STATE"), "mechanisms": enabled}, close=True)
        if mechanism not in self._mechanisms:
            self._record(mechanism, False, reauth, "UNSUPPORTED_SASL_MECHANISM", now)
            return SaslReply({"error_code": _code("UNSUPPORTED_SASL_MECHANISM"), "mechanisms": enabled},
                             close=True)
        self.mechanism = mechanism
        self._server = server_mechanism(mechanism, self._credentials)
        self.stage = "authenticate" if version >= 1 else "raw"
        self._reauth = reauth
        return SaslReply({"error_code": 0, "mechanisms": enabled})

    def authenticate(self, auth_bytes: bytes, now: float, lifetime_ms: int) -> SaslReply:
        if self.stage != "authenticate":
            return SaslReply(_auth_body("ILLEGAL_SASL_STATE", "SaslAuthenticate without a SaslHandshake v1"),
                             close=True)
        try:
            challenge = self._evaluate(auth_bytes, now, lifetime_ms)
        except SaslRejected as e:
            return SaslReply(_auth_body(e.error, e.message), close=True)
        body = _auth_body(None, None, challenge)
        if self.stage == "authenticated":
            body["session_lifetime_ms"] = self.session_lifetime_ms
        return SaslReply(body)

    def raw_token(self, token: bytes, now: float, lifetime_ms: int) -> bytes | None:
        """The answer to a raw token (after SaslHandshake v0); None means close the connection: a legacy
        client learns of a failure only by the close."""
        try:
            return self._evaluate(token, now, lifetime_ms)
        except SaslRejected:
            return None

    def _evaluate(self, data: bytes, now: float, lifetime_ms: int) -> bytes:
        server, mechanism = self._server, self.mechanism
        assert server is not None and mechanism is not None
        try:
            challenge = server.evaluate(data)
        except SaslRejected as e:
            self.stage = "failed"
            self._record(mechanism, False, self._reauth, e.message, now)
            raise
        if server.complete:
            self._server = None
            if self._reauth and server.principal != self.principal:
                self.stage = "failed"
                message = "Authentication failed: re-authentication changed the principal"
                self._record(mechanism, False, True, message, now)
                raise SaslRejected(message)
            self.stage = "authenticated"
            self.principal = server.principal
            self.authentications += 1
            token_expiry = getattr(server, "expires_at", None)
            if token_expiry is not None:
                # Kafka: min(connections.max.reauth.ms, the credential's remaining life), at least 0.
                left_ms = max(int((token_expiry - time.time()) * 1000), 0)
                lifetime_ms = left_ms if lifetime_ms <= 0 else min(lifetime_ms, left_ms)
            self.session_lifetime_ms = max(lifetime_ms, 0)
            self.expires_at = now + lifetime_ms / 1000 if lifetime_ms > 0 else None
            self._record(mechanism, True, self._reauth, None, now)
        return challenge

    def _record(self, mechanism: str, ok: bool, reauth: bool, error: str | None, now: float) -> None:
        principal = self.principal if ok or reauth else None
        self._records.append(SaslAuthRecord(self._broker_id, mechanism, principal, ok, reauth, error, now))


def _api_name(api: int) -> str:
    try:
        return ApiKey(api).name
    except ValueError:
        return f"api key {api}"


def _auth_body(error: str | None, message: str | None, auth_bytes: bytes = b"") -> Body:
    return {"error_code": _code(error) if error else 0, "error_message": message, "auth_bytes": auth_bytes,
            "session_lifetime_ms": 0}


__all__ = [
    "Credentials", "InvalidToken", "MskIamServer", "NativeMskValidator", "OAuthBearerServer", "PlainServer", "TokenValidator", "SASL_APIS", "SERVER_MECHANISMS", "SaslAuthRecord",
    "SaslRejected", "SaslReply", "SaslSession", "ScramCredential", "ScramServer", "scram_credential",
]
