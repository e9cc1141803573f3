"""AWS MSK IAM without the cloud: the MockCluster checks tokens as MSK does (kafkajet.testing.aws_msk,
recomputing SigV4 with botocore for a fixed fake key), for both forms: OAUTHBEARER with the MSK IAM
signer's token, and the native AWS_MSK_IAM mechanism (checked against kafka-python's own signer too)."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest

from tests.helpers.requires import require

require("botocore")
require("aws_msk_iam_sasl_signer")

from kafkajet import AuthenticationError, ConfigError, Producer  # noqa: E402
from kafkajet.testing.aws_msk import MskIamVerifier  # noqa: E402
from kafkajet.testing.mock.cluster import MockCluster  # noqa: E402
from kafkajet.testing.mock.sasl import InvalidToken  # noqa: E402

ACCESS_KEY = "AKIDKAFKAJETEXAMPLE"
SECRET_KEY = "kafkajet/Fake+Secret/KeyFor/Tests0000000"
REGION = "eu-west-1"
FORMS = {"OAUTHBEARER": {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "aws_msk_iam"},
         "AWS_MSK_IAM": {"sasl.mechanism": "AWS_MSK_IAM"}}


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fixed fake credentials from the environment, and nothing from this machine's ~/.aws."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _cluster(verifier: MskIamVerifier, **extra: Any) -> MockCluster:
    return MockCluster(sasl_mechanisms=["OAUTHBEARER", "AWS_MSK_IAM"],
                       sasl_oauthbearer_validator=verifier.oauthbearer_validator(),
                       sasl_aws_msk_iam_validator=verifier.native_validator(), **extra)


@pytest.fixture
def verifier() -> MskIamVerifier:
    return MskIamVerifier(ACCESS_KEY, SECRET_KEY, region=REGION)


def _cfg(cluster: MockCluster, form: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.aws.region": REGION, "max.block.ms": 10000, **FORMS[form], **extra}


@pytest.mark.parametrize("form", FORMS)
def test_both_forms_authenticate_and_reauthenticate_under_load(verifier: MskIamVerifier, form: str) -> None:
    with _cluster(verifier, brokers=2, sasl_session_lifetime_ms=1500) as cluster:
        cluster.create_topic("t", partitions=2)
        futures = []
        with Producer(_cfg(cluster, form)) as producer:
            deadline = time.monotonic() + 60
            while sum(a.reauth and a.ok for a in cluster.sasl_authentications()) < 4:
                assert time.monotonic() < deadline, "no re-authentication under load within 60 s"
                futures.append(producer.send("t", str(len(futures)).encode(), partition=len(futures) % 2))
                time.sleep(0.005)
            for f in futures:
                f.result(timeout=30)
        auths = cluster.sasl_authentications()
    assert all(a.ok and a.mechanism == form and a.principal == ACCESS_KEY for a in auths), auths
    for p in (0, 1):
        assert [r.value for r in cluster.records("t", p)] == [str(i).encode() for i in range(p, len(futures), 2)]


@pytest.mark.parametrize("form", FORMS)
def test_the_broker_refuses_a_wrong_secret_key_or_region(verifier: MskIamVerifier, form: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with _cluster(verifier, brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not/the/right/secret/key/at/all000000000")
        with Producer(_cfg(cluster, form)) as p, pytest.raises(AuthenticationError, match="signature does not match"):
            p.send("t", b"x").result(timeout=30)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        with Producer(_cfg(cluster, form, **{"sasl.aws.region": "us-east-1"})) as p, \
                pytest.raises(AuthenticationError, match="not for MSK in eu-west-1|credential scope"):
            p.send("t", b"x").result(timeout=30)
        with Producer(_cfg(cluster, form)) as p:
            p.send("t", b"ok").result(timeout=30)


def test_the_verifier_agrees_with_kafka_pythons_independent_signer(verifier: MskIamVerifier) -> None:
    import json

    from kafka.net.sasl.msk import AwsMskIamClient

    def message(**changes: Any) -> dict[str, str]:
        client = AwsMskIamClient(host="b-1.example.kafka.eu-west-1.amazonaws.com", access_key=ACCESS_KEY,
                                 secret_key=SECRET_KEY, region=REGION)
        for name, value in changes.items():
            setattr(client, name, value)
        return dict(json.loads(client.first_message()))

    validate = verifier.native_validator()
    principal, expires_at = validate(message())
    assert principal == ACCESS_KEY and expires_at is not None and 880 < expires_at - time.time() <= 900
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=901)
    with pytest.raises(InvalidToken, match="expired"):  # a well-signed message past its 900 s
        validate(message(timestamp=old.strftime("%Y%m%dT%H%M%SZ"), datestamp=old.strftime("%Y%m%d")))
    with pytest.raises(InvalidToken, match="action"):
        validate(message(action="kafka-cluster:AlterCluster"))
    with pytest.raises(InvalidToken, match="expiry"):
        validate(message(expires="3600"))
    with pytest.raises(InvalidToken, match="signature"):
        validate(message(host="b-2.example.kafka.eu-west-1.amazonaws.com") | {"host": "b-1.example"})
    with pytest.raises(InvalidToken, match="algorithm"):
        validate(message(algorithm="AWS4-HMAC-SHA1"))


def test_region_comes_from_the_environment_or_is_required(verifier: MskIamVerifier,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with _cluster(verifier, brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        cfg = {k: v for k, v in _cfg(cluster, "OAUTHBEARER").items() if k != "sasl.aws.region"}
        with pytest.raises(ConfigError, match="region"):
            Producer(cfg)
        monkeypatch.setenv("AWS_REGION", REGION)
        with Producer(cfg) as p:
            p.send("t", b"ok").result(timeout=30)


def test_missing_credentials_are_named_without_secrets(verifier: MskIamVerifier,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with _cluster(verifier, brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        # OAUTHBEARER logs in (makes its token) in the constructor, as Java's login module does; the native
        # mechanism signs per connection, so it fails at the first send.
        with pytest.raises(AuthenticationError, match="credentials") as info:
            Producer(_cfg(cluster, "OAUTHBEARER", **{"sasl.login.retry.backoff.max.ms": 100}))
        assert SECRET_KEY not in str(info.value)
        with Producer(_cfg(cluster, "AWS_MSK_IAM", **{"sasl.login.retry.backoff.max.ms": 100})) as p, \
                pytest.raises(AuthenticationError, match="credentials") as info:
            p.send("t", b"x").result(timeout=30)
        assert SECRET_KEY not in str(info.value)
