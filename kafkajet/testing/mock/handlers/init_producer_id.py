"""InitProducerId: an idempotent producer gets a fresh id; a transactional id goes to its transaction
coordinator (txn_coordinator.py), which fences the previous epoch.
"""

from __future__ import annotations

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.handlers.txn_coordinator import handle_transactional_init_producer_id
from kafkajet.testing.mock.requests import Answer, Body, Request, Served, Versions, code
from kafkajet.testing.mock.state import ClusterState

VERSIONS: Versions = {ApiKey.INIT_PRODUCER_ID: (0, 4)}


def handle_init_producer_id(state: ClusterState, req: Request) -> Answer:
    if req.body.get("transactional_id") is not None:
        return handle_transactional_init_producer_id(state, req)
    # Kafka hands an idempotent (non-transactional) producer a fresh id every time, whatever id and epoch
    # a v3+ request names; epochs of idempotent producers are bumped by the client itself.
    return Answer({"throttle_time_ms": 0, "error_code": 0, "producer_id": state.next_producer_id(),
                   "producer_epoch": 0})


def init_producer_id_error(state: ClusterState, req: Request, error: str) -> Body:
    return {"throttle_time_ms": 0, "error_code": code(error), "producer_id": -1, "producer_epoch": -1}


SERVED = {ApiKey.INIT_PRODUCER_ID: Served(handle_init_producer_id, init_producer_id_error)}
