"""The protocol codec: primitives, every schema at every version, golden bytes, and bad input."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet.errors import ProtocolError, UnsupportedVersionError
from kafkajet.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    choose_version,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_correlation_id,
)
from kafkajet.protocol import types as t
from kafkajet.protocol.codec import REQUESTS, RESPONSES, MessageSchema

# --- primitives --------------------------------------------------------------------------------------


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(n: int) -> None:
    assert t.Reader(t.uvarint(n)).uvarint("x", 5) == n


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    assert t.Reader(t.varint(n)).varint("x") == n


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    assert t.Reader(t.varlong(n)).varlong("x") == n


def test_zigzag_vectors_from_the_spec() -> None:
    for n, hx in [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804")]:
        assert t.varint(n).hex() == hx


@given(st.one_of(st.none(), st.text(max_size=50)), st.booleans())
def test_strings_round_trip(s: str | None, compact: bool) -> None:
    assert t.Reader(t.string(s, compact)).string(compact, True, "s") == s


@given(st.one_of(st.none(), st.binary(max_size=50)), st.booleans())
def test_bytes_round_trip(b: bytes | None, compact: bool) -> None:
    assert t.Reader(b"".join(t.bytes_(b, compact))).bytes_(compact, True, "b") == b


@given(st.sampled_from(sorted(t.FIXED)), st.data())
def test_fixed_width_round_trip(name: str, data: st.DataObject) -> None:
    s = t.FIXED[name]
    if name == "float64":
        v: Any = data.draw(st.floats(allow_nan=False))
    else:
        bits = s.size * 8
        lo, hi = (0, 2**bits - 1) if name == "uint16" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        v = data.draw(st.integers(lo, hi))
    assert t.Reader(s.pack(v)).fixed(s, name) == v


# --- every schema at every version -------------------------------------------------------------------

_STRATS: dict[str, st.SearchStrategy[Any]] = {
    "int8": st.integers(-128, 127), "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1), "int64": st.integers(-(2**63), 2**63 - 1),
    "uint16": st.integers(0, 2**16 - 1), "float64": st.floats(allow_nan=False), "bool": st.booleans(),
    "string": st.text(max_size=8), "bytes": st.binary(max_size=8), "records": st.binary(max_size=16),
    "uuid": st.binary(min_size=16, max_size=16),
}


def body_strategy(fields: list[dict[str, Any]], v: int, flex: bool) -> st.SearchStrategy[dict[str, Any]]:
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if not (f["versions"][0] <= v <= f["versions"][1]):
            continue
        nullable = f["nullable"] is not None and f["nullable"][0] <= v <= f["nullable"][1]
        ftype = f["type"]
        if ftype == "struct":
            s: st.SearchStrategy[Any] = body_strategy(f["fields"], v, flex)
        elif ftype == "[]":
            s = st.lists(body_strategy(f["fields"], v, flex), max_size=2)
        elif ftype.startswith("[]"):
            s = st.lists(_STRATS[ftype[2:]], max_size=3)
        else:
            s = _STRATS[ftype]
        if nullable and ftype not in t.FIXED and ftype not in ("bool", "uuid"):
            s = st.one_of(st.none(), s)
        parts[f["name"]] = s
    return st.fixed_dictionaries(parts)


CASES = [(schema, v) for table in (REQUESTS, RESPONSES) for schema in table.values()
         for v in range(schema.versions[0], schema.versions[1] + 1)]


@pytest.mark.parametrize("schema,version", CASES, ids=[f"{s.name.replace(' ', '-')}-v{v}" for s, v in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_schema_round_trips_at_every_version(schema: MessageSchema, version: int, data: st.DataObject) -> None:
    body = data.draw(body_strategy(schema.fields, version, schema.flexible(version)))
    if schema.kind == "request":
        frame = encode_request(schema.api_key, version, 42, "client", body)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        header, decoded = decode_request(frame[4:])
        assert header == (schema.api_key, version, 42, "client")
    else:
        frame = encode_response(schema.api_key, version, 42, body)
        assert read_correlation_id(frame[4:]) == 42
        cid, decoded = decode_response(schema.api_key, version, frame[4:])
        assert cid == 42
    assert decoded == body


# --- golden bytes, derived by hand from the spec ------------------------------------------------------


def test_golden_api_versions_v0_request() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 0, 1, "kj", {})
    # size=12 (2+2+4+2+2) | api_key=18 | version=0 | correlation_id=1 | client_id: int16 len 2 + "kj" | empty body
    assert frame.hex() == "0000000c" "0012" "0000" "00000001" "0002" "6b6a"


def test_golden_api_versions_v3_request_is_flexible() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 3, 7, "kj",
                           {"client_software_name": "a", "client_software_version": "1"})
    # header v2: api 18, v3, cid 7, client_id non-compact "kj", 0 header tags;
    # body: compact string "a" (len+1=2), compact string "1", 0 tags
    assert frame[4:].hex() == "0012" "0003" "00000007" "0002" "6b6a" "00" "0261" "0231" "00"


def test_golden_metadata_v1_request_for_one_topic() -> None:
    frame = encode_request(ApiKey.METADATA, 1, 2, None, {"topics": [{"name": "t"}]})
    # api 3, v1, cid 2, null client_id (-1) | topics: int32 count 1, string "t"
    assert frame[4:].hex() == "0003" "0001" "00000002" "ffff" "00000001" "0001" "74"


def test_golden_produce_v3_request() -> None:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\xab\xcd"}]}]}
    frame = encode_request(ApiKey.PRODUCE, 3, 9, "c", body)
    # api 0 v3 cid 9 client "c" | transactional_id null | acks -1 | timeout 1000 | 1 topic "t" | 1 partition
    # index 0 | records: int32 length 2 + abcd
    assert frame[4:].hex() == ("0000" "0003" "00000009" "000163" "ffff" "ffff" "000003e8"
                               "00000001" "000174" "00000001" "00000000" "00000002" "abcd")


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    frame = encode_response(ApiKey.API_VERSIONS, 3, 5, {"error_code": 0, "api_keys": []})
    # correlation id, then straight into the body: no header tag byte
    assert frame[4:10].hex() == "00000005" "0000"


# --- versions -------------------------------------------------------------------------------------------


def test_choose_version_picks_the_highest_common_one() -> None:
    assert choose_version(ApiKey.PRODUCE, (3, 11)) == SUPPORTED_VERSIONS[ApiKey.PRODUCE][1] == 9
    assert choose_version(ApiKey.METADATA, (0, 4)) == 4
    assert choose_version(ApiKey.INIT_PRODUCER_ID, (0, 5)) == 4
    with pytest.raises(UnsupportedVersionError, match="no common version of PRODUCE.*0-9.*10-12"):
        choose_version(ApiKey.PRODUCE, (10, 12))


def test_usable_ranges_match_sources_md() -> None:
    assert SUPPORTED_VERSIONS == {
        ApiKey.PRODUCE: (0, 9), ApiKey.FETCH: (0, 11), ApiKey.LIST_OFFSETS: (0, 8), ApiKey.METADATA: (0, 9),
        ApiKey.FIND_COORDINATOR: (0, 2), ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (0, 3), ApiKey.DELETE_TOPICS: (1, 4), ApiKey.INIT_PRODUCER_ID: (0, 4),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5), ApiKey.END_TXN: (0, 2), ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_CLUSTER: (0, 0),
    }


# --- bad input ----------------------------------------------------------------------------------------


def _metadata_response_frame() -> bytes:
    return encode_response(ApiKey.METADATA, 9, 3, {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}], "cluster_id": "c",
        "controller_id": 1,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "leader_id": 1, "replica_nodes": [1],
                                                 "isr_nodes": [1]}]}],
    })


def test_truncation_at_every_cut_point_is_a_protocol_error() -> None:
    payload = _metadata_response_frame()[4:]
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            decode_response(ApiKey.METADATA, 9, payload[:cut])


def test_truncated_message_names_the_field() -> None:
    payload = _metadata_response_frame()[4:]
    with pytest.raises(ProtocolError, match=r"truncated Metadata response v9: needed 4 bytes for .*throttle_time_ms"):
        decode_response(ApiKey.METADATA, 9, payload[:6])


def test_impossible_lengths_are_refused_before_allocating() -> None:
    # Metadata v1 response: correlation id, then a broker array claiming two billion entries.
    with pytest.raises(ProtocolError, match="claims 2000000000 elements"):
        decode_response(ApiKey.METADATA, 1, struct.pack(">ii", 1, 2_000_000_000))
    with pytest.raises(ProtocolError, match="invalid array length -5"):
        decode_response(ApiKey.METADATA, 1, struct.pack(">ii", 1, -5))


def test_unknown_api_and_unsupported_version() -> None:
    with pytest.raises(ProtocolError, match="unknown or unsupported api key 999"):
        encode_request(999, 0, 1, None, {})
    with pytest.raises(UnsupportedVersionError, match="unsupported version 12 of Produce request"):
        encode_request(ApiKey.PRODUCE, 12, 1, None, {})
    with pytest.raises(ProtocolError, match="unknown or unsupported api key"):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


def test_trailing_garbage_is_reported() -> None:
    payload = _metadata_response_frame()[4:] + b"\x00"
    with pytest.raises(ProtocolError, match="1 unexpected bytes"):
        decode_response(ApiKey.METADATA, 9, payload)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CASES), st.binary(max_size=200))
def test_random_bytes_only_ever_raise_protocol_error(case: tuple[MessageSchema, int], data: bytes) -> None:
    schema, version = case
    try:
        if schema.kind == "request":
            decode_request(struct.pack(">hhi", schema.api_key, version, 1) + data)
        else:
            decode_response(schema.api_key, version, data)
    except ProtocolError:
        pass


def test_a_misspelt_field_is_an_error_not_a_silent_default() -> None:
    # Fetch v4 calls the wait "max_wait" (Kafka renamed it later): a wrong key must not become 0 silently.
    with pytest.raises(ProtocolError, match="unknown field.*max_wait_ms.*max_wait"):
        encode_request(ApiKey.FETCH, 4, 1, None, {"max_wait_ms": 500})
    # A field Kafka defines for a newer version than ours is known, merely not encoded.
    frame = encode_request(ApiKey.METADATA, 9, 1, None, {"topics": [{"name": "t", "topic_id": bytes(16)}]})
    assert decode_request(frame[4:])[1]["topics"] == [{"name": "t"}]
