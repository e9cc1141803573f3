"""AWS MSK IAM authentication (`pip install 'kafkajet[aws]'`), two ways, as MSK's IAM listener takes both:

* sasl.mechanism=OAUTHBEARER with sasl.oauthbearer.method=aws_msk_iam: the token is AWS's MSK IAM signer's
  (aws-msk-iam-sasl-signer-python): a base64url SigV4-presigned `GET https://kafka.<region>.amazonaws.com/
  ?Action=kafka-cluster:Connect`, valid 900 s. It goes through the same RefreshingTokenSource as OIDC: one
  per client, refreshed in the background at Java's window.
* sasl.mechanism=AWS_MSK_IAM, the native mechanism of aws-msk-iam-auth (Java) that kafka-python also
  speaks: one JSON message of the same SigV4 query parameters, presigned for the broker's host name, made
  fresh for each exchange; the broker answers JSON with a request id.

Credentials come from botocore's usual chain (environment, shared files, instance roles), or a named
profile (sasl.aws.profile; a profile with role_arn assumes that role), or, for OAUTHBEARER, a role ARN to
assume (sasl.aws.role.arn). The region is sasl.aws.region, else AWS_REGION / AWS_DEFAULT_REGION, else the
profile's. No secret key, session token or signature appears in a message.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from collections.abc import Mapping
from typing import Any

from kafkajet.errors import AuthenticationError, ConfigError
from kafkajet.security.mechanism import OneExchange
from kafkajet.security.token_refresh import RefreshConfig, RefreshingTokenSource, Token, TokenFetchError

SERVICE = "kafka-cluster"
ACTION = "kafka-cluster:Connect"
EXPIRES_S = 900
NATIVE_VERSION = "2020_10_22"
_INSTALL = "pip install 'kafkajet[aws]'"
NO_CREDENTIALS = "no AWS credentials found (environment, shared files, profile or instance role)"


class _HideSigningMaterial(logging.Filter):
    """botocore logs the canonical request (with the session token) and the signature at DEBUG: together
    they rebuild a presigned MSK credential, usable for 15 minutes. Kept out of the log, as our own texts."""

    _HIDDEN = ("CanonicalRequest:", "StringToSign:", "Signature:")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self._HIDDEN):
            record.args = ("[hidden by kafkajet]",)
        return True


def _hide_botocore_signing_logs() -> None:
    logger = logging.getLogger("botocore.auth")
    if not any(isinstance(f, _HideSigningMaterial) for f in logger.filters):
        logger.addFilter(_HideSigningMaterial())


def _botocore_session(profile: str | None) -> Any:
    try:
        import botocore.session
    except ImportError:
        raise ConfigError(f"AWS MSK IAM authentication needs botocore: {_INSTALL}") from None
    _hide_botocore_signing_logs()
    try:
        return botocore.session.Session(profile=profile)
    except Exception as e:  # ProfileNotFound and the like: their texts name the profile, no secret
        raise ConfigError(f"sasl.aws.profile={profile!r}: {e}") from None


def _region(cfg: Mapping[str, Any], session: Any) -> str:
    region = cfg.get("sasl.aws.region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") \
        or session.get_config_variable("region")
    if not region:
        raise ConfigError("AWS MSK IAM needs the cluster's region: set sasl.aws.region (or AWS_REGION)")
    return str(region)


def msk_token_source(cfg: Mapping[str, Any]) -> RefreshingTokenSource:
    """The client's one OAUTHBEARER token source for sasl.oauthbearer.method=aws_msk_iam."""
    profile, role_arn = cfg.get("sasl.aws.profile"), cfg.get("sasl.aws.role.arn")
    region = _region(cfg, _botocore_session(profile))
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer
    except ImportError:
        raise ConfigError(f"sasl.oauthbearer.method=aws_msk_iam needs the MSK IAM signer: {_INSTALL}") from None
    session_name = cfg.get("sasl.aws.role.session.name") or "kafkajet"
    source = f"region {region}" + (f", role {role_arn}" if role_arn else f", profile {profile}" if profile else "")

    def fetch() -> Token:
        if not role_arn and _botocore_session(profile).get_credentials() is None:
            # The signer would fail on None with an AttributeError; say what is missing instead.
            raise TokenFetchError(f"AWS MSK IAM token ({source}) could not be made: {NO_CREDENTIALS}")
        try:
            if role_arn:
                value, expiry_ms = signer.generate_auth_token_from_role_arn(region, role_arn, session_name)
            elif profile:
                value, expiry_ms = signer.generate_auth_token_from_profile(region, profile)
            else:
                value, expiry_ms = signer.generate_auth_token(region)
        except Exception as e:
            raise _credentials_error(e, source) from None
        expires = expiry_ms / 1000
        return Token(value, expires, expires - EXPIRES_S)

    return RefreshingTokenSource(fetch, RefreshConfig.from_config(cfg), describe=f"AWS MSK IAM ({source})")


