"""OAUTHBEARER tokens from an OAuth 2 / OIDC token endpoint, by configuration (sasl.oauthbearer.method=oidc).

Two grants, as librdkafka and Java (KIP-768, KIP-1139):
* client_credentials: the client id and secret in an HTTP Basic header (RFC 6749 2.3.1, RFC 7617), scope in
  the form body;
* urn:ietf:params:oauth:grant-type:jwt-bearer (RFC 7523): a JWT assertion signed with the client's private
  key (sasl.oauthbearer.assertion.*; needs the `cryptography` package, `pip install kafkajet[oidc]`) with
  the claims of sasl.oauthbearer.assertion.template.file merged in, or a ready assertion read from
  sasl.oauthbearer.assertion.file at each fetch. The key, template and assertion files are read again at each
  fetch and used anew when they changed, as Java's (KIP-1139), so a rotation on disk needs no restart.

The answer's access_token is used as is; its expiry is the JWT's `exp` claim (Java and librdkafka read it
from the token too), or `expires_in` for an opaque token. HTTP goes through urllib; an https endpoint is
verified against https.ca.location / https.ca.pem, or the system store.

Errors name the endpoint (without any user:password part) and the HTTP status or the cause; the secret,
the assertion and the token never appear, not even in an identity provider's error text.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import kafkajet.config as config
from kafkajet.errors import ConfigError
from kafkajet.security.token_refresh import RefreshConfig, RefreshingTokenSource, Token, TokenFetchError

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"

T = TypeVar("T")
log = logging.getLogger("kafkajet.security")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The payload of a JWS compact token, unverified (the broker verifies); None if it is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(b64url_decode(parts[1]))
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def redact_url(url: str) -> str:
    """The URL as error messages show it: no user:password@, no query (where some put a key)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# --- the assertion (RFC 7523) -----------------------------------------------------------------------------


class WatchedFile(Generic[T]):
    """A small file read again at each use and parsed again only when its bytes changed, as Java's CachedFile
    reloads on modification: a key, assertion or template rotated on disk is used from the next refresh on,
    without a restart. Comparing the bytes, not the mtime, also sees a rewrite within one mtime tick."""

    def __init__(self, path: str, parse: Callable[[bytes], T], setting: str) -> None:
        self.path = path
        self.setting = setting  # names the file in errors; its contents never do
        self._parse = parse
        self._data: bytes | None = None
        self._value: T | None = None

    def __repr__(self) -> str:
        return f"WatchedFile({self.setting}={self.path!r})"

    def get(self) -> T:
        """The parsed contents; OSError if unreadable, ConfigError if they do not parse."""
        with open(self.path, "rb") as f:
            data = f.read(1 << 20)
        if data != self._data:
            self._value, self._data = self._parse(data), data
        assert self._value is not None
        return self._value


def load_private_key(pem: bytes, passphrase: str | None, algorithm: str, setting: str) -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
    except ImportError:
        raise ConfigError("the OIDC JWT bearer grant signs its assertion with the cryptography package: "
                          "pip install 'kafkajet[oidc]'") from None
    try:
        key = serialization.load_pem_private_key(pem, passphrase.encode("utf-8") if passphrase is not None else None)
    except (ValueError, TypeError) as e:
        # Not chained and not quoted: the message could echo part of the key.
        raise ConfigError(f"{setting}: cannot load the PEM private key "
                          f"({type(e).__name__}; wrong passphrase or not a PEM key?)") from None
    wanted = rsa.RSAPrivateKey if algorithm == "RS256" else ec.EllipticCurvePrivateKey
    if not isinstance(key, wanted):
        raise ConfigError(f"sasl.oauthbearer.assertion.algorithm={algorithm} needs "
                          f"{'an RSA' if algorithm == 'RS256' else 'an EC P-256'} private key")
    return key


Template = tuple[dict[str, Any], dict[str, Any]]


