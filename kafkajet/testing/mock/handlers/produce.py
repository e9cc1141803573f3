"""Produce: the partition leader validates the batch (magic 2, one batch per partition from v3, no control
batches, the producer's transaction), checks its sequence and appends it; acks=0 gets no answer.
"""

from __future__ import annotations

import logging

from kafkajet.errors import CorruptRecordError, error_for_code
from kafkajet.protocol import ApiKey
from kafkajet.records import decode_batches
from kafkajet.testing.mock.requests import Answer, Body, Request, Served, Versions, code
from kafkajet.testing.mock.sequences import last_sequence
from kafkajet.testing.mock.state import NO_LEADER, ClusterState, PartitionState

# v10 and v11 answer a refusal by a former leader with the new leader and its address (KIP-951). v12 is
# transaction version 2's implicit partition add, which this cluster's transactions do not model.
VERSIONS: Versions = {ApiKey.PRODUCE: (3, 11)}


log = logging.getLogger("kafkajet.testing.mock")

_MAGIC_AT = 16


def handle_produce(state: ClusterState, req: Request) -> Answer:
    acks = req.body.get("acks", -1)
    responses = []
    for topic in req.body.get("topic_data") or []:
        name = topic["name"]
        parts = []
        for pdata in topic.get("partition_data") or []:
            if acks not in (-1, 0, 1):
                result = _produce_error("INVALID_REQUIRED_ACKS")
            else:
                result = _produce_partition(state, req, name, pdata["index"], pdata.get("records"))
            result["index"] = pdata["index"]
            parts.append(result)
        responses.append({"name": name, "partition_responses": parts})
    if acks == 0:
        return Answer(None)
    answer = {"responses": responses, "throttle_time_ms": 0, "node_endpoints": _leader_endpoints(state, responses)}
    count_produce_errors(state, answer)
    return Answer(answer)


def _leader_endpoints(state: ClusterState, responses: list[Body]) -> list[Body]:
    """The addresses of the leaders the answer names (Kafka's ProduceResponse node_endpoints, v10+)."""
    named = {p["current_leader"]["leader_id"] for t in responses for p in t["partition_responses"]
             if "current_leader" in p}
    return [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": None}
            for b in state.brokers.values() if b.node_id in named]


def count_produce_errors(state: ClusterState, answer: Body) -> None:
    for topic in answer["responses"]:
        for part in topic["partition_responses"]:
            if part["error_code"]:
                state.stats[error_for_code_name(part["error_code"])] += 1


def error_for_code_name(error_code: int) -> str:
    cls = error_for_code(error_code)
    return cls.name if cls is not None else "NONE"


def _produce_error(name: str, message: str | None = None) -> Body:
    if message:
        log.debug("produce answered %s: %s", name, message)
    return {"error_code": code(name), "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
            "error_message": message}


def _produce_partition(state: ClusterState, req: Request, topic: str, index: int, records: bytes | None) -> Body:
    p = state.partition(topic, index)
    if p is None:
        return _produce_error("UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{index}")
    if p.leader != req.broker_id:
        refused = _produce_error("NOT_LEADER_OR_FOLLOWER", f"broker {req.broker_id} does not lead {topic}-{index}")
        if p.leader != NO_LEADER:
            # As Kafka's ReplicaManager: the refusal names the leader this broker knows of (KIP-951).
            refused["current_leader"] = {"leader_id": p.leader, "leader_epoch": p.leader_epoch}
        return refused
    if not records:
        return _produce_error("INVALID_RECORD", "no record batch")
    if len(records) > state.config.max_message_bytes:
        return _produce_error("MESSAGE_TOO_LARGE",
                              f"{len(records)} bytes > max message bytes {state.config.max_message_bytes}")
    if len(records) <= _MAGIC_AT or records[_MAGIC_AT] != 2:
        return _produce_error("INVALID_RECORD", "only record batches of magic 2 are accepted")
    try:
        batches = decode_batches(records)
    except CorruptRecordError as e:
        return _produce_error("CORRUPT_MESSAGE", str(e))
    if len(batches) != 1 and req.version >= 3:
        # Kafka's ProduceRequest.validateRecords: from v3 on, exactly one batch per partition.
        return _produce_error("INVALID_RECORD", f"{len(batches)} batches in one partition's data")
    batch = batches[0]
    if batch.is_control:
        # Kafka's LogValidator: only the coordinator's marker writes may append control batches.
        return _produce_error("INVALID_RECORD", "clients may not produce control batches")
    if batch.is_transactional:
        txn_error = state.transactions.check_produce(req.body.get("transactional_id"), batch.producer_id,
                                                     batch.producer_epoch, (topic, index), state.now_ms())
        if txn_error is not None:
            return _produce_error(txn_error, f"transactional batch of producer {batch.producer_id} epoch "
                                             f"{batch.producer_epoch} on {topic}-{index}")
    first_seq = batch.base_sequence
    last_seq = last_sequence(first_seq, batch.last_offset_delta)
    verdict = p.sequences.check(batch.producer_id, batch.producer_epoch, first_seq, last_seq)
    if verdict.duplicate_of is not None:
        state.stats["duplicate_batches"] += 1
        log.info("duplicate batch from producer %d on %s-%d (sequences %d-%d) answered with offset %d",
                 batch.producer_id, topic, index, first_seq, last_seq, verdict.duplicate_of.base_offset)
        if verdict.error is not None:
            return _produce_error(verdict.error, "duplicate sequence")
        return _produce_ok(p, verdict.duplicate_of.base_offset)
    if verdict.error is not None:
        return _produce_error(verdict.error, verdict.message)
    base = p.log.append(records, batch.last_offset_delta, batch.max_timestamp, p.leader_epoch)
    if batch.is_transactional:
        p.txns.on_append(batch.producer_id, base)
    p.sequences.record(batch.producer_id, batch.producer_epoch, first_seq, last_seq, base,
                       base + batch.last_offset_delta)
    return _produce_ok(p, base)


def _produce_ok(p: PartitionState, base_offset: int) -> Body:
    return {"error_code": 0, "base_offset": base_offset, "log_append_time_ms": -1,
            "log_start_offset": p.log.log_start_offset, "error_message": None}


def produce_error(state: ClusterState, req: Request, error: str) -> Body:
    answer = {"throttle_time_ms": 0, "responses": [
        {"name": t["name"], "partition_responses": [
            {**_produce_error(error), "index": p["index"]} for p in t.get("partition_data") or []]}
        for t in req.body.get("topic_data") or []]}
    count_produce_errors(state, answer)
    return answer


SERVED = {ApiKey.PRODUCE: Served(handle_produce, produce_error)}
