"""How the mock cluster's SASL server mechanisms refuse an exchange (SaslRejected), in Kafka's wording: below
both kafkajet.testing.mock.sasl (which answers the client with it) and the mechanisms kept in modules of their
own (kafkajet.testing.mock.gssapi)."""

from __future__ import annotations


class SaslRejected(Exception):
    """The server refuses the exchange; `error` is the Kafka error name for the SaslAuthenticate answer."""

    def __init__(self, message: str, error: str = "SASL_AUTHENTICATION_FAILED") -> None:
        super().__init__(message)
        self.message = message
        self.error = error


def invalid_credentials(mechanism: str) -> SaslRejected:
    # Kafka's wording for a SaslAuthenticationException caused by bad credentials.
    return SaslRejected("Authentication failed during authentication due to invalid credentials with SASL "
                        f"mechanism {mechanism}")


def malformed(mechanism: str, what: str) -> SaslRejected:
    # Kafka answers a mechanism's SaslException with SASL_AUTHENTICATION_FAILED too (with a generic text;
    # ours says what was wrong, which helps whoever is debugging a client against the mock).
    return SaslRejected(f"Authentication failed: invalid {mechanism} {what}")
