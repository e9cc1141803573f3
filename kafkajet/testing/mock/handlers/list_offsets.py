"""ListOffsets: the partition leader looks an offset up by timestamp (latest, earliest, max timestamp, or the
first at or after a time); read_committed's latest is the last stable offset.
"""

from __future__ import annotations

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.requests import (
    READ_COMMITTED,
    Answer,
    Body,
    Request,
    Served,
    Versions,
    code,
    leader_error,
)
from kafkajet.testing.mock.state import ClusterState, PartitionState

VERSIONS: Versions = {ApiKey.LIST_OFFSETS: (0, 8)}


_LATEST, _EARLIEST, _MAX_TIMESTAMP, _EARLIEST_LOCAL = -1, -2, -3, -4


def handle_list_offsets(state: ClusterState, req: Request) -> Answer:
    committed = req.body.get("isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in req.body.get("topics") or []:
        name = topic["name"]
        parts = []
        for lp in topic.get("partitions") or []:
            index = lp["partition_index"]
            p, error = leader_error(state, req, name, index, lp.get("current_leader_epoch", -1))
            result: Body = {"partition_index": index, "error_code": 0, "old_style_offsets": [], "timestamp": -1,
                            "offset": -1, "leader_epoch": -1}
            if p is not None and error is None:
                found = _lookup_offset(p, lp["timestamp"], committed)
                result["leader_epoch"] = p.leader_epoch
                if found is not None:
                    result["offset"], result["timestamp"] = found
                    result["old_style_offsets"] = [found[0]]
            if error is not None:
                result["error_code"] = code(error)
            parts.append(result)
        topics.append({"name": name, "partitions": parts})
    return Answer({"throttle_time_ms": 0, "topics": topics})


def _lookup_offset(p: PartitionState, timestamp: int, committed: bool) -> tuple[int, int] | None:
    plog = p.log
    if timestamp == _LATEST:
        # The end a read_committed consumer can reach is the last stable offset.
        return (p.last_stable_offset if committed else plog.log_end_offset), -1
    if timestamp in (_EARLIEST, _EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == _MAX_TIMESTAMP:
        return plog.max_timestamp_offset()
    return plog.offset_for_timestamp(timestamp)


def list_offsets_error(state: ClusterState, req: Request, error: str) -> Body:
    c = code(error)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": c} for p in t.get("partitions") or []]}
        for t in req.body.get("topics") or []]}


SERVED = {ApiKey.LIST_OFFSETS: Served(handle_list_offsets, list_offsets_error)}
