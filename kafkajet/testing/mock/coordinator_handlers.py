"""The coordinator APIs: FindCoordinator, the transaction coordinator's (InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) and the group coordinator's (OffsetCommit, OffsetFetch,
TxnOffsetCommit, ListGroups). Registered in handlers.HANDLERS; the state machines are in transactions.py and groups.py.

A coordinator request reaching a broker that does not coordinate its key is answered NOT_COORDINATOR, as Kafka
answers it, so clients look the coordinator up again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.groups import MAX_METADATA_BYTES, OffsetAndMetadata
from kafkajet.testing.mock.requests import Answer, Body, Request, code
from kafkajet.testing.mock.state import GROUP_COORDINATOR, TXN_COORDINATOR, ClusterState

log = logging.getLogger("kafkajet.testing.mock")

OffsetStore = Callable[[tuple[str, int], OffsetAndMetadata], None]

# KIP-588: from these versions on a client understands PRODUCER_FENCED; older ones get INVALID_PRODUCER_EPOCH.
_FENCED_SINCE = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2,
                 ApiKey.END_TXN: 2}


def _for_version(req: Request, error: str | None) -> str | None:
    if error == "PRODUCER_FENCED" and req.version < _FENCED_SINCE.get(ApiKey(req.header.api_key), 0):
        return "INVALID_PRODUCER_EPOCH"
    return error


def _err(error: str | None) -> int:
    return code(error) if error else 0


def _not_coordinator(state: ClusterState, req: Request, key_type: int, key: str) -> str | None:
    if state.coordinator(key_type, key) != req.broker_id:
        return "NOT_COORDINATOR"
    return None


# --- FindCoordinator -----------------------------------------------------------------------------------


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


# --- the transaction coordinator -----------------------------------------------------------------------


def handle_transactional_init_producer_id(state: ClusterState, req: Request) -> Answer:
    body = req.body
    txn_id = body["transactional_id"]
    error = _not_coordinator(state, req, TXN_COORDINATOR, txn_id)
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
    common = _not_coordinator(state, req, TXN_COORDINATOR, txn_id)
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
            {"partition_index": partition, "partition_error_code": _err(_for_version(req, error))})
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
    error = _not_coordinator(state, req, TXN_COORDINATOR, body["transactional_id"])
    if error is None:
        state.transactions.marker_delay_ms = state.config.txn_marker_delay_ms
        error = state.transactions.add_offsets(body["transactional_id"], body["producer_id"],
                                               body["producer_epoch"], body["group_id"], state.now_ms())
    return Answer({"throttle_time_ms": 0, "error_code": _err(_for_version(req, error))})


def handle_end_txn(state: ClusterState, req: Request) -> Answer:
    body = req.body
    error = _not_coordinator(state, req, TXN_COORDINATOR, body["transactional_id"])
    if error is None:
        state.transactions.marker_delay_ms = state.config.txn_marker_delay_ms
        error = state.transactions.end_txn(body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                           bool(body["committed"]), state.now_ms())
    return Answer({"throttle_time_ms": 0, "error_code": _err(_for_version(req, error))})


# --- the group coordinator -----------------------------------------------------------------------------


def _offset_results(state: ClusterState, topics: list[Body], common: str | None,
                    store: OffsetStore) -> list[Body]:
    out = []
    for t in topics:
        parts = []
        for p in t.get("partitions") or []:
            error = common
            metadata = p.get("committed_metadata")
            if error is None and state.partition(t["name"], p["partition_index"]) is None:
                error = "UNKNOWN_TOPIC_OR_PARTITION"
            elif error is None and metadata is not None and len(metadata.encode()) > MAX_METADATA_BYTES:
                error = "OFFSET_METADATA_TOO_LARGE"
            if error is None:
                store((t["name"], p["partition_index"]),
                      OffsetAndMetadata(p["committed_offset"], p.get("committed_leader_epoch", -1), metadata or ""))
            parts.append({"partition_index": p["partition_index"], "error_code": _err(error)})
        out.append({"name": t["name"], "partitions": parts})
    return out


def handle_offset_commit(state: ClusterState, req: Request) -> Answer:
    group = req.body["group_id"]
    error = "INVALID_GROUP_ID" if not group else _not_coordinator(state, req, GROUP_COORDINATOR, group)
    topics = _offset_results(state, req.body.get("topics") or [], error,
                             lambda tp, om: state.group_offsets.commit(group, tp, om))
    return Answer({"throttle_time_ms": 0, "topics": topics})


def handle_txn_offset_commit(state: ClusterState, req: Request) -> Answer:
    body = req.body
    group = body["group_id"]
    error = "INVALID_GROUP_ID" if not group else _not_coordinator(state, req, GROUP_COORDINATOR, group)
    if error is None:
        error = state.transactions.check_txn_offset_commit(body["transactional_id"], body["producer_id"],
                                                           body["producer_epoch"], group, state.now_ms())
    pid = body["producer_id"]
    topics = _offset_results(state, body.get("topics") or [], error,
                             lambda tp, om: state.group_offsets.stage(group, pid, tp, om))
    return Answer({"throttle_time_ms": 0, "topics": topics})


def _fetch_group(state: ClusterState, req: Request, group: str, topics: list[Body] | None,
                 require_stable: bool) -> tuple[str | None, list[Body]]:
    """(group error, per-topic results) of one group's OffsetFetch; topics None asks for all committed."""
    error = _not_coordinator(state, req, GROUP_COORDINATOR, group)
    if error is not None:
        return error, []
    if topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(state.group_offsets.committed(group)):
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t["name"]: list(t.get("partition_indexes") or []) for t in topics}
    out = []
    for name, partitions in wanted.items():
        parts = []
        for index in partitions:
            found = state.group_offsets.fetch(group, (name, index))
            part_error = None
            if require_stable and state.group_offsets.has_pending(group, (name, index)):
                # KIP-447: a transaction will move this offset; the consumer retries until it is decided.
                part_error, found = "UNSTABLE_OFFSET_COMMIT", None
            parts.append({"partition_index": index, "committed_offset": found.offset if found else -1,
                          "committed_leader_epoch": found.leader_epoch if found else -1,
                          "metadata": found.metadata if found else "", "error_code": _err(part_error)})
        out.append({"name": name, "partitions": parts})
    return None, out


