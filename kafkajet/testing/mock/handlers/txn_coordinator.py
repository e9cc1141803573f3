"""The transaction coordinator's APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, and InitProducerId for a
transactional id (init_producer_id.py hands it over). The state machine is in ../transactions.py. A broker that
does not coordinate the transactional id answers NOT_COORDINATOR, so the client looks the coordinator up again.
"""

from __future__ import annotations

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.requests import (
    Answer,
    Body,
    Request,
    Served,
    Versions,
    code,
    error_code,
    not_coordinator,
)
from kafkajet.testing.mock.state import TXN_COORDINATOR, ClusterState

VERSIONS: Versions = {
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 2),
}


# KIP-588: from these versions on a client understands PRODUCER_FENCED; older ones get INVALID_PRODUCER_EPOCH.
_FENCED_SINCE = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2,
                 ApiKey.END_TXN: 2}


def _for_version(req: Request, error: str | None) -> str | None:
    if error == "PRODUCER_FENCED" and req.version < _FENCED_SINCE.get(ApiKey(req.header.api_key), 0):
        return "INVALID_PRODUCER_EPOCH"
    return error


def handle_transactional_init_producer_id(state: ClusterState, req: Request) -> Answer:
    body = req.body
    txn_id = body["transactional_id"]
    error = not_coordinator(state, req, TXN_COORDINATOR, txn_id)
    if error is None:
        state.transactions.marker_delay_ms = state.config.txn_marker_delay_ms
        result = state.transactions.init_producer_id(txn_id, body["transaction_timeout_ms"],
                                                     body.get("producer_id", -1), body.get("producer_epoch", -1),
                                                     state.now_ms())
        error = result.error
        if error is None:
            return Answer({"throttle_time_ms": 0, "error_code": 0, "producer_id": result.producer_id,
                           "producer_epoch": result.producer_epoch})
    return Answer({"throttle_time_ms": 0, "error_code": code(_for_version(req, error) or error),
                   "producer_id": -1, "producer_epoch": -1})


def _txn_partitions(state: ClusterState, req: Request, txn_id: str, pid: int, epoch: int,
                    topics: list[Body], verify_only: bool) -> list[Body]:
    """One transaction's AddPartitionsToTxn: per-topic results, every partition with its error code."""
    wanted = [(t["name"], p) for t in topics for p in t.get("partitions") or []]
    errors: dict[tuple[str, int], str | None]
    common = not_coordinator(state, req, TXN_COORDINATOR, txn_id)
    unknown = {tp for tp in wanted if state.partition(*tp) is None}
    if common is None and unknown:
        # KafkaApis: the unknown ones fail, the others are not attempted, nothing is added.
        errors = {tp: "UNKNOWN_TOPIC_OR_PARTITION" if tp in unknown else "OPERATION_NOT_ATTEMPTED"
                  for tp in wanted}
    elif common is None and verify_only:
        errors = state.transactions.verify_partitions(txn_id, pid, epoch, wanted, state.now_ms())
    else:
        if common is None:
            state.transactions.marker_delay_ms = state.config.txn_marker_delay_ms
            common = state.transactions.add_partitions(txn_id, pid, epoch, wanted, state.now_ms())
        errors = dict.fromkeys(wanted, common)
    by_topic: dict[str, list[Body]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "partition_error_code": error_code(_for_version(req, error))})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


def handle_add_partitions_to_txn(state: ClusterState, req: Request) -> Answer:
    body = req.body
    if req.version <= 3:
        results = _txn_partitions(state, req, body["v3_and_below_transactional_id"],
                                  body["v3_and_below_producer_id"], body["v3_and_below_producer_epoch"],
                                  body.get("v3_and_below_topics") or [], verify_only=False)
        return Answer({"throttle_time_ms": 0, "results_by_topic_v3_and_below": results})
    # v4+: batched, sent by partition leaders (verify_only) and other brokers, never by clients.
    by_txn = [{"transactional_id": t["transactional_id"],
               "topic_results": _txn_partitions(state, req, t["transactional_id"], t["producer_id"],
                                                t["producer_epoch"], t.get("topics") or [],
                                                bool(t.get("verify_only")))}
              for t in body.get("transactions") or []]
    return Answer({"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": by_txn})


def handle_add_offsets_to_txn(state: ClusterState, req: Request) -> Answer:
    body = req.body
    error = not_coordinator(state, req, TXN_COORDINATOR, body["transactional_id"])
    if error is None:
        state.transactions.marker_delay_ms = state.config.txn_marker_delay_ms
        error = state.transactions.add_offsets(body["transactional_id"], body["producer_id"],
                                               body["producer_epoch"], body["group_id"], state.now_ms())
    return Answer({"throttle_time_ms": 0, "error_code": error_code(_for_version(req, error))})


def handle_end_txn(state: ClusterState, req: Request) -> Answer:
    body = req.body
    error = not_coordinator(state, req, TXN_COORDINATOR, body["transactional_id"])
    if error is None:
        state.transactions.marker_delay_ms = state.config.txn_marker_delay_ms
        error = state.transactions.end_txn(body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                           bool(body["committed"]), state.now_ms())
    return Answer({"throttle_time_ms": 0, "error_code": error_code(_for_version(req, error))})


def add_partitions_to_txn_error(state: ClusterState, req: Request, error: str) -> Body:
    c = code(error)

    def results(topics: list[Body]) -> list[Body]:
        return [{"name": t["name"], "results_by_partition": [
            {"partition_index": p, "partition_error_code": c} for p in t.get("partitions") or []]}
            for t in topics]
    if req.version <= 3:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results(req.body.get("v3_and_below_topics")
                                                                                or [])}
    return {"throttle_time_ms": 0, "error_code": c, "results_by_transaction": []}


def txn_error(state: ClusterState, req: Request, error: str) -> Body:
    """AddOffsetsToTxn's and EndTxn's: one error code."""
    return {"throttle_time_ms": 0, "error_code": code(error)}


SERVED = {
    ApiKey.ADD_PARTITIONS_TO_TXN: Served(handle_add_partitions_to_txn, add_partitions_to_txn_error),
    ApiKey.ADD_OFFSETS_TO_TXN: Served(handle_add_offsets_to_txn, txn_error),
    ApiKey.END_TXN: Served(handle_end_txn, txn_error),
}
