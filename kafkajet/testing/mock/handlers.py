"""The broker side of each API the mock cluster serves: request body in, response body out.

Handlers run on the server thread with the cluster lock held. They see the broker a request arrived at, so
leadership is checked as a real broker checks it.
"""

from __future__ import annotations

import logging

from kafkajet.errors import CorruptRecordError, error_for_code
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkajet.records import decode_batches
from kafkajet.testing.mock.coordinator_handlers import (
    coordinator_error_response,
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_end_txn,
    handle_find_coordinator,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_fetch,
    handle_transactional_init_producer_id,
    handle_txn_offset_commit,
)
from kafkajet.testing.mock.requests import Answer, Body, Handler, Request, code
from kafkajet.testing.mock.sasl import SASL_APIS
from kafkajet.testing.mock.sequences import last_sequence
from kafkajet.testing.mock.state import NO_LEADER, ClusterState, PartitionState

log = logging.getLogger("kafkajet.testing.mock")

_MAGIC_AT = 16
_LATEST, _EARLIEST, _MAX_TIMESTAMP, _EARLIEST_LOCAL = -1, -2, -3, -4
_READ_COMMITTED = 1


# --- Produce -------------------------------------------------------------------------------------------


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
    answer = {"responses": responses, "throttle_time_ms": 0}
    count_produce_errors(state, answer)
    return Answer(answer)


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
        return _produce_error("NOT_LEADER_OR_FOLLOWER", f"broker {req.broker_id} does not lead {topic}-{index}")
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


# --- Fetch and ListOffsets -----------------------------------------------------------------------------


def _epoch_error(p: PartitionState, client_epoch: int) -> str | None:
    """KIP-320: a client naming an older leader epoch is fenced; a newer one means our metadata lags."""
    if client_epoch < 0 or client_epoch == p.leader_epoch:
        return None
    return "FENCED_LEADER_EPOCH" if client_epoch < p.leader_epoch else "UNKNOWN_LEADER_EPOCH"


def _leader_error(state: ClusterState, req: Request, topic: str, index: int,
                  client_epoch: int) -> tuple[PartitionState | None, str | None]:
    p = state.partition(topic, index)
    if p is None:
        return None, "UNKNOWN_TOPIC_OR_PARTITION"
    if p.leader != req.broker_id:
        return p, "NOT_LEADER_OR_FOLLOWER"
    return p, _epoch_error(p, client_epoch)


def handle_fetch(state: ClusterState, req: Request) -> Answer:
    body = req.body
    committed = body.get("isolation_level", 0) == _READ_COMMITTED
    remaining = body.get("max_bytes", 0x7FFFFFFF)
    total = 0
    any_error = False
    responses = []
    for topic in body.get("topics") or []:
        name = topic["name"]
        parts = []
        for fp in topic.get("fetch_partitions") or []:
            index = fp["partition_index"]
            p, error = _leader_error(state, req, name, index, fp.get("current_leader_epoch", -1))
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


def handle_list_offsets(state: ClusterState, req: Request) -> Answer:
    committed = req.body.get("isolation_level", 0) == _READ_COMMITTED
    topics = []
    for topic in req.body.get("topics") or []:
        name = topic["name"]
        parts = []
        for lp in topic.get("partitions") or []:
            index = lp["partition_index"]
            p, error = _leader_error(state, req, name, index, lp.get("current_leader_epoch", -1))
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


# --- Metadata and cluster description ------------------------------------------------------------------


def _brokers(state: ClusterState) -> list[Body]:
    # Down brokers stay listed: the cluster has not noticed (as during a network partition), so clients keep
    # trying them and their leadership; set_leader() is the failover.
    return [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": None}
            for b in state.brokers.values()]


def _topic_metadata(state: ClusterState, name: str) -> Body:
    t = state.topics[name]
    parts = []
    for p in t.partitions:
        leaderless = p.leader == NO_LEADER
        parts.append({
            "error_code": code("LEADER_NOT_AVAILABLE") if leaderless else 0,
            "partition_index": p.index, "leader_id": p.leader, "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas), "isr_nodes": list(p.replicas), "offline_replicas": [],
        })
    return {"error_code": 0, "name": name, "is_internal": False, "partitions": parts}


