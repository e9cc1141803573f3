"""Kerberos for sasl.mechanism=GSSAPI (RFC 4752), on the `gssapi` package (`pip install 'kafkajet[gssapi]'`).

The client logs in from a keytab (sasl.kerberos.keytab and sasl.kerberos.principal, librdkafka's names, or
Java's Krb5LoginModule options keyTab= and principal= in sasl.jaas.config) into a credential cache of its
own: a MEMORY cache per login, so two clients in one process, or a user's own kinit, never share tickets.
Without a keytab it uses a ticket cache a kinit filled, as Java's useTicketCache=true (ticketCache= naming
it) and as librdkafka does with no keytab (KRB5CCNAME or the default cache); that cache's renewal is the
kinit's business (Java's renewTGT=false), and the client only reads it again at each login.
The login is a token of kafkajet.security.token_refresh: its value is the cache's name, fetched once per
client, shared by every connection, and renewed in the background at Java's KerberosLogin window
(sasl.kerberos.ticket.renew.window.factor 0.8 of the ticket's life, plus jitter, at least
sasl.kerberos.min.time.before.relogin after the last login). A connection that re-authenticates (KIP-368)
after a re-login takes its service ticket with the new TGT.

The exchange, as the JDK's GssKrb5Client that Kafka's Java client runs: GSS-API context tokens
(service@broker-host, mutual authentication) until the context is established, an empty message if the
last step produced no token, then the RFC 4752 3.1 security layer negotiation: the broker's wrapped
4-byte message (a bit mask of layers and its maximum buffer size) is answered with a wrapped
"no security layer" (mask 1, size 0) and no authorization id, as Kafka supports no other layer.

Errors name the principal (with its realm), the keytab's path and the Kerberos reason; a keytab's
contents never leave the GSS-API library.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkajet.config import setting
from kafkajet.errors import AuthenticationError, ConfigError
from kafkajet.security.mechanism import OneExchange
from kafkajet.security.token_refresh import RefreshConfig, RefreshingTokenSource, Token, TokenFetchError

_INSTALL = "pip install 'kafkajet[gssapi]' (the gssapi package, on MIT Kerberos' libgssapi-krb5)"

# RFC 4752 3.1: the security layer bit masks.
NO_SECURITY_LAYER = 1


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise ConfigError(f"sasl.mechanism=GSSAPI needs the gssapi package: {_INSTALL}") from None
    return gssapi


@dataclass(frozen=True)
class KerberosSettings:
    """Where the client's Kerberos credentials come from: a keytab it logs in with, or else a ticket cache
    someone else's kinit fills (ccache None: KRB5CCNAME or krb5.conf's default cache)."""

    principal: str | None
    keytab: str | None = None
    ccache: str | None = None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def kerberos_settings(cfg: Mapping[str, Any], jaas: Mapping[str, str]) -> KerberosSettings:
    """The keytab login (sasl.kerberos.principal and .keytab, or Krb5LoginModule's useKeyTab=true keyTab=
    principal=), else the ticket cache: Krb5LoginModule's useTicketCache=true (ticketCache= naming one), or
    librdkafka's behaviour when no keytab is set (the default cache, KRB5CCNAME). ConfigError if a value is
    set differently in both places, or for a JAAS line that asks for what kafkajet cannot do (a password
    prompt, renewTGT)."""
    values = {}
    for key, option in (("sasl.kerberos.principal", "principal"), ("sasl.kerberos.keytab", "keyTab")):
        explicit, from_jaas = cfg.get(key), jaas.get(option)
        if explicit is not None and from_jaas is not None and explicit != from_jaas:
            raise ConfigError(f"{key} and the {option} in sasl.jaas.config disagree; give it in one place only")
        value = explicit if explicit is not None else from_jaas
        values[option] = str(value) if value else None
    principal, keytab = values["principal"], values["keyTab"]
    use_keytab = _truthy(jaas.get("useKeyTab", "true" if keytab else "false"))
    use_cache = _truthy(jaas.get("useTicketCache")) or (not jaas and keytab is None)
    if use_keytab and keytab is not None:
        if principal is None:
            raise ConfigError("sasl.mechanism=GSSAPI with a keytab needs sasl.kerberos.principal (or "
                              "principal=... in sasl.jaas.config): the keytab may hold several")
        if not os.access(keytab, os.R_OK):
            raise ConfigError(f"sasl.kerberos.keytab: cannot read the keytab file {keytab}")
        return KerberosSettings(with_realm(principal), keytab=keytab)
    if not use_cache:
        raise ConfigError("sasl.jaas.config: Krb5LoginModule needs useKeyTab=true with keyTab=..., or "
                          "useTicketCache=true (a kinit's ticket cache); kafkajet cannot prompt for a password")
    if _truthy(jaas.get("renewTGT")):
        # Java's renewTGT runs kinit -R from its refresh thread; here the cache is the user's kinit's to renew.
        raise ConfigError("sasl.jaas.config: renewTGT=true is not supported: renew the ticket cache with your "
                          "own kinit -R (kafkajet reads it again at each login), or log in from a keytab")
    return KerberosSettings(with_realm(principal) if principal else None, ccache=jaas.get("ticketCache") or None)


def service_name(cfg: Mapping[str, Any], jaas: Mapping[str, str]) -> str:
    """sasl.kerberos.service.name, or the JAAS line's serviceName= (Kafka reads both; given differently in
    each, Java refuses), or librdkafka's default "kafka"."""
    explicit, from_jaas = cfg.get("sasl.kerberos.service.name"), jaas.get("serviceName")
    if explicit is not None and from_jaas is not None and explicit != from_jaas:
        raise ConfigError("sasl.kerberos.service.name and the serviceName in sasl.jaas.config disagree; give it "
                          "in one place only")
    name = explicit if explicit is not None else from_jaas if from_jaas is not None else "kafka"
    if not name:
        raise ConfigError("sasl.kerberos.service.name must not be empty")
    return str(name)


