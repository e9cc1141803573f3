"""Sans-I/O SASL authentication of one connection: SaslHandshake v1, then SaslAuthenticate rounds.

The same object serves the non-blocking NetworkClient and the blocking admin connection: the owner sends
the request it is given, decodes the response and hands the body back, until the exchange says it is done.
As Java's SaslClientAuthenticator, ApiVersions comes first, so the versions of both APIs are negotiated;
a re-authentication (KIP-368) is a new exchange on the same connection, without ApiVersions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkajet.errors import (
    NO_ERROR,
    AuthenticationError,
    KafkaError,
    SaslAuthenticationError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    error_for_code,
)
from kafkajet.network.versions import negotiate
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkajet.security.mechanism import SaslClient

# Java re-authenticates at a random point between 85 % and 95 % of the session lifetime.
REAUTH_FRACTION = (0.85, 0.95)


@dataclass(frozen=True, slots=True)
class SaslRequest:
    api_key: ApiKey
    version: int
    body: dict[str, Any]


class SaslExchange:
    """One authentication: call start(), send what it returns, feed each decoded response body to
    on_response(), which returns the next request or None once authenticated. Any failure raises an
    AuthenticationError (SaslAuthenticationError when the broker refused) and the connection must be closed.
    """

    def __init__(self, client: SaslClient, broker: str, api_versions: Mapping[int, tuple[int, int]]) -> None:
        self.client = client
        self.broker = broker
        self.mechanism = client.mechanism
        self._versions = api_versions
        self._authenticate_version = 0
        self._state = "initial"
        self.session_lifetime_ms = 0

    @property
    def done(self) -> bool:
        return self._state == "done"

    def start(self) -> SaslRequest:
        if self._state != "initial":
            raise AuthenticationError("SASL exchange started twice")
        handshake = self._version(ApiKey.SASL_HANDSHAKE)
        if handshake < 1:
            # v0 means GSSAPI-style raw tokens without SaslAuthenticate framing (pre KIP-152 brokers).
            raise SaslAuthenticationError(f"{self.broker} only supports SaslHandshake v0; kafkajet needs v1+ "
                                          "(Kafka 1.0 or later)")
        self._authenticate_version = self._version(ApiKey.SASL_AUTHENTICATE)
        self._state = "handshake"
        return SaslRequest(ApiKey.SASL_HANDSHAKE, handshake, {"mechanism": self.mechanism})

    def on_response(self, api_key: int, body: Mapping[str, Any]) -> SaslRequest | None:
        if self._state == "handshake" and api_key == ApiKey.SASL_HANDSHAKE:
            return self._on_handshake(body)
        if self._state == "authenticating" and api_key == ApiKey.SASL_AUTHENTICATE:
            return self._on_authenticate(body)
        raise AuthenticationError(f"SASL exchange with {self.broker}: unexpected api key {api_key} response "
                                  f"in state {self._state}")

    def _on_handshake(self, body: Mapping[str, Any]) -> SaslRequest:
        code = int(body.get("error_code", NO_ERROR))
        if code == UnsupportedSaslMechanismError.code:
            offered = ", ".join(body.get("mechanisms") or ()) or "none"
            raise SaslAuthenticationError(f"SASL mechanism {self.mechanism} is not enabled on {self.broker} "
                                          f"(it offers: {offered})")
        if code != NO_ERROR:
            raise SaslAuthenticationError(f"SaslHandshake with {self.broker} failed: {_code_name(code)}")
        self._state = "authenticating"
        return self._authenticate(self._call(self.client.start))

    def _on_authenticate(self, body: Mapping[str, Any]) -> SaslRequest | None:
        code = int(body.get("error_code", NO_ERROR))
        if code != NO_ERROR:
            message = body.get("error_message") or "no reason given by the broker"
            reason = "authentication failed" if code == SaslAuthenticationFailedError.code else _code_name(code)
            raise SaslAuthenticationError(f"SASL {self.mechanism} {reason} on {self.broker}: {message}")
        server = bytes(body.get("auth_bytes") or b"")
        self.session_lifetime_ms = int(body.get("session_lifetime_ms") or 0)
        if self.client.complete:
            if server:
                raise AuthenticationError(f"SASL {self.mechanism} with {self.broker}: protocol violation: the "
                                          "broker sent data after the exchange completed")
            self._state = "done"
            return None
        reply = self._call(lambda: self.client.step(server))
        if reply is None:
            if not self.client.complete:
                raise AuthenticationError(f"SASL {self.mechanism} with {self.broker}: the mechanism stopped "
                                          "before completing")
            self._state = "done"
            return None
        return self._authenticate(reply)

    def _authenticate(self, auth_bytes: bytes) -> SaslRequest:
        return SaslRequest(ApiKey.SASL_AUTHENTICATE, self._authenticate_version, {"auth_bytes": auth_bytes})

    def _call(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except KafkaError as e:
            self._state = "failed"
            if isinstance(e, AuthenticationError):
                raise type(e)(f"{self.broker}: {e}") from None
            raise
        except Exception as e:  # a token provider's own failure, say: name the step, keep the type
            self._state = "failed"
            raise AuthenticationError(f"SASL {self.mechanism} with {self.broker} failed in the client: "
                                      f"{type(e).__name__}") from e

    def _version(self, api: ApiKey) -> int:
        try:
            return negotiate(self._versions, api)
        except KafkaError:
            ours = SUPPORTED_VERSIONS[api]
            raise SaslAuthenticationError(f"{self.broker} does not support {api.name} v{ours[0]}-{ours[1]}: "
                                          "SASL is not enabled on this listener") from None

    def reauthenticate_after_ms(self, rng: random.Random) -> float | None:
        """When to re-authenticate, measured from the end of this exchange; None if the session never expires."""
        if self.session_lifetime_ms <= 0:
            return None
        return self.session_lifetime_ms * rng.uniform(*REAUTH_FRACTION)


def _code_name(code: int) -> str:
    cls = error_for_code(code)
    return f"error {code}" if cls is None else f"{cls.name} (error {code})"
