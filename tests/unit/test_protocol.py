"""The protocol codec's public API: golden frames derived by hand, headers, defaults, versions, bad input.

Every schema at every version is exercised by test_protocol_schemas.py; primitives by test_protocol_types.py;
agreement with kafka-python's hand-written structs by test_protocol_interop.py.
"""

from __future__ import annotations

import logging
import struct
import tracemalloc
from typing import Any

import pytest

from kafkajet.errors import ProtocolError, UnsupportedVersionError
from kafkajet.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    RequestHeader,
    choose_version,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    read_correlation_id,
)


def unhex(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


# --- golden request frames -------------------------------------------------------------------------------


def test_golden_api_versions_v0_request() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 0, 1, "kj", {})
    assert frame == unhex(
        "0000000c",  # size: 12 bytes follow
        "0012",      # api_key 18 (ApiVersions)
        "0000",      # api_version 0
        "00000001",  # correlation_id 1
        "0002",      # client_id: int16 length 2 (request header v1: a nullable, non-compact string)
        "6b6a",      # "kj"; v0 has no body fields
    )


def test_golden_api_versions_v3_request() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 3, 7, "kj",
                           {"client_software_name": "kafkajet", "client_software_version": "0.1"})
    assert frame == unhex(
        "0000001b",  # size 27 = 13 header + 14 body
        "0012", "0003", "00000007",
        "0002", "6b6a",          # client_id stays an int16-length string in header v2
        "00",                    # header v2 tagged fields: none
        "09", "6b61666b616a6574",  # client_software_name: compact string, uvarint length+1 = 9, "kafkajet"
        "04", "302e31",          # client_software_version: length+1 = 4, "0.1"
        "00",                    # body tagged fields: none
    )


def test_golden_metadata_v1_request_for_one_topic() -> None:
    frame = encode_request(ApiKey.METADATA, 1, 2, None, {"topics": [{"name": "t"}]})
    assert frame == unhex(
        "00000011",  # size 17
        "0003", "0001", "00000002",
        "ffff",      # client_id null: int16 -1
        "00000001",  # topics: int32 count 1
        "0001", "74",  # name: int16 length 1, "t"
    )


PRODUCE_BODY: dict[str, Any] = {
    "transactional_id": None, "acks": -1, "timeout_ms": 1000,
    "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\xab\xcd"}]}],
}


def test_golden_produce_v3_request() -> None:
    frame = encode_request(ApiKey.PRODUCE, 3, 9, "c", PRODUCE_BODY)
    assert frame == unhex(
        "00000028",  # size 40 = 11 header + 29 body
        "0000", "0003", "00000009", "0001", "63",  # Produce v3, correlation 9, client "c"
        "ffff",      # transactional_id (v3+): null
        "ffff",      # acks -1
        "000003e8",  # timeout_ms 1000
        "00000001",  # topic_data: 1 topic
        "0001", "74",  # name "t"
        "00000001",  # partition_data: 1 partition
        "00000000",  # index 0
        "00000002", "abcd",  # records: int32 length 2, then the raw batch bytes
    )


def test_golden_produce_v9_request_is_flexible() -> None:
    frame = encode_request(ApiKey.PRODUCE, 9, 9, "c", PRODUCE_BODY)
    assert frame[4:] == unhex(
        "0000", "0009", "00000009", "0001", "63",
        "00",        # header v2 tagged fields
        "00",        # transactional_id: compact nullable string, null = 0
        "ffff", "000003e8",
        "02",        # topic_data: compact array, count+1 = 2
        "02", "74",  # name: compact string "t"
        "02",        # partition_data: compact array of 1
        "00000000",
        "03", "abcd",  # records: compact bytes, length+1 = 3
        "00",        # partition struct tagged fields
        "00",        # topic struct tagged fields
        "00",        # body tagged fields
    )
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4


def test_golden_init_producer_id_v0_request_takes_defaults() -> None:
    # Nothing given: transactional_id has no JSON default and is nullable -> null; the int32 -> 0.
    frame = encode_request(ApiKey.INIT_PRODUCER_ID, 0, 1, None, {})
    assert frame[4:] == unhex("0016", "0000", "00000001", "ffff", "ffff", "00000000")


