"""The group coordinator's APIs: OffsetCommit, TxnOffsetCommit (staged until the transaction commits),
OffsetFetch (KIP-447's require_stable) and ListGroups. The offsets are kept in ../groups.py; groups have no members (JoinGroup
is not served). A broker that does not coordinate the group answers NOT_COORDINATOR.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.groups import MAX_METADATA_BYTES, OffsetAndMetadata
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
from kafkajet.testing.mock.state import GROUP_COORDINATOR, ClusterState

VERSIONS: Versions = {
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.LIST_GROUPS: (0, 5),
}


OffsetStore = Callable[[tuple[str, int], OffsetAndMetadata], None]


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
            parts.append({"partition_index": p["partition_index"], "error_code": error_code(error)})
        out.append({"name": t["name"], "partitions": parts})
    return out


def handle_offset_commit(state: ClusterState, req: Request) -> Answer:
    group = req.body["group_id"]
    error = "INVALID_GROUP_ID" if not group else not_coordinator(state, req, GROUP_COORDINATOR, group)
    topics = _offset_results(state, req.body.get("topics") or [], error,
                             lambda tp, om: state.group_offsets.commit(group, tp, om))
    return Answer({"throttle_time_ms": 0, "topics": topics})


def handle_txn_offset_commit(state: ClusterState, req: Request) -> Answer:
    body = req.body
    group = body["group_id"]
    error = "INVALID_GROUP_ID" if not group else not_coordinator(state, req, GROUP_COORDINATOR, group)
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
    error = not_coordinator(state, req, GROUP_COORDINATOR, group)
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
                          "metadata": found.metadata if found else "", "error_code": error_code(part_error)})
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
        return Answer({"throttle_time_ms": 0, "topics": topics, "error_code": error_code(error)})
    groups = []
    for g in body.get("groups") or []:
        error, topics = _fetch_group(state, req, g["group_id"], g.get("topics"), stable)
        groups.append({"group_id": g["group_id"], "topics": topics, "error_code": error_code(error)})
    return Answer({"throttle_time_ms": 0, "groups": groups})


def offset_commit_error(state: ClusterState, req: Request, error: str) -> Body:
    """OffsetCommit's and TxnOffsetCommit's: every partition gets the error. Each topic is answered as it was
    named, by name or (TxnOffsetCommit v6+) by id."""
    c = code(error)
    return {"throttle_time_ms": 0, "topics": [
        {**{k: t[k] for k in ("name", "topic_id") if k in t},
         "partitions": [{"partition_index": p["partition_index"], "error_code": c} for p in t.get("partitions") or []]}
        for t in req.body.get("topics") or []]}


def offset_fetch_error(state: ClusterState, req: Request, error: str) -> Body:
    c = code(error)
    body = req.body
    if req.version <= 7:
        return {"throttle_time_ms": 0, "error_code": c, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": c}
                for i in t.get("partition_indexes") or []]}
            for t in body.get("topics") or []]}
    return {"throttle_time_ms": 0, "groups": [{"group_id": g["group_id"], "topics": [], "error_code": c}
                                              for g in body.get("groups") or []]}


def handle_list_groups(state: ClusterState, req: Request) -> Answer:
    # Each broker lists the groups it coordinates, as Kafka's do; with no members, every group is a simple
    # group: protocol type "" and state Empty. The v4/v5 filters match names whatever their case, as Kafka's
    # group coordinator does; an empty filter lets every group through.
    states = {s.lower() for s in req.body.get("states_filter") or ()}
    types = {t.lower() for t in req.body.get("types_filter") or ()}
    if (states and "empty" not in states) or (types and "classic" not in types):
        return Answer({"throttle_time_ms": 0, "error_code": 0, "groups": []})
    groups = [{"group_id": g, "protocol_type": "", "group_state": "Empty", "group_type": "classic"}
              for g in state.group_offsets.groups() if not_coordinator(state, req, GROUP_COORDINATOR, g) is None]
    return Answer({"throttle_time_ms": 0, "error_code": 0, "groups": groups})


def list_groups_error(state: ClusterState, req: Request, error: str) -> Body:
    return {"throttle_time_ms": 0, "error_code": code(error), "groups": []}


SERVED = {
    ApiKey.OFFSET_COMMIT: Served(handle_offset_commit, offset_commit_error),
    ApiKey.OFFSET_FETCH: Served(handle_offset_fetch, offset_fetch_error),
    ApiKey.TXN_OFFSET_COMMIT: Served(handle_txn_offset_commit, offset_commit_error),
    ApiKey.LIST_GROUPS: Served(handle_list_groups, list_groups_error),
}
