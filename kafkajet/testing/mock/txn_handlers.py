"""The broker side of the transactional and group-offset APIs: FindCoordinator, InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, OffsetCommit, OffsetFetch.

The coordinator's state lives in transactions.py; this module turns requests into its calls and its answers
into response bodies, checking first that the request reached the coordinator, as a broker does.
"""

from __future__ import annotations

from typing import Any

from kafkajet.clock import wall_ms
from kafkajet.errors import error_for_name
from kafkajet.protocol import ApiKey
from kafkajet.records import build_control_batch
from kafkajet.testing.mock.state import ClusterState
from kafkajet.testing.mock.transactions import TXN_KEY_TYPE, AbortedTxn, TxnState

GROUP_KEY_TYPE = 0
Body = dict[str, Any]


def _code(name: str | None) -> int:
    return error_for_name(name).code if name else 0


def not_coordinator(state: ClusterState, broker_id: int, key_type: int, key: str) -> str | None:
    if state.txn.coordinators.for_key(key_type, key) != broker_id:
        return "NOT_COORDINATOR"
    return None


def write_marker(state: ClusterState, tp: tuple[str, int], producer_id: int, epoch: int, commit: bool) -> None:
    """The partition leader appends the marker; an abort records the aborted range for read_committed."""

    p = state.partition(*tp)
    if p is None:
        return
    data = build_control_batch(commit, producer_id=producer_id, producer_epoch=epoch, timestamp=int(wall_ms()))
    offset = p.log.append(data, 0, int(wall_ms()), p.leader_epoch)
    first = p.txns.ongoing.pop(producer_id, None)
    if not commit and first is not None:
        p.txns.aborted.append(AbortedTxn(producer_id, first, offset))
    state.changed.notify_all()


def _marker_writer(state: ClusterState) -> Any:
    return lambda tp, pid, epoch, commit: write_marker(state, tp, pid, epoch, commit)


def expire_transactions(state: ClusterState) -> None:
    state.txn.expire(_marker_writer(state))


def find_coordinator(state: ClusterState, broker_id: int, body: Body) -> Body:
    key_type = body.get("key_type", GROUP_KEY_TYPE)
    node = state.txn.coordinators.for_key(key_type, body["key"])
    b = state.brokers[node]
    if not b.up:
        return {"throttle_time_ms": 0, "error_code": _code("COORDINATOR_NOT_AVAILABLE"), "error_message": None,
                "node_id": -1, "host": "", "port": -1}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": node, "host": b.host,
            "port": b.port}


def init_transactional_producer_id(state: ClusterState, broker_id: int, version: int, body: Body) -> Body:
    txn_id = body["transactional_id"]
    error = not_coordinator(state, broker_id, TXN_KEY_TYPE, txn_id)
    pid = epoch = -1
    if error is None:
        expire_transactions(state)
        error, pid, epoch = state.txn.init_producer_id(
            txn_id, body["transaction_timeout_ms"], body.get("producer_id", -1), body.get("producer_epoch", -1),
            version, state.next_producer_id, _marker_writer(state))
    return {"throttle_time_ms": 0, "error_code": _code(error), "producer_id": pid, "producer_epoch": epoch}


def add_partitions(state: ClusterState, broker_id: int, body: Body) -> Body:
    txn_id = body["v3_and_below_transactional_id"]
    topics = body.get("v3_and_below_topics") or []
    wanted = [(t["name"], p) for t in topics for p in t["partitions"]]
    error = not_coordinator(state, broker_id, TXN_KEY_TYPE, txn_id)
    codes: dict[tuple[str, int], int] = {}
    if error is None:
        expire_transactions(state)
        meta, error = state.txn.check(txn_id, body["v3_and_below_producer_id"], body["v3_and_below_producer_epoch"])
        if meta is not None:
            unknown = [tp for tp in wanted if state.partition(*tp) is None]
            if unknown:
                # Kafka adds none of them: the unknown ones fail, the others were not attempted.
                codes = {tp: _code("UNKNOWN_TOPIC_OR_PARTITION" if tp in unknown else "OPERATION_NOT_ATTEMPTED")
                         for tp in wanted}
            else:
                state.txn.begin_if_needed(meta)
                meta.partitions.update(wanted)
                codes = dict.fromkeys(wanted, 0)
    if error is not None:
        codes = dict.fromkeys(wanted, _code(error))
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t["name"], "results_by_partition": [
            {"partition_index": p, "partition_error_code": codes[(t["name"], p)]} for p in t["partitions"]]}
        for t in topics]}


def add_offsets(state: ClusterState, broker_id: int, body: Body) -> Body:
    txn_id = body["transactional_id"]
    error = not_coordinator(state, broker_id, TXN_KEY_TYPE, txn_id)
    if error is None:
        expire_transactions(state)
        meta, error = state.txn.check(txn_id, body["producer_id"], body["producer_epoch"])
        if meta is not None:
            state.txn.begin_if_needed(meta)
            meta.groups.add(body["group_id"])
    return {"throttle_time_ms": 0, "error_code": _code(error)}


