"""Cross-checks against kafka-python, an independent implementation of the same protocol.

* kafka.protocol.old holds hand-written structs per API version (non-flexible versions, and ApiVersions v3-4):
  values are generated from THEIR struct definitions, encoded by kafka-python, decoded by kafkajet, compared
  field by field in wire order (so no name mapping is needed), and re-encoded by kafkajet byte for byte.
* kafka.protocol's newer message classes interpret their own copies of Kafka's JSON with their own code:
  they decode kafkajet's frames (flexible versions included) and must find the same values and re-encode
  the same bytes.
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet.protocol import ApiKey, decode_request, decode_response, encode_request, encode_response
from kafkajet.protocol import types as t
from kafkajet.protocol._schemas import SCHEMAS
from kafkajet.protocol.schema import StructPlan, message_plan

old = importlib.import_module("kafka.protocol.old")  # a test dependency: missing means broken, not skipped
kt = importlib.import_module("kafka.protocol.old.types")
old_api = importlib.import_module("kafka.protocol.old.api")
api_message = importlib.import_module("kafka.protocol.api_message")

from tests.unit.test_protocol_schemas import CASES, body_strategy  # noqa: E402  (the shared body generator)


def _old_classes() -> dict[tuple[int, str, int], Any]:
    found: dict[tuple[int, str, int], Any] = {}
    for info in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for name in dir(module):
            cls = getattr(module, name)
            if not (isinstance(cls, type) and issubclass(cls, old_api.RequestResponse)
                    and isinstance(getattr(cls, "API_KEY", None), int)
                    and isinstance(getattr(cls, "API_VERSION", None), int)):
                continue
            kind = "request" if cls.is_request() else "response"
            key = (cls.API_KEY, kind, cls.API_VERSION)
            if name.endswith(f"_v{cls.API_VERSION}") or key not in found:  # skip shared base classes
                found[key] = cls
    return found


OLD = _old_classes()
OLD_CASES = sorted(k for k in OLD if k[0] in SCHEMAS
                   and SCHEMAS[k[0]]["versions"][0] <= k[2] <= SCHEMAS[k[0]]["versions"][1])


def _is(typ: Any, cls: Any) -> bool:
    return typ is cls or isinstance(typ, cls) or (isinstance(typ, type) and issubclass(typ, cls))


def old_strategy(typ: Any) -> st.SearchStrategy[Any]:
    """Values for a kafka-python type, from its own definition (non-null only: nullability is ours to know)."""
    for cls, bits in ((kt.Int8, 8), (kt.Int16, 16), (kt.Int32, 32), (kt.Int64, 64)):
        if _is(typ, cls):
            return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if _is(typ, kt.Boolean):
        return st.booleans()
    if _is(typ, kt.Float64):
        return st.floats(allow_nan=False)
    if _is(typ, kt.UUID):
        return st.binary(min_size=16, max_size=16).filter(any).map(lambda b: uuid.UUID(bytes=b))
    if _is(typ, kt.String):  # CompactString too
        return st.text(max_size=5)
    if _is(typ, kt.Bytes) or _is(typ, kt.CompactBytes):
        return st.binary(max_size=8)
    if _is(typ, kt.TaggedFields):
        return st.just({})
    if _is(typ, kt.BitField):  # a set of bit numbers on kafka-python's side, an int32 on the wire
        return st.sets(st.integers(0, 31))
    if _is(typ, kt.Schema):
        return st.tuples(*[old_strategy(f) for f in typ.fields])
    if _is(typ, kt.Array):  # CompactArray too
        return st.lists(old_strategy(typ.array_of), max_size=2)
    raise NotImplementedError(f"no strategy for kafka-python type {typ!r}")


def from_old(typ: Any, value: Any) -> Any:
    """A kafka-python value in kafkajet's terms, positionally: structs become tuples without their tag buffer."""
    if _is(typ, kt.Schema):
        return tuple(from_old(f, v) for f, v in zip(typ.fields, value, strict=True) if not _is(f, kt.TaggedFields))
    if _is(typ, kt.Array):
        return [from_old(typ.array_of, v) for v in value]
    if isinstance(value, uuid.UUID):
        return value.bytes
    if _is(typ, kt.BitField):
        bits = sum(1 << b for b in value)
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    return value


def positional(plan: StructPlan, body: dict[str, Any]) -> tuple[Any, ...]:
    """A kafkajet body in wire order, tagged fields left out (kafka-python's old structs do not model them)."""
    out: list[Any] = []
    for f in plan.fields:
        value = body[f.name]
        if f.type == "struct" and f.struct is not None:
            value = positional(f.struct, value)
        elif f.type == "array" and f.element is not None and f.element.struct is not None and value is not None:
            value = [positional(f.element.struct, v) for v in value]
        out.append(value)
    return tuple(out)


def flat(value: Any) -> Any:
    """Both sides with one-field structs unwrapped: kafka-python writes Metadata v0's topics as Array(String)."""
    if isinstance(value, tuple):
        items = tuple(flat(v) for v in value)
        return items[0] if len(items) == 1 else items
    if isinstance(value, list):
        return [flat(v) for v in value]
    return value


