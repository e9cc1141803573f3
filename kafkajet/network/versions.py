"""ApiVersions negotiation shared by the non-blocking NetworkClient and the BlockingConnection.

Per KIP-511 a broker that does not support our ApiVersions version answers with a version 0 body carrying
UNSUPPORTED_VERSION and its own ApiVersions range; the client then retries at the highest common version
(what Java's NetworkClient does). Tansu instead closes the connection, which surfaces as a connection error.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkajet import __version__
from kafkajet.errors import NO_ERROR, KafkaError, ProtocolError, UnsupportedVersionError, make_error
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey, choose_version, decode_response

CLIENT_SOFTWARE_NAME = "kafkajet"
# Our request version falls at most twice (ours -> broker's max -> 0) before we give up on a broker.
MAX_API_VERSIONS_ATTEMPTS = 3

VersionRanges = dict[int, tuple[int, int]]


def max_api_versions_version() -> int:
    return SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]


def api_versions_request_body() -> dict[str, Any]:
    return {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": __version__}


@dataclass(slots=True)
class ApiVersionsOutcome:
    """Either the broker's ranges (negotiation done) or the version to retry the request at."""

    ranges: VersionRanges | None = None
    retry_version: int | None = None


def handle_api_versions_response(payload: bytes, sent_version: int) -> ApiVersionsOutcome:
    """Interpret an ApiVersions response payload (size prefix removed); KafkaError when the broker is unusable."""
    # ApiVersions responses always use header v0 (no tagged fields), so the error code sits right after the
    # correlation id whatever the body version; reading it first tells us which version to decode with.
    if len(payload) < 6:
        raise ProtocolError(f"ApiVersions response of {len(payload)} bytes is too short")
    error_code = struct.unpack_from(">h", payload, 4)[0]
    if error_code == UnsupportedVersionError.code and sent_version > 0:
        _, body = decode_response(ApiKey.API_VERSIONS, 0, payload)
        ranges = _ranges(body)
        broker = ranges.get(int(ApiKey.API_VERSIONS))
        retry = 0 if broker is None else min(broker[1], max_api_versions_version())
        if retry >= sent_version:
            retry = 0  # the broker contradicts itself; v0 is the one version every broker understands
        return ApiVersionsOutcome(retry_version=retry)
    if error_code != NO_ERROR:
        raise make_error(error_code, "ApiVersions request rejected") or KafkaError("ApiVersions failed")
    _, body = decode_response(ApiKey.API_VERSIONS, sent_version, payload)
    return ApiVersionsOutcome(ranges=_ranges(body))


def _ranges(body: Mapping[str, Any]) -> VersionRanges:
    return {int(k["api_key"]): (int(k["min_version"]), int(k["max_version"])) for k in body.get("api_keys") or ()}


def negotiate(ranges: Mapping[int, tuple[int, int]], api_key: int) -> int:
    """Highest version both we and the broker support; UnsupportedVersionError naming the API otherwise."""
    try:
        api = ApiKey(api_key)
    except ValueError:
        raise UnsupportedVersionError(f"api key {api_key} is not known to kafkajet") from None
    broker = ranges.get(int(api))
    if broker is None:
        raise UnsupportedVersionError(f"the broker does not support {api.name} (api key {int(api)})")
    return int(choose_version(api, broker))