def _credentials_error(e: Exception, source: str) -> TokenFetchError:
    """botocore's own texts for missing credentials or profiles hold no secret; others are named by type."""
    name = type(e).__name__
    safe = name in ("NoCredentialsError", "ProfileNotFound", "NoRegionError", "PartialCredentialsError")
    detail = f"{name}: {e}" if safe else name
    # Missing credentials may appear (an instance role coming up); a refused AssumeRole will not change.
    return TokenFetchError(f"AWS MSK IAM token ({source}) could not be made: {detail}", retryable=safe)


class MskNativeSigner:
    """Signs AWS_MSK_IAM first messages for a client; holds the botocore session (its credential chain
    refreshes temporary credentials by itself)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        if cfg.get("sasl.aws.role.arn"):
            raise ConfigError("sasl.aws.role.arn is for sasl.oauthbearer.method=aws_msk_iam; with "
                              "sasl.mechanism=AWS_MSK_IAM name a profile that has role_arn (sasl.aws.profile)")
        self._session = _botocore_session(cfg.get("sasl.aws.profile"))
        self.region = _region(cfg, self._session)

    def __repr__(self) -> str:
        return f"MskNativeSigner(region={self.region})"

    def first_message(self, host: str) -> bytes:
        from botocore.auth import SigV4QueryAuth
        from botocore.awsrequest import AWSRequest

        credentials = self._session.get_credentials()
        if credentials is None:
            raise AuthenticationError(f"AWS_MSK_IAM: {NO_CREDENTIALS}")
        request = AWSRequest(method="GET", url=f"https://{host}/", params={"Action": ACTION})
        SigV4QueryAuth(credentials.get_frozen_credentials(), SERVICE, self.region, expires=EXPIRES_S) \
            .add_auth(request)
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
        message = {"version": NATIVE_VERSION, "host": host, "user-agent": "kafkajet", "action": ACTION}
        for key in ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires",
                    "X-Amz-Signature", "X-Amz-Security-Token"):
            if key in query:
                message[key.lower()] = query[key]
        return json.dumps(message, separators=(",", ":")).encode("utf-8")


class AwsMskIamClient(OneExchange):
    """The native mechanism: one signed JSON message; the broker's JSON answer ends the exchange."""

    mechanism = "AWS_MSK_IAM"

    def __init__(self, signer: MskNativeSigner, host: str) -> None:
        self._signer = signer
        self._host = host
        self._state = "initial"

    def __repr__(self) -> str:
        return f"AwsMskIamClient(host={self._host!r}, region={self._signer.region}, state={self._state})"

    def start(self) -> bytes:
        self._begin()
        self._state = "failed"
        message = self._signer.first_message(self._host)
        self._state = "sent"
        return message

    def step(self, server_message: bytes) -> bytes | None:
        if self._state != "sent":
            raise AuthenticationError(f"AWS_MSK_IAM: unexpected server message in state {self._state}")
        self._state = "failed"
        try:
            answer = json.loads(server_message)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise AuthenticationError("AWS_MSK_IAM: protocol violation: the broker's answer is not a JSON object")
        self._state = "complete"
        return None


def native_login(cfg: Mapping[str, Any], jaas: Mapping[str, str]) -> MskNativeSigner:
    """sasl.mechanism=AWS_MSK_IAM's client-wide login: the one signer of all the client's connections."""
    return MskNativeSigner(_msk_settings(cfg, jaas))


def native_client(cfg: Mapping[str, Any], jaas: Mapping[str, str], login: MskNativeSigner | None,
                  host: str) -> AwsMskIamClient:
    return AwsMskIamClient(login if login is not None else native_login(cfg, jaas), host)


def _msk_settings(cfg: Mapping[str, Any], jaas: Mapping[str, str]) -> Mapping[str, Any]:
    """The sasl.aws.* keys, with aws-msk-iam-auth's IAMLoginModule options (awsProfileName, awsRoleArn)."""
    out = dict(cfg)
    for key, option in (("sasl.aws.profile", "awsProfileName"), ("sasl.aws.role.arn", "awsRoleArn")):
        if out.get(key) is None and jaas.get(option) is not None:
            out[key] = jaas[option]
    return out
