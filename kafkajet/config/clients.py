"""The client tables (Java's CommonClientConfigs and each client's own): the keys every client shares, the
producer's, admin's and fetch's, and the parsing of a user's settings against them."""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kafkajet.config.keys import (
    INT_MAX,
    ConfigKey,
    _acks,
    _bool,
    _callable_or_name,
    _choice,
    _choice_upper,
    _float_range,
    _gzip_level,
    _int_range,
    _interceptors,
    _list,
    _no_classes,
    _only,
    _only_list,
    _optional_int,
    _servers,
    _str,
    _transactional_id,
    _validate,
)
from kafkajet.config.sasl import OAUTHBEARER_METHODS, SASL_MECHANISMS, _sasl_mechanism, _token_provider
from kafkajet.config.security import (
    _endpoint_identification,
    _security,
    check_java_stores,
    check_security,
    tls_versions,
)
from kafkajet.errors import ConfigError

log = logging.getLogger("kafkajet.config")

_client_ids = itertools.count(1)


K = ConfigKey
# Java class names whose behaviour kafkajet has by other means (the keys naming them say which).
_OAUTH = "org.apache.kafka.common.security.oauthbearer."
JAVA_LOGIN_HANDLERS = (_OAUTH + "OAuthBearerLoginCallbackHandler",
                       "software.amazon.msk.auth.iam.IAMClientCallbackHandler")
JAVA_CLIENT_HANDLERS = ("software.amazon.msk.auth.iam.IAMClientCallbackHandler",)
JAVA_JWT_RETRIEVERS = tuple(_OAUTH + c for c in ("DefaultJwtRetriever", "ClientCredentialsJwtRetriever",
                                                  "JwtBearerJwtRetriever", "FileJwtRetriever"))
