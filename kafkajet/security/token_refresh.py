"""A token the client fetches itself (OIDC, AWS MSK IAM; a Kerberos login too), fetched once, cached and refreshed ahead of expiry.

One RefreshingTokenSource per client, shared by all of its connections: the identity provider is asked once
per refresh, not once per connection. As Java's ExpiringCredentialRefreshingLogin, the refresh happens in
the background at `sasl.login.refresh.window.factor` (+ jitter) of the token's lifetime, at least
`min.period.seconds` from now and at least `buffer.seconds` before expiry; so a connection that
re-authenticates near the end of its session (KIP-368, 85-95 % of a lifetime the broker caps at the token's
expiry) already finds the new token, and no connection thread waits on HTTP while a valid token exists.

A fetch that fails is retried as Java's oauthbearer Retry does: waits doubling from
`sasl.login.retry.backoff.ms`, for at most `sasl.login.retry.backoff.max.ms` in all; a failed background
refresh keeps the old (still valid) token and tries again later, so an identity-provider outage shorter
than the token's remaining life costs nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkajet.backoff import ExponentialBackoff
from kafkajet.config import default, setting
from kafkajet.errors import AuthenticationError, KafkaError

log = logging.getLogger("kafkajet.security")


class TokenFetchError(AuthenticationError):
    """A token could not be fetched. The text names the endpoint and the HTTP status or cause, never a
    secret; `retryable` is False for answers a retry cannot change (a 4xx refusal, a malformed token)."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    expires_at: float  # wall-clock seconds
    issued_at: float  # wall-clock seconds
    principal: str | None = None


_REFRESH_KEYS = ("sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
                 "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
                 "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms")


@dataclass(frozen=True)
class RefreshConfig:
    """The sasl.login.refresh.* and sasl.login.retry.* settings; the defaults are the configuration table's."""

    window_factor: float = float(default(_REFRESH_KEYS[0]))
    window_jitter: float = float(default(_REFRESH_KEYS[1]))
    min_period_s: float = float(default(_REFRESH_KEYS[2]))
    buffer_s: float = float(default(_REFRESH_KEYS[3]))
    retry_backoff_ms: float = float(default(_REFRESH_KEYS[4]))
    retry_backoff_max_ms: float = float(default(_REFRESH_KEYS[5]))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> RefreshConfig:
        return cls(*(float(setting(cfg, key)) for key in _REFRESH_KEYS))


def refresh_at(token: Token, now: float, cfg: RefreshConfig, rng: random.Random) -> float:
    """When to refresh `token` (wall seconds), by Java's ExpiringCredentialRefreshingLogin rules."""
    remaining = token.expires_at - now
    if remaining <= 0:
        return now
    factor = cfg.window_factor + cfg.window_jitter * rng.random()
    if remaining < cfg.min_period_s + cfg.buffer_s:
        # Too short-lived for both margins: Java drops them and refreshes at the window of what is left.
        return now + factor * remaining
    start = min(token.issued_at, now)
    at = start + factor * (token.expires_at - start)
    at = min(at, token.expires_at - cfg.buffer_s)
    return max(at, now + cfg.min_period_s)


