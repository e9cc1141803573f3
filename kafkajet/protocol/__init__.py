"""A sans-I/O codec for the Kafka wire protocol: bytes in, dicts out, and back. No sockets, no clock.

Schemas come from Kafka's own JSON message definitions (tools/gen_protocol.py -> _schemas.py).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any, NamedTuple

from kafkajet.errors import ProtocolError, UnsupportedVersionError
from kafkajet.protocol import types as _t
from kafkajet.protocol._schemas import SCHEMAS
from kafkajet.protocol.codec import REQUESTS, RESPONSES


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    END_TXN = 26
    SASL_AUTHENTICATE = 36
    DESCRIBE_CLUSTER = 60


SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {ApiKey(k): v["versions"] for k, v in SCHEMAS.items()}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">hhi")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _api_name(api: int) -> str:
    try:
        return ApiKey(api).name
    except ValueError:
        return f"api key {api}"


def _schema(table: dict[int, Any], api: int) -> Any:
    schema = table.get(api)
    if schema is None:
        raise ProtocolError(f"unknown or unsupported api key {api}")
    return schema


def choose_version(api: int, broker_range: tuple[int, int] | None) -> int:
    """The highest version both sides support; with no broker range known, our own highest."""
    ours = SUPPORTED_VERSIONS.get(api)  # type: ignore[call-overload]
    if ours is None:
        raise UnsupportedVersionError(f"this client does not implement {_api_name(api)}")
    if broker_range is None:
        return int(ours[1])
    lo, hi = max(ours[0], broker_range[0]), min(ours[1], broker_range[1])
    if lo > hi:
        raise UnsupportedVersionError(
            f"no common version of {_api_name(api)}: this client supports {ours[0]}-{ours[1]}, "
            f"the broker {broker_range[0]}-{broker_range[1]}")
    return int(hi)


def _response_header_flexible(api: int, version: int) -> bool:
    # ApiVersions responses always use header v0, so a client can read them whatever version it sent.
    return api != ApiKey.API_VERSIONS and RESPONSES[api].flexible(version)


def encode_request(api: int, version: int, correlation_id: int, client_id: str | None, body: dict[str, Any]) -> bytes:
    """The whole request frame, 4-byte size prefix included."""
    schema = _schema(REQUESTS, api)
    parts: list[Any] = [b"", _REQ_HEAD.pack(api, version, correlation_id), _t.string(client_id, False)]
    if schema.flexible(version):
        parts.append(b"\x00")  # request header v2: no tagged fields
    schema.encode(body, version, parts)
    parts[0] = _I32.pack(sum(len(p) for p in parts))
    return b"".join(parts)


def read_correlation_id(payload: bytes | memoryview) -> int:
    if len(payload) < 4:
        raise ProtocolError(f"truncated response: {len(payload)} bytes, not even a correlation id")
    return int(_I32.unpack_from(payload, 0)[0])


def decode_response(api: int, version: int, payload: bytes | memoryview) -> tuple[int, dict[str, Any]]:
    """(correlation_id, body) from a response frame without its size prefix."""
    schema = _schema(RESPONSES, api)
    r = _t.Reader(payload, f"{schema.name} v{version}")
    correlation_id = int(r.fixed(_I32, "correlation_id"))
    if _response_header_flexible(api, version):
        _skip_tags(r)
    body = schema.decode(r, version)
    if r.pos != r.end:
        raise ProtocolError(f"{schema.name} v{version}: {r.end - r.pos} unexpected bytes after the body")
    return correlation_id, body


def decode_request(payload: bytes | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """The server side: header and body of a request frame without its size prefix."""
    r = _t.Reader(payload, "request header")
    api = int(r.fixed(_I16, "api_key"))
    version = int(r.fixed(_I16, "api_version"))
    correlation_id = int(r.fixed(_I32, "correlation_id"))
    client_id = r.string(False, True, "client_id")
    schema = _schema(REQUESTS, api)
    header = RequestHeader(api, version, correlation_id, client_id)
    schema.check_version(version)
    r.context = f"{schema.name} v{version}"
    if schema.flexible(version):
        _skip_tags(r)
    body = schema.decode(r, version)
    if r.pos != r.end:
        raise ProtocolError(f"{schema.name} v{version}: {r.end - r.pos} unexpected bytes after the body")
    return header, body


def encode_response(api: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """The whole response frame, 4-byte size prefix included (server side)."""
    schema = _schema(RESPONSES, api)
    parts: list[Any] = [b"", _I32.pack(correlation_id)]
    if _response_header_flexible(api, version):
        parts.append(b"\x00")
    schema.encode(body, version, parts)
    parts[0] = _I32.pack(sum(len(p) for p in parts))
    return b"".join(parts)


def _skip_tags(r: _t.Reader) -> None:
    for _ in range(r.uvarint("header tagged field count")):
        r.uvarint("header tag")
        size = r.uvarint("header tag size")
        r.raw(size, "header tagged field")


__all__ = [
    "ApiKey", "RequestHeader", "SUPPORTED_VERSIONS", "choose_version", "decode_request", "decode_response",
    "encode_request", "encode_response", "read_correlation_id",
]
