"""FindCoordinator: the broker coordinating a group or a transactional id (v0 knows groups only).
"""

from __future__ import annotations

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.requests import Answer, Body, Request, Served, Versions, code
from kafkajet.testing.mock.state import GROUP_COORDINATOR, TXN_COORDINATOR, ClusterState

VERSIONS: Versions = {ApiKey.FIND_COORDINATOR: (0, 2)}


def handle_find_coordinator(state: ClusterState, req: Request) -> Answer:
    key_type = req.body.get("key_type", GROUP_COORDINATOR)  # v0 knows groups only
    if key_type not in (GROUP_COORDINATOR, TXN_COORDINATOR):
        return Answer(find_coordinator_error("INVALID_REQUEST", f"unknown key type {key_type}"))
    node = state.coordinator(key_type, req.body["key"])
    b = state.brokers[node]
    return Answer({"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": node,
                   "host": b.host, "port": b.port})


def find_coordinator_error(error: str, message: str | None = None) -> Body:
    return {"throttle_time_ms": 0, "error_code": code(error), "error_message": message or error, "node_id": -1,
            "host": "", "port": -1}


def _forced_error(state: ClusterState, req: Request, error: str) -> Body:
    return find_coordinator_error(error)


SERVED = {ApiKey.FIND_COORDINATOR: Served(handle_find_coordinator, _forced_error)}
