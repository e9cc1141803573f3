"""Secrets (passwords, tokens, private keys, JAAS lines) never appear in logs, exception texts, reprs or
metrics: scanned during a failed and a successful authentication with every logger at DEBUG."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from kafkajet import AuthenticationError, ConfigError, KafkaError, Producer
from kafkajet.admin import Admin
from kafkajet.config import config_markdown, parse_producer_config, security_config
from kafkajet.security.connection import connection_security
from kafkajet.testing.mock.cluster import MockCluster
from tests.helpers.requires import require

PASSWORD = "Sup3r-S3cret-Pa55"
WRONG = "Wr0ng-Guess-Pa55"
TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.dG9rZW4tc2VjcmV0"
SECRETS = (PASSWORD, WRONG, TOKEN)


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(brokers=1, sasl_mechanisms=["PLAIN", "SCRAM-SHA-256"], sasl_users={"alice": PASSWORD}) as c:
        c.create_topic("t", partitions=1)
        yield c


def _texts(error: BaseException) -> list[str]:
    """str, repr and the formatted traceback of an exception and of everything it chains to."""
    out = []
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out += [str(e), repr(e)]
        e = e.__cause__ or e.__context__
    out.append("".join(traceback.format_exception(error)))
    return out


def _assert_clean(texts: list[str]) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"a secret leaked into: {text[:300]}"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_no_secret_in_logs_errors_reprs_or_metrics(cluster: MockCluster, mechanism: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    texts: list[str] = []
    base = {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": "alice", "max.block.ms": 20000}
    with caplog.at_level(logging.DEBUG):
        # A failed authentication.
        with Producer({**base, "sasl.password": WRONG}) as bad:
            texts += [repr(bad), repr(bad.config), str(bad.config), repr(bad._client.security)]
            with pytest.raises(AuthenticationError) as info:
                bad.send("t", b"x")
            texts += _texts(info.value)
            texts.append(repr(bad.metrics()))
        admin_cfg = {k: v for k, v in base.items() if k != "max.block.ms"}  # a producer-only key
        with Admin({**admin_cfg, "sasl.password": WRONG}) as admin, pytest.raises(AuthenticationError) as info:
            admin.list_topics(timeout_s=20)
        texts += _texts(info.value)
        # A successful one.
        with Producer({**base, "sasl.password": PASSWORD}) as good:
            good.send("t", b"ok").result(timeout=30)
            texts += [repr(good), repr(good.config), repr(good.metrics())]
    texts.append(caplog.text)
    texts += [repr(r.args) for r in caplog.records]
    assert "authentication failed" in caplog.text  # the failure itself is logged, without the secret
    _assert_clean(texts)


def test_jaas_line_and_token_provider_are_hidden() -> None:
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{PASSWORD}";'
    cfg = parse_producer_config({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL",
                                 "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas})
    oauth = parse_producer_config({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
                                   "sasl.mechanism": "OAUTHBEARER",
                                   "sasl.oauthbearer.token.provider": lambda: TOKEN})
    texts = [repr(cfg), str(cfg), repr(oauth), repr(connection_security(cfg)), repr(connection_security(oauth)),
             repr(security_config(dict(cfg))), config_markdown()]
    assert "[hidden]" in repr(cfg) and "[hidden]" in repr(oauth)
    _assert_clean(texts)


@pytest.mark.parametrize("config", [
    {"sasl.password": 12345},  # wrong type for a secret: the message must not quote it
    {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'NoSuchModule required password="{PASSWORD}";'},
    {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                    f'required password="{PASSWORD}" broken'},
    {"ssl.key.password": 999, "security.protocol": "SASL_SSL"},
])
def test_config_errors_never_quote_a_secret(config: dict[str, Any]) -> None:
    settings = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT", **config}
    with pytest.raises((ConfigError, KafkaError)) as info:
        Producer(settings)
    text = str(info.value)
    _assert_clean(_texts(info.value))
    assert "12345" not in text and "999" not in text


def test_a_secret_set_twice_is_not_quoted() -> None:
    with pytest.raises(ConfigError, match="set twice") as info:
        parse_producer_config({"bootstrap.servers": "127.0.0.1:1", "sasl.password": PASSWORD}, sasl_password=WRONG)
    _assert_clean(_texts(info.value))


def test_oidc_secrets_tokens_and_keys_never_leak(caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from kafkajet.security.oidc import AssertionSigner
    from kafkajet.testing.oidc import OidcProvider

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    pem_body = pem.splitlines()[5]  # a line of the key itself, not the BEGIN header
    seen_tokens: list[str] = []
    texts: list[str] = []
    with OidcProvider(clients={"app": PASSWORD}) as idp:
        idp.register_assertion_key("svc", key.public_key())
        # A ready assertion (sasl.oauthbearer.assertion.file) is a credential too: its text must not leak.
        ready = AssertionSigner(lambda: key, "RS256", {"iss": "svc", "sub": "svc", "aud": idp.token_url},
                                300, 60, True).assertion()
        (tmp_path / "assertion.jwt").write_text(ready)
        (tmp_path / "key.pem").write_text(pem)
        inner = idp.validator()

        def validator(token: str, extensions: Any) -> Any:
            seen_tokens.append(token)
            return inner(token, extensions)

        with MockCluster(brokers=1, sasl_mechanisms=["OAUTHBEARER"], sasl_oauthbearer_validator=validator) as c:
            c.create_topic("t", partitions=1)
            base = {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                    "sasl.oauthbearer.token.endpoint.url": idp.token_url, "max.block.ms": 10000,
                    "sasl.login.retry.backoff.max.ms": 200}
            with caplog.at_level(logging.DEBUG):
                with pytest.raises(KafkaError) as info:  # the login, in the constructor, is refused
                    Producer({**base, "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": WRONG})
                texts += _texts(info.value)
                assert "HTTP 401" in str(info.value)
                for good_cfg in ({"sasl.oauthbearer.client.credentials.client.id": "app",
                                  "sasl.oauthbearer.client.credentials.client.secret": PASSWORD},
                                 {"sasl.oauthbearer.assertion.private.key.pem": pem,
                                  "sasl.oauthbearer.assertion.claim.iss": "svc",
                                  "sasl.oauthbearer.assertion.claim.sub": "svc",
                                  "sasl.oauthbearer.assertion.claim.aud": idp.token_url},
                                 {"sasl.oauthbearer.assertion.file": str(tmp_path / "assertion.jwt"),
                                  "sasl.oauthbearer.assertion.private.key.file": str(tmp_path / "key.pem")}):
                    with Producer({**base, **good_cfg}) as good:
                        good.send("t", b"ok").result(timeout=30)
                        texts += [repr(good), repr(good.config), repr(good.metrics()),
                                  repr(good._client.security),
                                  repr(good.config["sasl.oauthbearer.token.provider"] or "")]
                        sasl = good._client.security.sasl
                        assert sasl is not None
                        texts.append(repr(sasl("localhost")))
    texts.append(caplog.text)
    texts += [repr(r.args) for r in caplog.records]
    assert len(seen_tokens) >= 3 and len(idp.assertions) >= 2
    for text in texts:
        for secret in (*SECRETS, pem_body, *seen_tokens, ready, ready.split(".")[2]):
            assert secret not in text, f"a secret leaked into: {text[:300]}"


@pytest.mark.parametrize("form", ["OAUTHBEARER", "AWS_MSK_IAM"])
def test_aws_msk_iam_secret_key_and_signatures_never_leak(form: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    require("aws_msk_iam_sasl_signer")
    from kafkajet.testing.aws_msk import MskIamVerifier

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDKAFKAJETEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", PASSWORD)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    verifier = MskIamVerifier("AKIDKAFKAJETEXAMPLE", PASSWORD, region="eu-west-1", session_token=TOKEN)
    presented: list[str] = []
    oauth, native = verifier.oauthbearer_validator(), verifier.native_validator()

    def on_token(token: str, extensions: Any) -> Any:
        presented.append(token)
        return oauth(token, extensions)

    def on_message(message: Any) -> Any:
        presented.append(message["x-amz-signature"])
        return native(message)

    texts: list[str] = []
    with MockCluster(brokers=1, sasl_mechanisms=[form], sasl_oauthbearer_validator=on_token,
                     sasl_aws_msk_iam_validator=on_message) as c, caplog.at_level(logging.DEBUG):
        c.create_topic("t", partitions=1)
        mechanism = {"sasl.mechanism": form} if form == "AWS_MSK_IAM" else \
            {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "aws_msk_iam"}
        cfg = {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
               "sasl.aws.region": "eu-west-1", **mechanism}
        with Producer(cfg) as good:
            good.send("t", b"ok").result(timeout=30)
            sasl = good._client.security.sasl
            assert sasl is not None
            texts += [repr(good), repr(good.config), repr(good.metrics()), repr(sasl("localhost"))]
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG)
        with Producer({**cfg, "max.block.ms": 10000}) as bad, pytest.raises(KafkaError) as info:
            bad.send("t", b"x").result(timeout=30)
        texts += _texts(info.value)
    texts += [caplog.text] + [repr(r.args) for r in caplog.records]
    assert presented
    for text in texts:
        for secret in (*SECRETS, *presented):
            assert secret not in text, f"a secret leaked into: {text[:300]}"


def _keytab_keys(path: str) -> list[bytes]:
    """The key bytes of every entry of an MIT keytab (format 0x0502): what must never be shown."""
    import struct

    data = open(path, "rb").read()
    assert data[:2] == b"\x05\x02"
    keys, pos = [], 2
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        entry, pos = data[pos:pos + abs(size)], pos + abs(size)
        if size <= 0:
            continue  # a hole left by a removed entry
        (components,) = struct.unpack_from(">H", entry, 0)
        at = 2
        for _ in range(components + 1):  # the realm, then the name's components
            (n,) = struct.unpack_from(">H", entry, at)
            at += 2 + n
        at += 4 + 4 + 1 + 2  # name type, timestamp, 8-bit kvno, key type
        (n,) = struct.unpack_from(">H", entry, at)
        keys.append(entry[at + 2:at + 2 + n])
    return keys


def test_kerberos_keytab_contents_never_leak(kdc: Any, caplog: pytest.LogCaptureFixture) -> None:
    import base64
    import shutil

    require("gssapi")
    keytab = kdc.add_principal("secret-scan")
    stale = keytab + ".stale"
    shutil.copy(keytab, stale)
    kdc.kadmin(f"cpw -randkey {kdc.principal('secret-scan')}")
    kdc.kadmin(f"ktadd -k {keytab} {kdc.principal('secret-scan')}")  # the current key too: both are secrets
    keys = _keytab_keys(keytab) + _keytab_keys(stale)
    assert len(keys) >= 2 and all(len(k) >= 16 for k in keys)
    forms = [f for k in keys for f in (k.hex(), k.hex().upper(), base64.b64encode(k).decode(), repr(k)[2:-1])]
    texts: list[str] = []
    with MockCluster(brokers=1, sasl_mechanisms=["GSSAPI"], sasl_gssapi_keytab=kdc.service_keytab()) as c, \
            caplog.at_level(logging.DEBUG):
        c.create_topic("t", partitions=1)
        base = {"bootstrap.servers": c.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": kdc.principal("secret-scan"),
                "max.block.ms": 5000}
        with pytest.raises(KafkaError) as info:  # the stale key: refused at the login
            Producer({**base, "sasl.kerberos.keytab": stale})
        texts += _texts(info.value)
        with Producer({**base, "sasl.kerberos.keytab": keytab, "sasl.kerberos.service.name": "nokafka"}) as bad, \
                pytest.raises(KafkaError) as info:
            bad.send("t", b"x").result(timeout=30)
        texts += _texts(info.value) + [repr(bad.metrics())]
        with Producer({**base, "sasl.kerberos.keytab": keytab}) as good:
            good.send("t", b"ok").result(timeout=30)
            sasl = good._client.security.sasl
            assert sasl is not None
            texts += [repr(good), repr(good.config), repr(good.metrics()), repr(good._client.security),
                      repr(sasl("localhost"))]
    texts += [caplog.text] + [repr(r.args) for r in caplog.records]
    assert "secret-scan@KAFKAJET.TEST" in caplog.text or any("secret-scan@" in t for t in texts)
    for text in texts:
        for secret in forms:
            assert secret not in text, f"keytab key material leaked into: {text[:300]}"
