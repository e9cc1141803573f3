"""The ApiVersions fallback rule (network/versions.py), fed the answers real brokers give.

Java decodes an ApiVersions answer at the version it sent, else as v0; on UNSUPPORTED_VERSION (or an answer
that does not decode at the version sent) it retries at the highest ApiVersions version the broker lists, or
at v0. Both connection kinds (node.py for the producer, blocking.py for Admin/FetchClient) call this one
function, so these cases hold for both.
"""

from __future__ import annotations

import struct

import pytest

from kafkajet.errors import ClusterAuthorizationFailedError, ProtocolError, UnsupportedVersionError
from kafkajet.network.versions import handle_api_versions_response, max_api_versions_version
from kafkajet.protocol import ApiKey, encode_response

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
