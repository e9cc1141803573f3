"""Client configuration: one table of the keys every client shares, extended per client (producer, admin,
fetch), feeding validation, docs and the CLI.

Keys are the Java clients' names ("linger.ms"); keyword arguments in snake_case (linger_ms=5) mean the
same. Values may arrive as strings (properties files, Spark options) and are converted.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kafkajet.addresses import parse_servers
from kafkajet.errors import ConfigError

log = logging.getLogger("kafkajet.config")

_client_ids = itertools.count(1)
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # int, bool, str, list, enum, object
    default: Any
    doc: str
    validator: Callable[[str, Any], Any] | None = None  # returns the normalised value or raises ConfigError
    secret: bool = False
    required: bool = False
    # Set when this client accepts the key but does not read it (a Java setting, or a shared one that means
    # nothing here): what happens instead. Shown in the docs; tests/unit/test_config_keys_read.py holds every
    # other key to being read by the client's code.
    not_read: str = ""


def _int_range(lo: int, hi: int = 2**63 - 1) -> Callable[[str, Any], Any]:
    def check(key: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ConfigError(f"{key}={v!r}: expected an integer")
        try:
            n = int(v) if not isinstance(v, float) or v.is_integer() else None
        except ValueError:
            n = None
        if n is None:
            raise ConfigError(f"{key}={v!r}: expected an integer")
        if not lo <= n <= hi:
            raise ConfigError(f"{key}={n}: must be in [{lo}, {hi}]")
        return n

    return check


def _float_range(lo: float, hi: float) -> Callable[[str, Any], Any]:
    def check(key: str, v: Any) -> float:
        try:
            x = float(v) if not isinstance(v, bool) else None
        except (TypeError, ValueError):
            x = None
        if x is None:
            raise ConfigError(f"{key}={v!r}: expected a number")
        if not lo <= x <= hi:
            raise ConfigError(f"{key}={x}: must be in [{lo}, {hi}]")
        return x

    return check


def _bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ConfigError(f"{key}={v!r}: expected true or false")


def _choice(*options: str) -> Callable[[str, Any], Any]:
    def check(key: str, v: Any) -> str:
        s = str(v).strip().lower()
        if s not in options:
            raise ConfigError(f"{key}={v!r}: must be one of {', '.join(options)}")
        return s

    return check


def _acks(key: str, v: Any) -> int:
    s = str(v).strip().lower()
    table = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if s not in table:
        raise ConfigError(f"{key}={v!r}: must be one of all, -1, 0, 1")
    return table[s]


def _servers(key: str, v: Any) -> list[tuple[str, int]]:
    return parse_servers(v)


def _str(key: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{key}={v!r}: expected a string")
    return v


def _callable_or_name(key: str, v: Any) -> Any:
    if callable(v) or isinstance(v, str):
        return v
    raise ConfigError(f"{key}={v!r}: expected a callable or a built-in name")


def _interceptors(key: str, v: Any) -> list[Any]:
    items = [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]
    for icp in items:
        missing = [m for m in ("on_send", "on_acknowledgement", "close") if not callable(getattr(icp, m, None))]
        if missing:
            raise ConfigError(f"{key}: {icp!r} lacks {', '.join(missing)}")
    return items


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")

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


def _security(key: str, v: Any) -> str:
    s = str(v).strip().upper()
    if s not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{key}={v!r}: must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    return s


def _sasl_mechanism(key: str, v: Any) -> str:
    s = str(v).strip().upper()
    if s not in SASL_MECHANISMS:
        raise ConfigError(f"{key}={v!r}: must be one of {', '.join(SASL_MECHANISMS)}")
    return s


def _endpoint_identification(key: str, v: Any) -> str:
    s = str(v).strip().lower()
    if s in ("", "none"):  # "none" is librdkafka's spelling of Java's empty string
        return ""
    if s != "https":
        raise ConfigError(f"{key}={v!r}: must be https (verify the broker's host name) or empty (do not)")
    return s


def tls_versions(key: str, v: Any) -> list[str]:
    """ssl.enabled.protocols ("TLSv1.2,TLSv1.3" or a list) as canonical names; older versions are refused."""
    items = [x.strip() for x in (v.split(",") if isinstance(v, str) else list(v)) if str(x).strip()]
    by_lower = {t.lower(): t for t in TLS_VERSIONS}
    out = []
    for item in items:
        name = by_lower.get(str(item).lower())
        if name is None:
            raise ConfigError(f"{key}: {item!r} is not supported; kafkajet speaks {' and '.join(TLS_VERSIONS)} "
                              "(TLS 1.2 is the minimum)")
        out.append(name)
    if not out:
        raise ConfigError(f"{key} is empty: give TLSv1.2, TLSv1.3 or both")
    return out


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


def _transactional_id(key: str, v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{key}: expected a non-empty string naming this producer's transactions, got {v!r}")
    return v


def _optional_int(lo: int, hi: int) -> Callable[[str, Any], Any]:
    inner = _int_range(lo, hi)
    return lambda key, v: None if v is None else inner(key, v)


def _gzip_level(key: str, v: Any) -> int | None:
    # Java's GzipCompression.LevelValidator: 1-9, or -1 (Deflater.DEFAULT_COMPRESSION).
    if v is not None and str(v).strip() == "-1":
        return -1
    level: int | None = _optional_int(1, 9)(key, v)
    return level


K = ConfigKey
# What every client shares (Java's CommonClientConfigs): where the brokers are, how to reach them, how
# long to wait and how to back off; per-client tables below extend it.
COMMON_CONFIG: tuple[ConfigKey, ...] = (
    K("bootstrap.servers", "list", None, "host:port of brokers to bootstrap from (comma separated or a list)",
      _servers, required=True),
    K("client.id", "str", None, "name sent to brokers in every request (default producer-N, adminclient-N, fetch-N)", _str),
    K("request.timeout.ms", "int", 30000, "how long to wait for a broker's answer before retrying",
      _int_range(0, INT_MAX)),
    # Java's admin and consumer default: a call given no timeout of its own, and so a wrong address, waits as
    # long as the producer's send() (max.block.ms).
    K("default.api.timeout.ms", "int", 60000, "how long an admin or fetch call given no timeout waits in all "
      "(connections, retries, answers), as max.block.ms bounds the producer's: a wrong address fails after it",
      _int_range(1, INT_MAX)),
    K("retry.backoff.ms", "int", 100, "initial wait before a retry", _int_range(0)),
    K("retry.backoff.max.ms", "int", 1000, "largest wait before a retry (exponential backoff, +/-20% jitter)",
      _int_range(0)),
    K("metadata.max.age.ms", "int", 300000, "refresh metadata at least this often", _int_range(0)),
    K("reconnect.backoff.ms", "int", 50, "initial wait before reconnecting to a broker", _int_range(0)),
    K("reconnect.backoff.max.ms", "int", 1000, "largest wait before reconnecting", _int_range(0)),
    K("connections.max.idle.ms", "int", 540000, "close connections idle this long", _int_range(-1)),
    K("socket.connection.setup.timeout.ms", "int", 10000, "how long a TCP connect may take", _int_range(0)),
    K("socket.connection.setup.timeout.max.ms", "int", 30000, "upper bound of the connect timeout",
      _int_range(0)),
    # Not Java's 131072: a fixed SO_SNDBUF turns off Linux's autotuning, and a request larger than the buffer
    # then needs the sender thread (which shares the GIL with callers) again for every piece. With the OS
    # default, requests go out whole: 1 KiB records in 256 KiB batches went from 179k to 289k records/s.
    K("send.buffer.bytes", "int", -1, "SO_SNDBUF (-1: the OS default, autotuned; Java's default is 131072)",
      _int_range(-1, INT_MAX)),
    K("receive.buffer.bytes", "int", 32768, "SO_RCVBUF (-1: the OS default)", _int_range(-1, INT_MAX)),
    K("security.protocol", "enum", "PLAINTEXT", "PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL over TLS)",
      _security),
    K("ssl.ca.location", "str", None, "PEM file of CA certificates trusted in addition to the system store",
      _str),
    K("ssl.truststore.certificates", "str", None, "PEM text of CA certificates trusted in addition to the "
      "system store", _str),
    K("ssl.endpoint.identification.algorithm", "str", "https",
      "https: verify the broker's host name against its certificate; empty: do not (a warning is logged)",
      _endpoint_identification),
    K("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions allowed (TLSv1.2, TLSv1.3)",
      tls_versions),
    K("ssl.certificate.location", "str", None, "PEM file of the client certificate (mutual TLS)", _str),
    K("ssl.key.location", "str", None, "PEM file of the client certificate's private key", _str),
    K("ssl.certificate.pem", "str", None, "PEM text of the client certificate (instead of a file)", _str),
    K("ssl.key.pem", "str", None, "PEM text of the client's private key (instead of a file); secret", _str,
      secret=True),
    K("ssl.key.password", "str", None, "password of an encrypted private key; secret", _str, secret=True),
    K("sasl.mechanism", "enum", None, ", ".join(SASL_MECHANISMS[:-1]) + " or " + SASL_MECHANISMS[-1],
      _sasl_mechanism),
    K("sasl.username", "str", None, "SASL user name (PLAIN, SCRAM)", _str),
    K("sasl.password", "str", None, "SASL password (PLAIN, SCRAM); secret", _str, secret=True),
    K("sasl.jaas.config", "str", None,
      "Java's login module line, e.g. org.apache.kafka.common.security.plain.PlainLoginModule required "
      'username="u" password="p"; (instead of sasl.username/sasl.password); secret', _str, secret=True),
    K("sasl.oauthbearer.token.provider", "object", None,
      "OAUTHBEARER: a callable returning the token, or 'module:function' naming one; secret", _token_provider,
      secret=True),
    # OAUTHBEARER tokens fetched by the client (kafkajet.security.oidc): librdkafka's and Java's names.
    K("sasl.oauthbearer.method", "enum", "default", "default: tokens from sasl.oauthbearer.token.provider; oidc: "
      "fetched from sasl.oauthbearer.token.endpoint.url (OAuth client credentials or JWT bearer); aws_msk_iam: "
      "AWS MSK IAM tokens (pip install 'kafkajet[aws]')", _choice(*OAUTHBEARER_METHODS)),
    K("sasl.oauthbearer.token.endpoint.url", "str", None, "OIDC: the identity provider's token endpoint", _str),
    K("sasl.oauthbearer.client.id", "str", None, "OIDC: the client id (librdkafka's name)", _str),
    K("sasl.oauthbearer.client.secret", "str", None, "OIDC: the client secret (librdkafka's name); secret", _str,
      secret=True),
    K("sasl.oauthbearer.client.credentials.client.id", "str", None, "OIDC: the client id (Java's name)", _str),
    K("sasl.oauthbearer.client.credentials.client.secret", "str", None, "OIDC: the client secret (Java's "
      "name); secret", _str, secret=True),
    K("sasl.oauthbearer.scope", "str", None, "OIDC: the scope requested with the token", _str),
    K("sasl.oauthbearer.extensions", "str", None, "OAUTHBEARER extensions (KIP-342) sent with the token: "
      "key=value,key=value", _str),
    K("sasl.oauthbearer.grant.type", "enum", "client_credentials", "OIDC: client_credentials or "
      "urn:ietf:params:oauth:grant-type:jwt-bearer (a signed assertion instead of a client secret)",
      _choice("client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer")),
    K("sasl.oauthbearer.assertion.file", "str", None, "OIDC JWT bearer: a file holding a ready assertion "
      "(read at each fetch; when set, the other sasl.oauthbearer.assertion.* settings are ignored, as in Java)",
      _str),
    K("sasl.oauthbearer.assertion.template.file", "str", None, "OIDC JWT bearer: a JSON file "
      '{"header": {...}, "payload": {...}} merged into the signed assertion over the claim.* settings '
      "(Java's name; re-read when it changes)", _str),
    K("sasl.oauthbearer.assertion.jwt.template.file", "str", None, "OIDC JWT bearer: librdkafka's name for "
      "sasl.oauthbearer.assertion.template.file", _str),
    K("sasl.oauthbearer.assertion.private.key.file", "str", None, "OIDC JWT bearer: PEM private key that signs "
      "the assertion (re-read when it changes, for key rotation)", _str),
    K("sasl.oauthbearer.assertion.private.key.pem", "str", None, "OIDC JWT bearer: the PEM private key as text; "
      "secret", _str, secret=True),
    K("sasl.oauthbearer.assertion.private.key.passphrase", "str", None, "OIDC JWT bearer: passphrase of an "
      "encrypted private key; secret", _str, secret=True),
    K("sasl.oauthbearer.assertion.algorithm", "enum", "RS256", "OIDC JWT bearer: RS256 or ES256",
      lambda key, v: _choice("rs256", "es256")(key, v).upper()),
    K("sasl.oauthbearer.assertion.claim.iss", "str", None, "OIDC JWT bearer: the assertion's issuer", _str),
    K("sasl.oauthbearer.assertion.claim.sub", "str", None, "OIDC JWT bearer: the assertion's subject", _str),
    K("sasl.oauthbearer.assertion.claim.aud", "str", None, "OIDC JWT bearer: the assertion's audience", _str),
    K("sasl.oauthbearer.assertion.claim.exp.seconds", "int", 300, "OIDC JWT bearer: the assertion's lifetime",
      _int_range(1, 86400)),
    K("sasl.oauthbearer.assertion.claim.nbf.seconds", "int", 60, "OIDC JWT bearer: how far before now the "
      "assertion becomes valid (clock skew)", _int_range(0, 3600)),
    K("sasl.oauthbearer.assertion.claim.jti.include", "bool", False, "OIDC JWT bearer: add a unique jti claim",
      _bool),
    K("https.ca.location", "str", None, "OIDC: PEM file of CA certificates trusted for the token endpoint "
      "(instead of the system store)", _str),
    K("https.ca.pem", "str", None, "OIDC: PEM text of CA certificates trusted for the token endpoint", _str),
    K("sasl.aws.region", "str", None, "AWS MSK IAM: the cluster's region (default: AWS_REGION, "
      "AWS_DEFAULT_REGION or the profile's)", _str),
    K("sasl.aws.profile", "str", None, "AWS MSK IAM: the named profile whose credentials sign", _str),
    K("sasl.aws.role.arn", "str", None, "AWS MSK IAM (OAUTHBEARER): a role to assume for the credentials", _str),
    K("sasl.aws.role.session.name", "str", None, "AWS MSK IAM: the session name of the assumed role", _str),
    # GSSAPI (kafkajet.security.kerberos): librdkafka's names for the keytab login, Java's for its renewal.
    K("sasl.kerberos.service.name", "str", None, "GSSAPI: the brokers' Kerberos service name, their principal "
      "being service/broker-host@REALM (or serviceName= of a Krb5LoginModule sasl.jaas.config; default kafka)",
      _str),
    K("sasl.kerberos.principal", "str", None, "GSSAPI: the client's principal, e.g. client@EXAMPLE.COM (or "
      "principal= of a Krb5LoginModule sasl.jaas.config)", _str),
    K("sasl.kerberos.keytab", "str", None, "GSSAPI: the keytab file the client logs in with (or keyTab= of a "
      "Krb5LoginModule sasl.jaas.config; pip install 'kafkajet[gssapi]'); without one, the TGT a kinit put in "
      "the ticket cache (KRB5CCNAME, or useTicketCache=true ticketCache=... in sasl.jaas.config)", _str),
    K("sasl.kerberos.ticket.renew.window.factor", "float", 0.8, "GSSAPI: log in again from the keytab at this "
      "fraction of the ticket's lifetime", _float_range(0.5, 1.0)),
    K("sasl.kerberos.ticket.renew.jitter", "float", 0.05, "GSSAPI: random fraction of the ticket's lifetime "
      "added to the renewal time", _float_range(0.0, 0.25)),
    K("sasl.kerberos.min.time.before.relogin", "int", 60000, "GSSAPI: least time (ms) between two logins",
      _int_range(0)),
    K("sasl.login.refresh.window.factor", "float", 0.8, "a fetched token is refreshed at this fraction of its "
      "lifetime", _float_range(0.5, 1.0)),
    K("sasl.login.refresh.window.jitter", "float", 0.05, "random fraction of the lifetime added to the refresh "
      "time", _float_range(0.0, 0.25)),
    K("sasl.login.refresh.min.period.seconds", "int", 60, "least time between two token refreshes",
      _int_range(0, 900)),
    K("sasl.login.refresh.buffer.seconds", "int", 300, "refresh at least this long before the token expires",
      _int_range(0, 3600)),
    K("sasl.login.retry.backoff.ms", "int", 100, "first wait before retrying a failed token fetch",
      _int_range(0)),
    K("sasl.login.retry.backoff.max.ms", "int", 10000, "how long a token fetch is retried (doubling waits)",
      _int_range(0)),
    K("sasl.login.connect.timeout.ms", "int", 10000, "OIDC: connect timeout of a token request", _int_range(1)),
    K("sasl.login.read.timeout.ms", "int", 10000, "OIDC: read timeout of a token request", _int_range(1)),
)


def _not_read(keys: tuple[ConfigKey, ...], why: Mapping[str, str]) -> tuple[ConfigKey, ...]:
    """keys, those named in `why` marked as accepted but not read by this client, with what happens instead."""
    unknown = set(why) - {k.name for k in keys}
    if unknown:
        raise AssertionError(f"not_read names keys that are not in the table: {sorted(unknown)}")
    return tuple(dataclasses.replace(k, not_read=why[k.name]) if k.name in why else k for k in keys)


PRODUCER_CONFIG: tuple[ConfigKey, ...] = _not_read(COMMON_CONFIG, {
    "default.api.timeout.ms": "send() waits up to max.block.ms; flush() and close() take their own timeout",
}) + (
    K("acks", "enum", -1, "acknowledgements required: all (-1), 1 (leader only) or 0 (none)", _acks),
    K("enable.idempotence", "bool", True, "exactly-once per partition: producer id, epochs and sequence numbers",
      _bool),
    K("linger.ms", "int", 5, "how long a batch waits for more records before it is sent", _int_range(0, INT_MAX)),
    K("batch.size", "int", 16384, "target size in bytes of one partition's batch", _int_range(0, INT_MAX)),
    K("batch.max.size", "int", 1048576, "how far a batch still waiting to be sent may grow past batch.size "
      "(kafkajet's, not Java's; at most max.request.size; set it to batch.size for Java's fixed batches)",
      _int_range(0, INT_MAX)),
    K("buffer.memory", "int", 33554432, "bytes of memory for records waiting to be sent", _int_range(0)),
    K("max.block.ms", "int", 60000, "how long send() may block for metadata or buffer memory",
      _int_range(0)),
    K("max.request.size", "int", 1048576, "largest request (and so record) the producer will send",
      _int_range(0, INT_MAX)),
    K("delivery.timeout.ms", "int", 120000, "upper bound on the time from send() to success or failure",
      _int_range(0, INT_MAX)),
    K("retries", "int", INT_MAX, "how often a failed batch is retried (bounded by delivery.timeout.ms)",
      _int_range(0, INT_MAX)),
    K("max.in.flight.requests.per.connection", "int", 5, "unanswered requests allowed per broker",
      _int_range(1, INT_MAX)),
    K("metadata.max.idle.ms", "int", 300000, "forget a topic not produced to for this long",
      _int_range(5000)),
    K("compression.type", "enum", "none", "none, gzip, snappy, lz4 or zstd",
      _choice("none", "gzip", "snappy", "lz4", "zstd")),
    K("compression.gzip.level", "int", None, "gzip level 1-9 (default 6; -1, Java's default, means 6)",
      _gzip_level),
    K("compression.lz4.level", "int", None, "lz4 level 1-17 (default 9: lz4's fast compressor; any other level "
      "its slower high-compression one, as Java's)", _optional_int(1, 17)),
    K("compression.zstd.level", "int", None, "zstd level -131072 to 22 (default 3)", _optional_int(-131072, 22)),
    K("key.serializer", "object", "bytes", "callable, or bytes / str / int / long / double / json",
      _callable_or_name),
    K("value.serializer", "object", "bytes", "callable, or bytes / str / int / long / double / json",
      _callable_or_name),
    K("partitioner", "object", "default",
      "callable fn(key_bytes, all_partitions, available) -> int, or default / round_robin / random",
      _callable_or_name),
    K("partitioner.ignore.keys", "bool", False, "spread keyed records like keyless ones", _bool),
    K("partitioner.adaptive.partitioning.enable", "bool", True, "Java: favour partitions on less loaded brokers",
      _bool, not_read="keyless records go to the available partitions (those with a leader) uniformly, "
      "whatever their brokers' queues"),
    K("interceptors", "list", None, "objects with on_send, on_acknowledgement and close", _interceptors),
    K("allow.auto.create.topics", "bool", True, "let the broker create a topic on first use", _bool),
    K("transactional.id", "str", None, "enables transactions (init_transactions, begin/commit/abort); implies "
      "idempotence. Producers with the same id fence each other", _transactional_id),
    K("transaction.timeout.ms", "int", 60000, "how long the coordinator lets a transaction stay open before it "
      "aborts it", _int_range(1, INT_MAX)),
    K("opentelemetry.enable", "bool", False, "OpenTelemetry spans (one per record, ended at the broker's answer), "
      "trace context in the record headers, and the messaging metrics; needs pip install 'kafkajet[otel]'",
      _bool),
)
# The admin and fetch clients take the common keys, so one dict of settings serves every client; they send
# single requests over blocking connections, so the producer's connection tuning means nothing to them.
_BLOCKING_CONNECTIONS = {
    "metadata.max.age.ms": "broker addresses are asked for when a call needs them, not refreshed on a timer",
    "reconnect.backoff.ms": "a connection is opened when a call needs it; the call's deadline bounds the attempts",
    "reconnect.backoff.max.ms": "a connection is opened when a call needs it; the call's deadline bounds the "
                                "attempts",
    "connections.max.idle.ms": "connections stay open until close()",
    "socket.connection.setup.timeout.ms": "a connection attempt is bounded by request.timeout.ms",
    "socket.connection.setup.timeout.max.ms": "a connection attempt is bounded by request.timeout.ms",
    "send.buffer.bytes": "the OS default",
    "receive.buffer.bytes": "the OS default",
}
ADMIN_CONFIG: tuple[ConfigKey, ...] = _not_read(COMMON_CONFIG, _BLOCKING_CONNECTIONS)
FETCH_CONFIG: tuple[ConfigKey, ...] = _not_read(COMMON_CONFIG, _BLOCKING_CONNECTIONS) + (
    K("isolation.level", "enum", "read_uncommitted", "read_committed: only committed transactions' records, up to "
      "the last stable offset (aborted ones dropped); read_uncommitted: everything up to the high watermark",
      _choice("read_uncommitted", "read_committed")),
)


def _snake(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class ClientTable:
    """One client's keys, looked up by Java name and by snake_case keyword."""

    client: str  # "producer", "admin", "fetch": named in error messages and `kafkajet config --client`
    keys: tuple[ConfigKey, ...]
    client_id_prefix: str  # default client.id is <prefix>-N, as Java numbers its clients

    @property
    def by_name(self) -> dict[str, ConfigKey]:
        return {k.name: k for k in self.keys}

    @property
    def by_snake(self) -> dict[str, str]:
        return {_snake(k.name): k.name for k in self.keys}


