"""The client's TLS context, built from the Java / librdkafka ssl.* configuration keys.

Server certificates are verified against the system trust store plus any CA the user adds; the broker's
host name is checked unless ssl.endpoint.identification.algorithm is empty; TLS 1.2 is the floor whatever
ssl.enabled.protocols says (the config table only accepts TLSv1.2 and TLSv1.3).
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kafkajet.config import default, setting, tls_versions
from kafkajet.errors import ConfigError, KafkaConnectionError, KafkaError, SslAuthenticationError
from kafkajet.tls_context import client_context

log = logging.getLogger("kafkajet.security")

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def build_ssl_context(cfg: Mapping[str, Any]) -> ssl.SSLContext:
    """An SSLContext for connecting to brokers; ConfigError naming the key when a file or PEM is unusable."""
    ctx = client_context()
    protocols = "ssl.enabled.protocols"
    _set_versions(ctx, tls_versions(protocols, cfg.get(protocols) or default(protocols)),
                  tls_versions("ssl.protocol", [setting(cfg, "ssl.protocol")])[0])
    ca_key, ca_file = given(cfg, "ssl.ca.location", "ssl.truststore.location")
    if ca_file:
        _check_file(ca_key, ca_file)
        try:
            ctx.load_verify_locations(cafile=ca_file)
        except ssl.SSLError as e:
            raise ConfigError(f"{ca_key}: {ca_file} holds no usable PEM certificate ({_reason(e)})") from None
    ca_text = cfg.get("ssl.truststore.certificates")
    if ca_text:
        try:
            ctx.load_verify_locations(cadata=pem_lines(ca_text))
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(f"ssl.truststore.certificates holds no usable PEM certificate ({_reason(e)})") from None
    if setting(cfg, "ssl.endpoint.identification.algorithm") == "":
        log.warning("ssl.endpoint.identification.algorithm is empty: the broker's host name is not checked "
                    "against its certificate, so any holder of a certificate from a trusted CA can pose as it")
        ctx.check_hostname = False
    _load_client_certificate(ctx, cfg)
    return ctx


def _set_versions(ctx: ssl.SSLContext, names: list[str], protocol: str) -> None:
    versions = sorted(_VERSIONS[n] for n in names)
    # A gap (none possible with two versions) would be bridged: OpenSSL only takes a range.
    ctx.minimum_version = max(versions[0], ssl.TLSVersion.TLSv1_2)
    # Java's ssl.protocol is the SSLContext's: TLSv1.2 keeps to 1.2 whatever ssl.enabled.protocols names.
    highest = min(versions[-1], _VERSIONS[protocol])
    if highest < ctx.minimum_version:
        raise ConfigError(f"ssl.protocol={protocol} is below every version of ssl.enabled.protocols "
                          f"({', '.join(names)})")
    ctx.maximum_version = highest


def given(cfg: Mapping[str, Any], ours: str, java: str) -> tuple[str, Any]:
    """The key of the two, kafkajet's (librdkafka's) or Java's name for the same file or text, that is set
    (the configuration refuses both), and its value."""
    value = cfg.get(java)
    return (java, value) if value is not None else (ours, cfg.get(ours))


def _load_client_certificate(ctx: ssl.SSLContext, cfg: Mapping[str, Any]) -> None:
    # A Java PEM key store (ssl.keystore.location) holds the chain and the key in one file.
    file_key, cert_file = given(cfg, "ssl.certificate.location", "ssl.keystore.location")
    key_file = cfg.get("ssl.key.location")
    pem_key, cert_pem = given(cfg, "ssl.certificate.pem", "ssl.keystore.certificate.chain")
    key_pem_key, key_pem = given(cfg, "ssl.key.pem", "ssl.keystore.key")
    cert_pem, key_pem = (None if t is None else pem_lines(t) for t in (cert_pem, key_pem))
    if not (cert_file or cert_pem):
        return
    if cert_file:
        _check_file(file_key, cert_file)
    if key_file:
        _check_file("ssl.key.location", key_file)
    password = cfg.get("ssl.key.password")
    cert_key = file_key if cert_file else pem_key
    key_key = "ssl.key.location" if key_file else key_pem_key if key_pem else cert_key

    def no_password() -> str:
        # Without this OpenSSL would prompt on the terminal for the pass phrase of an encrypted key.
        raise ConfigError(f"the private key in {key_key} is encrypted: set ssl.key.password")

    # The ssl module loads certificate chains from files only: PEM text goes through private temporary files
    # (mode 0600) that are removed as soon as OpenSSL has read them.
    with _as_file(cert_pem, cert_file) as certfile, _as_file(key_pem, key_file) as keyfile:
        assert certfile is not None
        try:
            ctx.load_cert_chain(certfile, keyfile, password if password is not None else no_password)
        except ssl.SSLError as e:
            text = str(e)
            if "KEY_VALUES_MISMATCH" in text:
                what = f"the private key in {key_key} does not belong to the certificate"
            elif password is not None and ("bad decrypt" in text.lower() or "PEM lib" in text):
                what = f"cannot decrypt the private key in {key_key}: check ssl.key.password"
            else:
                what = _reason(e)
            raise ConfigError(f"cannot load the client certificate ({cert_key}) and its key ({key_key}): "
                              f"{what}") from None


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def pem_lines(text: str) -> str:
    """PEM text as OpenSSL reads it. A Java properties file continues a long value with a backslash at the end of
    each line, which joins the lines into one: Java's PEM reader takes that, OpenSSL needs the line breaks back."""
    if "\n" in text.strip():
        return text
    blocks = [(kind, "".join(body.split())) for kind, body in _PEM_BLOCK.findall(text)]
    if not blocks:
        return text  # OpenSSL names what is wrong with it
    return "".join(f"-----BEGIN {kind}-----\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
                   + f"\n-----END {kind}-----\n" for kind, body in blocks)


