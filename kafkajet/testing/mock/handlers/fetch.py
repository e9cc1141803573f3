"""Fetch: the partition leader hands out stored batches from an offset; read_committed up to the last stable
offset, with the aborted transactions in what it returns. With too little to return the answer is held (up to
max_wait) until an append or a transaction marker brings more: the server calls the handler again.
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
from kafkajet.testing.mock.state import ClusterState

VERSIONS: Versions = {ApiKey.FETCH: (0, 11)}


def handle_fetch(state: ClusterState, req: Request) -> Answer:
    body = req.body
    committed = body.get("isolation_level", 0) == READ_COMMITTED
    remaining = body.get("max_bytes", 0x7FFFFFFF)
    total = 0
    any_error = False
    responses = []
    for topic in body.get("topics") or []:
        name = topic["name"]
        parts = []
        for fp in topic.get("fetch_partitions") or []:
            index = fp["partition_index"]
            p, error = leader_error(state, req, name, index, fp.get("current_leader_epoch", -1))
            result: Body = {"partition": index, "error_code": 0, "high_watermark": -1, "last_stable_offset": -1,
                            "log_start_offset": -1, "aborted_transactions": [], "preferred_read_replica": -1,
                            "record_set": b""}
            if p is not None and error is None:
                plog = p.log
                offset = fp["fetch_offset"]
                lso = p.last_stable_offset
                if not plog.log_start_offset <= offset <= plog.log_end_offset:
                    error = "OFFSET_OUT_OF_RANGE"
                else:
                    # read_committed sees up to the last stable offset only, with the aborted transactions in
                    # what it got (the consumer drops their records); read_uncommitted gets null for them.
                    data, end = plog.read_until(offset, min(fp["max_bytes"], remaining), at_least_one=total == 0,
                                                upper=lso if committed else None)
                    total += len(data)
                    remaining -= len(data)
                    aborted = None
                    if committed:
                        aborted = [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                                   for a in p.txns.aborted_between(offset, end)] if data else []
                    result.update(high_watermark=plog.log_end_offset, last_stable_offset=lso,
                                  log_start_offset=plog.log_start_offset, record_set=data,
                                  aborted_transactions=aborted)
            if error is not None:
                any_error = True
                result["error_code"] = code(error)
            parts.append(result)
        responses.append({"topic": name, "partition_responses": parts})
    answer: Body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
    # Like a broker's purgatory: with nothing to hand out, hold the answer up to max_wait (an error is news).
    wait = 0 if any_error or total >= body.get("min_bytes", 0) else max(body.get("max_wait", 0), 0)
    return Answer(answer, wait_ms=wait)


def fetch_error(state: ClusterState, req: Request, error: str) -> Body:
    c = code(error)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": t["name"], "partition_responses": [
            {"partition": p["partition_index"], "error_code": c, "high_watermark": -1, "record_set": b""}
            for p in t.get("fetch_partitions") or []]}
        for t in req.body.get("topics") or []]}


SERVED = {ApiKey.FETCH: Served(handle_fetch, fetch_error)}
