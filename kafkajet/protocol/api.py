"""Frames: the size prefix, request/response headers, version choice, and the public encode/decode calls.

Header layouts (protocol-guide.md Part 3, from RequestHeader.json / ResponseHeader.json):
* request header v1 = api_key int16, api_version int16, correlation_id int32, client_id nullable string;
  v2 = v1 + tagged fields, used when the request version is flexible. client_id stays a non-compact string
  in v2 (its own "flexibleVersions": "none").
* response header v0 = correlation_id int32; the flexible form adds tagged fields. ApiVersions responses
  always use v0 (KIP-511), so a client can read one whatever version it sent.
"""

from __future__ import annotations

import logging
from enum import IntEnum
from typing import Any, NamedTuple

import kafkajet.protocol.types as t
from kafkajet.errors import ProtocolError, UnsupportedVersionError
from kafkajet.protocol._schemas import SCHEMAS
from kafkajet.protocol.codec import decode_struct, decode_tagged, encode_struct
from kafkajet.protocol.schema import MessagePlan, message_plan

log = logging.getLogger(__name__)


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    DELETE_GROUPS = 42
    DESCRIBE_CLUSTER = 60
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72


# This client's usable (min, max) version per API: what both the request and the response definition cover.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey(api): (int(entry["versions"][0]), int(entry["versions"][1])) for api, entry in SCHEMAS.items()
}


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def api_name(api: int) -> str:
    entry = SCHEMAS.get(api)
    return str(entry["name"]) if entry is not None else f"api key {api}"


def choose_version(api: int, broker_range: tuple[int, int] | None) -> int:
    """The highest version both this client and the broker support.

    ``broker_range`` None means the broker's range is not known yet (no ApiVersions answer, or the request is
    ApiVersions itself): we use our own highest version and rely on the broker to say otherwise (KIP-511).
    UnsupportedVersionError when the ranges do not overlap or the API is not one this client implements.
    """
    ours = SUPPORTED_VERSIONS.get(api)  # type: ignore[call-overload]
    if ours is None:
        raise UnsupportedVersionError(f"{api_name(api)} is not implemented by this client")
    if broker_range is None:
        return int(ours[1])
    lo, hi = max(ours[0], broker_range[0]), min(ours[1], broker_range[1])
    if lo > hi:
        raise UnsupportedVersionError(
            f"no common version of {api_name(api)}: this client supports {ours[0]}-{ours[1]}, "
            f"the broker {broker_range[0]}-{broker_range[1]}")
    return int(hi)


# Pieces at least this long (record batches) stay separate buffers in a gathered frame instead of being
# copied into it: the socket's sendmsg() takes them as they are.
_GATHER_MIN = 4096


def _frame(parts: list[Any]) -> bytes:
    """Join the parts behind a 4-byte size prefix; parts[0] is a placeholder for it."""
    _size_prefix(parts)
    return b"".join(parts)


def _size_prefix(parts: list[Any]) -> None:
    # len() is the byte count of every part: bytes, bytearrays and one-dimensional byte views (a sealed
    # batch is a view of its bytearray).
    size = sum(map(len, parts)) - len(parts[0])
    if size > 0x7FFFFFFF:
        raise ProtocolError(f"frame of {size} bytes does not fit an int32 size")
    parts[0] = t.INT32.pack(size)


def _gather(parts: list[Any]) -> list[Any]:
    """The frame as few buffers: runs of small pieces joined, large ones (record batches) left uncopied."""
    _size_prefix(parts)
    out: list[Any] = []
    run: list[Any] = []
    for p in parts:
        if len(p) >= _GATHER_MIN:
            if run:
                out.append(b"".join(run))
                run.clear()
            out.append(p)
        else:
            run.append(p)
    if run:
        out.append(b"".join(run))
    return out


def encode_request(api: int, version: int, correlation_id: int, client_id: str | None,
                   body: dict[str, Any]) -> bytes:
    """The whole request frame, 4-byte size prefix included. ProtocolError if ``body`` does not fit the schema."""
    return _frame(_request_parts(api, version, correlation_id, client_id, body))


