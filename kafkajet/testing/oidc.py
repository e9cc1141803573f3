"""A local OAuth 2 / OIDC identity provider for tests: a token endpoint minting RS256 JWTs, with a JWKS.

    with OidcProvider(clients={"app": "app-secret"}, audience="kafka") as idp:
        validator = idp.validator(scope="kafka.write")       # for MockCluster(sasl_oauthbearer_validator=...)
        cfg = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": idp.token_url, ...}

POST {token_url}: grant_type=client_credentials (HTTP Basic client id and secret) or
urn:ietf:params:oauth:grant-type:jwt-bearer (an assertion signed by a key registered with
`register_assertion_key`, audience `token_url`, with iat, exp and nbf that hold now, and whatever
`required_assertion_header` / `required_assertion_claims` demand; each accepted assertion's header and claims
are kept in `assertions`). GET {jwks_url}: the signing key. Knobs for tests: `token_lifetime_s`, `down`
(answer 503), `token_requests` (how many tokens were asked for); with `ssl_context` it serves https.

The validator checks a token the way a broker's JWT validator does: the RS256 signature against the key in
the JWKS, exp (and nbf), the audience and the scope; it needs the `cryptography` package.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kafkajet.security.oidc import JWT_BEARER, b64url, b64url_decode
from kafkajet.testing.mock.sasl import InvalidToken, TokenValidator


def _int_b64(n: int) -> str:
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def _split(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("not a JWS compact token")
    try:
        header, claims = json.loads(b64url_decode(parts[0])), json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("malformed JWT") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidToken("malformed JWT")
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), signature


def _verify(public_key: Any, alg: str, signing_input: bytes, signature: bytes) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

    try:
        if alg == "RS256" and isinstance(public_key, rsa.RSAPublicKey):
            public_key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
        elif alg == "ES256" and isinstance(public_key, ec.EllipticCurvePublicKey) and len(signature) == 64:
            der = utils.encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                             int.from_bytes(signature[32:], "big"))
            public_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
        else:
            raise InvalidToken(f"unexpected algorithm {alg!r} for the key")
    except InvalidSignature:
        raise InvalidToken("bad signature") from None


class OidcProvider:
    def __init__(self, clients: Mapping[str, str] | None = None, *, audience: str = "kafka",
                 issuer: str = "https://idp.test", scopes: Iterable[str] = ("kafka",),
                 token_lifetime_s: float = 3600.0, ssl_context: ssl.SSLContext | None = None) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa

        self._ssl = ssl_context  # serve https with this server context

        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "kafkajet-test-1"
        self.clients = dict(clients or {})
        self.audience = audience
        self.issuer = issuer
        self.scopes = frozenset(scopes)
        self.token_lifetime_s = token_lifetime_s
        self.down = False
        self.token_requests = 0  # answered with a token
        self.failed_requests = 0
        self.assertion_keys: dict[str, Any] = {}  # assertion issuer -> public key
        # What an identity provider may demand of an assertion besides iss/aud/exp (a kid, a tenant claim):
        # a JWT bearer request whose verified assertion lacks one of these is refused with 401.
        self.required_assertion_header: dict[str, Any] = {}
        self.required_assertion_claims: dict[str, Any] = {}
        # RFC 6749 2.3.1: the client id and secret in the Basic header are form-encoded first. Providers that
        # decode them refuse a raw secret with reserved characters (Java's sasl.oauthbearer.header.urlencode).
        self.form_encoded_basic = False
        self.assertions: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (header, claims) of accepted ones
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- life cycle ---------------------------------------------------------------------------------

    def start(self) -> OidcProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                status, doc = provider._token_response(form, self.headers.get("Authorization"))
                self._send(status, doc)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/jwks":
                    self._send(200, provider.jwks())
                else:
                    self._send(404, {"error": "not_found"})

            def _send(self, status: int, doc: Mapping[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self._ssl is not None:
            self._server.socket = self._ssl.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the provider first"
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_port}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    # --- keys and tokens ----------------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "kid": self.kid, "alg": "RS256", "use": "sig",
                          "n": _int_b64(numbers.n), "e": _int_b64(numbers.e)}]}

    def register_assertion_key(self, issuer: str, public_key: Any) -> None:
        """Trust JWT bearer assertions from `issuer` signed by `public_key` (RSA or EC P-256)."""
        self.assertion_keys[issuer] = public_key

    def mint(self, subject: str, scope: str, *, lifetime_s: float | None = None,
             audience: str | None = None) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        now = time.time()
        claims = {"iss": self.issuer, "sub": subject, "aud": audience or self.audience, "scope": scope,
                  "iat": int(now), "exp": round(now + (self.token_lifetime_s if lifetime_s is None else lifetime_s), 3)}
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64url(signature)}"

    def _token_response(self, form: Mapping[str, str], authorization: str | None) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.down:
                self.failed_requests += 1
                return 503, {"error": "temporarily_unavailable"}
        grant = form.get("grant_type")
        if grant == "client_credentials":
            subject = self._basic_client(authorization)
        elif grant == JWT_BEARER:
            subject = self._assertion_subject(form.get("assertion", ""))
        else:
            return 400, {"error": "unsupported_grant_type"}
        if subject is None:
            with self._lock:
                self.failed_requests += 1
            return 401, {"error": "invalid_client"}
        scope = form.get("scope", " ".join(sorted(self.scopes)))
        if not set(scope.split()) <= self.scopes:
            return 400, {"error": "invalid_scope"}
        with self._lock:
            self.token_requests += 1
        return 200, {"access_token": self.mint(subject, scope), "token_type": "Bearer",
                     "expires_in": int(self.token_lifetime_s), "scope": scope}

    def _basic_client(self, authorization: str | None) -> str | None:
        if not authorization or not authorization.startswith("Basic "):
            return None
        try:
            client_id, _, secret = base64.b64decode(authorization[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if self.form_encoded_basic:
            client_id, secret = urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret)
        return client_id if client_id in self.clients and self.clients[client_id] == secret else None

    def _assertion_subject(self, assertion: str) -> str | None:
        try:
            header, claims, signing_input, signature = _split(assertion)
            key = self.assertion_keys.get(str(claims.get("iss")))
            if key is None:
                return None
            _verify(key, str(header.get("alg")), signing_input, signature)
            now = time.time()
            if claims.get("aud") != self.token_url or not now < float(claims.get("exp", 0)) or \
                    float(claims.get("nbf", 0)) > now + 5 or not float(claims.get("iat", now + 60)) <= now + 5:
                return None
            if any(header.get(k) != v for k, v in self.required_assertion_header.items()) or \
                    any(claims.get(k) != v for k, v in self.required_assertion_claims.items()):
                return None
        except (InvalidToken, ValueError, TypeError):
            return None
        sub = claims.get("sub")
        if not isinstance(sub, str):
            return None
        with self._lock:
            self.assertions.append((header, claims))
        return sub

    # --- the broker's side --------------------------------------------------------------------------

    def validator(self, *, audience: str | None = None, scope: str | None = None) -> TokenValidator:
        """A MockCluster token validator: RS256 signature by the JWKS key of the token's kid, exp and nbf,
        the audience (default the provider's) and, if given, a scope the token must carry."""
        from cryptography.hazmat.primitives.asymmetric import rsa

        keys = {}
        for jwk in self.jwks()["keys"]:
            n, e = (int.from_bytes(b64url_decode(jwk[x]), "big") for x in ("n", "e"))
            keys[jwk["kid"]] = rsa.RSAPublicNumbers(e, n).public_key()
        wanted_audience = audience or self.audience
        issuer = self.issuer

        def validate(token: str, extensions: Mapping[str, str]) -> tuple[str, float | None]:
            header, claims, signing_input, signature = _split(token)
            key = keys.get(str(header.get("kid")))
            if key is None:
                raise InvalidToken("unknown signing key")
            _verify(key, str(header.get("alg")), signing_input, signature)
            now = time.time()
            exp = claims.get("exp")
            if not isinstance(exp, (int, float)) or exp <= now:
                raise InvalidToken("the token has expired")
            if float(claims.get("nbf", 0)) > now:
                raise InvalidToken("the token is not valid yet")
            if claims.get("iss") != issuer:
                raise InvalidToken("wrong issuer")
            aud = claims.get("aud")
            if wanted_audience not in (aud if isinstance(aud, list) else [aud]):
                raise InvalidToken(f"the token is not for audience {wanted_audience!r}")
            if scope is not None and scope not in str(claims.get("scope", "")).split():
                raise InvalidToken(f"the token lacks scope {scope!r}")
            sub = claims.get("sub")
            if not isinstance(sub, str) or not sub:
                raise InvalidToken("the token has no subject")
            return sub, float(exp)

        return validate