# --- golden response frames ------------------------------------------------------------------------------


def test_golden_api_versions_v3_response_with_tagged_fields() -> None:
    payload = unhex(
        "00000005",  # correlation id; header v0 even though v3 is flexible (KIP-511): no header tags
        "0000",      # error_code
        "02",        # api_keys: compact array of 1
        "0000", "0000", "0009", "00",  # api_key 0, min 0, max 9, no tags
        "00000000",  # throttle_time_ms
        "02",        # 2 tagged fields
        "03", "01", "01",    # tag 3 (zk_migration_ready), 1 byte: true
        "09", "02", "beef",  # tag 9: unknown to this schema, skipped by its size
    )
    cid, body = decode_response(ApiKey.API_VERSIONS, 3, payload)
    assert cid == 5
    assert body == {
        "error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}], "throttle_time_ms": 0,
        "supported_features": [], "finalized_features_epoch": -1, "finalized_features": [],
        "zk_migration_ready": True,
    }
    # Re-encoding writes only the known tag that differs from its default.
    assert encode_response(ApiKey.API_VERSIONS, 3, 5, body)[4:] == payload[:-8] + unhex("01", "03", "01", "01")


def test_golden_metadata_v9_response_skips_unknown_header_tags() -> None:
    payload = unhex(
        "00000007",
        "01", "05", "01", "aa",  # flexible response header: one tag (5), 1 byte, unknown -> skipped
        "00000000",  # throttle_time_ms
        "01",        # brokers: empty compact array
        "00",        # cluster_id: null
        "00000001",  # controller_id
        "01",        # topics: empty
        "80000000",  # cluster_authorized_operations (v8-10)
        "00",
    )
    assert decode_response(ApiKey.METADATA, 9, payload) == (7, {
        "throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": 1, "topics": [],
        "cluster_authorized_operations": -(2**31)})
    assert read_correlation_id(payload) == 7


