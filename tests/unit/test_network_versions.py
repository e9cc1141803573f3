"""The ApiVersions fallback rule (network/versions.py), fed the answers real brokers give.

Java decodes an ApiVersions answer at the version it sent, else as v0; on UNSUPPORTED_VERSION (or an answer
that does not decode at the version sent) it retries at the highest ApiVersions version the broker lists, or
at v0. Both connection kinds (node.py for the producer, blocking.py for Admin/FetchClient) call this one
function, so these cases hold for both.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

import kafkajet
from kafkajet.errors import ClusterAuthorizationFailedError, ProtocolError, UnsupportedVersionError
from kafkajet.network.versions import (
    CLIENT_MAX_VERSIONS,
    FinalizedFeatures,
    for_transaction_version,
    handle_api_versions_response,
    max_api_versions_version,
    negotiate,
)
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey, encode_response

API_VERSIONS = int(ApiKey.API_VERSIONS)
OURS = max_api_versions_version()
CID = struct.pack(">i", 7)


def _v0_body(error: int, apis: list[tuple[int, int, int]]) -> bytes:
    return CID + struct.pack(">hi", error, len(apis)) + b"".join(struct.pack(">hhh", *a) for a in apis)


def _answer(version: int, error: int, apis: list[tuple[int, int, int]]) -> bytes:
    body = {"error_code": error, "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                                              for k, lo, hi in apis]}
    return encode_response(API_VERSIONS, version, 7, body)[4:]


def test_librdkafka_mock_answer_to_a_version_above_its_range_retries_at_v0() -> None:
    # The bytes librdkafka's mock sends to an ApiVersions v3+ request it does not serve
    # (rd_kafka_mock_handle_ApiVersion): error 35, a one-byte "count" of 1, the ApiVersions entry 0..2,
    # throttle_time_ms. Read as v0 it claims 16,781,824 api keys; read as the version sent it is an empty list
    # followed by bytes the schema does not describe. Either way the answer is "retry lower": v0, since the
    # readable form lists no ApiVersions range (what Java does with an empty api_keys).
    payload = CID + struct.pack(">hb", 35, 1) + struct.pack(">hhh", API_VERSIONS, 0, 2) + struct.pack(">i", 0)
    outcome = handle_api_versions_response(payload, OURS)
    assert outcome.ranges is None and outcome.retry_version == 0


def test_kip_511_answer_retries_at_the_highest_version_the_broker_lists() -> None:
    payload = _v0_body(35, [(API_VERSIONS, 0, 2)])
    outcome = handle_api_versions_response(payload, OURS)
    assert outcome.ranges is None and outcome.retry_version == 2


def test_unsupported_version_at_the_version_sent_uses_its_listed_range() -> None:
    payload = _answer(3, 35, [(API_VERSIONS, 0, 1)])
    assert handle_api_versions_response(payload, 3).retry_version == 1


def test_a_broker_that_lists_the_version_it_refused_gets_v0() -> None:
    assert handle_api_versions_response(_v0_body(35, [(API_VERSIONS, 0, OURS)]), OURS).retry_version == 0


def test_an_answer_that_decodes_only_as_v0_is_a_cue_to_retry() -> None:
    # No error code, but a v0 body to a v3 request: the broker does not speak v3, whatever it says.
    payload = _v0_body(0, [(API_VERSIONS, 0, 2), (int(ApiKey.PRODUCE), 0, 9)])
    outcome = handle_api_versions_response(payload, 3)
    assert outcome.ranges is None and outcome.retry_version == 2


def test_an_answer_at_the_version_sent_gives_the_ranges() -> None:
    payload = _answer(OURS, 0, [(API_VERSIONS, 0, OURS), (int(ApiKey.PRODUCE), 3, 9)])
    outcome = handle_api_versions_response(payload, OURS)
    assert outcome.retry_version is None
    assert outcome.ranges == {API_VERSIONS: (0, OURS), int(ApiKey.PRODUCE): (3, 9)}


def test_trailing_bytes_do_not_spoil_a_good_answer() -> None:
    payload = _answer(OURS, 0, [(API_VERSIONS, 0, OURS)]) + b"\x00\x01"
    assert handle_api_versions_response(payload, OURS).ranges == {API_VERSIONS: (0, OURS)}


def test_unsupported_version_at_v0_is_the_end() -> None:
    with pytest.raises(UnsupportedVersionError):
        handle_api_versions_response(_v0_body(35, [(API_VERSIONS, 0, 2)]), 0)


def test_an_undecodable_v0_answer_is_a_protocol_error() -> None:
    payload = CID + struct.pack(">hi", 0, 2_000_000_000)
    with pytest.raises(ProtocolError, match="claims 2000000000 elements"):
        handle_api_versions_response(payload, 0)


def test_other_errors_name_themselves() -> None:
    with pytest.raises(ClusterAuthorizationFailedError):
        handle_api_versions_response(_answer(OURS, 31, []), OURS)


def test_a_frame_too_short_for_the_error_code_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="too short"):
        handle_api_versions_response(CID + b"\x00", OURS)


# --- the client's caps ------------------------------------------------------------------------------


def test_a_capped_api_is_negotiated_no_higher_than_its_cap() -> None:
    assert CLIENT_MAX_VERSIONS[ApiKey.ADD_PARTITIONS_TO_TXN] == 3  # Java's forClient: v4+ is the brokers' form
    assert negotiate({int(ApiKey.ADD_PARTITIONS_TO_TXN): (0, 5)}, ApiKey.ADD_PARTITIONS_TO_TXN) == 3
    assert negotiate({int(ApiKey.ADD_PARTITIONS_TO_TXN): (0, 2)}, ApiKey.ADD_PARTITIONS_TO_TXN) == 2
    assert negotiate({int(ApiKey.OFFSET_FETCH): (0, 9)}, ApiKey.OFFSET_FETCH) == 7
    assert negotiate({int(ApiKey.LIST_OFFSETS): (0, 8)}, ApiKey.LIST_OFFSETS) == 4
    # Produce goes to v13 (topics by id); the sender falls back to v12 for a topic whose id it does not know.
    assert negotiate({int(ApiKey.PRODUCE): (3, 99)}, ApiKey.PRODUCE) == 13 == SUPPORTED_VERSIONS[ApiKey.PRODUCE][1]
    # TxnOffsetCommit v6 names topics by id likewise (Java's forTopicNames stops at v5), and v5 is transaction
    # version 2's: under version 1 it goes at v4, as Java's builder for isTransactionV2Enabled false.
    negotiated = negotiate({int(ApiKey.TXN_OFFSET_COMMIT): (0, 6)}, ApiKey.TXN_OFFSET_COMMIT)
    assert negotiated == 5 < SUPPORTED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT][1]
    assert for_transaction_version(ApiKey.TXN_OFFSET_COMMIT, negotiated, 2) == 5
    assert for_transaction_version(ApiKey.TXN_OFFSET_COMMIT, negotiated, 1) == 4
    # An API without a cap gets the highest common version: EndTxn v5 (transaction version 2, where the
    # producer asks for it; the transaction manager caps it at v4 under version 1).
    assert negotiate({int(ApiKey.END_TXN): (0, 99)}, ApiKey.END_TXN) == SUPPORTED_VERSIONS[ApiKey.END_TXN][1] == 5


def test_finalized_features_are_read_from_the_answer() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": API_VERSIONS, "min_version": 0, "max_version": 4}],
            "finalized_features_epoch": 7,
            "finalized_features": [{"name": "transaction.version", "max_version_level": 2, "min_version_level": 2},
                                   {"name": "metadata.version", "max_version_level": 27, "min_version_level": 27}]}
    outcome = handle_api_versions_response(encode_response(API_VERSIONS, 3, 7, body)[4:], 3)
    assert outcome.features == FinalizedFeatures(7, {"transaction.version": 2, "metadata.version": 27})
    # Before v3 (and from brokers that finalize nothing: Tansu, librdkafka's mock) there are none, at epoch -1.
    old = handle_api_versions_response(_answer(2, 0, [(API_VERSIONS, 0, 2)]), 2)
    assert old.features == FinalizedFeatures(-1, {})


def test_a_broker_whose_range_starts_above_the_cap_is_unsupported() -> None:
    with pytest.raises(UnsupportedVersionError, match="ADD_PARTITIONS_TO_TXN v4-v5; kafkajet sends it at v3 at most"):
        negotiate({int(ApiKey.ADD_PARTITIONS_TO_TXN): (4, 5)}, ApiKey.ADD_PARTITIONS_TO_TXN)


def test_every_capped_api_stays_usable() -> None:
    for api, cap in CLIENT_MAX_VERSIONS.items():
        assert cap >= SUPPORTED_VERSIONS[api][0], api


def test_both_connection_kinds_take_their_versions_from_the_one_rule() -> None:
    """No caller caps a version itself (min() over a negotiated version, or a table of its own)."""
    root = Path(kafkajet.__file__).parent
    callers = [p for p in root.rglob("*.py") if "testing" not in p.parts and p.name != "versions.py"]
    offenders = [f"{p.relative_to(root)}:{n}" for p in callers
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if re.search(r"min\(.*api_version\(|^\s*[A-Z_]*MAX_VERSIONS?\b\s*[:=]", line)]
    assert offenders == []
