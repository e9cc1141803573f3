"""The OIDC token source without a broker: Java's refresh schedule, the retry rules, the grants (client
credentials in both spellings, JWT bearer with RS256 and ES256 assertions), and what errors say."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet.config import security_config
from kafkajet.errors import ConfigError
from kafkajet.security.oidc import jwt_claims, oidc_token_source
from kafkajet.security.sasl import OAuthBearerClient, client_login
from kafkajet.security.token_refresh import (
    RefreshConfig,
    RefreshingTokenSource,
    Token,
    TokenFetchError,
    refresh_at,
)
from kafkajet.testing.oidc import OidcProvider
from tests.helpers.ports import refusing_port

SECRET = "app-Client-S3cret"


@pytest.fixture
def idp() -> Iterator[OidcProvider]:
    with OidcProvider(clients={"app": SECRET}, scopes=("kafka",)) as p:
        yield p


def _cfg(idp: OidcProvider, **extra: Any) -> dict[str, Any]:
    return {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": idp.token_url, "sasl.oauthbearer.client.id": "app",
            "sasl.oauthbearer.client.secret": SECRET, "sasl.login.retry.backoff.ms": 10,
            "sasl.login.retry.backoff.max.ms": 300, **extra}


# --- the refresh schedule (Java's ExpiringCredentialRefreshingLogin) ---------------------------------------


def test_refresh_at_java_window_factor_plus_jitter() -> None:
    token = Token("t", expires_at=1000.0 + 3600, issued_at=1000.0)
    times = [refresh_at(token, 1000.0, RefreshConfig(), random.Random(seed)) - 1000.0 for seed in range(200)]
    assert 0.80 * 3600 <= min(times) and max(times) <= 0.85 * 3600
    assert max(times) - min(times) > 0.03 * 3600  # the jitter spreads clients


def test_refresh_at_keeps_the_buffer_and_the_minimum_period() -> None:
    cfg = RefreshConfig(buffer_s=300, min_period_s=60)
    # 1000 s token: 80 % is 800 s, but the buffer wants 300 s before expiry: 700 s.
    assert refresh_at(Token("t", 2000.0, 1000.0), 1000.0, cfg, random.Random(0)) == 1700.0
    # Too short for both margins together (60 + 300 s), even if longer than either: Java drops them and
    # refreshes at the window (0.80-0.85) of what is left, never sooner than the window would.
    for expires in (1100.0, 1340.0):
        for seed in range(20):
            at = refresh_at(Token("t", expires, 1000.0), 1000.0, cfg, random.Random(seed))
            assert 1000.0 + 0.80 * (expires - 1000.0) <= at <= 1000.0 + 0.85 * (expires - 1000.0)
    # A token already past its window when received (issued long ago): not before the minimum period.
    assert refresh_at(Token("t", 10000.0, 0.0), 9000.0, RefreshConfig(buffer_s=0), random.Random(0)) == 9060.0


# --- fetching -------------------------------------------------------------------------------------------


def test_client_credentials_in_either_spelling_and_extensions(idp: OidcProvider) -> None:
    java = {"sasl.oauthbearer.client.credentials.client.id": "app",
            "sasl.oauthbearer.client.credentials.client.secret": SECRET}
    cfg = {k: v for k, v in _cfg(idp).items() if "client." not in k} | java
    source = oidc_token_source({**cfg, "sasl.oauthbearer.extensions": "traceId=abc,logicalCluster=lkc-1"})
    claims = jwt_claims(source.token())
    assert claims is not None and claims["sub"] == "app"
    assert source.extensions() == {"traceId": "abc", "logicalCluster": "lkc-1"}
    message = OAuthBearerClient(source).start()
    assert message.endswith(b"\x01traceId=abc\x01logicalCluster=lkc-1\x01\x01")
    with pytest.raises(ConfigError, match="client secret is set differently"):
        oidc_token_source({**_cfg(idp), "sasl.oauthbearer.client.credentials.client.secret": "other"})


def test_java_jaas_options_give_the_client(idp: OidcProvider) -> None:
    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            f'clientId="app" clientSecret="{SECRET}" scope="kafka" extension_tenant="t1";')
    # Java's configuration has no method key: a token endpoint URL without a token provider means OIDC.
    cfg = {k: v for k, v in _cfg(idp).items() if "client." not in k and k != "sasl.oauthbearer.method"} | \
        {"sasl.jaas.config": jaas}
    security_config({**cfg, "security.protocol": "SASL_SSL"})
    source = client_login(cfg)
    assert (jwt_claims(source.token()) or {})["scope"] == "kafka"
    assert source.extensions() == {"tenant": "t1"}


def test_the_token_is_cached(idp: OidcProvider) -> None:
    source = oidc_token_source(_cfg(idp))
    assert len({source.token() for _ in range(20)}) == 1
    assert idp.token_requests == 1 and source.fetches == 1
    source.close()


def test_header_urlencode_form_encodes_the_client_id_and_secret(idp: OidcProvider) -> None:
    """Java's sasl.oauthbearer.header.urlencode (RFC 6749 2.3.1), for a provider that decodes the header: a
    secret with ':', '+' or '%' only gets through encoded."""
    idp.form_encoded_basic = True
    idp.clients["app:2"] = "s:e+c%ret 2"
    creds = {"sasl.oauthbearer.client.id": "app:2", "sasl.oauthbearer.client.secret": "s:e+c%ret 2"}
    source = oidc_token_source(_cfg(idp, **creds, **{"sasl.oauthbearer.header.urlencode": "true"}))
    claims = jwt_claims(source.token())
    assert claims is not None and claims["sub"] == "app:2"
    with pytest.raises(TokenFetchError, match="HTTP 401"):
        oidc_token_source(_cfg(idp, **creds)).token()


def test_a_refusal_is_not_retried_and_names_endpoint_and_status(idp: OidcProvider) -> None:
    source = oidc_token_source(_cfg(idp, **{"sasl.oauthbearer.client.secret": "Wr0ng-S3cret"}))
    with pytest.raises(TokenFetchError) as info:
        source.token()
    text = str(info.value)
    assert idp.token_url in text and "HTTP 401" in text and "invalid_client" in text
    assert "Wr0ng-S3cret" not in text and SECRET not in text
    assert idp.failed_requests == 1  # a 4xx answer does not change by asking again


def test_an_outage_is_retried_within_the_backoff_budget(idp: OidcProvider) -> None:
    idp.down = True
    source = oidc_token_source(_cfg(idp))
    with pytest.raises(TokenFetchError, match="HTTP 503") as info:
        source.token()
    assert idp.token_url in str(info.value)
    assert 3 <= idp.failed_requests <= 8  # 10, 20, 40, 80, 160 ms... within 300 ms


def test_a_failed_background_refresh_waits_javas_doubling_before_its_next_round() -> None:
    """The rounds after a failed refresh are spaced by the same backoff as the fetch's own retries:
    retry.backoff.ms doubling by the number of failed rounds, capped at retry.backoff.max.ms, no jitter."""
    def refused() -> Token:
        raise TokenFetchError("OIDC token request to http://idp/token failed: HTTP 503", retryable=False)

    source = RefreshingTokenSource(refused, RefreshConfig(retry_backoff_ms=100, retry_backoff_max_ms=1000),
                                   describe="http://idp/token")
    waits: list[float] = []
    source._schedule = lambda delay_s, failures=0: waits.append(delay_s)  # type: ignore[method-assign]
    for failures in range(6):
        source._refresh(failures)
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_an_unreachable_endpoint_names_the_cause() -> None:
    with refusing_port() as port:
        with pytest.raises(ConfigError, match="must not carry a user") as refused:
            oidc_token_source({"sasl.oauthbearer.token.endpoint.url": f"http://user:pw@127.0.0.1:{port}/token"})
        assert "pw" not in str(refused.value)
        url = f"http://127.0.0.1:{port}/token?key=k"
        cfg = {"sasl.oauthbearer.token.endpoint.url": url, "sasl.oauthbearer.client.id": "app",
               "sasl.oauthbearer.client.secret": SECRET, "sasl.login.retry.backoff.max.ms": 0}
        with pytest.raises(TokenFetchError) as info:
            oidc_token_source(cfg).token()
    text = str(info.value)
    assert f"http://127.0.0.1:{port}/token" in text and "ConnectionRefusedError" in text
    assert "key=k" not in text


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_jwt_bearer_grant_with_a_private_key_assertion(idp: OidcProvider, algorithm: str, tmp_path: Any) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048) if algorithm == "RS256" \
        else ec.generate_private_key(ec.SECP256R1())
    idp.register_assertion_key("svc-issuer", key.public_key())
    pem_file = tmp_path / "key.pem"
    pem_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.BestAvailableEncryption(b"pass-phrase")))
    cfg = {"sasl.oauthbearer.token.endpoint.url": idp.token_url,
           "sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
           "sasl.oauthbearer.assertion.algorithm": algorithm,
           "sasl.oauthbearer.assertion.private.key.file": str(pem_file),
           "sasl.oauthbearer.assertion.private.key.passphrase": "pass-phrase",
           "sasl.oauthbearer.assertion.claim.iss": "svc-issuer", "sasl.oauthbearer.assertion.claim.sub": "svc",
           "sasl.oauthbearer.assertion.claim.aud": idp.token_url, "sasl.oauthbearer.assertion.claim.jti.include": True}
    assert (jwt_claims(oidc_token_source(cfg).token()) or {})["sub"] == "svc"
    with pytest.raises(ConfigError, match="cannot load the PEM private key") as info:
        oidc_token_source({**cfg, "sasl.oauthbearer.assertion.private.key.passphrase": "wrong"})
    assert "pass-phrase" not in str(info.value)


def _rsa_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Any, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _jwt_bearer_cfg(idp: OidcProvider, key_file: Any, **extra: Any) -> dict[str, Any]:
    return {"sasl.oauthbearer.token.endpoint.url": idp.token_url, "sasl.login.retry.backoff.max.ms": 0,
            "sasl.oauthbearer.assertion.private.key.file": str(key_file),
            "sasl.oauthbearer.assertion.claim.iss": "svc-issuer", "sasl.oauthbearer.assertion.claim.sub": "from-config",
            "sasl.oauthbearer.assertion.claim.aud": idp.token_url, **extra}


def test_the_template_file_is_layered_as_javas_and_read_again_when_it_changes(idp: OidcProvider,
                                                                             tmp_path: Any) -> None:
    """KIP-1139 layers: claim.* settings, then the template over them, then alg/typ and iat/exp/nbf over both."""
    import json
    import time

    key = _rsa_key()
    idp.register_assertion_key("svc-issuer", key.public_key())
    _write_key(tmp_path / "key.pem", key)
    # This identity provider demands a kid header and a tenant claim, which only the template can give.
    idp.required_assertion_header = {"kid": "k-7"}
    idp.required_assertion_claims = {"tenant": "acme"}
    with pytest.raises(TokenFetchError, match="HTTP 401"):
        oidc_token_source(_jwt_bearer_cfg(idp, tmp_path / "key.pem")).token()
    template = tmp_path / "template.json"
    stale = {"alg": "none", "typ": "x"}, {"exp": 1, "iat": 1, "nbf": 1}  # must never win over fresh values
    template.write_text(json.dumps({"header": {"kid": "k-7", **stale[0]},
                                    "payload": {"tenant": "acme", "sub": "from-template", "roles": ["w"], **stale[1]}}))
    # librdkafka's name for the same file.
    sources = []
    for name in ("sasl.oauthbearer.assertion.template.file", "sasl.oauthbearer.assertion.jwt.template.file"):
        before = time.time()
        source = oidc_token_source(_jwt_bearer_cfg(idp, tmp_path / "key.pem", **{name: str(template)}))
        assert (jwt_claims(source.token()) or {})["sub"] == "from-template"
        header, claims = idp.assertions[-1]
        assert header == {"kid": "k-7", "alg": "RS256", "typ": "JWT"}
        assert claims["tenant"] == "acme" and claims["roles"] == ["w"] and claims["iss"] == "svc-issuer"
        assert int(before) <= claims["iat"] and claims["exp"] == claims["iat"] + 300
        assert claims["nbf"] == claims["iat"] - 60
        sources.append(source)
    # Rewritten on disk: the next refresh of the same client signs with the new claims.
    idp.required_assertion_claims = {"tenant": "beta"}
    template.write_text(json.dumps({"header": {"kid": "k-7"}, "payload": {"tenant": "beta"}}))
    source._refresh()
    assert source.fetches == 2 and idp.assertions[-1][1]["tenant"] == "beta"
    assert idp.assertions[-1][1]["sub"] == "from-config"  # the template no longer overrides it
    for source in sources:
        source.close()
    with pytest.raises(ConfigError, match="template.file: 'payload' must be a JSON object"):
        template.write_text('{"payload": [1]}')
        oidc_token_source(_jwt_bearer_cfg(idp, tmp_path / "key.pem", **{
            "sasl.oauthbearer.assertion.template.file": str(template)}))
    with pytest.raises(ConfigError, match="set differently"):
        oidc_token_source(_jwt_bearer_cfg(idp, tmp_path / "key.pem", **{
            "sasl.oauthbearer.assertion.template.file": str(template),
            "sasl.oauthbearer.assertion.jwt.template.file": str(tmp_path / "other.json")}))


def test_a_rotated_private_key_file_signs_the_next_refresh(idp: OidcProvider, tmp_path: Any) -> None:
    old, new = _rsa_key(), _rsa_key()
    idp.register_assertion_key("svc-issuer", old.public_key())
    _write_key(tmp_path / "key.pem", old)
    source = oidc_token_source(_jwt_bearer_cfg(idp, tmp_path / "key.pem"))
    source.token()
    # The identity provider now trusts only the new key, and the file holds it.
    idp.register_assertion_key("svc-issuer", new.public_key())
    _write_key(tmp_path / "key.pem", new)
    source._refresh()
    assert source.fetches == 2 and idp.token_requests == 2
    # A file rewritten into garbage: this refresh fails, naming the setting, and the token stays.
    (tmp_path / "key.pem").write_text("not a key")
    source._refresh()
    assert source.fetches == 2
    with pytest.raises(TokenFetchError, match="private.key.file: cannot load the PEM private key"):
        source._fetch()
    source.close()


def test_a_ready_assertion_file_is_read_at_each_refresh_and_wins_over_the_signing_settings(
        idp: OidcProvider, tmp_path: Any) -> None:
    from kafkajet.security.oidc import AssertionSigner

    key = _rsa_key()
    idp.register_assertion_key("svc-issuer", key.public_key())

    def assertion(sub: str) -> str:
        return AssertionSigner(lambda: key, "RS256", {"iss": "svc-issuer", "sub": sub, "aud": idp.token_url},
                               300, 60, False).assertion()

    ready = tmp_path / "assertion.jwt"
    ready.write_text(assertion("one") + "\n")
    # Java ignores every other assertion setting when the file is given: a key file that is not there too.
    cfg = {"sasl.oauthbearer.token.endpoint.url": idp.token_url, "sasl.login.retry.backoff.max.ms": 0,
           "sasl.oauthbearer.assertion.file": str(ready),
           "sasl.oauthbearer.assertion.private.key.file": str(tmp_path / "absent.pem")}
    source = oidc_token_source(cfg)
    assert (jwt_claims(source.token()) or {})["sub"] == "one"
    ready.write_text(assertion("two"))
    source._refresh()
    assert (jwt_claims(source.token()) or {})["sub"] == "two" and source.fetches == 2
    source.close()
    secret = assertion("three")
    ready.write_text(secret.replace(".", "-"))
    with pytest.raises(ConfigError, match="assertion.file: not a serialized JWT") as info:
        oidc_token_source(cfg)
    assert secret.replace(".", "-") not in str(info.value)
    with pytest.raises(ConfigError, match=r"assertion.file: cannot read .*missing"):
        oidc_token_source({**cfg, "sasl.oauthbearer.assertion.file": str(tmp_path / "missing")})


def test_config_requires_an_endpoint_for_oidc() -> None:
    base = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc"}
    with pytest.raises(ConfigError, match="token.endpoint.url"):
        security_config(base)
    with pytest.raises(ConfigError, match="not both"):
        security_config({**base, "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                         "sasl.oauthbearer.token.provider": lambda: "t"})
    cfg = security_config({**base, "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                           "sasl.oauthbearer.client.id": "a", "sasl.oauthbearer.client.secret": SECRET,
                           "sasl.login.refresh.window.factor": "0.9"})
    assert cfg["sasl.login.refresh.window.factor"] == 0.9 and SECRET not in repr(cfg)
    with pytest.raises(ConfigError, match=r"\[0.5, 1.0\]"):
        security_config({**base, "sasl.login.refresh.window.factor": 0.2})


def test_an_https_endpoint_is_verified_against_the_configured_ca(tmp_path: Any) -> None:
    import ssl

    from tests.helpers.tls_proxy import CertificateAuthority

    ca = CertificateAuthority("idp CA")
    cert_file, key_file = ca.issue("idp", ips=("127.0.0.1",)).write(tmp_path, "idp")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    with OidcProvider(clients={"app": SECRET}, scopes=("kafka",), ssl_context=server) as idp:
        assert idp.token_url.startswith("https://")
        (tmp_path / "ca.pem").write_text(ca.cert_pem)
        for trust in ({"https.ca.location": str(tmp_path / "ca.pem")}, {"https.ca.pem": ca.cert_pem}):
            assert jwt_claims(oidc_token_source({**_cfg(idp), **trust}).token()) is not None
        # Without the CA the system store does not know the endpoint's certificate: refused, and said so.
        with pytest.raises(TokenFetchError, match="CERTIFICATE_VERIFY_FAILED|SSLCertVerificationError") as info:
            oidc_token_source(_cfg(idp, **{"sasl.login.retry.backoff.max.ms": 0})).token()
        assert idp.token_url in str(info.value) and SECRET not in str(info.value)
    with pytest.raises(ConfigError, match="https.ca"):
        oidc_token_source({"sasl.oauthbearer.token.endpoint.url": "https://127.0.0.1:1/token",
                           "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": SECRET,
                           "https.ca.location": str(tmp_path / "missing.pem")})