def encode_request_buffers(api: int, version: int, correlation_id: int, client_id: str | None,
                           body: dict[str, Any]) -> list[Any]:
    """encode_request() as a list of buffers whose concatenation is the frame: the record batches of a
    Produce request are not copied into one frame, sendmsg() gathers them."""
    return _gather(_request_parts(api, version, correlation_id, client_id, body))


def _request_parts(api: int, version: int, correlation_id: int, client_id: str | None,
                   body: dict[str, Any]) -> list[Any]:
    plan = message_plan(api, "request", version)
    parts: list[Any] = [b"",
                        t.fixed(t.INT16, api, "int16 'api_key'"),
                        t.fixed(t.INT16, version, "int16 'api_version'"),
                        t.fixed(t.INT32, correlation_id, "int32 'correlation_id'")]
    if client_id is not None and not isinstance(client_id, str):
        raise ProtocolError(f"client_id must be a str or None, got {type(client_id).__name__}")
    parts.append(t.string(client_id, compact=False))
    if plan.flexible:
        parts.append(b"\x00")  # request header v2: no tagged fields of our own
    encode_struct(plan.body, body, parts)
    return parts


def encode_response(api: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """The whole response frame, 4-byte size prefix included (the server side, e.g. a mock broker)."""
    plan = message_plan(api, "response", version)
    parts: list[Any] = [b"", t.fixed(t.INT32, correlation_id, "int32 'correlation_id'")]
    if _flexible_response_header(plan):
        parts.append(b"\x00")
    encode_struct(plan.body, body, parts)
    return _frame(parts)


def read_correlation_id(payload: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (without its size prefix), whatever API it answers."""
    if len(payload) < 4:
        raise ProtocolError(f"truncated response: needed 4 bytes for int32 'correlation_id', {len(payload)} left")
    return int(t.INT32.unpack_from(payload, 0)[0])


def decode_response(api: int, version: int, payload: bytes | bytearray | memoryview) -> tuple[int, dict[str, Any]]:
    """(correlation_id, body) of a response frame without its size prefix."""
    plan = message_plan(api, "response", version)
    r = t.Reader(payload, plan.context)
    correlation_id = r.int32("int32 'correlation_id'")
    if _flexible_response_header(plan):
        decode_tagged(None, r, {})  # no header tags are defined; skip any a newer broker sends
    return correlation_id, _decode_body(plan, r, strict=False)


def decode_request_header(payload: bytes | bytearray | memoryview) -> RequestHeader:
    """Only the v1 part of a request header: enough for a server to answer even an unsupported request."""
    return _read_request_header(t.Reader(payload, "request header"))


def _read_request_header(r: t.Reader) -> RequestHeader:
    return RequestHeader(r.int16("int16 'api_key'"), r.int16("int16 'api_version'"),
                         r.int32("int32 'correlation_id'"), r.string(False, True, "'client_id'"))


def decode_request(payload: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Header and body of a request frame without its size prefix (the server side).

    ProtocolError for an unknown API key, UnsupportedVersionError for a version outside SUPPORTED_VERSIONS.
    """
    r = t.Reader(payload, "request header")
    header = _read_request_header(r)
    plan = message_plan(header.api_key, "request", header.api_version)
    r.context = plan.context
    if plan.flexible:
        decode_tagged(None, r, {})
    # Requests stay strict: they come from our own encoder or the clients a mock broker referees, where
    # extra bytes mean a framing bug worth failing on.
    return header, _decode_body(plan, r, strict=True)


def _decode_body(plan: MessagePlan, r: t.Reader, *, strict: bool) -> dict[str, Any]:
    body = decode_struct(plan.body, r)
    if r.remaining:
        if strict:
            raise r.error(f"{r.remaining} unexpected bytes after the body")
        # Brokers in the field append bytes our schema does not describe (librdkafka's mock sends one after a
        # Metadata v9 body); Java's and librdkafka's readers stop at the end of the body and ignore the rest.
        log.debug("%s: ignored %d bytes after the body", r.context, r.remaining)
    return body


def _flexible_response_header(plan: MessagePlan) -> bool:
    return plan.flexible and plan.api_key != ApiKey.API_VERSIONS