PRODUCER = ClientTable("producer", PRODUCER_CONFIG, "producer")
ADMIN = ClientTable("admin", ADMIN_CONFIG, "adminclient")
FETCH = ClientTable("fetch", FETCH_CONFIG, "fetch")
TABLES: dict[str, ClientTable] = {t.client: t for t in (PRODUCER, ADMIN, FETCH)}

# Every key of every client: secrets are hidden in any config's repr.
BY_NAME: dict[str, ConfigKey] = {**FETCH.by_name, **ADMIN.by_name, **PRODUCER.by_name}
BY_SNAKE: dict[str, str] = {**FETCH.by_snake, **ADMIN.by_snake, **PRODUCER.by_snake}


def default(key: str) -> Any:
    """The table's default of `key`: the one place it is written."""
    return BY_NAME[key].default


def setting(cfg: Mapping[str, Any], key: str) -> Any:
    """`key` of `cfg`, the validated configuration (or a mapping of some raw settings, as tests and the Spark
    options hand over), with the table's default where it is unset."""
    value = cfg.get(key)
    return BY_NAME[key].default if value is None else value


class ClientConfig(Mapping[str, Any]):
    """Validated, normalised client settings; cfg["linger.ms"] and cfg.linger_ms both work."""

    def __init__(self, values: dict[str, Any], explicit: frozenset[str]) -> None:
        self._values = values
        self.explicit = explicit

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[BY_SNAKE[name]]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        shown = {k: ("[hidden]" if BY_NAME[k].secret and v is not None else v) for k, v in self._values.items()
                 if k in self.explicit}
        return f"ClientConfig({shown})"


