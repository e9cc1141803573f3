"""SASL client mechanisms, sans-I/O: the network client carries their bytes in SaslAuthenticate requests.

    client = sasl_client_from_config(cfg, host)
    out = client.start()                       # auth_bytes of the first SaslAuthenticate
    while out is not None:
        response = <send SaslAuthenticate(auth_bytes=out)>   # raise on a non-zero error code
        out = client.step(response.auth_bytes)
    assert client.complete

Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, 7677; kafkajet.security.scram), OAUTHBEARER
(RFC 7628, KIP-255), AWS_MSK_IAM (kafkajet.security.aws_msk) and GSSAPI (RFC 4752, Kerberos;
kafkajet.security.kerberos). One client object per exchange: a re-authentication (KIP-368) makes a new one,
which for OAUTHBEARER also fetches a fresh token, and for GSSAPI takes the client's current login.

Every failure is an AuthenticationError (a malformed server message says "protocol violation"), and the
connection should be closed. Passwords and tokens appear in no exception text and no repr.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from kafkajet.errors import AuthenticationError, ConfigError, KafkaError
from kafkajet.security.jaas import (
    KRB5_LOGIN_MODULE,
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    parse_jaas_config,
)
from kafkajet.security.mechanism import OneExchange, SaslClient
from kafkajet.security.scram import ScramClient

# Every mechanism kafkajet speaks, with the JAAS login module that configures it. The one list: config.py
# validates sasl.mechanism against it, so a new mechanism is added here only.
_LOGIN_MODULE = {"PLAIN": PLAIN_LOGIN_MODULE, "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
                 "SCRAM-SHA-512": SCRAM_LOGIN_MODULE, "OAUTHBEARER": OAUTHBEARER_LOGIN_MODULE,
                 "AWS_MSK_IAM": "software.amazon.msk.auth.iam.IAMLoginModule", "GSSAPI": KRB5_LOGIN_MODULE}
SASL_MECHANISMS: tuple[str, ...] = tuple(_LOGIN_MODULE)
# The client-wide signer of AWS_MSK_IAM, put in the settings by with_token_source (not a user's key).
_MSK_SIGNER = "_kafkajet.aws.msk.signer"
# The client-wide Kerberos login of GSSAPI (kafkajet.security.kerberos), put there by with_token_source.
_KERBEROS_LOGIN = "_kafkajet.kerberos.login"


def oauthbearer_method(values: Mapping[str, Any]) -> str:
    """sasl.oauthbearer.method, where a Java configuration (a token endpoint URL, no method key and no
    token provider) means oidc, as Java's OAuthBearerLoginCallbackHandler takes it."""
    method = values.get("sasl.oauthbearer.method") or "default"
    if method == "default" and values.get("sasl.oauthbearer.token.provider") is None \
            and values.get("sasl.oauthbearer.token.endpoint.url"):
        return "oidc"
    return str(method)


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