def test_golden_produce_v8_response() -> None:
    payload = unhex(
        "00000003", "00000001", "0001", "74", "00000001",
        "00000000", "0000",  # index 0, error_code 0
        "0000000000000005",  # base_offset 5
        "ffffffffffffffff",  # log_append_time_ms -1
        "0000000000000000",  # log_start_offset 0
        "00000000",  # record_errors: empty
        "ffff",      # error_message: null
        "00000000",  # throttle_time_ms
    )
    cid, body = decode_response(ApiKey.PRODUCE, 8, payload)
    assert cid == 3
    assert body == {"responses": [{"name": "t", "partition_responses": [{
        "index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0,
        "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}


# --- headers ---------------------------------------------------------------------------------------------


def test_flexible_responses_carry_header_tags_except_api_versions() -> None:
    assert encode_response(ApiKey.API_VERSIONS, 3, 5, {})[4:10] == unhex("00000005", "0000")
    assert encode_response(ApiKey.METADATA, 9, 5, {})[4:9] == unhex("00000005", "00")
    assert encode_response(ApiKey.METADATA, 8, 5, {})[4:12] == unhex("00000005", "00000000")


def test_request_headers_decode_on_the_server_side() -> None:
    frame = encode_request(ApiKey.SASL_HANDSHAKE, 1, 77, "me", {"mechanism": "PLAIN"})
    header, body = decode_request(frame[4:])
    assert header == RequestHeader(ApiKey.SASL_HANDSHAKE, 1, 77, "me")
    assert body == {"mechanism": "PLAIN"}
    assert decode_request_header(frame[4:]) == header
    # Header v2 tags a newer client might send are skipped.
    frame = encode_request(ApiKey.SASL_AUTHENTICATE, 2, 1, None, {"auth_bytes": b"x"})
    assert frame[14] == 0  # after api_key, api_version, correlation_id, null client_id: no header tags
    payload = frame[4:14] + unhex("01", "07", "02", "0000") + frame[15:]
    assert decode_request(payload) == (RequestHeader(36, 2, 1, None), {"auth_bytes": b"x"})


def test_request_header_of_an_unsupported_request_is_still_readable() -> None:
    payload = struct.pack(">hhih", ApiKey.PRODUCE, 42, 9, -1) + b"whatever"
    assert decode_request_header(payload) == RequestHeader(0, 42, 9, None)
    with pytest.raises(UnsupportedVersionError, match=r"unsupported version 42 of Produce \(supported 3-13\)"):
        decode_request(payload)


# --- defaults and versions -------------------------------------------------------------------------------


def test_missing_fields_take_json_defaults_or_zero_values() -> None:
    _, fetch = decode_request(encode_request(ApiKey.FETCH, 4, 1, None, {})[4:])
    assert fetch == {"replica_id": 0, "max_wait": 0, "min_bytes": 0, "max_bytes": 0x7FFFFFFF,
                     "isolation_level": 0, "topics": []}
    _, md = decode_request(encode_request(ApiKey.METADATA, 4, 1, None, {})[4:])
    assert md == {"topics": None, "allow_auto_topic_creation": True}  # topics nullable from v1: null = all
    _, md0 = decode_request(encode_request(ApiKey.METADATA, 0, 1, None, {})[4:])
    assert md0 == {"topics": []}  # not nullable in v0


def test_fields_of_other_versions_are_ignored() -> None:
    body = dict(PRODUCE_BODY, transactional_id="tx")
    # Produce v12 names topics, v13 gives their ids instead: each version encodes only its own.
    with_id = {"topic_data": [{"name": "t", "topic_id": bytes(16), "partition_data": []}]}
    assert decode_request(encode_request(ApiKey.PRODUCE, 12, 1, None, dict(body, **with_id))[4:])[1][
        "topic_data"] == [{"name": "t", "partition_data": []}]
    # A field Kafka defines only for versions newer than ours is known, merely not encoded.
    frame = encode_request(ApiKey.METADATA, 9, 1, None, {"topics": [{"name": "t", "topic_id": bytes(16)}]})
    assert decode_request(frame[4:])[1]["topics"] == [{"name": "t"}]


def test_choose_version_picks_the_highest_common_version() -> None:
    assert choose_version(ApiKey.PRODUCE, (3, 11)) == 11
    assert choose_version(ApiKey.METADATA, (0, 4)) == 4
    assert choose_version(ApiKey.DELETE_TOPICS, (0, 1)) == 1
    assert choose_version(ApiKey.FETCH, (11, 17)) == 11  # a single common version
    assert choose_version(ApiKey.API_VERSIONS, None) == SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] == 5


def test_choose_version_raises_when_ranges_do_not_overlap() -> None:
    with pytest.raises(UnsupportedVersionError, match="no common version of Produce: this client supports 3-13, "
                                                      "the broker 14-15"):
        choose_version(ApiKey.PRODUCE, (14, 15))
    with pytest.raises(UnsupportedVersionError, match="DeleteTopics.*1-4.*0-0"):
        choose_version(ApiKey.DELETE_TOPICS, (0, 0))
    with pytest.raises(UnsupportedVersionError, match="api key 99 is not implemented"):
        choose_version(99, (0, 3))


# --- bad input -------------------------------------------------------------------------------------------


def _metadata_v9_response() -> bytes:
    return encode_response(ApiKey.METADATA, 9, 3, {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}], "cluster_id": "c",
        "controller_id": 1,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "leader_id": 1, "replica_nodes": [1],
                                                 "isr_nodes": [1]}]}],
    })[4:]


def test_truncation_messages_say_what_where_and_how_much() -> None:
    payload = _metadata_v9_response()
    with pytest.raises(ProtocolError) as e:
        decode_response(ApiKey.METADATA, 9, payload[:7])
    assert str(e.value) == ("truncated Metadata v9 response: needed 4 bytes for int32 'throttle_time_ms' "
                            "at offset 5, 2 left")
    # The body ends: topic_authorized_operations (4), topic tags (1), cluster_authorized_operations (4), tags (1).
    with pytest.raises(ProtocolError, match=r"needed 4 bytes for int32 'topics\.topic_authorized_operations'.* 2 left"):
        decode_response(ApiKey.METADATA, 9, payload[:-8])
    with pytest.raises(ProtocolError, match="truncated response: needed 4 bytes for int32 'correlation_id', 3 left"):
        read_correlation_id(payload[:3])