# The old name, kept for producer.py and security/connection.py: every client's settings are one type.
ProducerConfig = ClientConfig


# librdkafka's (confluent-kafka's) names for Java's settings, which users bring along: spelled too differently for
# difflib to find the Java name, and some differ in unit or in what they count, which the hint says.
LIBRDKAFKA_NAMES: dict[str, tuple[str, str]] = {
    "queue.buffering.max.ms": ("linger.ms", "the same milliseconds"),
    "batch.num.messages": ("batch.size", "a batch is bounded in bytes, not records; batch.max.size caps its growth"),
    "message.max.bytes": ("max.request.size", "the largest request, in bytes"),
    "queue.buffering.max.kbytes": ("buffer.memory", "in bytes, not KiB"),
    "queue.buffering.max.messages": ("buffer.memory", "the buffer is bounded in bytes, not records"),
    "message.timeout.ms": ("delivery.timeout.ms", "the same milliseconds"),
    "message.send.max.retries": ("retries", "the same count"),
    "compression.codec": ("compression.type", "the same codecs"),
    "topic.metadata.refresh.interval.ms": ("metadata.max.age.ms", "the same milliseconds"),
    "socket.timeout.ms": ("request.timeout.ms", "the same milliseconds"),
}


def _unknown(table: ClientTable, key: str, snake: bool) -> ConfigError:
    names = list(table.by_snake) if snake else list(table.by_name)
    librdkafka = LIBRDKAFKA_NAMES.get(key.replace("_", ".") if snake else key)
    if librdkafka is not None and librdkafka[0] in table.by_name:
        java, difference = librdkafka
        spelled = _snake(java) if snake else java
        hint = f"; that is librdkafka's name: kafkajet takes Java's, '{spelled}' ({difference})"
    else:
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        hint = f"; did you mean '{close[0]}'?" if close else ""
    where = "" if table is PRODUCER else f" --client {table.client}"
    return ConfigError(f"unknown {table.client} setting '{key}'{hint} "
                       f"(python -m kafkajet config{where} lists them all)")


