"""Every schema, request and response, at every supported version: round trips, truncation, fuzzing.

Bodies are generated from the generated schema table itself. The expected result of a round trip is worked
out here from the table with the defaulting rule of the spec (JSON default, else the type's zero, None where
nullable), independently of kafkajet.protocol.schema, so a wrong version filter or default shows up.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet.errors import ProtocolError
from kafkajet.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_correlation_id,
)
from kafkajet.protocol._schemas import SCHEMAS
from kafkajet.protocol.schema import FieldPlan, StructPlan, message_plan

ROOT = Path(__file__).resolve().parents[2]
# A verbatim copy of Kafka's JSON message definitions (shared/kafka-protocol/message, see SOURCES.md beside it),
# kept with the tests as errors.tsv is, so the up-to-date check runs on every clone instead of skipping.
MESSAGES = Path(__file__).resolve().parent / "data" / "kafka-protocol" / "message"
MESSAGES_NEXT = MESSAGES.parent / "message-next"
# Later versions folded from Kafka 4.4's client jar by tools/jar_messages.py; they supersede the copies above.
MESSAGES_JAR = MESSAGES.parent / "message-4.4.0-jar"

CASES = [(api, kind, v) for api, entry in SCHEMAS.items() for kind in ("request", "response")
         for v in range(entry["versions"][0], entry["versions"][1] + 1)]
CASE_IDS = [f"{SCHEMAS[api]['name']}-{kind}-v{v}" for api, kind, v in CASES]

INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def in_range(spec: str | None, v: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return int(spec[:-1]) <= v
    lo, _, hi = spec.partition("-")
    return int(lo) <= v <= int(hi or lo)


def is_flexible(api: int, kind: str, v: int) -> bool:
    return in_range(SCHEMAS[api][kind]["flexible"], v)


# --- bodies from the table --------------------------------------------------------------------------------


def _scalar(ftype: str) -> st.SearchStrategy[Any]:
    if ftype in INTS:
        bits = INTS[ftype]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return {
        "uint16": st.integers(0, 2**16 - 1), "uint32": st.integers(0, 2**32 - 1),
        "float64": st.floats(allow_nan=False), "bool": st.booleans(), "string": st.text(max_size=6),
        "bytes": st.binary(max_size=6), "records": st.binary(max_size=12),
        "uuid": st.binary(min_size=16, max_size=16),
    }[ftype]


def value_strategy(spec: dict[str, Any], v: int) -> st.SearchStrategy[Any]:
    ftype: str = spec["type"]
    if ftype.startswith("[]"):
        elem = ftype[2:]
        inner = body_strategy(spec["fields"], v) if "fields" in spec else _scalar(elem)
        s: st.SearchStrategy[Any] = st.lists(inner, max_size=2 if "fields" in spec else 3)
    elif "fields" in spec:
        s = body_strategy(spec["fields"], v)
    else:
        s = _scalar(ftype)
    if in_range(spec.get("nullable"), v):
        s = st.one_of(st.none(), s)
    return s


def body_strategy(specs: list[dict[str, Any]], v: int) -> st.SearchStrategy[dict[str, Any]]:
    """Any subset of the fields present at v, plus now and then fields of other versions (to be ignored)."""
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for spec in specs:
        optional[spec["name"]] = value_strategy(spec, v) if in_range(spec["versions"], v) else st.integers()
    return st.fixed_dictionaries({}, optional=optional)


def zero(spec: dict[str, Any], v: int) -> Any:
    ftype: str = spec["type"]
    if in_range(spec.get("nullable"), v) and (ftype in ("string", "bytes", "records") or "fields" in spec
                                              or ftype.startswith("[]")):
        return None
    if ftype.startswith("[]"):
        return []
    if "fields" in spec:
        return expected_body(spec["fields"], {}, v)
    return {"bool": False, "float64": 0.0, "string": "", "bytes": b"", "records": b"",
            "uuid": bytes(16)}.get(ftype, 0)


def default(spec: dict[str, Any], v: int) -> Any:
    if "default" in spec and (spec["default"] is not None or in_range(spec.get("nullable"), v)):
        return spec["default"]
    return zero(spec, v)


def expected_value(spec: dict[str, Any], value: Any, v: int) -> Any:
    if value is None or "fields" not in spec:
        return value
    if spec["type"].startswith("[]"):
        return [expected_body(spec["fields"], item, v) for item in value]
    return expected_body(spec["fields"], value, v)


def expected_body(specs: list[dict[str, Any]], body: dict[str, Any], v: int) -> dict[str, Any]:
    return {spec["name"]: expected_value(spec, body[spec["name"]], v) if spec["name"] in body else default(spec, v)
            for spec in specs if in_range(spec["versions"], v)}


def rich_value(spec: dict[str, Any], v: int) -> Any:
    """A value unlike the default, so that every field and every tagged field is on the wire."""
    ftype: str = spec["type"]
    if ftype.startswith("[]"):
        return [rich_body(spec["fields"], v) if "fields" in spec else rich_value({"type": ftype[2:]}, v)]
    if "fields" in spec:
        return rich_body(spec["fields"], v)
    return {"bool": True, "float64": 0.5, "string": "ab", "bytes": b"xy", "records": b"rec",
            "uuid": bytes(range(16))}.get(ftype, 7)


def rich_body(specs: list[dict[str, Any]], v: int) -> dict[str, Any]:
    return {spec["name"]: rich_value(spec, v) for spec in specs if in_range(spec["versions"], v)}


def encode(api: int, kind: str, v: int, body: dict[str, Any]) -> bytes:
    if kind == "request":
        return encode_request(api, v, 42, "client", body)
    return encode_response(api, v, 42, body)


def decode(api: int, kind: str, v: int, payload: bytes | memoryview) -> dict[str, Any]:
    if kind == "request":
        header, body = decode_request(payload)
        assert tuple(header) == (api, v, 42, "client")
        return body
    cid, body = decode_response(api, v, payload)
    assert cid == 42 == read_correlation_id(payload)
    return body


# --- round trips -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("api,kind,version", CASES, ids=CASE_IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_schema_round_trips_at_every_version(api: int, kind: str, version: int, data: st.DataObject) -> None:
    specs = SCHEMAS[api][kind]["fields"]
    body = data.draw(body_strategy(specs, version))
    frame = encode(api, kind, version, body)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    decoded = decode(api, kind, version, memoryview(frame)[4:])
    assert decoded == expected_body(specs, body, version)
    assert encode(api, kind, version, decoded) == frame  # decoding loses nothing the wire carries


@pytest.mark.parametrize("api,kind,version", CASES, ids=CASE_IDS)
def test_a_body_with_every_field_set_round_trips(api: int, kind: str, version: int) -> None:
    body = rich_body(SCHEMAS[api][kind]["fields"], version)
    frame = encode(api, kind, version, body)
    assert decode(api, kind, version, frame[4:]) == body


# --- truncation and garbage ------------------------------------------------------------------------------


@pytest.mark.parametrize("api,kind,version", CASES, ids=CASE_IDS)
def test_every_truncation_of_a_valid_frame_is_a_protocol_error(api: int, kind: str, version: int) -> None:
    payload = encode(api, kind, version, rich_body(SCHEMAS[api][kind]["fields"], version))[4:]
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            decode(api, kind, version, payload[:cut])


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(CASES), st.binary(max_size=120))
def test_random_bytes_only_ever_raise_protocol_error(case: tuple[int, str, int], data: bytes) -> None:
    api, kind, version = case
    try:
        if kind == "request":
            decode_request(struct.pack(">hhih", api, version, 1, -1) + data)
        else:
            decode_response(api, version, data)
    except ProtocolError:
        pass


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.data())
def test_corrupted_valid_frames_only_ever_raise_protocol_error(case: tuple[int, str, int],
                                                               data: st.DataObject) -> None:
    # Random bytes rarely get past the first length; damaging a real frame reaches the deep fields.
    api, kind, version = case
    payload = bytearray(encode(api, kind, version, rich_body(SCHEMAS[api][kind]["fields"], version))[4:])
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(payload) - 1))
        payload[pos] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, payload[pos] ^ 1]))
    try:
        if kind == "request":
            decode_request(bytes(payload))
        else:
            decode_response(api, version, bytes(payload))
    except ProtocolError:
        pass


# --- the table itself ------------------------------------------------------------------------------------


def test_usable_ranges_match_sources_md() -> None:
    assert SUPPORTED_VERSIONS == {
        ApiKey.PRODUCE: (3, 13), ApiKey.FETCH: (0, 11), ApiKey.LIST_OFFSETS: (0, 8), ApiKey.METADATA: (0, 13),
        ApiKey.OFFSET_COMMIT: (0, 9), ApiKey.OFFSET_FETCH: (0, 9),
        ApiKey.FIND_COORDINATOR: (0, 2), ApiKey.LIST_GROUPS: (0, 5), ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 5),
        ApiKey.CREATE_TOPICS: (0, 3), ApiKey.DELETE_TOPICS: (1, 4),
        # SOURCES.md says 0-2; extended on purpose to the request's 0-4 (see tools/gen_protocol.py).
        ApiKey.INIT_PRODUCER_ID: (0, 4),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5), ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 5), ApiKey.TXN_OFFSET_COMMIT: (0, 6), ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_CLUSTER: (0, 0),
        # From Kafka 4.4's client jar only (SOURCES.md, message-4.4.0-jar).
        ApiKey.DESCRIBE_GROUPS: (0, 6), ApiKey.DESCRIBE_CONFIGS: (1, 4), ApiKey.DELETE_GROUPS: (0, 3),
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0), ApiKey.PUSH_TELEMETRY: (0, 0),
    }
    assert set(SCHEMAS) == {int(k) for k in ApiKey}


# First flexible version of request / response, from the SOURCES.md table (None = never flexible).
FLEXIBLE_FROM = {
    0: (9, 9), 1: (None, 12), 2: (6, 6), 3: (9, 9), 8: (8, 8), 9: (6, 6), 10: (3, None), 16: (3, 3), 17: (None, None), 18: (3, 3), 19: (5, None),
    15: (5, 5), 20: (4, 4), 22: (2, 2), 24: (3, 3), 25: (3, 3), 26: (3, 3), 28: (3, 3), 32: (4, 4), 36: (2, 2),
    42: (2, 2), 60: (0, 0),
    71: (0, 0), 72: (0, 0),
}


@pytest.mark.parametrize("api,kind,version", CASES, ids=CASE_IDS)
def test_flexible_versions_match_sources_md(api: int, kind: str, version: int) -> None:
    first = FLEXIBLE_FROM[api][0 if kind == "request" else 1]
    assert message_plan(api, kind, version).flexible == (first is not None and version >= first)


def _arrays(plan: StructPlan) -> list[FieldPlan]:
    found: list[FieldPlan] = []
    for f in plan.fields + plan.tagged:
        if f.type == "array":
            found.append(f)
        for sub in (f.struct, f.element.struct if f.element else None):
            if sub is not None:
                found.extend(_arrays(sub))
    return found


@pytest.mark.parametrize("api,kind,version", CASES, ids=CASE_IDS)
def test_no_array_element_can_be_empty(api: int, kind: str, version: int) -> None:
    # The decoder refuses counts larger than the bytes left, which is only sound if every element takes a byte.
    for f in _arrays(message_plan(api, kind, version).body):
        assert f.element_min_size >= 1, f.path


def test_generated_table_is_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location("gen_protocol", ROOT / "tools" / "gen_protocol.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    rendered = gen.render(gen.build_table(MESSAGES, MESSAGES_NEXT, MESSAGES_JAR), MESSAGES, MESSAGES_NEXT, MESSAGES_JAR)
    assert rendered == (ROOT / "kafkajet" / "protocol" / "_schemas.py").read_text()