def _requested_topics(req: Request) -> list[str] | None:
    """None for "all topics": an empty list in v0, null from v1 on."""
    topics = req.body.get("topics")
    if topics is None or (req.version == 0 and not topics):
        return None
    return [t["name"] for t in topics]


def handle_metadata(state: ClusterState, req: Request) -> Answer:
    names = _requested_topics(req)
    topics = []
    if names is None:
        topics = [_topic_metadata(state, n) for n in state.topics]
    else:
        allow_create = state.config.auto_create_topics and req.body.get("allow_auto_topic_creation", True)
        for name in names:
            if name not in state.topics:
                invalid = state.topic_name_error(name)
                if invalid or not allow_create:
                    err = "INVALID_TOPIC_EXCEPTION" if invalid else "UNKNOWN_TOPIC_OR_PARTITION"
                    topics.append({"error_code": code(err), "name": name, "is_internal": False, "partitions": []})
                    continue
                log.info("auto-creating topic %r with %d partitions", name, state.config.default_partitions)
                state.create_topic(name, state.config.default_partitions)
            topics.append(_topic_metadata(state, name))
    return Answer({"throttle_time_ms": 0, "brokers": _brokers(state), "cluster_id": state.cluster_id,
                   "controller_id": state.controller_id, "topics": topics})


def handle_describe_cluster(state: ClusterState, req: Request) -> Answer:
    brokers = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": None}
               for b in _brokers(state)]
    return Answer({"throttle_time_ms": 0, "error_code": 0, "error_message": None, "cluster_id": state.cluster_id,
                   "controller_id": state.controller_id, "brokers": brokers})


# --- Admin: topics -------------------------------------------------------------------------------------


def handle_create_topics(state: ClusterState, req: Request) -> Answer:
    results = []
    validate_only = req.body.get("validate_only", False)
    for spec in req.body.get("topics") or []:
        name = spec["name"]
        error, message = _create_topic(state, spec, validate_only)
        results.append({"name": name, "error_code": code(error) if error else 0, "error_message": message})
    return Answer({"throttle_time_ms": 0, "topics": results})


def _create_topic(state: ClusterState, spec: Body, validate_only: bool) -> tuple[str | None, str | None]:
    name = spec["name"]
    invalid = state.topic_name_error(name)
    if invalid:
        return "INVALID_TOPIC_EXCEPTION", invalid
    if name in state.topics:
        return "TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists"
    assignments = spec.get("assignments") or []
    leaders: list[int] | None = None
    if assignments:
        ordered = sorted(assignments, key=lambda a: a["partition_index"])
        if [a["partition_index"] for a in ordered] != list(range(len(ordered))):
            return "INVALID_REPLICA_ASSIGNMENT", "partition indexes must be 0..n-1"
        leaders = [a["broker_ids"][0] if a["broker_ids"] else -1 for a in ordered]
        if any(b not in state.brokers for b in leaders):
            return "INVALID_REPLICA_ASSIGNMENT", f"unknown broker in {leaders}"
        partitions = len(ordered)
    else:
        partitions = spec["num_partitions"]
        if partitions == -1:
            partitions = state.config.default_partitions
        if partitions < 1:
            return "INVALID_PARTITIONS", f"number of partitions must be positive, not {partitions}"
    rf = spec.get("replication_factor", -1)
    if rf > len(state.brokers):
        return "INVALID_REPLICATION_FACTOR", f"replication factor {rf} > {len(state.brokers)} brokers"
    if rf == 0 or rf < -1:
        return "INVALID_REPLICATION_FACTOR", f"replication factor must be positive, not {rf}"
    if not validate_only:
        state.create_topic(name, partitions, rf if rf > 0 else None, leaders)
    return None, None


def handle_delete_topics(state: ClusterState, req: Request) -> Answer:
    results = []
    for name in req.body.get("topic_names") or []:
        if state.topics.pop(name, None) is None:
            results.append({"name": name, "error_code": code("UNKNOWN_TOPIC_OR_PARTITION")})
        else:
            results.append({"name": name, "error_code": 0})
    return Answer({"throttle_time_ms": 0, "responses": results})


# --- Producer ids and versions -------------------------------------------------------------------------


