"""Checks AWS MSK IAM credentials the way an MSK broker does, for the MockCluster (needs botocore).

    verifier = MskIamVerifier(ACCESS_KEY, SECRET_KEY, region="eu-west-1")
    MockCluster(sasl_mechanisms=["OAUTHBEARER", "AWS_MSK_IAM"],
                sasl_oauthbearer_validator=verifier.oauthbearer_validator(),
                sasl_aws_msk_iam_validator=verifier.native_validator())

Both forms carry the same SigV4 presigned query: the action must be kafka-cluster:Connect, the algorithm
AWS4-HMAC-SHA256, the expiry 900 s (and not passed), the credential scope <key>/<date>/<region>/
kafka-cluster/aws4_request for the known access key, the region and the signing date; the signature is
recomputed with botocore for the fixed secret key. The principal is the access key id.
"""

from __future__ import annotations

import calendar
import hmac
import time
import urllib.parse
from collections.abc import Mapping

from kafkajet.security.aws_msk import ACTION, EXPIRES_S, NATIVE_VERSION, SERVICE
from kafkajet.security.oidc import b64url_decode
from kafkajet.testing.mock.sasl import InvalidToken, NativeMskValidator, TokenValidator

ALGORITHM = "AWS4-HMAC-SHA256"


class MskIamVerifier:
    def __init__(self, access_key: str, secret_key: str, *, region: str, session_token: str | None = None) -> None:
        self.access_key = access_key
        self._secret_key = secret_key
        self.region = region
        self._session_token = session_token

    def __repr__(self) -> str:
        return f"MskIamVerifier(access_key={self.access_key!r}, region={self.region!r})"

    def oauthbearer_validator(self) -> TokenValidator:
        """OAUTHBEARER: the token is the base64url presigned URL for kafka.<region>.amazonaws.com."""
        def validate(token: str, extensions: Mapping[str, str]) -> tuple[str, float | None]:
            try:
                url = b64url_decode(token).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                raise InvalidToken("not a base64url MSK IAM token") from None
            parts = urllib.parse.urlsplit(url)
            if parts.scheme != "https" or parts.hostname != f"kafka.{self.region}.amazonaws.com":
                raise InvalidToken(f"the token is not for MSK in {self.region}")
            query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
            query.pop("User-Agent", None)  # added after signing by the MSK signer
            return self._check(parts.hostname, query)

        return validate

    def native_validator(self) -> NativeMskValidator:
        """AWS_MSK_IAM: the JSON message; its host is the broker's."""
        def validate(message: Mapping[str, str]) -> tuple[str, float | None]:
            if message.get("version") != NATIVE_VERSION:
                raise InvalidToken(f"unknown version {message.get('version')!r}")
            host = message.get("host")
            if not host:
                raise InvalidToken("no host")
            names = {k.lower(): k for k in ("Action", "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date",
                                              "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature",
                                              "X-Amz-Security-Token")}
            query = {names[k]: str(v) for k, v in message.items() if k in names}
            return self._check(host, query)

        return validate

    def _check(self, host: str, query: Mapping[str, str]) -> tuple[str, float | None]:
        if query.get("Action") != ACTION:
            raise InvalidToken(f"the action is {query.get('Action')!r}, not {ACTION}")
        if query.get("X-Amz-Algorithm") != ALGORITHM:
            raise InvalidToken(f"the algorithm is not {ALGORITHM}")
        if query.get("X-Amz-Expires") != str(EXPIRES_S):
            raise InvalidToken(f"the expiry is {query.get('X-Amz-Expires')!r} s, not {EXPIRES_S}")
        date = query.get("X-Amz-Date", "")
        try:
            signed_at = calendar.timegm(time.strptime(date, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            raise InvalidToken("bad X-Amz-Date") from None
        expires_at = float(signed_at + EXPIRES_S)
        if time.time() >= expires_at:
            raise InvalidToken("the signature has expired")
        credential = query.get("X-Amz-Credential", "")
        wanted = f"{self.access_key}/{date[:8]}/{self.region}/{SERVICE}/aws4_request"
        if credential != wanted:
            raise InvalidToken("unknown access key or wrong credential scope")
        if self._session_token is not None and query.get("X-Amz-Security-Token") != self._session_token:
            raise InvalidToken("wrong session token")
        if not hmac.compare_digest(self._signature(host, query, date), query.get("X-Amz-Signature", "")):
            raise InvalidToken("the signature does not match")
        return self.access_key, expires_at

    def _signature(self, host: str, query: Mapping[str, str], timestamp: str) -> str:
        from botocore.auth import SigV4QueryAuth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        signed = {k: v for k, v in query.items() if k != "X-Amz-Signature"}
        # quote_via=quote: SigV4 encodes a space as %20, never "+" (the canonical query sorts the pairs).
        request = AWSRequest(method="GET", url=f"https://{host}/?"
                             f"{urllib.parse.urlencode(signed, quote_via=urllib.parse.quote, safe='-_.~')}")
        request.context["timestamp"] = timestamp
        auth = SigV4QueryAuth(Credentials(self.access_key, self._secret_key, self._session_token), SERVICE,
                              self.region, expires=EXPIRES_S)
        return str(auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request))

