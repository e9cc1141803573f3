"""Metadata and DescribeCluster: the brokers (down ones included), the controller, and topics with their
leaders; Metadata auto-creates a topic it is asked about when the cluster allows it.
"""

from __future__ import annotations

import logging

from kafkajet.protocol import ApiKey
from kafkajet.testing.mock.requests import Answer, Body, Request, Served, Versions, code
from kafkajet.testing.mock.state import NO_LEADER, ClusterState

# v10+ answer topic ids, v12+ take a topic by id alone (a null name), v13 adds an error code for the whole
# answer (always none here).
VERSIONS: Versions = {ApiKey.METADATA: (0, 13), ApiKey.DESCRIBE_CLUSTER: (0, 0)}


log = logging.getLogger("kafkajet.testing.mock")


def _brokers(state: ClusterState) -> list[Body]:
    # Down brokers stay listed: the cluster has not noticed (as during a network partition), so clients keep
    # trying them and their leadership; set_leader() is the failover.
    return [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
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
    return {"error_code": 0, "name": name, "topic_id": t.topic_id, "is_internal": False, "partitions": parts}


def _requested_topics(state: ClusterState, req: Request) -> list[str | bytes] | None:
    """None for "all topics": an empty list in v0, null from v1 on. A topic asked for by id alone (v12+, a
    null name) is its name when the id is known, else the id."""
    topics = req.body.get("topics")
    if topics is None or (req.version == 0 and not topics):
        return None
    by_id = {t.topic_id: name for name, t in state.topics.items()}
    return [t["name"] if t.get("name") is not None else by_id.get(t["topic_id"], t["topic_id"]) for t in topics]


def handle_metadata(state: ClusterState, req: Request) -> Answer:
    names = _requested_topics(state, req)
    topics = []
    if names is None:
        topics = [_topic_metadata(state, n) for n in state.topics]
    else:
        allow_create = state.config.auto_create_topics and req.body.get("allow_auto_topic_creation", True)
        for name in names:
            if isinstance(name, bytes):
                topics.append({"error_code": code("UNKNOWN_TOPIC_ID"), "name": None, "topic_id": name,
                               "is_internal": False, "partitions": []})
                continue
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
    brokers = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
               for b in _brokers(state)]
    return Answer({"throttle_time_ms": 0, "error_code": 0, "error_message": None, "cluster_id": state.cluster_id,
                   "controller_id": state.controller_id, "brokers": brokers})


def metadata_error(state: ClusterState, req: Request, error: str) -> Body:
    names = _requested_topics(state, req)
    if names is None:
        names = list(state.topics)
    return {"throttle_time_ms": 0, "brokers": _brokers(state), "cluster_id": state.cluster_id,
            "controller_id": state.controller_id,
            "topics": [{"error_code": code(error), "name": None if isinstance(n, bytes) else n,
                        "topic_id": n if isinstance(n, bytes) else None, "partitions": []} for n in names]}


def describe_cluster_error(state: ClusterState, req: Request, error: str) -> Body:
    return {"throttle_time_ms": 0, "error_code": code(error), "error_message": error, "cluster_id": state.cluster_id,
            "controller_id": -1, "brokers": []}


SERVED = {
    ApiKey.METADATA: Served(handle_metadata, metadata_error),
    ApiKey.DESCRIBE_CLUSTER: Served(handle_describe_cluster, describe_cluster_error),
}