@contextmanager
def _as_file(pem: str | None, path: str | None) -> Iterator[str | None]:
    if pem is None:
        yield path
        return
    fd, name = tempfile.mkstemp(prefix="kafkajet-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(pem)
        yield name
    finally:
        os.unlink(name)


def _check_file(key: str, path: str) -> None:
    if not os.path.isfile(path):
        raise ConfigError(f"{key}: file {path} does not exist")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{key}: file {path} is not readable")


def _reason(e: Exception) -> str:
    return getattr(e, "reason", None) or str(e)


# What the broker's TLS alerts mean for the user (OpenSSL reason names).
_ALERT_HINTS = {
    "CERTIFICATE_REQUIRED": "it requires a client certificate: set ssl.certificate.location and ssl.key.location",
    "UNKNOWN_CA": "it does not trust the CA that issued our client certificate",
    "BAD_CERTIFICATE": "it rejected our client certificate",
    "CERTIFICATE_EXPIRED": "it says our client certificate has expired",
    "CERTIFICATE_UNKNOWN": "it rejected our client certificate",
    "HANDSHAKE_FAILURE": "no common TLS parameters, or it wants a client certificate",
    "PROTOCOL_VERSION": "no common TLS version (see ssl.enabled.protocols)",
    "UNSUPPORTED_PROTOCOL": "no common TLS version (see ssl.enabled.protocols)",
}


# A plaintext Kafka listener reads a ClientHello as a huge request size: Apache Kafka closes the connection,
# Tansu waits for the rest. Either way the handshake gets no answer; say the likely cause.
NOT_TLS_HINT = "the listener may not speak TLS (security.protocol SSL or SASL_SSL against a PLAINTEXT listener?)"


def handshake_error(peer: str, e: OSError) -> KafkaError:
    """What a failed TLS handshake with `peer` means to the client (SSLError is an OSError)."""
    if isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError)):
        return KafkaConnectionError(f"TLS handshake with {peer} failed: the connection was closed during the "
                                    f"handshake; {NOT_TLS_HINT}")
    if isinstance(e, ssl.SSLError):
        # A certificate that does not verify is an authentication failure: retrying cannot fix it.
        return SslAuthenticationError(f"TLS handshake with {peer} failed: {verification_reason(e)}")
    return KafkaConnectionError(f"TLS handshake with {peer} failed: {e}")


def verification_reason(e: ssl.SSLError) -> str:
    """A readable cause of a failed handshake: OpenSSL's verification message, or what an alert means."""
    if isinstance(e, ssl.SSLCertVerificationError) and e.verify_message:
        return f"certificate verify failed: {e.verify_message}"
    reason = getattr(e, "reason", None)
    if not reason:
        return str(e)
    text = reason.lower().replace("_", " ")
    for name, hint in _ALERT_HINTS.items():
        if reason.endswith(name):
            return f"{text} ({hint})"
    return text
