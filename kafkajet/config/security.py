"""security.protocol and TLS (Java's SslConfigs): the validators of their keys, and the cross-checks of
what each security.protocol and sasl.mechanism needs."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kafkajet.config.sasl import SASL, SASL_MECHANISMS
from kafkajet.errors import ConfigError

log = logging.getLogger("kafkajet.config")

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")


def _security(key: str, v: Any) -> str:
    s = str(v).strip().upper()
    if s not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{key}={v!r}: must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
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
        cert_keys = ("ssl.certificate.location", "ssl.certificate.pem", "ssl.keystore.location",
                     "ssl.keystore.certificate.chain")
        key_keys = ("ssl.key.location", "ssl.key.pem", "ssl.keystore.key")
        for keys in (cert_keys, key_keys):
            both = [k for k in keys if values.get(k) is not None]
            if len(both) == 2:
                raise ConfigError(f"set either {both[0]} or {both[1]}, not both")
            if len(both) > 2:
                raise ConfigError(f"set one of {', '.join(both)}, not several")
        # A Java PEM key store has the key in the file with the chain.
        has_cert = any(values.get(k) is not None for k in cert_keys)
        has_key = any(values.get(k) is not None for k in key_keys)
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


def check_java_stores(values: Mapping[str, Any], explicit: frozenset[str]) -> None:
    """Java's PEM stores (KIP-651): a JKS or PKCS12 store is refused, naming the conversion; a store given under
    Java's name and kafkajet's (librdkafka's) at once is refused too. security/tls.py reads either name."""
    for store in ("truststore", "keystore"):
        location, kind = f"ssl.{store}.location", f"ssl.{store}.type"
        if values.get(location) is not None and values[kind] != "PEM":
            default = "" if kind in explicit else f" (Java's default when {kind} is not set)"
            raise ConfigError(
                f"{location}: a {values[kind]} {store}{default} is a JVM format kafkajet cannot read; convert it "
                f"to PEM and set {kind}=PEM (keytool -importkeystore -deststoretype PKCS12, then openssl pkcs12 "
                "-nodes)")
    if values.get("ssl.truststore.location") is not None and values.get("ssl.ca.location") is not None:
        raise ConfigError("set either ssl.truststore.location (Java's name) or ssl.ca.location, not both")
