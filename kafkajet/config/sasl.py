"""The SASL mechanisms (Java's SaslConfigs): one entry each, the checks of their settings at configuration
time, and the validators of the keys that pick a mechanism and hand it a token."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkajet.errors import ConfigError

# --- SASL mechanisms: one entry each ---------------------------------------------------------------------------


def _needs_credentials(mechanism: str, values: Mapping[str, Any]) -> None:
    """PLAIN and SCRAM: a username and a password, or a sasl.jaas.config line the SASL layer reads them from
    (and checks they agree with sasl.username / sasl.password)."""
    user, password, jaas = values.get("sasl.username"), values.get("sasl.password"), values.get("sasl.jaas.config")
    if jaas is None and (user is None or password is None):
        missing = " and ".join(k for k, v in (("sasl.username", user), ("sasl.password", password)) if v is None)
        raise ConfigError(f"sasl.mechanism={mechanism} needs credentials: {missing} is not set "
                          "(or give sasl.jaas.config)")


def _oauthbearer_checks(mechanism: str, values: Mapping[str, Any]) -> None:
    """OAUTHBEARER: exactly one token source, the user's provider or one the client runs itself."""
    method = oauthbearer_method(values)
    if method == "oidc" and values.get("sasl.oauthbearer.token.endpoint.url") is None:
        raise ConfigError("sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url")
    built_in = method != "default"
    if built_in and values.get("sasl.oauthbearer.token.provider") is not None:
        raise ConfigError(f"set sasl.oauthbearer.method={values.get('sasl.oauthbearer.method')} or "
                          "sasl.oauthbearer.token.provider, not both")
    if not built_in and values.get("sasl.oauthbearer.token.provider") is None:
        raise oauthbearer_needs_a_provider()


def _no_checks(mechanism: str, values: Mapping[str, Any]) -> None:
    """The mechanism's own module checks its settings when the client is built (a keytab, a region)."""


@dataclass(frozen=True)
class SaslMechanism:
    """One SASL mechanism, the one place it is described: the client (kafkajet.security.sasl), the
    configuration check below and the MockCluster's server side (kafkajet.testing.mock.sasl) read it.

    `client` and `login` name their functions as "module:function", as Java's configuration names classes: the
    configuration sits below the security layer, and a mechanism's module (Kerberos, AWS) is loaded only when
    that mechanism is used. client(cfg, jaas_options, login, host) makes one exchange's client; login(cfg,
    jaas_options) makes the client-wide login (Java's LoginManager) every connection of one client shares:
    a Kerberos login, a fetched-token source, a signer; the client owns and closes it."""

    name: str
    login_module: str  # the JAAS login module a sasl.jaas.config line names for this mechanism
    client: str
    login: str | None = None
    check: Callable[[str, Mapping[str, Any]], None] = _no_checks  # cross-checks at configuration time


_SASL = "kafkajet.security.sasl"
SASL: Mapping[str, SaslMechanism] = {m.name: m for m in (
    SaslMechanism("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule", f"{_SASL}:plain_client",
                  check=_needs_credentials),
    SaslMechanism("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule",
                  f"{_SASL}:scram_client", check=_needs_credentials),
    SaslMechanism("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule",
                  f"{_SASL}:scram_client", check=_needs_credentials),
    SaslMechanism("OAUTHBEARER", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
                  f"{_SASL}:oauthbearer_client", f"{_SASL}:oauthbearer_login", _oauthbearer_checks),
    SaslMechanism("AWS_MSK_IAM", "software.amazon.msk.auth.iam.IAMLoginModule",
                  "kafkajet.security.aws_msk:native_client", "kafkajet.security.aws_msk:native_login"),
    SaslMechanism("GSSAPI", "com.sun.security.auth.module.Krb5LoginModule",
                  "kafkajet.security.kerberos:gssapi_client", "kafkajet.security.kerberos:kerberos_login"),
)}
SASL_MECHANISMS: tuple[str, ...] = tuple(SASL)
# sasl.oauthbearer.method: the user's provider (default), or tokens the client fetches itself.
OAUTHBEARER_METHODS = ("default", "oidc", "aws_msk_iam")


def oauthbearer_method(values: Mapping[str, Any]) -> str:
    """sasl.oauthbearer.method, where a Java configuration (a token endpoint URL, no method key and no
    token provider) means oidc, as Java's OAuthBearerLoginCallbackHandler takes it."""
    method = values.get("sasl.oauthbearer.method") or "default"
    if method == "default" and values.get("sasl.oauthbearer.token.provider") is None \
            and values.get("sasl.oauthbearer.token.endpoint.url"):
        return "oidc"
    return str(method)


def oauthbearer_needs_a_provider() -> ConfigError:
    """OAUTHBEARER without a token source: the configuration check and the SASL client say it in one way."""
    return ConfigError("sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.provider (a callable "
                       "returning the token) or sasl.oauthbearer.method=oidc or aws_msk_iam")


def _sasl_mechanism(key: str, v: Any) -> str:
    s = str(v).strip().upper()
    if s not in SASL_MECHANISMS:
        raise ConfigError(f"{key}={v!r}: must be one of {', '.join(SASL_MECHANISMS)}")
    return s


def _token_provider(key: str, v: Any) -> Any:
    """A callable returning the token (str), or "module:function" naming one (Spark options, properties files)."""
    if callable(v) or callable(getattr(v, "token", None)):
        return v
    if isinstance(v, str) and ":" in v:
        module, _, attr = v.strip().partition(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"{key}: cannot import {v.strip()!r}: {type(e).__name__}") from None
        if callable(found):
            return found
    raise ConfigError(f"{key}: expected a callable returning the token (or an object with a token() method), "
                      "or 'module:function' naming one")
