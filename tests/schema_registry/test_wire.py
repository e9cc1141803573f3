"""The Confluent framing, checked against confluent-kafka's own SchemaId encoder and decoder."""

from __future__ import annotations

import io
import uuid

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from kafkajet.errors import SerializationError
from kafkajet.schema_registry.wire import (
    SchemaRef,
    encode_message_indexes,
    frame,
    frame_guid,
    schema_id_header_value,
    unframe,
)


@given(st.integers(0, 2**31 - 1), st.binary(max_size=20))
def test_frame_is_magic_zero_and_big_endian_id(schema_id: int, payload: bytes) -> None:
    framed = frame(schema_id, payload)
    assert framed == SchemaId("AVRO", schema_id).id_to_bytes() + payload
    ref, rest = unframe(framed)
    assert ref == SchemaRef(id=schema_id) and bytes(rest) == payload


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=6), st.integers(0, 2**31 - 1))
def test_message_indexes_match_confluents_encoder_and_decoder(indexes: list[int], schema_id: int) -> None:
    ours = frame(schema_id, b"P", indexes)
    theirs = SchemaId("PROTOBUF", schema_id, message_indexes=indexes).id_to_bytes() + b"P"
    assert ours == theirs
    ref, rest = unframe(ours, protobuf=True)
    assert ref.message_indexes == tuple(indexes) and bytes(rest) == b"P"
    decoded = SchemaId("PROTOBUF")
    decoded.from_bytes(io.BytesIO(ours))
    assert decoded.message_indexes == indexes


def test_first_message_is_the_single_byte_zero() -> None:
    assert encode_message_indexes([0]) == b"\x00"
    assert encode_message_indexes([1]) == b"\x02\x02"  # count 1, index 1, both zig-zag


def test_magic_one_guid_frame_is_read() -> None:
    guid = str(uuid.uuid4())
    ref, rest = unframe(frame_guid(guid, b"xyz"))
    assert ref == SchemaRef(guid=guid) and bytes(rest) == b"xyz"
    theirs = SchemaId("AVRO", guid=guid).guid_to_bytes() + b"xyz"
    assert frame_guid(guid, b"xyz") == theirs


def test_header_form_leaves_the_payload_whole() -> None:
    guid = str(uuid.uuid4())
    headers = [("other", b"1"), ("__value_schema_id", schema_id_header_value(guid=guid))]
    ref, rest = unframe(b"\x02x", headers=headers)
    assert ref.guid == guid and bytes(rest) == b"\x02x"
    # The key's header is another one: a value header does not apply to the key.
    with pytest.raises(SerializationError, match="unknown magic byte 2"):
        unframe(b"\x02x", headers=headers, is_key=True)
    ref, _ = unframe(b"x", headers={"__key_schema_id": schema_id_header_value(7)}, is_key=True)
    assert ref.id == 7


@pytest.mark.parametrize(("data", "message"), [
    (b"", "empty payload"),
    (b"\x00\x00\x01", "too short"),
    (b"{\"a\": 1}", "unknown magic byte 123"),
    (b"\x01" + b"\x00" * 5, "too short"),
])
def test_unframed_input_is_named(data: bytes, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        unframe(data, what="value of record t-0@5")


def test_truncated_message_indexes() -> None:
    with pytest.raises(SerializationError, match="truncated"):
        unframe(b"\x00\x00\x00\x00\x01\x04\x02", protobuf=True)
    with pytest.raises(SerializationError, match="count"):
        unframe(b"\x00\x00\x00\x00\x01\x01", protobuf=True)  # zig-zag -1