def with_realm(principal: str) -> str:
    """name@REALM for a principal given without its realm (krb5.conf's default_realm), so that what the
    client logs and every error names is the principal the KDC sees."""
    if "@" in principal:
        return principal
    gssapi = _gssapi()
    try:
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
        return str(name.canonicalize(gssapi.MechType.kerberos))
    except gssapi.exceptions.GSSError:
        raise ConfigError(f"sasl.kerberos.principal={principal!r} has no realm and krb5.conf names no "
                          "default_realm: give it as name@REALM") from None


def renew_config(cfg: Mapping[str, Any]) -> RefreshConfig:
    """Java's KerberosLogin timing in RefreshConfig terms: no buffer before expiry, the relogin minimum as
    the least period; a failed login is retried with the sasl.login.retry.* waits."""
    def get(key: str) -> float:
        return float(setting(cfg, key))

    return RefreshConfig(get("sasl.kerberos.ticket.renew.window.factor"), get("sasl.kerberos.ticket.renew.jitter"),
                         get("sasl.kerberos.min.time.before.relogin") / 1000, 0.0,
                         get("sasl.login.retry.backoff.ms"), get("sasl.login.retry.backoff.max.ms"))


class KeytabLogin:
    """One login per call: a fresh MEMORY credential cache holding a TGT got with the keytab's key."""

    def __init__(self, principal: str, keytab: str, clock: Callable[[], float] = time.time) -> None:
        self.principal = principal
        self.keytab = keytab
        self._clock = clock

    def __repr__(self) -> str:
        return f"KeytabLogin({self.principal!r}, keytab={self.keytab!r})"

    def __call__(self) -> Token:
        gssapi = _gssapi()
        # A new cache per login, as Java's relogin makes a new Subject: connections in the middle of an
        # exchange keep the cache they started with. An old MEMORY cache (a few KB) lives on with the process.
        ccache = f"MEMORY:kafkajet-{uuid.uuid4().hex}"
        try:
            name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
            acquired = gssapi.raw.acquire_cred_from(
                {b"client_keytab": os.fsencode(self.keytab), b"ccache": ccache.encode()}, name=name,
                usage="initiate")
            lifetime = acquired.lifetime
        except gssapi.exceptions.GSSError as e:
            text = _gss_text(e)
            # Only an unreachable KDC may pass; a refused principal or a wrong key stays refused.
            retryable = "contact" in text.lower() or "timed out" in text.lower()
            raise TokenFetchError(f"GSSAPI: cannot log in as {self.principal} with the keytab {self.keytab}: "
                                  f"{text}", retryable) from None
        now = self._clock()
        return Token(ccache, now + float(lifetime or 0), now, self.principal)


class TicketCacheLogin:
    """The TGT a kinit put in a ticket cache, read again at each login: renewal is the kinit's (or its
    cron's) job, as with Java's useTicketCache=true and renewTGT=false. The cache's name is the token, so
    each connection takes its service ticket from the cache as it is then."""

    def __init__(self, principal: str | None, ccache: str | None, clock: Callable[[], float] = time.time) -> None:
        self.principal = principal
        self.ccache = ccache
        self._clock = clock

    def __repr__(self) -> str:
        return f"TicketCacheLogin({self.principal!r}, ccache={self.ccache!r})"

    def where(self) -> str:
        return self.ccache or os.environ.get("KRB5CCNAME") or "the default ticket cache"

    def __call__(self) -> Token:
        gssapi = _gssapi()
        # Resolved at each login: KRB5CCNAME may point elsewhere now than when the client was made.
        ccache = self.ccache or os.environ.get("KRB5CCNAME") or ""
        who = self.principal or "the cache's principal"
        try:
            acquired = _from_cache(gssapi, self.principal, ccache)
            lifetime = acquired.lifetime
            principal = str(gssapi.Credentials(acquired.creds).name)
        except gssapi.exceptions.GSSError as e:
            # A cache holds what it holds: asking again before someone runs kinit changes nothing.
            raise TokenFetchError(f"GSSAPI: no usable Kerberos ticket for {who} in {self.where()}: {_gss_text(e)} "
                                  "(run kinit, or set sasl.kerberos.keytab)", retryable=False) from None
        if not lifetime:
            raise TokenFetchError(f"GSSAPI: the ticket of {principal} in {self.where()} has expired (run kinit)",
                                  retryable=False)
        now = self._clock()
        return Token(ccache, now + float(lifetime), now, principal)


