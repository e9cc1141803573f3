"""A sans-I/O codec for the Kafka wire protocol: dicts to frames and back. No sockets, no clock.

Schemas come from Kafka's own JSON message definitions: tools/gen_protocol.py turns them into the data table
in _schemas.py, schema.py cuts it into per-version plans, codec.py runs the plans, api.py adds the framing.
types.py holds the primitive encoders and the bounds-checked reader.
"""

from __future__ import annotations

from kafkajet.protocol.api import (
    SUPPORTED_VERSIONS,
    ApiKey,
    RequestHeader,
    choose_version,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_request_buffers,
    encode_response,
    read_correlation_id,
)

__all__ = [
    "ApiKey", "RequestHeader", "SUPPORTED_VERSIONS", "choose_version", "decode_request", "decode_request_header",
    "decode_response", "encode_request", "encode_request_buffers", "encode_response", "read_correlation_id",
]