def handle_offset_fetch(state: ClusterState, req: Request) -> Answer:
    body = req.body
    stable = bool(body.get("require_stable", False))
    if req.version <= 7:
        error, topics = _fetch_group(state, req, body["group_id"], body.get("topics"), stable)
        if error is not None and req.version < 2:
            # No top-level error before v2: every partition asked for carries it.
            topics = [{"name": t["name"], "partitions": [
                {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": code(error)}
                for i in t.get("partition_indexes") or []]} for t in body.get("topics") or []]
        return Answer({"throttle_time_ms": 0, "topics": topics, "error_code": _err(error)})
    groups = []
    for g in body.get("groups") or []:
        error, topics = _fetch_group(state, req, g["group_id"], g.get("topics"), stable)
        groups.append({"group_id": g["group_id"], "topics": topics, "error_code": _err(error)})
    return Answer({"throttle_time_ms": 0, "groups": groups})


def handle_list_groups(state: ClusterState, req: Request) -> Answer:
    # Each broker lists the groups it coordinates, as Kafka's do; with no members, every group is a simple
    # group: protocol type "" and state Empty.
    groups = [{"group_id": g, "protocol_type": "", "group_state": "Empty", "group_type": "classic"}
              for g in state.group_offsets.groups() if _not_coordinator(state, req, GROUP_COORDINATOR, g) is None]
    return Answer({"throttle_time_ms": 0, "error_code": 0, "groups": groups})


# --- forced errors -------------------------------------------------------------------------------------


def coordinator_error_response(req: Request, error: str) -> Body | None:
    """The answer to a coordinator request failing as a whole with `error`; None for other APIs."""
    c = code(error)
    api = req.header.api_key
    body = req.body
    if api == ApiKey.FIND_COORDINATOR:
        return find_coordinator_error(error)
    if api in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
        return {"throttle_time_ms": 0, "error_code": c}
    if api == ApiKey.ADD_PARTITIONS_TO_TXN:
        def results(topics: list[Body]) -> list[Body]:
            return [{"name": t["name"], "results_by_partition": [
                {"partition_index": p, "partition_error_code": c} for p in t.get("partitions") or []]}
                for t in topics]
        if req.version <= 3:
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results(body.get("v3_and_below_topics")
                                                                                    or [])}
        return {"throttle_time_ms": 0, "error_code": c, "results_by_transaction": []}
    if api in (ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT):
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": c}
                                               for p in t.get("partitions") or []]}
            for t in body.get("topics") or []]}
    if api == ApiKey.OFFSET_FETCH:
        if req.version <= 7:
            return {"throttle_time_ms": 0, "error_code": c, "topics": [
                {"name": t["name"], "partitions": [
                    {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": c}
                    for i in t.get("partition_indexes") or []]}
                for t in body.get("topics") or []]}
        return {"throttle_time_ms": 0, "groups": [{"group_id": g["group_id"], "topics": [], "error_code": c}
                                                  for g in body.get("groups") or []]}
    return None