def _from_cache(gssapi: Any, principal: str | None, ccache: str) -> Any:
    """The initiator credentials of `principal` (None: the cache's own) in the ticket cache named `ccache` ("":
    KRB5CCNAME or the default cache), as gssapi's acquire_cred_from returns them; GSSError if there are none."""
    name = gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal else None
    store = {b"ccache": ccache.encode()} if ccache else {}
    return gssapi.raw.acquire_cred_from(store, name=name, usage="initiate")


def _gss_text(e: Exception) -> str:
    """The GSS-API major and minor messages, which name the principal and the Kerberos reason."""
    gen = getattr(e, "gen_message", None)
    text = gen() if callable(gen) else str(e)
    return " ".join(str(text).split())


def kerberos_login(cfg: Mapping[str, Any], jaas: Mapping[str, str],
                   clock: Callable[[], float] = time.time) -> RefreshingTokenSource:
    """The client's one login: logs in now (a wrong keytab or an unknown principal fails the client's
    construction, as Java's LoginManager does) and renews in the background."""
    settings = kerberos_settings(cfg, jaas)
    login: Callable[[], Token]
    if settings.keytab is not None:
        assert settings.principal is not None
        login = KeytabLogin(settings.principal, settings.keytab, clock)
        describe = f"Kerberos KDC for {settings.principal}"
    else:
        login = TicketCacheLogin(settings.principal, settings.ccache, clock)
        describe = f"Kerberos ticket cache {login.where()}"
    source = RefreshingTokenSource(login, renew_config(cfg), describe=describe, clock=clock)
    source.token()
    return source


def gssapi_client(cfg: Mapping[str, Any], jaas: Mapping[str, str], login: RefreshingTokenSource | None,
                  host: str) -> GssapiClient:
    """One exchange's client, on the client-wide `login` (a login of its own when there is none)."""
    login = login if login is not None else kerberos_login(cfg, jaas)
    return GssapiClient(login.token, kerberos_settings(cfg, jaas).principal, service_name(cfg, jaas), host)


class GssapiClient(OneExchange):
    """One GSSAPI exchange with `host` as sasl.kerberos.service.name/host, with the TGT in `ccache`."""

    mechanism = "GSSAPI"

    def __init__(self, login: Callable[[], str], principal: str | None, service: str, host: str) -> None:
        self._login = login
        self._principal = principal  # None: the ticket cache's own principal
        self._target = f"{service}@{host}"
        self._context: Any = None
        self._state = "initial"  # -> context -> layer -> complete | failed

    def __repr__(self) -> str:
        return f"GssapiClient(principal={self._principal!r}, service={self._target!r}, state={self._state})"

    def start(self) -> bytes:
        self._begin()
        self._state = "failed"
        gssapi = _gssapi()
        ccache = self._login()
        try:
            creds = gssapi.Credentials(_from_cache(gssapi, self._principal, ccache).creds)
            target = gssapi.Name(self._target, gssapi.NameType.hostbased_service)
            self._context = gssapi.SecurityContext(
                name=target, creds=creds, usage="initiate",
                flags=gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.out_of_sequence_detection)
            token = self._context.step()
        except gssapi.exceptions.GSSError as e:
            raise self._error("cannot start the Kerberos exchange", e) from None
        self._state = "context"
        return bytes(token or b"")

    def step(self, server_message: bytes) -> bytes | None:
        state = self._state
        self._state = "failed"
        gssapi = _gssapi()
        try:
            if state == "context":
                reply = self._context.step(server_message)
                self._state = "layer" if self._context.complete else "context"
                return bytes(reply or b"")
            if state == "layer":
                reply = self._security_layer(server_message)
                self._state = "complete"
                return reply
        except gssapi.exceptions.GSSError as e:
            raise self._error("the broker's Kerberos token was refused", e) from None
        raise AuthenticationError(f"GSSAPI: unexpected server message in state {state}")

    def _security_layer(self, server_message: bytes) -> bytes:
        offer = self._context.unwrap(server_message).message
        if len(offer) != 4:
            raise AuthenticationError(f"GSSAPI: protocol violation: the security layer message has {len(offer)} "
                                      "bytes, not 4")
        if not offer[0] & NO_SECURITY_LAYER:
            raise AuthenticationError("GSSAPI: the broker requires a security layer (integrity or privacy); "
                                      "Kafka clients support none")
        # Mask "none", maximum size 0 (RFC 4752: zero without a layer), no authorization id.
        return bytes(self._context.wrap(bytes([NO_SECURITY_LAYER, 0, 0, 0]), False).message)

    def _error(self, what: str, e: Exception) -> AuthenticationError:
        client = self._principal or "from the ticket cache"
        return AuthenticationError(f"GSSAPI: {what} (client {client}, service {self._target}): "
                                   f"{_gss_text(e)}")
