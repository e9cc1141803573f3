"""SASL client mechanisms, sans-I/O: the network client carries their bytes in SaslAuthenticate requests.

    login = client_login(cfg)                  # once per client: shared by all its connections
    client = sasl_client_from_config(cfg, host, login)
    out = client.start()                       # auth_bytes of the first SaslAuthenticate
    while out is not None:
        response = <send SaslAuthenticate(auth_bytes=out)>   # raise on a non-zero error code
        out = client.step(response.auth_bytes)
    assert client.complete

Mechanisms, one entry each in kafkajet.config.SASL (which names the functions below that make their clients
and logins): PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, 7677; kafkajet.security.scram), OAUTHBEARER
(RFC 7628, KIP-255), AWS_MSK_IAM (kafkajet.security.aws_msk) and GSSAPI (RFC 4752, Kerberos;
kafkajet.security.kerberos). One client object per exchange: a re-authentication (KIP-368) makes a new one,
which for OAUTHBEARER also fetches a fresh token, and for GSSAPI takes the client's current login.

Every failure is an AuthenticationError (a malformed server message says "protocol violation"), and the
connection should be closed. Passwords and tokens appear in no exception text and no repr.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from kafkajet.config import SASL, SaslMechanism, oauthbearer_method, oauthbearer_needs_a_provider
from kafkajet.errors import AuthenticationError, ConfigError, KafkaError
from kafkajet.security.jaas import parse_jaas_config
from kafkajet.security.mechanism import OneExchange, SaslClient
from kafkajet.security.scram import ScramClient


def authentication_error(mechanism: str, reason: str | None) -> AuthenticationError:
    """The error for a broker's SASL_AUTHENTICATION_FAILED (or similar) answer, in one wording."""
    return AuthenticationError(f"{mechanism} authentication failed: {reason or 'no reason given by the broker'}")


# --- PLAIN ------------------------------------------------------------------------------------------------