def txn_offset_commit(state: ClusterState, broker_id: int, body: Body) -> Body:
    group = body["group_id"]
    error = not_coordinator(state, broker_id, GROUP_KEY_TYPE, group)
    if error is None:
        meta, error = state.txn.check(body["transactional_id"], body["producer_id"], body["producer_epoch"])
        if meta is not None and (meta.state is not TxnState.ONGOING or group not in meta.groups):
            error = "INVALID_TXN_STATE"  # offsets only after AddOffsetsToTxn named the group
        if error is None and meta is not None:
            staged = meta.staged_offsets.setdefault(group, {})
            for t in body.get("topics") or []:
                for p in t.get("partitions") or []:
                    staged[(t["name"], p["partition_index"])] = (p["committed_offset"], p.get("committed_metadata"))
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": _code(error)}
                                           for p in t.get("partitions") or []]}
        for t in body.get("topics") or []]}


def end_txn(state: ClusterState, broker_id: int, body: Body) -> Body:
    txn_id, commit = body["transactional_id"], body["committed"]
    error = not_coordinator(state, broker_id, TXN_KEY_TYPE, txn_id)
    if error is None:
        expire_transactions(state)
        meta, error = state.txn.check(txn_id, body["producer_id"], body["producer_epoch"])
        if meta is not None:
            if meta.state is TxnState.ONGOING:
                state.txn.end(meta, commit=commit, write_marker=_marker_writer(state))
            elif meta.state is not (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
                # A retried EndTxn of the transaction just completed is answered with success; anything else
                # (no transaction, or the other outcome) is a client bug.
                error = "INVALID_TXN_STATE"
    return {"throttle_time_ms": 0, "error_code": _code(error)}


def offset_commit(state: ClusterState, broker_id: int, body: Body) -> Body:
    group = body["group_id"]
    error = not_coordinator(state, broker_id, GROUP_KEY_TYPE, group)
    if error is None:
        offsets = state.txn.committed.setdefault(group, {})
        for t in body.get("topics") or []:
            for p in t.get("partitions") or []:
                offsets[(t["name"], p["partition_index"])] = (p["committed_offset"], p.get("committed_metadata"))
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": _code(error)}
                                           for p in t.get("partitions") or []]}
        for t in body.get("topics") or []]}


def _fetch_group(state: ClusterState, broker_id: int, group: str, topics: list[Body] | None,
                 require_stable: bool) -> tuple[str | None, list[Body]]:
    error = not_coordinator(state, broker_id, GROUP_KEY_TYPE, group)
    if error is not None:
        return error, []
    committed = state.txn.committed.get(group, {})
    pending = {tp for m in state.txn.transactions.values() if m.state is TxnState.ONGOING
               for tp in m.staged_offsets.get(group, {})}
    if topics is None:
        names = sorted({t for t, _ in committed})
        topics = [{"name": n, "partition_indexes": sorted(p for t, p in committed if t == n)} for n in names]
    out = []
    for t in topics:
        parts = []
        for index in t["partition_indexes"]:
            tp = (t["name"], index)
            offset, metadata = committed.get(tp, (-1, ""))
            unstable = require_stable and tp in pending
            parts.append({"partition_index": index, "committed_offset": -1 if unstable else offset,
                          "committed_leader_epoch": -1, "metadata": metadata,
                          "error_code": _code("UNSTABLE_OFFSET_COMMIT") if unstable else 0})
        out.append({"name": t["name"], "partitions": parts})
    return None, out


def offset_fetch(state: ClusterState, broker_id: int, version: int, body: Body) -> Body:
    stable = body.get("require_stable", False)
    if version >= 8:
        groups = []
        for g in body.get("groups") or []:
            error, topics = _fetch_group(state, broker_id, g["group_id"], g.get("topics"), stable)
            groups.append({"group_id": g["group_id"], "topics": topics, "error_code": _code(error)})
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = _fetch_group(state, broker_id, body["group_id"], body.get("topics"), stable)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": _code(error)}


def error_body(api: int, body: Body, version: int, c: int) -> Body | None:
    """Every partition/topic of a coordinator request failing with code `c` (for injected errors)."""
    if api == ApiKey.FIND_COORDINATOR:
        return {"throttle_time_ms": 0, "error_code": c, "error_message": None, "node_id": -1, "host": "",
                "port": -1}
    if api in (ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN):
        return {"throttle_time_ms": 0, "error_code": c}
    if api == ApiKey.ADD_PARTITIONS_TO_TXN:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": t["name"], "results_by_partition": [
                {"partition_index": p, "partition_error_code": c} for p in t["partitions"]]}
            for t in body.get("v3_and_below_topics") or []]}
    if api in (ApiKey.TXN_OFFSET_COMMIT, ApiKey.OFFSET_COMMIT):
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": c}
                                               for p in t.get("partitions") or []]}
            for t in body.get("topics") or []]}
    if api == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return {"throttle_time_ms": 0, "groups": [
                {"group_id": g["group_id"], "topics": [], "error_code": c} for g in body.get("groups") or []]}
        return {"throttle_time_ms": 0, "topics": [], "error_code": c}
    return None