def test_kafka_python_covers_a_useful_share() -> None:
    apis = {api for api, _, _ in OLD_CASES}
    assert {0, 1, 2, 3, 18, 19, 22}.issubset(apis), apis
    assert len(OLD_CASES) >= 80


@pytest.mark.parametrize("api,kind,version", OLD_CASES,
                         ids=[f"{SCHEMAS[a]['name']}-{k}-v{v}" for a, k, v in OLD_CASES])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_frames_decode_and_re_encode_identically(api: int, kind: str, version: int,
                                                             data: st.DataObject) -> None:
    cls = OLD[(api, kind, version)]
    values = data.draw(old_strategy(cls.SCHEMA))
    message = cls(*values)
    message.with_header(correlation_id=11, client_id="kj")
    frame = message.encode(header=True, framed=True)
    plan = message_plan(api, kind, version)
    if kind == "request":
        header, body = decode_request(frame[4:])
        assert tuple(header) == (api, version, 11, "kj")
        assert encode_request(api, version, 11, "kj", body) == frame
    else:
        cid, body = decode_response(api, version, frame[4:])
        assert cid == 11
        assert encode_response(api, version, 11, body) == frame
    assert flat(positional(plan.body, body)) == flat(from_old(cls.SCHEMA, values))


@given(st.integers(0, 2**31 - 1))
def test_unsigned_varint_agrees_with_kafka_python(n: int) -> None:
    assert t.uvarint(n) == kt.UnsignedVarInt32.encode(n)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
def test_zigzag_varints_agree_with_kafka_python(n: int, m: int) -> None:
    assert t.varint(n) == kt.VarInt32.encode(n)
    assert t.varlong(m) == kt.VarInt64.encode(m)


# --- kafka-python's JSON-driven message classes ---------------------------------------------------------


def _new_classes() -> dict[tuple[int, str], Any]:
    found: dict[tuple[int, str], Any] = {}
    modules = [importlib.import_module("kafka.protocol.sasl")]
    for package in ("metadata", "producer", "consumer", "admin"):
        pkg = importlib.import_module(f"kafka.protocol.{package}")
        modules += [importlib.import_module(f"kafka.protocol.{package}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    for module in modules:
        for name in dir(module):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, api_message.ApiMessage) and cls is not api_message.ApiMessage:
                found[(cls.API_KEY, cls.type)] = cls
    return found


NEW = _new_classes()
NEW_CASES = [(api, kind, v) for api, kind, v in CASES
             if (api, kind) in NEW and v <= NEW[(api, kind)].max_version]


def values_only(value: Any) -> Any:
    """Field values in wire order without names: kafka-python's JSON copies are of other Kafka releases, which
    renamed some fields (Fetch's max_wait -> max_wait_ms, topic -> name) without changing the wire format."""
    if isinstance(value, dict):
        return tuple(values_only(v) for v in value.values())
    if isinstance(value, list):
        return [values_only(v) for v in value]
    if isinstance(value, set):  # kafka-python patches authorized-operations int32s into sets of bit numbers
        bits = sum(1 << b for b in value)
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


def same(theirs: Any, ours: Any) -> bool:
    if isinstance(theirs, tuple | list) and type(theirs) is type(ours):
        return len(theirs) == len(ours) and all(same(a, b) for a, b in zip(theirs, ours, strict=True))
    if theirs is None and ours == -(2**31):
        return True  # kafka-python reads the authorized-operations sentinel (only bit 31 set) as None
    if theirs is None and ours == bytes(16):
        return True  # kafka-python reads the zero UUID (Kafka's Uuid.ZERO_UUID, "no id") as None
    if theirs is None and isinstance(ours, tuple) and ours and all(v == -1 for v in ours):
        return True  # an absent tagged struct (Produce v10's current_leader): None there, its defaults here
    return bool(theirs == ours)


def test_kafka_python_json_classes_cover_the_flexible_versions() -> None:
    flexible = {(api, kind, v) for api, kind, v in NEW_CASES if message_plan(api, kind, v).flexible}
    assert {(0, "request", 9), (3, "response", 9), (18, "request", 3), (60, "response", 0)} <= flexible
    assert len(NEW_CASES) >= 140


@pytest.mark.parametrize("api,kind,version", NEW_CASES,
                         ids=[f"{SCHEMAS[a]['name']}-{k}-v{v}" for a, k, v in NEW_CASES])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_json_classes_read_our_frames(api: int, kind: str, version: int, data: st.DataObject) -> None:
    body = data.draw(body_strategy(SCHEMAS[api][kind]["fields"], version))
    if api == ApiKey.API_VERSIONS and kind == "response":
        body["error_code"] = 0  # KIP-511: an ApiVersions error response is read as v0, whatever was asked
    if kind == "request":
        frame = encode_request(api, version, 11, "kj", body)
        ours = decode_request(frame[4:])[1]
    else:
        frame = encode_response(api, version, 11, body)
        ours = decode_response(api, version, frame[4:])[1]
    theirs = NEW[(api, kind)].decode(frame, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == 11
    assert same(values_only(theirs.to_dict(json=False)), values_only(ours)), (theirs, ours)
    assert theirs.encode(header=True, framed=True) == frame
