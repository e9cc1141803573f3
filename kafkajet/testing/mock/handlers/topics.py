"""CreateTopics and DeleteTopics (the admin client's): names checked as Kafka checks them, explicit replica
assignments or a partition count, replication factors up to the number of brokers, validate_only.
"""

from __future__ import annotations

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.requests import Answer, Body, Request, Served, Versions, code
from kafkajet.testing.mock.state import ClusterState

VERSIONS: Versions = {ApiKey.CREATE_TOPICS: (0, 3), ApiKey.DELETE_TOPICS: (1, 4)}


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


def create_topics_error(state: ClusterState, req: Request, error: str) -> Body:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t["name"], "error_code": code(error), "error_message": error} for t in req.body.get("topics") or []]}


def delete_topics_error(state: ClusterState, req: Request, error: str) -> Body:
    return {"throttle_time_ms": 0, "responses": [
        {"name": n, "error_code": code(error)} for n in req.body.get("topic_names") or []]}


SERVED = {
    ApiKey.CREATE_TOPICS: Served(handle_create_topics, create_topics_error),
    ApiKey.DELETE_TOPICS: Served(handle_delete_topics, delete_topics_error),
}