def _collect(table: ClientTable, config: Mapping[str, Any] | str | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Java names and snake_case keywords merged into Java names; unknown or conflicting keys raise.

    Every client takes a bare string as bootstrap.servers (`Producer("host:9092")`), as users try first."""
    if isinstance(config, str):
        config = {"bootstrap.servers": config}
    elif config is not None and not isinstance(config, Mapping):
        raise TypeError(
            f"the configuration must be a dict of Kafka settings or a bootstrap.servers string, not "
            f"{type(config).__name__}: e.g. Producer({{'bootstrap.servers': 'host:9092'}}), "
            "Producer('host:9092') or Producer(bootstrap_servers='host:9092')")
    by_name, by_snake = table.by_name, table.by_snake
    raw: dict[str, Any] = {}
    for key, value in (config or {}).items():
        if key not in by_name:
            if key in by_snake:
                key = by_snake[key]
            else:
                raise _unknown(table, key, snake=False)
        raw[key] = value
    for key, value in kwargs.items():
        name = by_snake.get(key)
        if name is None:
            raise _unknown(table, key, snake=True)
        if name in raw and raw[name] != value:
            if by_name[name].secret:
                raise ConfigError(f"'{name}' is set twice with different values (as '{name}' and as {key}=)")
            raise ConfigError(f"'{name}' is set twice with different values ({raw[name]!r} and {key}={value!r})")
        raw[name] = value
    return raw


def _values(table: ClientTable, raw: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for k in table.keys:
        if k.name in raw and raw[k.name] is not None:
            values[k.name] = _validate(k, raw[k.name])
        elif k.required:
            raise ConfigError(f"'{k.name}' is required: the host:port of at least one broker")
        else:
            values[k.name] = k.default
    if values["client.id"] is None:
        values["client.id"] = f"{table.client_id_prefix}-{next(_client_ids)}"
    return values


def parse_client_config(table: ClientTable, config: Mapping[str, Any] | str | None = None, /,
                        **kwargs: Any) -> ClientConfig:
    """Validate the admin or fetch client's settings; a bare string is bootstrap.servers."""
    raw = _collect(table, config, kwargs)
    values = _values(table, raw)
    explicit = frozenset(raw)
    check_security(values, explicit)
    return ClientConfig(values, explicit)


def parse_producer_config(config: Mapping[str, Any] | str | None = None, /, **kwargs: Any) -> ProducerConfig:
    raw = _collect(PRODUCER, config, kwargs)
    values = _values(PRODUCER, raw)
    explicit = frozenset(raw)
    _cross_check(values, explicit)
    check_security(values, explicit)
    return ProducerConfig(values, explicit)


def _validate(k: ConfigKey, value: Any) -> Any:
    if k.validator is None:
        return value
    if not k.secret:
        return k.validator(k.name, value)
    try:
        return k.validator(k.name, value)
    except ConfigError as e:
        # Validators quote the value they reject; a secret's value must never reach a message or a log.
        msg = str(e)
        if repr(value) in msg or (isinstance(value, str) and value and value in msg):
            msg = f"{k.name}: invalid value of type {type(value).__name__} (not shown: it is a secret)"
        raise ConfigError(msg) from None


SECURITY_KEYS: tuple[str, ...] = tuple(
    k.name for k in COMMON_CONFIG
    if k.name == "security.protocol" or k.name.startswith(("ssl.", "sasl.", "https.")))


def security_config(config: Mapping[str, Any]) -> ClientConfig:
    """The validated security settings (security.protocol, ssl.*, sasl.*) out of a wider configuration.

    For the Spark options, which carry the security keys among others; other keys are ignored here.
    """
    raw = {k: v for k, v in config.items() if k in SECURITY_KEYS}
    values = {}
    for name in SECURITY_KEYS:
        k = BY_NAME[name]
        values[name] = _validate(k, raw[name]) if raw.get(name) is not None else k.default
    explicit = frozenset(raw)
    check_security(values, explicit)
    return ClientConfig(values, explicit)  # its repr hides the secrets


def ignored_security_keys(protocol: str, keys: Iterable[str]) -> list[str]:
    """The ssl.* / sasl.* keys among `keys` that security.protocol `protocol` does not use, sorted."""
    uses_tls = protocol in ("SSL", "SASL_SSL")
    uses_sasl = protocol.startswith("SASL_")
    return sorted(k for k in keys if (k.startswith("sasl.") and not uses_sasl) or (k.startswith("ssl.") and not uses_tls))


def check_security(values: Mapping[str, Any], explicit: frozenset[str]) -> None:
    """Cross-checks of the security keys: what each security.protocol and sasl.mechanism needs."""
    protocol = values["security.protocol"]
    uses_tls = protocol in ("SSL", "SASL_SSL")
    uses_sasl = protocol.startswith("SASL_")
    ignored = ignored_security_keys(protocol, explicit)
    if ignored:
        log.warning("%s ignored: security.protocol is %s", ", ".join(ignored), protocol)
    if uses_tls:
        for file_key, pem_key in (("ssl.certificate.location", "ssl.certificate.pem"),
                                  ("ssl.key.location", "ssl.key.pem")):
            if values[file_key] is not None and values[pem_key] is not None:
                raise ConfigError(f"set either {file_key} or {pem_key}, not both")
        has_cert = values["ssl.certificate.location"] is not None or values["ssl.certificate.pem"] is not None
        has_key = values["ssl.key.location"] is not None or values["ssl.key.pem"] is not None
        if has_key and not has_cert:
            raise ConfigError("a client private key (ssl.key.location / ssl.key.pem) needs its certificate: "
                              "set ssl.certificate.location or ssl.certificate.pem")
    if not uses_sasl:
        return
    mechanism = values["sasl.mechanism"]
    if mechanism is None:
        raise ConfigError(f"security.protocol={protocol} needs sasl.mechanism "
                          f"({', '.join(SASL_MECHANISMS)})")
    SASL[mechanism].check(mechanism, values)


def _cross_check(values: dict[str, Any], explicit: frozenset[str]) -> None:
    need = values["linger.ms"] + values["request.timeout.ms"]
    if values["delivery.timeout.ms"] < need:
        raise ConfigError(
            f"delivery.timeout.ms ({values['delivery.timeout.ms']}) must be at least linger.ms + "
            f"request.timeout.ms ({need})")
    conflicts = []
    if values["acks"] != -1:
        conflicts.append(f"acks={values['acks']} (idempotence needs acks=all)")
    if values["retries"] == 0:
        conflicts.append("retries=0 (idempotence needs retries > 0)")
    if values["max.in.flight.requests.per.connection"] > 5:
        conflicts.append(
            f"max.in.flight.requests.per.connection={values['max.in.flight.requests.per.connection']} "
            "(idempotence allows at most 5)")
    if values["transactional.id"] is not None:
        # Java: transactions are built on idempotence; a setting that rules it out is a mistake, not a hint.
        if "enable.idempotence" in explicit and not values["enable.idempotence"]:
            raise ConfigError("transactional.id needs enable.idempotence=true: remove enable.idempotence=false "
                              "or transactional.id")
        if conflicts:
            raise ConfigError("transactional.id (which implies idempotence) conflicts with " + "; ".join(conflicts))
    if values["enable.idempotence"] and conflicts:
        if "enable.idempotence" in explicit:
            raise ConfigError("enable.idempotence=true conflicts with " + "; ".join(conflicts))
        # Java's rule: idempotence only on by default gives way to the user's explicit choices.
        log.warning("idempotence disabled because of %s", "; ".join(conflicts))
        values["enable.idempotence"] = False


# Java's name for each key that is not the Java clients' own (librdkafka's, or kafkajet's): the settings page
# shows it, so a user coming from Java finds the key, and one coming from librdkafka sees which name is whose.
# Every other key is spelled as in Java's ProducerConfig (or the consumer's, for isolation.level).
JAVA_NAMES: dict[str, str] = {
    "default.api.timeout.ms": "same, in the admin client and the consumer (Java's producer has none)",
    "ssl.ca.location": "`ssl.truststore.location` with `ssl.truststore.type=PEM` (this is librdkafka's name)",
    "ssl.certificate.location": "`ssl.keystore.location` with `ssl.keystore.type=PEM` (librdkafka's name)",
    "ssl.key.location": "none: the key is in the `ssl.keystore.location` PEM file (librdkafka's name)",
    "ssl.certificate.pem": "`ssl.keystore.certificate.chain` (librdkafka's name)",
    "ssl.key.pem": "`ssl.keystore.key` (librdkafka's name)",
    "sasl.username": "none: `username=` in `sasl.jaas.config` (librdkafka's name)",
    "sasl.password": "none: `password=` in `sasl.jaas.config` (librdkafka's name)",
    "sasl.oauthbearer.token.provider": "none: `sasl.login.callback.handler.class`, a class (kafkajet's)",
    "sasl.oauthbearer.method": "none: the login callback handler decides (librdkafka's name)",
    "sasl.oauthbearer.client.id": "`sasl.oauthbearer.client.credentials.client.id` (librdkafka's name)",
    "sasl.oauthbearer.client.secret": "`sasl.oauthbearer.client.credentials.client.secret` (librdkafka's name)",
    "sasl.oauthbearer.extensions": "none: `extension_NAME=` options in `sasl.jaas.config` (librdkafka's name)",
    "sasl.oauthbearer.grant.type": "none: `sasl.oauthbearer.jwt.retriever.class` decides (librdkafka's name)",
    "sasl.oauthbearer.assertion.jwt.template.file": "`sasl.oauthbearer.assertion.template.file` (librdkafka's name)",
    "sasl.oauthbearer.assertion.private.key.pem": "none: Java reads the key from "
                                                  "`sasl.oauthbearer.assertion.private.key.file` (kafkajet's)",
    "https.ca.location": "none (librdkafka's name)",
    "https.ca.pem": "none (librdkafka's name)",
    "sasl.aws.region": "none (kafkajet's)",
    "sasl.aws.profile": "none: `awsProfileName=` of aws-msk-iam-auth's `sasl.jaas.config` (kafkajet's)",
    "sasl.aws.role.arn": "none: `awsRoleArn=` of aws-msk-iam-auth's `sasl.jaas.config` (kafkajet's)",
    "sasl.aws.role.session.name": "none: `awsRoleSessionName=` of aws-msk-iam-auth's `sasl.jaas.config` "
                                  "(kafkajet's)",
    "sasl.kerberos.principal": "none: `principal=` of a Krb5LoginModule `sasl.jaas.config` (librdkafka's name)",
    "sasl.kerberos.keytab": "none: `keyTab=` of a Krb5LoginModule `sasl.jaas.config` (librdkafka's name)",
    "batch.max.size": "none (kafkajet's)",
    "partitioner": "`partitioner.class`, a class (a callable or a name here)",
    "interceptors": "`interceptor.classes`, classes (objects here)",
    "allow.auto.create.topics": "none in the producer, which always lets the broker create (the consumer's name)",
    "opentelemetry.enable": "none (kafkajet's)",
}
if set(JAVA_NAMES) - set(BY_NAME):
    raise AssertionError(f"JAVA_NAMES names keys that are not in a table: {sorted(set(JAVA_NAMES) - set(BY_NAME))}")


def config_markdown(table: ClientTable = PRODUCER) -> str:
    """The table as Markdown: `kafkajet config` prints it, and docs/settings.md holds the producer's."""
    lines = ["| key | type | default | Java's name | description |", "| --- | --- | --- | --- | --- |"]
    for k in table.keys:
        default = f"{table.client_id_prefix}-N" if k.name == "client.id" else ("required" if k.required else k.default)
        if k.name == "acks":
            default = "all"
        if isinstance(default, list):
            default = ",".join(default)
        doc = f"{k.doc}. **Accepted, not read by this client**: {k.not_read}" if k.not_read else k.doc
        java = JAVA_NAMES.get(k.name, "same")
        lines.append(f"| `{k.name}` | {k.type} | `{default}` | {java} | {doc} |")
    return "\n".join(lines)


SETTINGS_PAGE_HEAD = """\
# Producer settings

<!-- Generated from kafkajet/config.py by `python -m kafkajet.config > docs/settings.md`; do not edit by hand:
tests/unit/test_settings_page.py fails when this page and the table differ. -->

Every setting `Producer` and `AIOProducer` take, from the table in `kafkajet/config.py` that also validates
them. Keys are the Java producer's where it has the setting; as keyword arguments they are written in
snake_case (`linger_ms=5` is `linger.ms`). A value may be given as a string (a properties file, a Spark
option) and is converted. An unknown key, a wrong type or a value out of range raises `ConfigError` naming
the key. "Java's name" is what the Java client calls a setting whose key here is librdkafka's or kafkajet's
own ("same" where the key is Java's). `kafkajet config` prints this table, and `kafkajet config --client admin` (or `fetch`) the admin
and fetch clients' (the same shared keys; [Admin and reading back](admin.md)).

"""


def settings_page() -> str:
    """docs/settings.md: the producer's settings reference."""
    return SETTINGS_PAGE_HEAD + config_markdown(PRODUCER) + "\n"


if __name__ == "__main__":
    print(settings_page(), end="")
