"""The Confluent wire format: a magic byte, the schema's id (magic 0: 4 bytes big-endian) or GUID (magic 1:
16 bytes), for Protobuf the message-index list, then the payload. Or the id in a `__key_schema_id` /
`__value_schema_id` header and the bare payload. Pure functions: no I/O."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkajet.errors import SerializationError

MAGIC_ID = 0
MAGIC_GUID = 1
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"
_ID = struct.Struct(">bI")
_MAX_INDEXES = 100_000  # confluent's bound: a garbage varint must not allocate a huge list


@dataclass(frozen=True)
class SchemaRef:
    """Where a payload's schema is found: an id (magic 0) or a GUID (magic 1); Protobuf's message indexes."""

    id: int | None = None
    guid: str | None = None
    message_indexes: tuple[int, ...] | None = None

    def describe(self) -> str:
        return f"schema id {self.id}" if self.id is not None else f"schema guid {self.guid}"


def frame(schema_id: int, payload: bytes, message_indexes: Sequence[int] | None = None) -> bytes:
    """Magic 0, the id, the message indexes if given (Protobuf), the payload."""
    head = _ID.pack(MAGIC_ID, schema_id)
    if message_indexes is None:
        return head + payload
    return head + encode_message_indexes(message_indexes) + payload


def frame_guid(guid: str, payload: bytes, message_indexes: Sequence[int] | None = None) -> bytes:
    head = bytes((MAGIC_GUID,)) + uuid.UUID(guid).bytes
    return head + (b"" if message_indexes is None else encode_message_indexes(message_indexes)) + payload


def schema_id_header_value(schema_id: int | None = None, guid: str | None = None) -> bytes:
    """A header's value: magic 1 and the GUID (what confluent's header serializer writes), or magic 0 and the id."""
    if guid is not None:
        return bytes((MAGIC_GUID,)) + uuid.UUID(guid).bytes
    if schema_id is None:
        raise ValueError("a schema id or guid is needed")
    return _ID.pack(MAGIC_ID, schema_id)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _write_varint(out: bytearray, n: int) -> None:
    n = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """Zig-zag varints: the count, then each index; [0] (the first message) is the single byte 0."""
    if not indexes:
        raise ValueError("message indexes must name at least one message")
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(out, len(indexes))
    for i in indexes:
        _write_varint(out, i)
    return bytes(out)


def _read_varint(data: bytes | memoryview, pos: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise SerializationError(f"{what}: the message-index list is truncated")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        if shift > 63:
            raise SerializationError(f"{what}: a message index is not a valid varint")


def decode_message_indexes(data: bytes | memoryview, pos: int, what: str) -> tuple[tuple[int, ...], int]:
    count, pos = _read_varint(data, pos, what)
    if count == 0:
        return (0,), pos
    if not 0 < count <= _MAX_INDEXES:
        raise SerializationError(f"{what}: message-index count {count} is invalid (corrupt Protobuf framing?)")
    out = []
    for _ in range(count):
        i, pos = _read_varint(data, pos, what)
        out.append(i)
    return tuple(out), pos


def _parse_head(data: bytes | memoryview, what: str) -> tuple[SchemaRef, int]:
    if len(data) < 1:
        raise SerializationError(f"{what}: empty payload, not in the Schema Registry wire format")
    magic = data[0]
    if magic == MAGIC_ID:
        if len(data) < 5:
            raise SerializationError(
                f"{what}: {len(data)} bytes, too short for the Schema Registry framing (magic byte + 4-byte id)")
        return SchemaRef(id=_ID.unpack_from(data)[1]), 5
    if magic == MAGIC_GUID:
        if len(data) < 17:
            raise SerializationError(
                f"{what}: {len(data)} bytes, too short for the Schema Registry framing (magic 1 + 16-byte guid)")
        return SchemaRef(guid=str(uuid.UUID(bytes=bytes(data[1:17])))), 17
    raise SerializationError(
        f"{what}: unknown magic byte {magic} (expected 0 or 1): this data was not written by a Schema Registry "
        f"serializer (plain bytes, JSON or another format?)")


def _header(headers: Any, name: str) -> bytes | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found = None
    for k, v in items:
        if k == name:
            found = v  # the last one wins, as Java's Headers.lastHeader
    if isinstance(found, str):
        found = found.encode("latin-1")
    return found


def unframe(data: bytes | memoryview, *, is_key: bool = False, headers: Any = None, protobuf: bool = False,
            what: str = "record") -> tuple[SchemaRef, memoryview]:
    """The schema reference and the payload: from the `__key_schema_id` / `__value_schema_id` header if the
    record has one (then `data` is the bare payload), else from the framing at the front of `data`."""
    mv = memoryview(data)
    header = _header(headers, KEY_SCHEMA_ID_HEADER if is_key else VALUE_SCHEMA_ID_HEADER)
    if header is not None:
        hv = memoryview(header)
        ref, pos = _parse_head(hv, f"{what} (schema id header)")
        if protobuf:
            idx, pos = decode_message_indexes(hv, pos, what)
            ref = SchemaRef(ref.id, ref.guid, idx)
        return ref, mv
    ref, pos = _parse_head(mv, what)
    if protobuf:
        idx, pos = decode_message_indexes(mv, pos, what)
        ref = SchemaRef(ref.id, ref.guid, idx)
    return ref, mv[pos:]
