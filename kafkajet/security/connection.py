"""What a connection needs to be secured: a TLS context and a factory of SASL clients, from the config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkajet.config import ProducerConfig, security_config
from kafkajet.security.mechanism import SaslClient, SaslClientFactory

if TYPE_CHECKING:
    import ssl  # loaded only where TLS is configured: OpenSSL adds about 6 MB to every process


@dataclass(frozen=True)
class ConnectionSecurity:
    """security.protocol made concrete. Holds no secret in its repr: the SASL factory closes over them."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    sasl: SaslClientFactory | None = field(default=None, repr=False)
    mechanism: str | None = None
    client_certificate: bool = False  # for error messages: whether the broker could have refused ours
    # The client's own token source (OIDC, MSK IAM) or Kerberos login: its background refresh ends with it.
    token_source: Any = field(default=None, repr=False, compare=False)

    def close(self) -> None:
        close = getattr(self.token_source, "close", None)
        if callable(close):
            close()


PLAINTEXT = ConnectionSecurity()


def connection_security(cfg: Mapping[str, Any]) -> ConnectionSecurity:
    """Build the TLS context and check the SASL settings once, so a bad file or credential fails at
    construction (ConfigError), not on every connection attempt. `cfg` may be raw (strings, any keys)."""
    if not isinstance(cfg, ProducerConfig):
        cfg = security_config(cfg)
    protocol = cfg["security.protocol"]
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        from kafkajet.security.tls import build_ssl_context

        context = build_ssl_context(cfg)
    factory: SaslClientFactory | None = None
    mechanism = None
    token_source = None
    if protocol.startswith("SASL_"):
        from kafkajet.security.sasl import OAuthBearerClient, client_login, sasl_client_from_config
        from kafkajet.security.token_refresh import RefreshingTokenSource

        settings = {k: v for k, v in cfg.items() if k.startswith(("sasl.", "https."))}
        # The client-wide login (Java's LoginManager): one per client, shared by all its connections.
        login = client_login(settings)

        def make(host: str) -> SaslClient:
            return sasl_client_from_config(settings, host, login)

        factory = make
        mechanism = make("localhost").mechanism  # validates the credentials and the JAAS line now
        user_provider = cfg.get("sasl.oauthbearer.token.provider")
        if user_provider is None:  # ours, not the user's: we may close it
            token_source = login if isinstance(login, RefreshingTokenSource) else None
            if token_source is not None:
                _login(token_source)
        elif mechanism == "OAUTHBEARER":
            # The user's provider is called at construction too, as Java's login callback handler is.
            OAuthBearerClient(user_provider).login()
    has_cert = any(cfg.get(k) for k in ("ssl.certificate.location", "ssl.certificate.pem", "ssl.keystore.location",
                                        "ssl.keystore.certificate.chain"))
    return ConnectionSecurity(protocol, context, factory, mechanism, has_cert, token_source)


def _login(token_source: Any) -> None:
    """The first token (or Kerberos ticket), fetched now, as Java's clients log in in their constructor (OAuthBearerLoginModule
    through ExpiringCredentialRefreshingLogin.login(), which also starts the refresh thread): so no connection
    thread ever waits on the identity provider for it (the sender would block up to
    sasl.login.retry.backoff.max.ms), and an identity provider that cannot give a token within that budget
    fails the constructor with its error (endpoint and HTTP status or cause), not the first send."""
    try:
        token_source.token()
    except BaseException:
        token_source.close()
        raise