class RefreshingTokenSource:
    """The OAuthBearerClient's token provider: token() and extensions(). Thread-safe."""

    def __init__(self, fetch: Callable[[], Token], cfg: RefreshConfig, *, describe: str,
                 extensions: Mapping[str, str] | None = None, clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None) -> None:
        self._fetch = fetch
        self._cfg = cfg
        self._describe = describe  # names the endpoint in logs; holds no secret
        self._extensions = dict(extensions or {})
        self._clock = clock
        self._rng = rng or random.Random()
        # Java's Retry: waits doubling from retry.backoff.ms, no jitter. The same waits, by the count of failed
        # rounds, space a failed background refresh's next rounds (Java's refresher waits a fixed 10 s).
        self._backoff = ExponentialBackoff(max(self._cfg.retry_backoff_ms, 1.0), 2,
                                           max(self._cfg.retry_backoff_max_ms, self._cfg.retry_backoff_ms, 1.0), 0.0)
        self._lock = threading.Lock()  # guards _token and _timer
        self._fetch_lock = threading.Lock()  # one fetch at a time: N connections, one request
        self._closed = threading.Event()
        self._token: Token | None = None
        self._timer: threading.Timer | None = None
        self.fetches = 0  # successful fetches, for tests and metrics
        self.refresh_at: float | None = None

    def __repr__(self) -> str:
        state = "no token" if self._token is None else f"expires_at={self._token.expires_at:.0f}"
        return f"RefreshingTokenSource({self._describe}, {state}, fetches={self.fetches})"

    def token(self) -> str:
        current = self._valid()
        if current is not None:
            return current.value
        with self._fetch_lock:
            current = self._valid()  # another connection may have fetched it meanwhile
            if current is not None:
                return current.value
            return self._install(self._fetch_with_retry()).value

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _valid(self) -> Token | None:
        """The cached token, unless it is about to expire: one that runs out while its SaslAuthenticate
        travels fails the connection, so the last second (or tenth of a short life) counts as expired."""
        token = self._token
        if token is None:
            return None
        margin = min(1.0, (token.expires_at - token.issued_at) / 10)
        return token if self._clock() < token.expires_at - margin else None

    def _install(self, token: Token) -> Token:
        now = self._clock()
        at = refresh_at(token, now, self._cfg, self._rng)
        with self._lock:
            self._token = token
            self.fetches += 1
            self.refresh_at = at
        # `describe` says what kind: an OAUTHBEARER token endpoint, or a Kerberos KDC for a principal.
        log.info("new credential from %s: expires in %.0f s, refresh in %.0f s", self._describe,
                 token.expires_at - now, at - now)
        self._schedule(at - now)
        return token

    def _schedule(self, delay_s: float, failures: int = 0) -> None:
        if self._closed.is_set():
            return
        ref = weakref.ref(self)  # a timer must not keep an abandoned client's source alive

        def fire() -> None:
            source = ref()
            if source is not None:
                source._refresh(failures)

        timer = threading.Timer(max(delay_s, 0.0), fire)
        timer.daemon = True
        timer.name = "kafkajet-token-refresh"
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = timer
        timer.start()

    def _refresh(self, failures: int = 0) -> None:
        if self._closed.is_set():
            return
        try:
            with self._fetch_lock:
                token = self._fetch_with_retry()
        except Exception as e:  # also a provider's bug: the refresh must not die with its timer thread
            # The old token may still be good for a while: keep it, try again after a growing wait.
            reason = str(e) if isinstance(e, KafkaError) else type(e).__name__  # only our texts are secret-free
            wait_ms = self._backoff.backoff(failures)
            old = self._token
            left = "expired" if old is None or old.expires_at <= self._clock() else \
                f"current token expires in {old.expires_at - self._clock():.0f} s"
            log.warning("token refresh failed (%s); retrying in %.0f ms (%s)", reason, wait_ms, left)
            self._schedule(wait_ms / 1000, failures + 1)
            return
        self._install(token)

    def _fetch_with_retry(self) -> Token:
        """Java's Retry: doubling waits from retry.backoff.ms within a budget of retry.backoff.max.ms."""
        budget_end = time.monotonic() + self._cfg.retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            try:
                return self._fetch()
            except TokenFetchError as e:
                if not e.retryable:
                    raise
                left = budget_end - time.monotonic()
                wait = min(self._backoff.backoff(attempt) / 1000, left)
                if wait <= 0 or self._closed.is_set():
                    raise
                log.debug("token fetch from %s failed (%s); retrying in %.0f ms", self._describe, e, wait * 1000)
                attempt += 1
                if self._closed.wait(wait):
                    raise