class PlainClient(OneExchange):
    """RFC 4616 with an empty authorization id: one message; the broker answers empty bytes if it agrees."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        for what, value in (("username", username), ("password", password)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"PLAIN: the {what} must be a non-empty string")
            if "\0" in value:
                raise ConfigError(f"PLAIN: the {what} contains a NUL character")
        self._username = username
        try:
            self._message = b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError("PLAIN: the username or password is not a valid text string") from None
        self._state = "initial"

    def __repr__(self) -> str:
        return f"PlainClient(username={self._username!r}, state={self._state})"

    def start(self) -> bytes:
        self._begin()
        self._state = "sent"
        message, self._message = self._message, b""
        return message

    def step(self, server_message: bytes) -> bytes | None:
        if self._state != "sent":
            raise AuthenticationError(f"PLAIN: unexpected server message in state {self._state}")
        if server_message:
            self._state = "failed"
            raise AuthenticationError("PLAIN: protocol violation: the server answered with a non-empty message")
        self._state = "complete"
        return None


# --- OAUTHBEARER ------------------------------------------------------------------------------------------

# RFC 6750 b64token; RFC 7628 extension keys are letters, values printable (kept to visible ASCII and space).
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_EXT_KEY = re.compile(r"[A-Za-z]+")
_EXT_VALUE = re.compile(r"[\x20-\x7e\t\r\n]*")

TokenProvider = Any  # a callable returning a token, or an object with token() (and maybe extensions())


class OAuthBearerClient(OneExchange):
    """RFC 7628 / KIP-255: "n,,\\x01auth=Bearer <token>[\\x01key=value...]\\x01\\x01".

    The token (and KIP-342 extensions, from the provider's extensions() if it has one) is fetched at start().
    If the broker rejects the token it answers with a JSON error as a challenge; step() then returns the
    "\\x01" that ends the exchange (RFC 7628 3.2.3) and keeps the error in `server_error`. The broker
    follows with SASL_AUTHENTICATION_FAILED; should it instead answer success, step() raises.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, provider: TokenProvider) -> None:
        if not callable(provider) and not callable(getattr(provider, "token", None)):
            raise ConfigError("sasl.oauthbearer.token.provider must be a callable or have a token() method")
        self._provider = provider
        self._fetch: Callable[[], Any] = provider if callable(provider) else provider.token
        self._state = "initial"
        self.server_error: str | None = None

    def __repr__(self) -> str:
        return f"OAuthBearerClient(provider={type(self._provider).__name__}, state={self._state})"

    def start(self) -> bytes:
        self._begin()
        self._state = "failed"
        token = self._token()
        extensions = self._extensions()
        ext = "".join(f"\x01{k}={v}" for k, v in extensions.items())
        self._state = "sent"
        return f"n,,\x01auth=Bearer {token}{ext}\x01\x01".encode("ascii")

    def _token(self) -> str:
        try:
            token = self._fetch()
        except KafkaError as e:  # kafkajet's own sources (OIDC, MSK): their texts name no secret
            raise AuthenticationError(f"OAUTHBEARER: {e}") from None
        except Exception as e:
            # Not chained: this error reaches send() futures and the network log, and the provider's
            # exception text is outside our control and might quote the token.
            raise AuthenticationError(
                f"OAUTHBEARER: the token provider failed ({type(e).__name__})") from None
        return self._checked(token)

    def login(self) -> None:
        """The provider's first call, in the client's constructor, as Java's OAuthBearerLoginModule.login()
        calls the login callback handler for the token and the extensions there: a provider that cannot
        give a valid token fails the construction, not the first send. Its own error is chained here, as
        Java's LoginException carries its cause: it goes to the code that built the client, not to a log."""
        try:
            token = self._fetch()
        except Exception as e:
            raise AuthenticationError("OAUTHBEARER: the token provider failed at the client's login "
                                      f"({type(e).__name__})") from e
        self._checked(token)
        self._extensions()

    @staticmethod
    def _checked(token: Any) -> str:
        value = getattr(token, "value", token)  # a token object with .value, or the string itself
        if not isinstance(value, str) or not _TOKEN.fullmatch(value):
            raise AuthenticationError("OAUTHBEARER: the token provider returned no valid bearer token "
                                      "(expected a non-empty RFC 6750 b64token string)")
        return value

    def _extensions(self) -> dict[str, str]:
        get = getattr(self._provider, "extensions", None)
        if not callable(get):
            return {}
        try:
            extensions = get() or {}
        except Exception as e:
            raise AuthenticationError(
                f"OAUTHBEARER: the token provider's extensions() failed ({type(e).__name__})") from None
        if not isinstance(extensions, Mapping):
            raise AuthenticationError("OAUTHBEARER: extensions() must return a mapping")
        out: dict[str, str] = {}
        for k, v in extensions.items():
            if not isinstance(k, str) or not _EXT_KEY.fullmatch(k) or k == "auth":
                raise AuthenticationError(f"OAUTHBEARER: invalid extension name {k!r}")
            if not isinstance(v, str) or not _EXT_VALUE.fullmatch(v):
                raise AuthenticationError(f"OAUTHBEARER: invalid value for extension {k!r}")
            out[k] = v
        return out

    def step(self, server_message: bytes) -> bytes | None:
        if self._state == "sent":
            if not server_message:
                self._state = "complete"
                return None
            self._state = "rejected"
            self.server_error = _describe_oauth_error(server_message)
            return b"\x01"
        if self._state == "rejected":
            self._state = "failed"
            raise AuthenticationError(f"OAUTHBEARER authentication failed: {self.server_error}")
        raise AuthenticationError(f"OAUTHBEARER: unexpected server message in state {self._state}")


