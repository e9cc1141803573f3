"""What every SASL mechanism client shares: one exchange per client object, and where it stands."""

from __future__ import annotations

from kafkajet.errors import AuthenticationError


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