JMX_REPORTER = "org.apache.kafka.common.metrics.JmxReporter"
JAVA_PARTITIONERS = ("org.apache.kafka.clients.producer.RoundRobinPartitioner",)
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
    # Rebootstrap (KIP-899, KIP-1102) and the bootstrap addresses (KIP-909), as Java's NetworkClient.
    K("metadata.recovery.strategy", "enum", "rebootstrap", "rebootstrap: when no broker of the last metadata "
      "can be reached, or a broker answers REBOOTSTRAP_REQUIRED, start again from bootstrap.servers; none: "
      "keep trying the last known brokers", _choice("rebootstrap", "none")),
    K("metadata.recovery.rebootstrap.trigger.ms", "int", 300000, "rebootstrap after this long without a "
      "connection to any broker of the last metadata (metadata.recovery.strategy=rebootstrap)", _int_range(0)),
    K("client.dns.lookup", "enum", "use_all_dns_ips", "use_all_dns_ips: try each address a host name resolves "
      "to in turn; resolve_canonical_bootstrap_servers_only: replace each bootstrap host by the canonical "
      "names of its addresses (for Kerberos behind an alias), then as use_all_dns_ips",
      _choice("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
    K("bootstrap.resolve.timeout.ms", "int", 0, "0: bootstrap.servers is resolved when the client is built, and "
      "no resolvable host is a ConfigError there (Java's default)",
      lambda key, v: int(_only("0", why="kafkajet resolves bootstrap.servers when the client is built (0); "
                                         "Java's asynchronous resolution (an evolving feature) is not "
                                         "supported")(key, v)), not_read="only 0 (Java's default) is taken: bootstrap.servers is resolved when the client is built"),
    K("metadata.cluster.check.enable", "bool", True, "send the cluster id and node id the client expects in "
      "ApiVersions (v5, KIP-1242), so a 4.4 broker refuses a misrouted connection; ignored with "
      "metadata.recovery.strategy=none and by older brokers", _bool),
    K("security.protocol", "enum", "PLAINTEXT", "PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL over TLS)",
      _security),
    K("ssl.ca.location", "str", None, "PEM file of CA certificates trusted in addition to the system store",
      _str),
    K("ssl.truststore.certificates", "str", None, "PEM text of CA certificates trusted in addition to the "
      "system store", _str),
    # Java's names for PEM trust and key stores (KIP-651); JKS and PKCS12 stores are JVM formats.
    K("ssl.truststore.type", "enum", "JKS", "PEM: ssl.truststore.location is a PEM file of CA certificates "
      "(JKS, PKCS12: Java's key stores, which kafkajet cannot read; ssl.truststore.location is refused with them)",
      _choice_upper("JKS", "PKCS12", "PEM"), not_read="only PEM is read, which the settings' check holds ssl.truststore.location to"),
    K("ssl.truststore.location", "str", None, "with ssl.truststore.type=PEM: PEM file of CA certificates trusted "
      "in addition to the system store (as ssl.ca.location)", _str),
    K("ssl.keystore.type", "enum", "JKS", "PEM: ssl.keystore.location is a PEM file of the client certificate "
      "chain and its private key (JKS, PKCS12: Java's key stores, which kafkajet cannot read)",
      _choice_upper("JKS", "PKCS12", "PEM"), not_read="only PEM is read, which the settings' check holds ssl.keystore.location to"),
    K("ssl.keystore.location", "str", None, "with ssl.keystore.type=PEM: PEM file of the client certificate "
      "chain and its private key (mutual TLS; an encrypted key's password is ssl.key.password)", _str),
    K("ssl.keystore.certificate.chain", "str", None, "PEM text of the client certificate chain (as "
      "ssl.certificate.pem)", _str),
    K("ssl.keystore.key", "str", None, "PEM text of the client's private key (as ssl.key.pem); secret", _str,
      secret=True),
    K("ssl.protocol", "enum", "TLSv1.3", "the highest TLS version (TLSv1.2 keeps to 1.2 even if "
      "ssl.enabled.protocols names TLSv1.3)", lambda key, v: tls_versions(key, [v])[0]),
    K("ssl.cipher.suites", "list", [], "empty: OpenSSL's default suites", _no_classes(
      "Java's cipher suite names are not taken: kafkajet offers OpenSSL's default suites (TLS 1.2 and 1.3); "
      "restrict versions with ssl.enabled.protocols"), not_read="only the empty list (Java's default) is taken: OpenSSL's default suites"),
    K("ssl.keymanager.algorithm", "str", "SunX509", "a JVM key manager factory", _only(
      "SunX509", "PKIX", "NewSunX509", why="a JVM key manager factory; kafkajet's client certificate is "
      "OpenSSL's (ssl.keystore.location)"), not_read="OpenSSL presents the client certificate"),
    K("ssl.trustmanager.algorithm", "str", "PKIX", "a JVM trust manager factory", _only(
      "PKIX", "SunX509", why="a JVM trust manager factory; OpenSSL verifies the broker's chain "
      "(ssl.truststore.location)"), not_read="OpenSSL verifies the broker's certificate chain"),
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
    K("sasl.kerberos.kinit.cmd", "str", "/usr/bin/kinit", "GSSAPI: Java's kinit command for renewing a "
      "ticket-cache login", _str, not_read="kafkajet logs in again from the keytab; a ticket cache is renewed by "
      "whoever ran kinit"),
    K("sasl.login.callback.handler.class", "str", None, "Java's login callback handler: "
      "OAuthBearerLoginCallbackHandler (the OIDC token endpoint) or aws-msk-iam-auth's IAMClientCallbackHandler",
      _only(*JAVA_LOGIN_HANDLERS, why="a JVM class; kafkajet takes sasl.oauthbearer.token.provider (a Python "
            "callable) or sasl.oauthbearer.method=oidc / aws_msk_iam"),
      not_read="sasl.oauthbearer.token.endpoint.url or the IAMLoginModule of sasl.jaas.config choose the same"),
    K("sasl.client.callback.handler.class", "str", None, "Java's SASL client callback handler",
      _only(*JAVA_CLIENT_HANDLERS, why="a JVM class; credentials come from sasl.jaas.config or "
            "sasl.username/sasl.password"), not_read="aws-msk-iam-auth's handler: the IAMLoginModule of "
      "sasl.jaas.config chooses the same"),
    K("sasl.oauthbearer.jwt.retriever.class", "str", "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
      "Java's token retriever", _only(*JAVA_JWT_RETRIEVERS, why="a JVM class; kafkajet fetches tokens as "
      "sasl.oauthbearer.grant.type and sasl.oauthbearer.assertion.* say"),
      not_read="sasl.oauthbearer.grant.type and sasl.oauthbearer.assertion.file choose the same"),
    K("sasl.oauthbearer.header.urlencode", "bool", False, "OIDC: URL-encode the client id and secret in the "
      "Authorization header (RFC 6749 2.3.1)", _bool),
    *(K(name, kind, value, f"Java: {what}", check, not_read="the broker validates the token; a client (Java's "
        "too) sends the token its identity provider gave") for name, kind, value, what, check in (
        ("sasl.oauthbearer.jwt.validator.class", "str",
         "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator", "the token validator class",
         _only("org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
               "org.apache.kafka.common.security.oauthbearer.ClientJwtValidator",
               why="a JVM class; kafkajet does not validate its own tokens")),
        ("sasl.oauthbearer.allow.unverified.audience", "bool", False, "accept a token without an audience",
         _bool),
        ("sasl.oauthbearer.allow.unverified.issuer", "bool", False, "accept a token without an issuer", _bool),
        ("sasl.oauthbearer.clock.skew.seconds", "int", 30, "clock skew allowed when validating a token",
         _int_range(0, INT_MAX)),
        ("sasl.oauthbearer.expected.audience", "list", [], "the audiences a token must name", _list),
        ("sasl.oauthbearer.expected.issuer", "str", None, "the issuer a token must name", _str),
        ("sasl.oauthbearer.jwks.endpoint.url", "str", None, "where the validating keys are", _str),
        ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "int", 3600000, "how often the keys are fetched",
         _int_range(0)),
        ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "int", 100, "first wait before refetching the keys",
         _int_range(0)),
        ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "int", 10000, "largest wait before refetching "
         "the keys", _int_range(0)),
        ("sasl.oauthbearer.scope.claim.name", "str", "scope", "the claim holding the token's scope", _str),
        ("sasl.oauthbearer.sub.claim.name", "str", "sub", "the claim holding the token's subject", _str),
    )),
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
    # Metrics (Java's CommonClientConfigs): what the registry and its reporters are.
    K("metric.reporters", "list", [JMX_REPORTER], "Java's metric reporter classes", _only_list(
      JMX_REPORTER, why="a JVM class; read producer.metrics() (or opentelemetry.enable for OpenTelemetry)"),
      not_read="there is no JMX in Python: producer.metrics() gives the same names"),
    K("metrics.num.samples", "int", 2, "samples a windowed rate is computed over", _int_range(1, INT_MAX),
      not_read="rates are over Java's default windows: 2 samples of 30 s"),
    K("metrics.sample.window.ms", "int", 30000, "the window of one sample", _int_range(0),
      not_read="rates are over Java's default windows: 2 samples of 30 s"),
    K("metrics.recording.level", "enum", "INFO", "INFO, DEBUG or TRACE",
      lambda key, v: _choice("info", "debug", "trace")(key, v).upper(),
      not_read="every metric kafkajet has is recorded"),
    K("enable.metrics.push", "bool", True, "push client metrics to a broker that subscribes to them (KIP-714)",
      _bool, not_read="only the producer pushes client metrics (its own key below)"),
    K("config.providers", "list", [], "Java's ConfigProvider aliases", _no_classes(
      "JVM ConfigProvider classes are not taken: resolve ${provider:path:key} values before giving them to the "
      "client (os.environ, a secrets manager's SDK)"), not_read="only the empty list (Java's default) is taken"),
    K("sasl.login.connect.timeout.ms", "int", 10000, "OIDC: connect timeout of a token request", _int_range(1)),
    K("sasl.login.read.timeout.ms", "int", 10000, "OIDC: read timeout of a token request", _int_range(1)),
)