def sasl_client_from_config(cfg: Mapping[str, Any], host: str) -> SaslClient:
    """A fresh client for one exchange with broker `host` (GSSAPI's service principal is service/host).

    Keys: sasl.mechanism (Java's default is GSSAPI), sasl.username / sasl.password (librdkafka's names),
    sasl.jaas.config (Java's syntax, for PLAIN and SCRAM: username= and password= options; for GSSAPI the
    Krb5LoginModule's keyTab= and principal=), sasl.oauthbearer.token.provider (for OAUTHBEARER),
    sasl.kerberos.* (for GSSAPI).

    Credentials may come from either place. If both give a username or password they must agree, else
    ConfigError: silently preferring one would hide a stale copy that later breaks in another environment.
    """
    raw = cfg.get("sasl.mechanism")
    mechanism = "GSSAPI" if raw is None else str(raw).strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"sasl.mechanism={mechanism!r} is not supported; use one of {', '.join(SASL_MECHANISMS)}")
    options = _jaas_options(cfg, mechanism)
    if mechanism == "GSSAPI":
        from kafkajet.security.kerberos import GssapiClient, kerberos_login, kerberos_settings, service_name

        login = cfg.get(_KERBEROS_LOGIN) or kerberos_login(cfg, options)
        return GssapiClient(login.token, kerberos_settings(cfg, options).principal, service_name(cfg, options), host)
    if mechanism == "AWS_MSK_IAM":
        from kafkajet.security.aws_msk import AwsMskIamClient, MskNativeSigner

        signer = cfg.get(_MSK_SIGNER) or MskNativeSigner(_msk_settings(cfg, options))
        return AwsMskIamClient(signer, host)
    if mechanism == "OAUTHBEARER":
        provider = cfg.get("sasl.oauthbearer.token.provider")
        if provider is None:
            raise ConfigError("sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.provider "
                              "(a callable returning a token, or an object with a token() method) "
                              "or sasl.oauthbearer.method=oidc")
        return OAuthBearerClient(provider)
    username = _credential(cfg, options, "sasl.username", mechanism)
    password = _credential(cfg, options, "sasl.password", mechanism)
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    return ScramClient(username, password, mechanism)


def with_token_source(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """`cfg` with the client's one token source in sasl.oauthbearer.token.provider when the client fetches
    its own OAUTHBEARER tokens (sasl.oauthbearer.method=oidc): made once per client, so that all its
    connections share one cached token and one refresh schedule."""
    out = dict(cfg)
    mechanism = str(cfg.get("sasl.mechanism") or "").strip().upper()
    method = oauthbearer_method(cfg)
    if mechanism == "OAUTHBEARER" and method == "oidc":
        from kafkajet.security.oidc import oidc_token_source

        out["sasl.oauthbearer.token.provider"] = oidc_token_source(cfg, _jaas_options(cfg, mechanism))
    elif mechanism == "OAUTHBEARER" and method == "aws_msk_iam":
        from kafkajet.security.aws_msk import msk_token_source

        out["sasl.oauthbearer.token.provider"] = msk_token_source(cfg)
    elif mechanism == "AWS_MSK_IAM":
        from kafkajet.security.aws_msk import MskNativeSigner

        out[_MSK_SIGNER] = MskNativeSigner(_msk_settings(cfg, _jaas_options(cfg, mechanism)))
    elif mechanism == "GSSAPI":
        from kafkajet.security.kerberos import kerberos_login

        out[_KERBEROS_LOGIN] = kerberos_login(cfg, _jaas_options(cfg, mechanism))
    return out


def owned_refresher(settings: Mapping[str, Any]) -> Any:
    """The background-refreshed source with_token_source made (an OIDC or MSK token source, a Kerberos
    login), for the client to close; None when the user supplied the provider (it is theirs to close)."""
    return settings.get(_KERBEROS_LOGIN) or settings.get("sasl.oauthbearer.token.provider")


def _msk_settings(cfg: Mapping[str, Any], jaas: Mapping[str, str]) -> Mapping[str, Any]:
    """The sasl.aws.* keys, with aws-msk-iam-auth's IAMLoginModule options (awsProfileName, awsRoleArn)."""
    out = dict(cfg)
    for key, option in (("sasl.aws.profile", "awsProfileName"), ("sasl.aws.role.arn", "awsRoleArn")):
        if out.get(key) is None and jaas.get(option) is not None:
            out[key] = jaas[option]
    return out


def _jaas_options(cfg: Mapping[str, Any], mechanism: str) -> dict[str, str]:
    text = cfg.get("sasl.jaas.config")
    if text is None:
        return {}
    jaas = parse_jaas_config(text)
    if jaas.module != _LOGIN_MODULE[mechanism]:
        raise ConfigError(f"sasl.jaas.config names {jaas.module}, which does not do sasl.mechanism={mechanism}; "
                          f"use {_LOGIN_MODULE[mechanism]}")
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
