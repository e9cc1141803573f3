"""ApiVersions negotiation shared by the non-blocking NetworkClient and the BlockingConnection.

Per KIP-511 a broker that does not support our ApiVersions version answers with a version 0 body carrying
UNSUPPORTED_VERSION and its own ApiVersions range; the client then retries at the highest common version
(what Java's NetworkClient does). Other brokers answer in shapes of their own (librdkafka's mock: error 35 in
a body that is neither the version asked nor v0), and Tansu closes the connection, which surfaces as a
connection error. One rule, in handle_api_versions_response, serves both connection kinds.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kafkajet._version import __version__
from kafkajet.errors import NO_ERROR, KafkaError, ProtocolError, UnsupportedVersionError, make_error
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey, choose_version, decode_response

CLIENT_SOFTWARE_NAME = "kafkajet"

# Where kafkajet sends less than its codec encodes: from these versions on a request means something else,
# or takes a shape the callers do not build. The one table of such caps, for every client: negotiate()
# applies it, so a version never has to be capped where a request is made.
CLIENT_MAX_VERSIONS: Mapping[ApiKey, int] = MappingProxyType({
    # v4+ is the brokers' batched verification form (KIP-890, cluster permission); clients send v3 and
    # below, as Java's AddPartitionsToTxnRequest.Builder.forClient does.
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    # The FetchClient's Fetch body and reading: v5 answers log_start_offset (and, since v4, the LSO and the
    # aborted transactions); v7+ adds fetch sessions, v13+ topic ids instead of names.
    ApiKey.FETCH: 5,
    # v4+ batches coordinator keys; kafkajet asks for one key at a time, in v3's shape.
    ApiKey.FIND_COORDINATOR: 3,
    # The FetchClient's ListOffsets body: v2 takes the isolation level, v4 leader epochs.
    ApiKey.LIST_OFFSETS: 4,
    # v8+ batches groups; the admin client's OffsetFetch body is v7's (require_stable).
    ApiKey.OFFSET_FETCH: 7,
    # v6 names topics by id, which Java sends only when its metadata knows every topic's id; kafkajet names them,
    # as Java's TxnOffsetCommitRequest.Builder.forTopicNames (v5 at most) does.
    ApiKey.TXN_OFFSET_COMMIT: 5,
})
# Transaction version 1 (KIP-890 part 1): a transactional producer whose brokers do not finalize
# transaction.version 2 sends Produce below v12 (v12+ adds partitions to the transaction implicitly), EndTxn
# below v5 (v5 bumps the epoch) and TxnOffsetCommit below v5 (v5 adds the group to the transaction, with no
# AddOffsetsToTxn), as Java's ProduceRequest.builder, EndTxnRequest.Builder and TxnOffsetCommitRequest.Builder do.
TV1_MAX_VERSIONS: Mapping[ApiKey, int] = MappingProxyType(
    {ApiKey.PRODUCE: 11, ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 4})
TRANSACTION_VERSION = "transaction.version"

# Our request version falls at most twice (ours -> broker's max -> 0) before we give up on a broker.
MAX_API_VERSIONS_ATTEMPTS = 3

VersionRanges = dict[int, tuple[int, int]]


def max_api_versions_version() -> int:
    return SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]


def api_versions_request_body(cluster_check: tuple[str, int] | None = None) -> dict[str, Any]:
    """ApiVersions' body; from v5 the cluster id and node id the client expects, which a 4.4 broker checks
    (KIP-1242; none, -1: no check). Earlier versions leave the two fields out, so one body serves the retry
    at a lower version a broker without v5 (Tansu) asks for."""
    cluster_id, node_id = cluster_check if cluster_check is not None else (None, -1)
    return {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": __version__,
            "cluster_id": cluster_id, "node_id": node_id}


@dataclass(slots=True)
class ApiVersionsOutcome:
    """Either the broker's ranges (negotiation done) or the version to retry the request at."""

    ranges: VersionRanges | None = None
    retry_version: int | None = None
    features: FinalizedFeatures | None = None


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The feature levels a broker's ApiVersions answer finalizes (v3+), and the epoch of that answer: a higher
    epoch is a later state of the cluster's features (Java's ApiVersions.FinalizedFeaturesInfo)."""

    epoch: int
    levels: Mapping[str, int]


NO_FEATURES = FinalizedFeatures(-1, MappingProxyType({}))


def handle_api_versions_response(payload: bytes, sent_version: int) -> ApiVersionsOutcome:
    """Interpret an ApiVersions response payload (size prefix removed); KafkaError when the broker is unusable.

    Java's rule (ApiVersionsResponse.parse and NetworkClient.handleApiVersionsResponse): decode at the version
    sent, else as v0; UNSUPPORTED_VERSION, or an answer that does not decode at the version sent, means
    "retry at the highest ApiVersions version the broker lists, or at v0". librdkafka's mock answers a request
    above its range with error 35 in a short body that parses as neither the version sent nor v0, so the
    error code is read on its own first: it is the first int16 of the body at every version.
    """
    # ApiVersions responses always use header v0 (no tagged fields), so the error code sits right after the
    # correlation id whatever the body version.
    if len(payload) < 6:
        raise ProtocolError(f"ApiVersions response of {len(payload)} bytes is too short")
    error_code = struct.unpack_from(">h", payload, 4)[0]
    body, decode_error = _decode_at_sent_or_v0(payload, sent_version)
    if sent_version > 0 and (error_code == UnsupportedVersionError.code or body is None
                             or body.version != sent_version):
        ranges = {} if body is None else _ranges(body.body)
        broker = ranges.get(int(ApiKey.API_VERSIONS))
        retry = 0 if broker is None else min(broker[1], max_api_versions_version())
        if retry >= sent_version:
            retry = 0  # the broker contradicts itself; v0 is the one version every broker understands
        return ApiVersionsOutcome(retry_version=retry)
    if error_code != NO_ERROR:
        raise make_error(error_code, "ApiVersions request rejected") or KafkaError("ApiVersions failed")
    if body is None:
        assert decode_error is not None
        raise decode_error
    return ApiVersionsOutcome(ranges=_ranges(body.body), features=_features(body.body))


@dataclass(slots=True)
class _Decoded:
    version: int
    body: dict[str, Any]


def _decode_at_sent_or_v0(payload: bytes, sent_version: int) -> tuple[_Decoded | None, ProtocolError | None]:
    """The body at the version sent, else at v0 (a broker's fallback answer), else None and the first error."""
    first: ProtocolError | None = None
    for version in dict.fromkeys((sent_version, 0)):
        try:
            return _Decoded(version, decode_response(ApiKey.API_VERSIONS, version, payload)[1]), None
        except ProtocolError as e:
            first = first or e
    return None, first


def _ranges(body: Mapping[str, Any]) -> VersionRanges:
    return {int(k["api_key"]): (int(k["min_version"]), int(k["max_version"])) for k in body.get("api_keys") or ()}


def _features(body: Mapping[str, Any]) -> FinalizedFeatures:
    levels = {str(f["name"]): int(f["max_version_level"]) for f in body.get("finalized_features") or ()}
    return FinalizedFeatures(int(body.get("finalized_features_epoch", -1)), MappingProxyType(levels))


def for_transaction_version(api_key: ApiKey, negotiated: int, transaction_version: int) -> int:
    """The version of a transactional request under the transaction version the producer chose: the
    negotiated one under version 2, no higher than TV1_MAX_VERSIONS under version 1."""
    cap = TV1_MAX_VERSIONS.get(api_key) if transaction_version < 2 else None
    return negotiated if cap is None or negotiated <= cap else cap


def negotiate(ranges: Mapping[int, tuple[int, int]], api_key: int) -> int:
    """Highest version both we and the broker support, within CLIENT_MAX_VERSIONS; UnsupportedVersionError
    naming the API otherwise."""
    try:
        api = ApiKey(api_key)
    except ValueError:
        raise UnsupportedVersionError(f"api key {api_key} is not known to kafkajet") from None
    broker = ranges.get(int(api))
    if broker is None:
        raise UnsupportedVersionError(f"the broker does not support {api.name} (api key {int(api)})")
    version = int(choose_version(api, broker))
    cap = CLIENT_MAX_VERSIONS.get(api)
    if cap is None or version <= cap:
        return version
    if broker[0] > cap:
        raise UnsupportedVersionError(f"the broker supports {api.name} v{broker[0]}-v{broker[1]}; kafkajet sends "
                                      f"it at v{cap} at most")
    return cap