def test_impossible_lengths_in_a_frame() -> None:
    with pytest.raises(ProtocolError, match="'brokers' claims 2000000000 elements"):
        decode_response(ApiKey.METADATA, 1, struct.pack(">ii", 1, 2_000_000_000))
    with pytest.raises(ProtocolError, match="negative array length -5 for 'brokers'"):
        decode_response(ApiKey.METADATA, 1, struct.pack(">ii", 1, -5))
    with pytest.raises(ProtocolError, match="null array for non-nullable 'brokers'"):
        decode_response(ApiKey.METADATA, 1, struct.pack(">ii", 1, -1))
    with pytest.raises(ProtocolError, match="null string for non-nullable 'brokers.host'"):
        decode_response(ApiKey.METADATA, 1, struct.pack(">iiih", 1, 1, 0, -1) + bytes(6))
    with pytest.raises(ProtocolError, match="1000 tagged fields claimed"):
        # header tags, error_code, null error_message, empty auth_bytes, session_lifetime_ms, 1000 tags
        decode_response(ApiKey.SASL_AUTHENTICATE, 2, unhex("00000001", "00", "0000", "00", "01",
                                                           "0000000000000000", "e807"))


def test_tagged_field_sizes_are_checked() -> None:
    base = unhex("00000005", "0000", "01", "00000000")
    with pytest.raises(ProtocolError, match=r"zk_migration_ready' \(tag 3\) declared 2 bytes but used 1"):
        decode_response(ApiKey.API_VERSIONS, 3, base + unhex("01", "03", "02", "0101"))
    with pytest.raises(ProtocolError, match="truncated ApiVersions v3 response: needed 9 bytes for tag 9"):
        decode_response(ApiKey.API_VERSIONS, 3, base + unhex("01", "09", "09", "01"))


def test_trailing_bytes_after_a_response_body_are_ignored_with_a_debug_log(caplog: pytest.LogCaptureFixture) -> None:
    # This test used to require a ProtocolError. librdkafka's mock cluster appends one byte to its Metadata v9
    # answer, and Java's and librdkafka's readers stop at the end of the body, so refusing the frame only made
    # kafkajet unable to talk to a broker every other client reads. Truncation, impossible lengths and bad
    # tags (the tests above, and the fuzz tests in test_protocol_schemas.py) still catch corruption.
    payload = _metadata_v9_response()
    with caplog.at_level(logging.DEBUG, logger="kafkajet.protocol"):
        assert decode_response(ApiKey.METADATA, 9, payload + b"\x00") == decode_response(ApiKey.METADATA, 9, payload)
    assert "Metadata v9 response: ignored 1 bytes after the body" in caplog.text


def test_trailing_bytes_after_a_request_body_are_reported() -> None:
    # The server side stays strict: requests come from our own encoder or from clients a mock broker referees.
    frame = encode_request(ApiKey.METADATA, 9, 1, "c", {"topics": None})[4:]
    with pytest.raises(ProtocolError, match="Metadata v9 request: 1 unexpected bytes after the body"):
        decode_request(frame + b"\x00")


def test_unknown_api_key() -> None:
    for call in (lambda: encode_request(999, 0, 1, None, {}), lambda: encode_response(999, 0, 1, {}),
                 lambda: decode_response(999, 0, b"\x00\x00\x00\x01"),
                 lambda: decode_request(struct.pack(">hhih", 999, 0, 1, -1))):
        with pytest.raises(ProtocolError, match="unknown api key 999"):
            call()