def _describe_oauth_error(message: bytes) -> str:
    """The RFC 7628 3.2.2 JSON error ({"status": ..., "scope": ..., "openid-configuration": ...}) in words."""
    try:
        doc = json.loads(message.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return f"protocol violation: the server sent a non-JSON challenge ({len(message)} bytes)"
    if not isinstance(doc, dict):
        return "protocol violation: the server's error is not a JSON object"
    parts = [f"{k}={str(doc[k])[:100]!r}" for k in ("status", "scope", "openid-configuration") if k in doc]
    return "server error " + (", ".join(parts) if parts else "with no status")


# --- from configuration -----------------------------------------------------------------------------------


def sasl_client_from_config(cfg: Mapping[str, Any], host: str, login: Any = None) -> SaslClient:
    """A fresh client for one exchange with broker `host` (GSSAPI's service principal is service/host);
    `login` is the client-wide login client_login(cfg) made, shared by all the client's connections.

    Keys: sasl.mechanism (Java's default is GSSAPI), sasl.username / sasl.password (librdkafka's names),
    sasl.jaas.config (Java's syntax, for PLAIN and SCRAM: username= and password= options; for GSSAPI the
    Krb5LoginModule's keyTab= and principal=), sasl.oauthbearer.token.provider (for OAUTHBEARER),
    sasl.kerberos.* (for GSSAPI).

    Credentials may come from either place. If both give a username or password they must agree, else
    ConfigError: silently preferring one would hide a stale copy that later breaks in another environment.
    """
    raw = cfg.get("sasl.mechanism")
    mechanism = _mechanism("GSSAPI" if raw is None else str(raw))
    client: Callable[..., SaslClient] = _function(mechanism.client)
    return client(cfg, _jaas_options(cfg, mechanism), login, host)


def client_login(cfg: Mapping[str, Any]) -> Any:
    """The client-wide login of sasl.mechanism (config.SaslMechanism.login), made once per client so that all
    its connections share one cached token, one Kerberos login, one refresh schedule; None when the mechanism
    has none or the user supplied the token provider (it is theirs)."""
    raw = cfg.get("sasl.mechanism")
    if not raw:
        return None
    mechanism = _mechanism(str(raw))
    if mechanism.login is None:
        return None
    return _function(mechanism.login)(cfg, _jaas_options(cfg, mechanism))


def _mechanism(name: str) -> SaslMechanism:
    mechanism = SASL.get(name.strip().upper())
    if mechanism is None:
        raise ConfigError(f"sasl.mechanism={name.strip().upper()!r} is not supported; use one of {', '.join(SASL)}")
    return mechanism


def _function(ref: str) -> Callable[..., Any]:
    """The function a SaslMechanism names as "module:function", its module imported on first use."""
    module, _, name = ref.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return found


def plain_client(cfg: Mapping[str, Any], jaas: Mapping[str, str], login: Any, host: str) -> SaslClient:
    return PlainClient(_credential(cfg, jaas, "sasl.username", "PLAIN"),
                       _credential(cfg, jaas, "sasl.password", "PLAIN"))


def scram_client(cfg: Mapping[str, Any], jaas: Mapping[str, str], login: Any, host: str) -> SaslClient:
    mechanism = str(cfg["sasl.mechanism"]).strip().upper()
    return ScramClient(_credential(cfg, jaas, "sasl.username", mechanism),
                       _credential(cfg, jaas, "sasl.password", mechanism), mechanism)


def oauthbearer_client(cfg: Mapping[str, Any], jaas: Mapping[str, str], login: Any, host: str) -> SaslClient:
    provider = login if login is not None else cfg.get("sasl.oauthbearer.token.provider")
    if provider is None:
        raise oauthbearer_needs_a_provider()
    return OAuthBearerClient(provider)


def oauthbearer_login(cfg: Mapping[str, Any], jaas: Mapping[str, str]) -> Any:
    """The token source the client runs itself for sasl.oauthbearer.method=oidc or aws_msk_iam; None for the
    user's provider."""
    method = oauthbearer_method(cfg)
    if method == "oidc":
        from kafkajet.security.oidc import oidc_token_source

        return oidc_token_source(cfg, jaas)
    if method == "aws_msk_iam":
        from kafkajet.security.aws_msk import msk_token_source

        return msk_token_source(cfg)
    return None


def _jaas_options(cfg: Mapping[str, Any], mechanism: SaslMechanism) -> dict[str, str]:
    text = cfg.get("sasl.jaas.config")
    if text is None:
        return {}
    jaas = parse_jaas_config(text)
    if jaas.module != mechanism.login_module:
        raise ConfigError(f"sasl.jaas.config names {jaas.module}, which does not do sasl.mechanism="
                          f"{mechanism.name}; use {mechanism.login_module}")
    return jaas.options


def _credential(cfg: Mapping[str, Any], jaas: Mapping[str, str], key: str, mechanism: str) -> str:
    name = key.removeprefix("sasl.")  # the JAAS option's name
    explicit = cfg.get(key)
    from_jaas = jaas.get(name)
    if explicit is not None and not isinstance(explicit, str):
        raise ConfigError(f"{key} must be a string, got {type(explicit).__name__}")
    if explicit is not None and from_jaas is not None and explicit != from_jaas:
        raise ConfigError(f"{key} and the {name} in sasl.jaas.config disagree; give it in one place only")
    value = explicit if explicit is not None else from_jaas
    if not value:
        raise ConfigError(f"sasl.mechanism={mechanism} needs {key} (or {name}=... in sasl.jaas.config)")
    return value
