"""SaslHandshake and SaslAuthenticate: answered by the server itself, through the connection's SaslSession
(kafkajet.testing.mock.sasl), since they act on the connection; listed by ApiVersions only when the cluster
takes SASL. Here: their versions and their answers to a forced error.
"""

from __future__ import annotations

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.requests import Body, Request, Versions, code
from kafkajet.testing.mock.state import ClusterState

VERSIONS: Versions = {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}


def sasl_handshake_error(state: ClusterState, req: Request, error: str) -> Body:
    return {"error_code": code(error), "mechanisms": list(state.config.sasl_mechanisms)}


def sasl_authenticate_error(state: ClusterState, req: Request, error: str) -> Body:
    return {"error_code": code(error), "error_message": error, "auth_bytes": b"", "session_lifetime_ms": 0}


ERRORS = {ApiKey.SASL_HANDSHAKE: sasl_handshake_error, ApiKey.SASL_AUTHENTICATE: sasl_authenticate_error}