def test_unsupported_versions() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"unsupported version 14 of Produce \(supported 3-13\)"):
        encode_request(ApiKey.PRODUCE, 14, 1, None, {})
    with pytest.raises(UnsupportedVersionError, match=r"unsupported version 0 of DeleteTopics \(supported 1-4\)"):
        decode_response(ApiKey.DELETE_TOPICS, 0, b"\x00\x00\x00\x01")
    with pytest.raises(UnsupportedVersionError, match="unsupported version -1 of Metadata"):
        encode_response(ApiKey.METADATA, -1, 1, {})


def test_bodies_that_do_not_fit_the_schema_are_refused() -> None:
    cases: list[tuple[int, int, dict[str, Any], str]] = [
        (ApiKey.PRODUCE, 3, {"acks": 40000}, "cannot encode 40000 as int16 'acks'"),
        (ApiKey.PRODUCE, 3, {"acks": "1"}, "int16 'acks'"),
        (ApiKey.FETCH, 4, {"max_wait_ms": 500}, "unknown field.*max_wait_ms.*max_wait"),
        (ApiKey.METADATA, 0, {"topics": None}, "'topics' is not nullable in this version"),
        (ApiKey.METADATA, 1, {"topics": [{"name": 5}]}, "'topics.name' must be a str, got int"),
        (ApiKey.METADATA, 1, {"topics": "t"}, "'topics' must be a list, got str"),
        (ApiKey.METADATA, 1, {"topics": ["t"]}, "'topics' must be a dict, got str"),
        (ApiKey.PRODUCE, 3, {"topic_data": [{"partition_data": [{"records": "text"}]}]},
         "'topic_data.partition_data.records' must be bytes, got str"),
        (ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "x" * 40_000}, "'mechanism'.*does not fit an int16 length"),
        (ApiKey.FETCH, 4, {"topics": [{"fetch_partitions": [None]}]},
         "'topics.fetch_partitions' elements cannot be None"),
    ]
    for api, version, body, message in cases:
        with pytest.raises(ProtocolError, match=message):
            encode_request(api, version, 1, None, body)
    with pytest.raises(ProtocolError, match="int32 'correlation_id'"):
        encode_request(ApiKey.METADATA, 0, 2**31, None, {})
    with pytest.raises(ProtocolError, match="client_id must be a str or None"):
        encode_request(ApiKey.METADATA, 0, 1, b"kj", {})  # type: ignore[arg-type]


def test_invalid_utf8_in_a_frame() -> None:
    payload = struct.pack(">hhi", ApiKey.SASL_HANDSHAKE, 0, 1) + struct.pack(">h", 2) + b"\xc3\x28"
    with pytest.raises(ProtocolError, match="'client_id' is not valid UTF-8"):
        decode_request(payload)


# --- speed-related guarantees ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 9])
@pytest.mark.parametrize("wrap", [bytes, memoryview])
def test_produce_records_are_copied_once(version: int, wrap: Any) -> None:
    size = 8 << 20
    records = wrap(bytes(size))
    body = {"acks": 1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [
        {"index": p, "records": records} for p in range(2)]}]}
    tracemalloc.start()
    try:
        frame = encode_request(ApiKey.PRODUCE, version, 1, "c", body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The frame holds both partitions' records (2 x size); any intermediate copy would push the peak to 3x+.
    assert len(frame) > 2 * size
    assert peak < 2.5 * size


def test_request_buffers_are_the_frame_with_record_batches_left_uncopied() -> None:
    from kafkajet.protocol import ApiKey, encode_request, encode_request_buffers

    batches = [bytes([i]) * (5000 + i) for i in range(3)] + [b"small batch"]
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": i, "records": b} for i, b in enumerate(batches)]}]}
    for version in (3, 8, 9):  # the last plain and the first flexible version
        buffers = encode_request_buffers(ApiKey.PRODUCE, version, 7, "cid", body)
        assert b"".join(buffers) == encode_request(ApiKey.PRODUCE, version, 7, "cid", body)
        # The large batches are handed to sendmsg() as they are; the small pieces between them are joined.
        assert [b for b in buffers if any(b is big for big in batches[:3])] == batches[:3]
        assert len(buffers) == 7