def _not_read(keys: tuple[ConfigKey, ...], why: Mapping[str, str]) -> tuple[ConfigKey, ...]:
    """keys, those named in `why` marked as accepted but not read by this client, with what happens instead."""
    unknown = set(why) - {k.name for k in keys}
    if unknown:
        raise AssertionError(f"not_read names keys that are not in the table: {sorted(unknown)}")
    return tuple(dataclasses.replace(k, not_read=why[k.name]) if k.name in why else k for k in keys)


PRODUCER_CONFIG: tuple[ConfigKey, ...] = _not_read(tuple(k for k in COMMON_CONFIG if k.name != "enable.metrics.push"), {
    "default.api.timeout.ms": "send() waits up to max.block.ms; flush() and close() take their own timeout",
}) + (
    K("acks", "enum", -1, "acknowledgements required: all (-1), 1 (leader only) or 0 (none)", _acks),
    K("enable.idempotence", "bool", True, "exactly-once per partition: producer id, epochs and sequence numbers",
      _bool),
    K("enable.metrics.push", "bool", True, "push the producer's metrics to the brokers when a broker's client "
      "metrics subscription asks for them (KIP-714)", _bool),
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
    K("partitioner.adaptive.partitioning.enable", "bool", True, "default partitioner: keyless records favour "
      "partitions with shorter queues (slower brokers get fewer); false: uniform among those with a leader",
      _bool),
    K("partitioner.availability.timeout.ms", "int", 0, "default partitioner, adaptive: a partition whose leader "
      "has not been able to take a batch for this long gets no keyless records until it can; 0: off",
      _int_range(0)),
    K("partitioner.rack.aware", "bool", False, "default partitioner: keyless records go to partitions led in "
      "client.rack when any is available (KIP-1123), else to all", _bool),
    K("client.rack", "str", None, "the rack (availability zone) this client runs in, for partitioner.rack.aware",
      _str),
    K("partitioner.class", "str", None, "Java's partitioner class: empty (the built-in one) or "
      "org.apache.kafka.clients.producer.RoundRobinPartitioner (as partitioner=round_robin)",
      _only(*JAVA_PARTITIONERS, why="a JVM class; give partitioner= a Python callable or default / "
            "round_robin / random"), not_read='RoundRobinPartitioner is turned into partitioner=round_robin when the settings are parsed'),
    K("interceptors", "list", None, "objects with on_send, on_acknowledgement and close", _interceptors),
    K("interceptor.classes", "list", [], "Java's interceptor classes: empty", _no_classes(
      "JVM classes are not taken: give interceptors= objects with on_send, on_acknowledgement and close"), not_read="only the empty list (Java's default) is taken"),
    K("buffer.memory.allocation.strategy", "enum", "full", "full: a batch takes batch.size of buffer.memory "
      "when it is created", _only("full", why="kafkajet reserves batch.size for each batch when it is "
                                  "created (full); Java's incremental allocation is not supported"), not_read="only full (Java's default) is taken, which is what the buffer pool does"),
    K("transaction.two.phase.commit.enable", "bool", False, "false: transactions end by commit or abort "
      "within transaction.timeout.ms", lambda key, v: _bool(key, _only(
          "false", why="two-phase commit with an external transaction manager (KIP-939) is not supported: "
          "a transaction ends by commit_transaction() or abort_transaction()")(key, v)), not_read="only false (Java's default) is taken"),
    K("allow.auto.create.topics", "bool", True, "let the broker create a topic on first use", _bool),
    K("transactional.id", "str", None, "enables transactions (init_transactions, begin/commit/abort); implies "
      "idempotence. Producers with the same id fence each other", _transactional_id),
    K("transaction.timeout.ms", "int", 60000, "how long the coordinator lets a transaction stay open before it "
      "aborts it", _int_range(1, INT_MAX)),
    K("opentelemetry.enable", "bool", False, "OpenTelemetry spans (one per record, ended at the broker's answer), "
      "trace context in the record headers, and the messaging metrics; needs pip install 'kafkajet[otel]'",
      _bool),
)
# Java 4.4 keys kafkajet does not take, whatever the value, with why and what to use instead. Every key of
# Java's ProducerConfig is in the producer's table or here (tests/unit/test_java_producer_keys.py, against
# tests/unit/data/java-producer-keys-4.4.0.tsv, which tools/JavaConfigKeys.java prints from the jar).
REFUSED: dict[str, str] = {
    "security.providers": "JVM security provider classes; TLS here is OpenSSL's (the ssl.* keys)",
    "ssl.engine.factory.class": "a JVM SSLEngine factory; the TLS context is built from the ssl.* keys",
    "ssl.provider": "a JVM security provider; TLS here is OpenSSL's",
    "ssl.secure.random.implementation": "a JVM SecureRandom; OpenSSL seeds its own from the OS",
    "ssl.keystore.password": "it opens a JKS or PKCS12 key store, which kafkajet cannot read: convert it to PEM "
                             "(ssl.keystore.type=PEM; an encrypted key's password is ssl.key.password)",
    "ssl.truststore.password": "it opens a JKS or PKCS12 trust store, which kafkajet cannot read: convert it to "
                               "PEM (ssl.truststore.type=PEM, which needs no password)",
    "sasl.login.class": "a JVM Login class; kafkajet logs in as sasl.mechanism and sasl.jaas.config say",
}

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
    "metadata.recovery.strategy": "every call tries the brokers it knows, then bootstrap.servers (as rebootstrap)",
    "metadata.recovery.rebootstrap.trigger.ms": "every call tries the brokers it knows, then bootstrap.servers, "
                                                "within its own deadline",
    "metadata.cluster.check.enable": "connections are blocking ones, which send ApiVersions without the cluster id",
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
    dotted = key.replace("_", ".") if snake else key
    if dotted in REFUSED:
        return ConfigError(f"{dotted} is not supported: {REFUSED[dotted]}")
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
    check_java_stores(values, explicit)
    check_security(values, explicit)
    return ClientConfig(values, explicit)


def parse_producer_config(config: Mapping[str, Any] | str | None = None, /, **kwargs: Any) -> ProducerConfig:
    raw = _collect(PRODUCER, config, kwargs)
    values = _values(PRODUCER, raw)
    explicit = frozenset(raw)
    _cross_check(values, explicit)
    check_java_stores(values, explicit)
    check_security(values, explicit)
    return ProducerConfig(values, explicit)


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
    check_java_stores(values, explicit)
    check_security(values, explicit)
    return ClientConfig(values, explicit)  # its repr hides the secrets



def _cross_check(values: dict[str, Any], explicit: frozenset[str]) -> None:
    if values["partitioner.class"] is not None:
        if "partitioner" in explicit:
            raise ConfigError("set either partitioner or partitioner.class (Java's name), not both")
        values["partitioner"] = "round_robin"  # the one Java class taken (JAVA_PARTITIONERS)
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
