"""The one way kafkajet starts a TLS client context: brokers (security/tls.py builds theirs on it from the
ssl.* keys), an OIDC token endpoint, a Schema Registry. Standard library only, below every client, so the
registry client (which speaks plain HTTP with the standard library) uses it without the broker's security
layer."""

from __future__ import annotations

import ssl


def client_context(*, system_cas: bool = True) -> ssl.SSLContext:
    """A TLS client context with the server's certificate and host name checked, trusting the system's CAs
    unless `system_cas` is false (the caller then loads its own)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname on
    if system_cas:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return ctx