def handle_init_producer_id(state: ClusterState, req: Request) -> Answer:
    if req.body.get("transactional_id") is not None:
        return handle_transactional_init_producer_id(state, req)
    # Kafka hands an idempotent (non-transactional) producer a fresh id every time, whatever id and epoch
    # a v3+ request names; epochs of idempotent producers are bumped by the client itself.
    return Answer({"throttle_time_ms": 0, "error_code": 0, "producer_id": state.next_producer_id(),
                   "producer_epoch": 0})


def api_versions_body(error: str | None = None, sasl: bool = False) -> Body:
    keys = [{"api_key": int(api), "min_version": lo, "max_version": hi}
            for api, (lo, hi) in advertised(sasl).items()]
    return {"error_code": code(error) if error else 0, "api_keys": keys, "throttle_time_ms": 0}


def handle_api_versions(state: ClusterState, req: Request) -> Answer:
    return Answer(api_versions_body(sasl=bool(state.config.sasl_mechanisms)))


HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.LIST_GROUPS: handle_list_groups,
}


def advertised(sasl: bool = False) -> dict[ApiKey, tuple[int, int]]:
    """Exactly what can be served: the APIs with a handler, at every version the codec reads and writes, and
    with `sasl` the SASL APIs (the server answers those itself: they act on the connection)."""
    apis = sorted([*HANDLERS, *(SASL_APIS if sasl else ())])
    return {api: SUPPORTED_VERSIONS[api] for api in apis if api in SUPPORTED_VERSIONS}


# --- Forced errors -------------------------------------------------------------------------------------


def error_response(state: ClusterState, req: Request, error: str) -> Body:
    """The response a broker would give if every partition/topic of the request failed with `error`."""
    c = code(error)
    api = req.header.api_key
    body = req.body
    if api == ApiKey.PRODUCE:
        answer = {"throttle_time_ms": 0, "responses": [
            {"name": t["name"], "partition_responses": [
                {**_produce_error(error), "index": p["index"]} for p in t.get("partition_data") or []]}
            for t in body.get("topic_data") or []]}
        count_produce_errors(state, answer)
        return answer
    if api == ApiKey.FETCH:
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
            {"topic": t["name"], "partition_responses": [
                {"partition": p["partition_index"], "error_code": c, "high_watermark": -1, "record_set": b""}
                for p in t.get("fetch_partitions") or []]}
            for t in body.get("topics") or []]}
    if api == ApiKey.LIST_OFFSETS:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": c} for p in t.get("partitions") or []]}
            for t in body.get("topics") or []]}
    if api == ApiKey.METADATA:
        names = _requested_topics(req)
        if names is None:
            names = list(state.topics)
        return {"throttle_time_ms": 0, "brokers": _brokers(state), "cluster_id": state.cluster_id,
                "controller_id": state.controller_id,
                "topics": [{"error_code": c, "name": n, "partitions": []} for n in names]}
    if api == ApiKey.CREATE_TOPICS:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "error_code": c, "error_message": error} for t in body.get("topics") or []]}
    if api == ApiKey.DELETE_TOPICS:
        return {"throttle_time_ms": 0, "responses": [
            {"name": n, "error_code": c} for n in body.get("topic_names") or []]}
    if api == ApiKey.INIT_PRODUCER_ID:
        return {"throttle_time_ms": 0, "error_code": c, "producer_id": -1, "producer_epoch": -1}
    if api == ApiKey.API_VERSIONS:
        return api_versions_body(error, sasl=bool(state.config.sasl_mechanisms))
    if api == ApiKey.SASL_HANDSHAKE:
        return {"error_code": c, "mechanisms": list(state.config.sasl_mechanisms)}
    if api == ApiKey.SASL_AUTHENTICATE:
        return {"error_code": c, "error_message": error, "auth_bytes": b"", "session_lifetime_ms": 0}
    if api == ApiKey.DESCRIBE_CLUSTER:
        return {"throttle_time_ms": 0, "error_code": c, "error_message": error, "cluster_id": state.cluster_id,
                "controller_id": -1, "brokers": []}
    coordinator = coordinator_error_response(req, error)
    if coordinator is not None:
        return coordinator
    raise ValueError(f"no error response shape for api key {api}")
