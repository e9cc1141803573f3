"""What a SASL mechanism client is: the one interface the connection code drives (SaslClient), and the
one-exchange state every mechanism in kafkajet.security.sasl shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kafkajet.errors import AuthenticationError


class SaslClient(Protocol):
    """One mechanism's side of one authentication, driven by network.sasl_exchange.SaslExchange."""

    mechanism: str

    def start(self) -> bytes:
        """The first client message."""
        ...

    def step(self, server_message: bytes) -> bytes | None:
        """The next client message; None when the exchange is complete. AuthenticationError on failure."""
        ...

    @property
    def complete(self) -> bool:
        """True once the server's last message was verified."""
        ...


# Builds a fresh client for a broker host name (GSSAPI-style mechanisms need it; a client runs one exchange).
SaslClientFactory = Callable[[str], SaslClient]


class OneExchange:
    """A mechanism client runs a single exchange: `_state` goes from "initial" on to "complete" (or a
    failure), and a second start() is refused rather than silently reusing nonces or spent credentials."""

    mechanism: str
    _state: str = "initial"

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def _begin(self) -> None:
        """The guard at the top of start()."""
        if self._state != "initial":
            raise AuthenticationError(f"{self.mechanism}: start() called twice; use a new client per exchange")