def parse_template(data: bytes, setting: str) -> Template:
    """Java's FileAssertionJwtTemplate: a JSON object with optional "header" and "payload" objects."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise ConfigError(f"{setting}: not JSON ({type(e).__name__} at {getattr(e, 'pos', '?')})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f'{setting}: expected a JSON object with "header" and/or "payload"')
    parts = []
    for name in ("header", "payload"):
        part = doc.get(name, {})
        if not isinstance(part, dict):
            raise ConfigError(f"{setting}: {name!r} must be a JSON object")
        parts.append(part)
    return parts[0], parts[1]


def parse_ready_assertion(data: bytes, setting: str) -> str:
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"{setting}: the assertion is not ASCII (a serialized JWT is)") from None
    if text.count(".") != 2:
        raise ConfigError(f"{setting}: not a serialized JWT (header.payload.signature)")
    return text


class AssertionSigner:
    """Makes a fresh signed JWT assertion per fetch, layered as Java's (KIP-1139) LayeredAssertionJwtTemplate:
    the claim.aud/iss/sub settings, then the template file over them, then what must be fresh and cannot be
    overridden (alg and typ in the header; iat, exp, nbf and jti in the payload)."""

    def __init__(self, key: Callable[[], Any], algorithm: str, claims: Mapping[str, Any],
                 exp_seconds: int, nbf_seconds: int, include_jti: bool,
                 template: Callable[[], Template] | None = None, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self.algorithm = algorithm
        self._claims = {k: v for k, v in claims.items() if v is not None}
        self._template = template
        self._exp = exp_seconds
        self._nbf = nbf_seconds
        self._jti = include_jti
        self._clock = clock

    def __repr__(self) -> str:
        return f"AssertionSigner({self.algorithm}, claims={sorted(self._claims)})"

    def assertion(self) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

        key = self._key()
        header_t, payload_t = self._template() if self._template is not None else ({}, {})
        now = int(self._clock())
        claims = {**self._claims, **payload_t, "iat": now, "exp": now + self._exp, "nbf": now - self._nbf}
        if self._jti:
            claims["jti"] = str(uuid.uuid4())
        header = {**header_t, "alg": self.algorithm, "typ": "JWT"}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}".encode()
        if isinstance(key, rsa.RSAPrivateKey):
            signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            r, s = utils.decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")  # JWS wants raw r || s (RFC 7518 3.4)
        return f"{signing_input.decode()}.{b64url(signature)}"


# --- the token request ------------------------------------------------------------------------------------


class OidcTokenFetcher:
    """One POST to the token endpoint per call; returns a Token or raises TokenFetchError."""

    def __init__(self, url: str, *, client_id: str | None, client_secret: str | None, scope: str | None,
                 assertion: Callable[[], str] | None, ssl_context: Any, timeout_s: float,
                 clock: Callable[[], float] = time.time, urlencode: bool = False) -> None:
        self.url = url
        self.endpoint = redact_url(url)
        self._client_id = client_id
        self._secret = client_secret
        self._urlencode = urlencode  # RFC 6749 2.3.1 (Java's sasl.oauthbearer.header.urlencode)
        self._scope = scope
        self._assertion = assertion
        self._ssl = ssl_context
        self._timeout = timeout_s
        self._clock = clock

    def __repr__(self) -> str:
        grant = "jwt-bearer" if self._assertion is not None else "client_credentials"
        return f"OidcTokenFetcher({self.endpoint}, grant={grant}, client_id={self._client_id!r})"

    def __call__(self) -> Token:
        form: dict[str, str] = {}
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self._assertion is not None:
            form["grant_type"] = JWT_BEARER
            try:
                form["assertion"] = self._assertion()
            except OSError as e:
                raise TokenFetchError(f"OIDC: cannot read the assertion for {self.endpoint}: "
                                      f"{type(e).__name__}: {e.strerror} ({e.filename})", retryable=False) from None
            except ConfigError as e:  # a key, template or assertion file rewritten into something unusable
                raise TokenFetchError(f"OIDC: cannot make the assertion for {self.endpoint}: {e}",
                                      retryable=False) from None
        else:
            form["grant_type"] = "client_credentials"
            client_id, secret = self._client_id or "", self._secret or ""
            if self._urlencode:
                client_id, secret = urllib.parse.quote_plus(client_id), urllib.parse.quote_plus(secret)
            basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode("ascii")
            headers["Authorization"] = f"Basic {basic}"
        if self._scope:
            form["scope"] = self._scope
        request = urllib.request.Request(self.url, data=urllib.parse.urlencode(form).encode(), headers=headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._ssl) as response:
                body = response.read(1 << 20)
        except urllib.error.HTTPError as e:
            raise self._http_error(e) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise TokenFetchError(f"OIDC token request to {self.endpoint} failed: "
                                  f"{type(reason).__name__}: {self._scrub(str(reason))}") from None
        return self._parse(body)

    def _http_error(self, e: urllib.error.HTTPError) -> TokenFetchError:
        detail = ""
        try:
            doc = json.loads(e.read(65536))
            if isinstance(doc, dict):
                detail = ", ".join(f"{k}={str(doc[k])[:200]!r}" for k in ("error", "error_description") if k in doc)
        except (ValueError, OSError):
            pass
        # A refusal (bad client, bad grant) stays a refusal; 408, 429 and 5xx may pass (as Java decides).
        retryable = not (400 <= e.code < 500) or e.code in (408, 429)
        text = f"OIDC token request to {self.endpoint} failed: HTTP {e.code} ({e.reason})"
        return TokenFetchError(self._scrub(text + (f": {detail}" if detail else "")), retryable)

    def _parse(self, body: bytes) -> Token:
        try:
            doc = json.loads(body)
        except ValueError:
            raise TokenFetchError(f"OIDC token endpoint {self.endpoint} answered with no JSON "
                                  f"({len(body)} bytes)", retryable=False) from None
        token = doc.get("access_token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token:
            raise TokenFetchError(f"OIDC token endpoint {self.endpoint} answered without an access_token",
                                  retryable=False)
        now = self._clock()
        claims = jwt_claims(token) or {}
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)):
            expires_in = doc.get("expires_in")
            if not isinstance(expires_in, (int, float)) or isinstance(expires_in, bool):
                raise TokenFetchError(f"OIDC token from {self.endpoint} has no expiry (no exp claim and no "
                                      "expires_in)", retryable=False)
            exp = now + float(expires_in)
        iat = claims.get("iat")
        issued = float(iat) if isinstance(iat, (int, float)) and iat <= now else now
        sub = claims.get("sub")
        return Token(token, float(exp), issued, sub if isinstance(sub, str) else None)

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "[hidden]") if self._secret else text


# --- from configuration -----------------------------------------------------------------------------------


def parse_extensions(text: str | None) -> dict[str, str]:
    """sasl.oauthbearer.extensions: "key=value,key=value" (librdkafka's syntax)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"sasl.oauthbearer.extensions: expected key=value, got {item.strip()!r}")
        out[key.strip()] = value.strip()
    return out


def _one_of(cfg: Mapping[str, Any], jaas: Mapping[str, str], keys: tuple[str, ...], jaas_key: str,
            what: str) -> str | None:
    values = {k: cfg.get(k) for k in keys if cfg.get(k) is not None}
    if jaas.get(jaas_key) is not None:
        values[f"{jaas_key}= in sasl.jaas.config"] = jaas[jaas_key]
    if len(set(values.values())) > 1:
        raise ConfigError(f"the OIDC {what} is set differently in {' and '.join(values)}; give it once")
    return next(iter(values.values()), None)


def oidc_token_source(cfg: Mapping[str, Any], jaas: Mapping[str, str] | None = None,
                      clock: Callable[[], float] = time.time) -> RefreshingTokenSource:
    """The client's one token source for sasl.oauthbearer.method=oidc. `jaas` holds the options of an
    OAuthBearerLoginModule line (Java's clientId, clientSecret, scope, extension_<name>)."""
    jaas = jaas or {}
    url = cfg.get("sasl.oauthbearer.token.endpoint.url")
    if not url:
        raise ConfigError("sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme
    if scheme not in ("http", "https"):
        raise ConfigError(f"sasl.oauthbearer.token.endpoint.url must be an http(s) URL, not {redact_url(url)!r}")
    if parts.username is not None:
        raise ConfigError("sasl.oauthbearer.token.endpoint.url must not carry a user or password: give "
                          "sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret")
    client_id = _one_of(cfg, jaas, ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.credentials.client.id"),
                        "clientId", "client id")
    secret = _one_of(cfg, jaas, ("sasl.oauthbearer.client.secret",
                                 "sasl.oauthbearer.client.credentials.client.secret"), "clientSecret", "client secret")
    scope = _one_of(cfg, jaas, ("sasl.oauthbearer.scope",), "scope", "scope")
    assertion = _assertion(cfg)
    if assertion is None and (not client_id or not secret):
        raise ConfigError("sasl.oauthbearer.method=oidc needs sasl.oauthbearer.client.id and "
                          "sasl.oauthbearer.client.secret (or the JWT bearer grant: "
                          "sasl.oauthbearer.assertion.private.key.file)")
    ssl_context = None
    if scheme == "https":
        import ssl

        from kafkajet.tls_context import client_context  # loads OpenSSL: only for an https endpoint

        cafile, cadata = cfg.get("https.ca.location"), cfg.get("https.ca.pem")
        try:
            # The given CAs instead of the system's, as ssl.create_default_context(cafile, cadata) would.
            ssl_context = client_context(system_cas=not (cafile or cadata))
            if cafile or cadata:
                ssl_context.load_verify_locations(cafile=cafile, cadata=cadata)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"https.ca.location / https.ca.pem: cannot load the CA certificates: {e}") from None
    timeout = max(int(config.setting(cfg, "sasl.login.connect.timeout.ms")), int(config.setting(cfg, "sasl.login.read.timeout.ms"))) / 1000
    fetcher = OidcTokenFetcher(url, client_id=client_id, client_secret=secret, scope=scope, assertion=assertion,
                               ssl_context=ssl_context, timeout_s=timeout, clock=clock,
                               urlencode=bool(config.setting(cfg, "sasl.oauthbearer.header.urlencode")))
    extensions = parse_extensions(cfg.get("sasl.oauthbearer.extensions"))
    for key, value in jaas.items():
        if key.startswith("extension_"):
            extensions.setdefault(key[len("extension_"):], value)
    return RefreshingTokenSource(fetcher, RefreshConfig.from_config(cfg), describe=fetcher.endpoint,
                                 extensions=extensions, clock=clock)


def _assertion(cfg: Mapping[str, Any]) -> Callable[[], str] | None:
    key_file = cfg.get("sasl.oauthbearer.assertion.private.key.file")
    key_pem = cfg.get("sasl.oauthbearer.assertion.private.key.pem")
    ready_file = cfg.get("sasl.oauthbearer.assertion.file")
    jwt_bearer = cfg.get("sasl.oauthbearer.grant.type") == JWT_BEARER or key_file or key_pem or ready_file
    if not jwt_bearer:
        return None
    if ready_file is not None:
        # Java: "all other sasl.oauthbearer.assertion.* configurations are ignored" (and librdkafka alike).
        ignored = sorted(k for k in _SIGNING_SETTINGS if cfg.get(k) is not None)
        if ignored:
            log.info("sasl.oauthbearer.assertion.file is set: ignoring %s", ", ".join(ignored))
        setting = "sasl.oauthbearer.assertion.file"
        ready = WatchedFile(os.fspath(ready_file), lambda data: parse_ready_assertion(data, setting), setting)
        _check(ready)
        return ready.get
    if key_file is not None and key_pem is not None:
        raise ConfigError("the OIDC JWT bearer grant takes one of sasl.oauthbearer.assertion.private.key.file "
                          "and .private.key.pem, not both")
    if key_file is None and key_pem is None:
        raise ConfigError("the OIDC JWT bearer grant needs sasl.oauthbearer.assertion.private.key.file (or "
                          ".private.key.pem), or a ready assertion in sasl.oauthbearer.assertion.file")
    algorithm = str(cfg.get("sasl.oauthbearer.assertion.algorithm") or config.default("sasl.oauthbearer.assertion.algorithm")).upper()
    passphrase = cfg.get("sasl.oauthbearer.assertion.private.key.passphrase")
    key: Callable[[], Any]
    if key_file is not None:
        setting = "sasl.oauthbearer.assertion.private.key.file"
        key_watch = WatchedFile(os.fspath(key_file),
                                lambda data: load_private_key(data, passphrase, algorithm, setting), setting)
        _check(key_watch)
        key = key_watch.get
    else:
        loaded = load_private_key(str(key_pem).encode("ascii"), passphrase, algorithm,
                                  "sasl.oauthbearer.assertion.private.key.pem")
        key = lambda: loaded  # noqa: E731
    template: Callable[[], Template] | None = None
    template_file = _one_of(cfg, {}, ("sasl.oauthbearer.assertion.template.file",
                                      "sasl.oauthbearer.assertion.jwt.template.file"), "", "assertion template file")
    if template_file is not None:
        setting = "sasl.oauthbearer.assertion.template.file"
        template_watch = WatchedFile(os.fspath(template_file), lambda data: parse_template(data, setting), setting)
        _check(template_watch)
        template = template_watch.get
    signer = AssertionSigner(
        key, algorithm,
        {"iss": cfg.get("sasl.oauthbearer.assertion.claim.iss"), "sub": cfg.get("sasl.oauthbearer.assertion.claim.sub"),
         "aud": cfg.get("sasl.oauthbearer.assertion.claim.aud")},
        int(config.setting(cfg, "sasl.oauthbearer.assertion.claim.exp.seconds")),
        int(config.setting(cfg, "sasl.oauthbearer.assertion.claim.nbf.seconds")),
        bool(cfg.get("sasl.oauthbearer.assertion.claim.jti.include")), template)
    return signer.assertion


# What sasl.oauthbearer.assertion.file makes moot (the settings a user sets; the defaulted ones are always there).
_SIGNING_SETTINGS = frozenset({
    "sasl.oauthbearer.assertion.private.key.file", "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.assertion.private.key.passphrase", "sasl.oauthbearer.assertion.template.file",
    "sasl.oauthbearer.assertion.jwt.template.file", "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.sub", "sasl.oauthbearer.assertion.claim.aud"})


def _check(watched: WatchedFile[Any]) -> None:
    """Read the file now, so a missing or malformed one fails the client's construction (Java validates
    the file at configure time), naming the setting and the path."""
    try:
        watched.get()
    except OSError as e:
        raise ConfigError(f"{watched.setting}: cannot read {watched.path}: {e.strerror}") from None
