"""The cluster as a Metadata response describes it: brokers, topics, partitions and their leaders.

One reader of Metadata responses for every client: the producer's metadata, the admin client and the fetch
client all build a Cluster from the response instead of reading its fields themselves; and one writer of
the Metadata request they all send (metadata_request_body).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kafkajet.errors import NO_ERROR, BrokerError, ReplicaNotAvailableError, make_error

# A partition whose replica list is incomplete still has a usable leader.
_LEADER_USABLE = (NO_ERROR, ReplicaNotAvailableError.code)


class TopicPartition(NamedTuple):
    """A partition of a topic, as users name one (offsets to commit, partitions to read). A tuple, so
    ("t", 0) and TopicPartition("t", 0) are the same key in a dict."""

    topic: str
    partition: int


# How the client's internals key a partition: a plain tuple, which the send path builds per record without a
# NamedTuple's cost. A TopicPartition is one (a tuple subclass), so the two are the same key in a dict.
TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader right now
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class Cluster:
    """One consistent view of the cluster; replaced whole on every metadata response, never mutated."""

    nodes: Mapping[int, Node] = field(default_factory=dict)
    partitions: Mapping[str, tuple[PartitionInfo, ...]] = field(default_factory=dict)
    topic_errors: Mapping[str, BrokerError] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    internal_topics: frozenset[str] = frozenset()
    topic_ids: Mapping[str, Any] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        # Derived once per snapshot so the per-record path is a dict lookup.
        leaders: dict[tuple[str, int], int] = {}
        epochs: dict[tuple[str, int], int] = {}
        available: dict[str, tuple[int, ...]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        for topic, parts in self.partitions.items():
            avail = []
            for p in parts:
                epochs[(topic, p.partition)] = p.leader_epoch
                if p.leader >= 0 and p.leader in self.nodes:
                    leaders[(topic, p.partition)] = p.leader
                    avail.append(p.partition)
                    by_node.setdefault(p.leader, []).append(p)
            available[topic] = tuple(avail)
        object.__setattr__(self, "_leaders", leaders)
        object.__setattr__(self, "_epochs", epochs)
        object.__setattr__(self, "_available", available)
        object.__setattr__(self, "_by_node", {k: tuple(v) for k, v in by_node.items()})
        object.__setattr__(self, "partition_counts", {t: len(p) for t, p in self.partitions.items()})

    def leader_for(self, topic: str, partition: int) -> int | None:
        return self._leaders.get((topic, partition))  # type: ignore[attr-defined, no-any-return]

    def leader_epoch_for(self, topic: str, partition: int) -> int:
        """The partition's leader epoch as this view knows it; -1 when unknown (Metadata below v7)."""
        return self._epochs.get((topic, partition), -1)  # type: ignore[attr-defined, no-any-return]

    def partition_info(self, topic: str, partition: int) -> PartitionInfo | None:
        for p in self.partitions.get(topic, ()):
            if p.partition == partition:
                return p
        return None

    def partition_count(self, topic: str) -> int | None:
        return self.partition_counts.get(topic)

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        return self._available.get(topic, ())  # type: ignore[attr-defined, no-any-return]

    def available_partitions_in_rack(self, topic: str, rack: str) -> tuple[int, ...]:
        """The topic's partitions with a leader in `rack` (KIP-1123); asked once per sticky switch, so not kept."""
        leaders = self._leaders  # type: ignore[attr-defined]
        nodes = self.nodes
        return tuple(p for p in self.available_partitions(topic) if nodes[leaders[(topic, p)]].rack == rack)

    def partitions_for_node(self, node_id: int) -> tuple[PartitionInfo, ...]:
        return self._by_node.get(node_id, ())  # type: ignore[attr-defined, no-any-return]

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self.partitions.get(topic, ())

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self.partitions)

    @classmethod
    def from_metadata_response(cls, body: Mapping[str, Any]) -> Cluster:
        """The Cluster a decoded Metadata response describes: the one reader of brokers, topics, partitions."""
        nodes = {
            b["node_id"]: Node(b["node_id"], b["host"], b["port"], b.get("rack"))
            for b in body.get("brokers") or ()
        }
        partitions: dict[str, tuple[PartitionInfo, ...]] = {}
        errors: dict[str, BrokerError] = {}
        internal: set[str] = set()
        topic_ids: dict[str, Any] = {}
        for t in body.get("topics") or ():
            name = t["name"]
            err = make_error(t.get("error_code", NO_ERROR), f"topic '{name}'")
            if err is not None:
                errors[name] = err
                continue
            if t.get("is_internal"):
                internal.add(name)
            topic_id = t.get("topic_id")
            # Metadata below v10, and brokers that keep no ids, answer the zero uuid: Kafka's "no id".
            topic_ids[name] = topic_id if topic_id and any(topic_id) else None
            parts = sorted(
                (
                    PartitionInfo(
                        name,
                        p["partition_index"],
                        p.get("leader_id", -1) if p.get("error_code", NO_ERROR) in _LEADER_USABLE else -1,
                        p.get("leader_epoch", -1),
                        tuple(p.get("replica_nodes") or ()),
                        tuple(p.get("isr_nodes") or ()),
                    )
                    for p in t.get("partitions") or ()
                ),
                key=lambda p: p.partition,
            )
            partitions[name] = tuple(parts)
        return cls(nodes, partitions, errors, body.get("cluster_id"), body.get("controller_id", -1),
                   frozenset(internal), topic_ids)


def format_uuid(raw: bytes) -> str:
    """A topic id as Kafka prints one (Uuid.toString: URL-safe base64, unpadded)."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def metadata_request_body(topics: list[str] | None, *, version: int | None = None,
                          allow_auto_topic_creation: bool = False) -> dict[str, Any]:
    """The Metadata request every client sends; topics None asks for every topic, [] (v1+) for brokers and
    controller only.

    Metadata v0 has no null array: there an empty list means every topic. `version` matters only for None.
    """
    if topics is None and version == 0:
        wanted: list[dict[str, Any]] | None = []
    else:
        wanted = None if topics is None else [{"name": t, "topic_id": None} for t in topics]
    return {
        "topics": wanted,
        "allow_auto_topic_creation": allow_auto_topic_creation,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
