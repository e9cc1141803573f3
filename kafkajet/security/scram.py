"""SCRAM (RFC 5802, RFC 7677) for Kafka's SCRAM-SHA-256 and SCRAM-SHA-512: the client, and the pieces a
server needs (key derivation, message parsing) so the mock cluster can share them.

Sans-I/O: bytes in, bytes out, no sockets, no clock. As Kafka does, passwords are used as UTF-8 without
SASLprep, channel binding is not supported ("n,," / "c=biws"), and a server offering fewer than 4096
iterations is refused (Kafka's ScramMechanism minimum).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from kafkajet.errors import AuthenticationError, ConfigError
from kafkajet.security.mechanism import OneExchange

# Kafka's ScramMechanism bounds: credentials cannot be created outside them, so a server asking for more
# is either broken or trying to make us burn CPU.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

# SCRAM-SHA-1 is not a Kafka mechanism; it is here so RFC 5802's own example exchange can test the algorithm.
HASHES: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512", "SCRAM-SHA-1": "sha1"}

GS2_HEADER = "n,,"  # no channel binding, no authzid
CHANNEL_BINDING = base64.b64encode(GS2_HEADER.encode()).decode()  # "biws"


class ScramProtocolError(AuthenticationError):
    """A SCRAM message did not parse (a protocol violation): the connection must be closed."""


# --- the algorithm (RFC 5802 section 3) -------------------------------------------------------------------


def hash_name(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ConfigError(f"unknown SCRAM mechanism {mechanism!r}; known: {', '.join(HASHES)}") from None


def salted_password(hash_: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_, password, salt, iterations)


def hmac_(hash_: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_).digest()


def client_key(hash_: str, salted: bytes) -> bytes:
    return hmac_(hash_, salted, b"Client Key")


def server_key(hash_: str, salted: bytes) -> bytes:
    return hmac_(hash_, salted, b"Server Key")


def stored_key(hash_: str, client_key_: bytes) -> bytes:
    return hashlib.new(hash_, client_key_).digest()


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


# --- message syntax (RFC 5802 section 7) ------------------------------------------------------------------


def escape_saslname(name: str) -> str:
    # "=" first, or the "=" of "=2C" would be escaped again.
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_saslname(value: str) -> str:
    """ScramProtocolError for a "=" not starting =2C or =3D (RFC 5802: the server must fail)."""
    out = []
    i = 0
    while i < len(value):
        c = value[i]
        if c == "=":
            code = value[i + 1:i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramProtocolError("SCRAM protocol violation: invalid escape in a username")
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_attributes(text: str, what: str) -> list[tuple[str, str]]:
    """"a=x,b=y" -> [("a", "x"), ("b", "y")]; each attribute a single ASCII letter, values without ","."""
    out = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=" or not ("a" <= part[0] <= "z" or "A" <= part[0] <= "Z"):
            raise ScramProtocolError(f"SCRAM protocol violation: malformed attribute in the {what}")
        out.append((part[0], part[2:]))
    return out


def decode_message(data: bytes, what: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramProtocolError(f"SCRAM protocol violation: the {what} is not UTF-8") from None
    if not text:
        raise ScramProtocolError(f"SCRAM protocol violation: empty {what}")
    return text


def b64decode(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ScramProtocolError(f"SCRAM protocol violation: {what} is not valid base64") from None


def valid_nonce(nonce: str) -> bool:
    """RFC 5802 printable: %x21-2B / %x2D-7E (visible ASCII except ",")."""
    return bool(nonce) and all("\x21" <= c <= "\x7e" and c != "," for c in nonce)


def parse_iterations(value: str) -> int:
    if not value.isascii() or not value.isdigit() or value.startswith("0") or len(value) > 10:
        raise ScramProtocolError("SCRAM protocol violation: the iteration count is not a positive integer")
    return int(value)


# --- the client -------------------------------------------------------------------------------------------


class ScramClient(OneExchange):
    """One SCRAM exchange: start() -> client-first; step(server-first) -> client-final;
    step(server-final) -> None once the server's signature is verified (complete is then True).

    A failed or malformed exchange raises AuthenticationError (ScramProtocolError for a parse failure);
    the client is then spent. `nonce` is for tests with known vectors; leave it None otherwise.
    """

    def __init__(self, username: str, password: str, mechanism: str = "SCRAM-SHA-256", *,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = hash_name(mechanism)
        if not username:
            raise ConfigError(f"{mechanism}: the username is empty")
        self._username = username
        try:
            self._password = password.encode("utf-8")
        except (UnicodeEncodeError, AttributeError):
            # The UnicodeEncodeError would carry the whole password in its .object.
            raise ConfigError(f"{mechanism}: the password is not a valid text string") from None
        if nonce is not None and not valid_nonce(nonce):
            raise ConfigError(f"{mechanism}: a nonce must be visible ASCII without ','")
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = ""
        self._auth_message = b""
        self._server_signature = b""
        self._state = "initial"  # -> sent-first -> sent-final -> complete | failed

    def __repr__(self) -> str:
        return f"ScramClient(mechanism={self.mechanism!r}, username={self._username!r}, state={self._state})"

    def start(self) -> bytes:
        self._begin()
        self._client_first_bare = f"n={escape_saslname(self._username)},r={self._nonce}"
        self._state = "sent-first"
        return (GS2_HEADER + self._client_first_bare).encode("utf-8")

    def step(self, server_message: bytes) -> bytes | None:
        state = self._state
        self._state = "failed"  # until this step succeeds: a spent client refuses to go on
        if state == "sent-first":
            reply = self._client_final(server_message)
            self._state = "sent-final"
            return reply
        if state == "sent-final":
            self._verify_server_final(server_message)
            self._state = "complete"
            return None
        raise AuthenticationError(f"{self.mechanism}: unexpected server message in state {state}")

    def _client_final(self, server_message: bytes) -> bytes:
        text = decode_message(server_message, "server-first message")
        nonce, salt, iterations = parse_server_first(text, self._nonce)
        if iterations < MIN_ITERATIONS:
            raise AuthenticationError(
                f"{self.mechanism}: the server asked for {iterations} iterations, fewer than the minimum "
                f"{MIN_ITERATIONS}")
        if iterations > MAX_ITERATIONS:
            raise AuthenticationError(
                f"{self.mechanism}: the server asked for {iterations} iterations, more than the maximum "
                f"{MAX_ITERATIONS}")
        salted = salted_password(self._hash, self._password, salt, iterations)
        self._password = b""  # no longer needed; keep secrets in memory as briefly as we can
        without_proof = f"c={CHANNEL_BINDING},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        ckey = client_key(self._hash, salted)
        proof = xor(ckey, hmac_(self._hash, stored_key(self._hash, ckey), auth_message))
        self._server_signature = hmac_(self._hash, server_key(self._hash, salted), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_message: bytes) -> None:
        text = decode_message(server_message, "server-final message")
        attrs = parse_attributes(text, "server-final message")
        key, value = attrs[0]
        if key == "e":
            raise AuthenticationError(f"{self.mechanism} authentication failed: the server says {value[:200]!r}")
        if key != "v":
            raise ScramProtocolError("SCRAM protocol violation: the server-final message has no verifier")
        signature = b64decode(value, "the server signature")
        if not hmac.compare_digest(signature, self._server_signature):
            raise AuthenticationError(
                f"{self.mechanism}: the server's signature does not match; it does not know our credentials")


def parse_server_first(text: str, client_nonce: str) -> tuple[str, bytes, int]:
    """(nonce, salt, iterations) of "r=...,s=...,i=...[,ext...]" (RFC 5802 order), checking the nonce
    extends ours. Raises ScramProtocolError; the iteration bounds are the caller's policy."""
    attrs = parse_attributes(text, "server-first message")
    if attrs[0][0] == "m":
        raise ScramProtocolError("SCRAM protocol violation: the server requires an unsupported extension (m=)")
    if len(attrs) < 3 or [k for k, _ in attrs[:3]] != ["r", "s", "i"]:
        raise ScramProtocolError("SCRAM protocol violation: the server-first message needs r=, s=, i= in order")
    seen = [k for k, _ in attrs]
    if len(set(seen)) != len(seen):
        raise ScramProtocolError("SCRAM protocol violation: repeated attribute in the server-first message")
    nonce, salt_b64, iterations = attrs[0][1], attrs[1][1], attrs[2][1]
    if not valid_nonce(nonce):
        raise ScramProtocolError("SCRAM protocol violation: invalid nonce characters")
    if not nonce.startswith(client_nonce) or len(nonce) == len(client_nonce):
        raise ScramProtocolError("SCRAM protocol violation: the server nonce does not extend the client nonce")
    salt = b64decode(salt_b64, "the salt")
    if not salt:
        raise ScramProtocolError("SCRAM protocol violation: empty salt")
    return nonce, salt, parse_iterations(iterations)
