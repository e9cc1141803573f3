"""What the producer knows about the cluster: an immutable Cluster snapshot and versioned, waitable Metadata."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkajet.errors import BrokerError, KafkaError, KafkaTimeoutError, make_error


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
    partition_counts: Mapping[str, int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        # Derived once per snapshot so the per-record path is a dict lookup.
        leaders: dict[tuple[str, int], int] = {}
        available: dict[str, tuple[int, ...]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        for topic, parts in self.partitions.items():
            avail = []
            for p in parts:
                if p.leader >= 0 and p.leader in self.nodes:
                    leaders[(topic, p.partition)] = p.leader
                    avail.append(p.partition)
                    by_node.setdefault(p.leader, []).append(p)
            available[topic] = tuple(avail)
        object.__setattr__(self, "_leaders", leaders)
        object.__setattr__(self, "_available", available)
        object.__setattr__(self, "_by_node", {k: tuple(v) for k, v in by_node.items()})
        object.__setattr__(self, "partition_counts", {t: len(p) for t, p in self.partitions.items()})

    def leader_for(self, topic: str, partition: int) -> int | None:
        return self._leaders.get((topic, partition))  # type: ignore[attr-defined, no-any-return]

    def partition_count(self, topic: str) -> int | None:
        return self.partition_counts.get(topic)  # type: ignore[no-any-return]

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        return self._available.get(topic, ())  # type: ignore[attr-defined, no-any-return]

    def partitions_for_node(self, node_id: int) -> tuple[PartitionInfo, ...]:
        return self._by_node.get(node_id, ())  # type: ignore[attr-defined, no-any-return]

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self.partitions.get(topic, ())

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self.partitions)


def cluster_from_response(body: Mapping[str, Any]) -> Cluster:
    """Build a Cluster from a decoded Metadata response body."""
    nodes = {
        b["node_id"]: Node(b["node_id"], b["host"], b["port"], b.get("rack"))
        for b in body.get("brokers", ())
    }
    partitions: dict[str, tuple[PartitionInfo, ...]] = {}
    errors: dict[str, BrokerError] = {}
    for t in body.get("topics", ()):
        name = t["name"]
        err = make_error(t.get("error_code", 0), f"topic '{name}'")
        if err is not None:
            errors[name] = err
            continue
        parts = sorted(
            (
                PartitionInfo(
                    name,
                    p["partition_index"],
                    p.get("leader_id", -1) if p.get("error_code", 0) in (0, 9) else -1,
                    p.get("leader_epoch", -1),
                    tuple(p.get("replica_nodes", ())),
                    tuple(p.get("isr_nodes", ())),
                )
                for p in t.get("partitions", ())
            ),
            key=lambda p: p.partition,
        )
        partitions[name] = tuple(parts)
    return Cluster(nodes, partitions, errors, body.get("cluster_id"), body.get("controller_id", -1))


class Metadata:
    """The producer's metadata: the current Cluster, the topics it needs, and when to refresh.

    Callers of send() wait here (with a deadline) for a topic to appear; the sender thread fetches and
    calls update(). Every update bumps `version`, so a waiter can tell "a response arrived" from "time passed".
    """

    def __init__(self, *, max_age_ms: float, max_idle_ms: float, retry_backoff_ms: float,
                 retry_backoff_max_ms: float) -> None:
        self._cond = threading.Condition()
        self.cluster = Cluster()
        self.version = 0
        self._topics: dict[str, float] = {}  # topic -> last time it was used (monotonic ms)
        self._need_update = True
        self._last_refresh_ms = 0.0
        self._last_attempt_ms = 0.0
        self._failures = 0
        self._max_age_ms = max_age_ms
        self._max_idle_ms = max_idle_ms
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self.last_error: KafkaError | None = None
        self._fatal: KafkaError | None = None
        # The last connection's authentication failure; cleared by the next metadata response.
        self.authentication_error: KafkaError | None = None

    # --- called by any thread -------------------------------------------------------------------

    def add_topic(self, topic: str, now_ms: float) -> None:
        with self._cond:
            if topic not in self._topics:
                self._need_update = True
            self._topics[topic] = now_ms

    def request_update(self) -> int:
        with self._cond:
            self._need_update = True
            return self.version

    def topics(self) -> list[str]:
        with self._cond:
            return list(self._topics)

    def wait_for_topic(self, topic: str, max_wait_ms: float, wake: Any, clock: Any = None) -> Cluster:
        """Block until `topic` has partitions in metadata, at most max_wait_ms (then KafkaTimeoutError)."""
        clock = clock or (lambda: time.monotonic() * 1000.0)
        now = clock()
        deadline_ms = now + max_wait_ms
        self.add_topic(topic, now)
        with self._cond:
            while True:
                cluster = self.cluster
                if cluster.partition_count(topic):
                    return cluster
                err = cluster.topic_errors.get(topic)
                if err is not None and not err.retriable:
                    raise err
                if self._fatal is not None:
                    raise self._fatal
                if self.authentication_error is not None:
                    raise self.authentication_error
                remaining = deadline_ms - clock()
                if remaining <= 0:
                    cause = err or self.last_error
                    raise KafkaTimeoutError(
                        f"Topic '{topic}' not present in metadata after {max_wait_ms:.0f} ms", cause
                    )
                self._need_update = True
                wake()
                self._cond.wait(remaining / 1000.0)

    # --- called by the sender thread ------------------------------------------------------------

    def time_to_next_update(self, now_ms: float) -> float:
        """ms until a metadata request is due (0 = now): on demand with backoff, else at max age."""
        with self._cond:
            if not self._need_update:
                return max(0.0, self._last_refresh_ms + self._max_age_ms - now_ms)
            if self._failures:
                backoff = min(self._backoff_ms * 2 ** (self._failures - 1), self._backoff_max_ms)
                due = self._last_attempt_ms + backoff
            elif self._last_refresh_ms:
                # Right after a response, asking again at once would hammer a broker while a leader moves.
                due = self._last_refresh_ms + self._backoff_ms
            else:
                due = 0.0
            return max(0.0, due - now_ms)

    def attempt_started(self, now_ms: float) -> list[str]:
        with self._cond:
            self._last_attempt_ms = now_ms
            idle = [t for t, used in self._topics.items() if now_ms - used > self._max_idle_ms]
            for t in idle:
                del self._topics[t]
            return list(self._topics)

    def update(self, cluster: Cluster, now_ms: float) -> None:
        with self._cond:
            self.cluster = cluster
            self.version += 1
            self._last_refresh_ms = now_ms
            self._failures = 0
            self.authentication_error = None
            missing = [t for t in self._topics if cluster.partition_count(t) is None]
            # A topic we asked for but did not get back is still pending (e.g. being auto-created).
            self._need_update = bool(missing)
            self._cond.notify_all()

    def failed(self, error: KafkaError, now_ms: float) -> None:
        with self._cond:
            self.last_error = error
            self._failures += 1
            self._need_update = True
            self._cond.notify_all()

    def authentication_failed(self, error: KafkaError) -> None:
        """Waiters raise `error` now instead of waiting out max.block.ms; a later success clears it."""
        with self._cond:
            self.authentication_error = error
            self.last_error = error
            self._cond.notify_all()

    def fatal(self, error: KafkaError) -> None:
        with self._cond:
            self._fatal = error
            self._cond.notify_all()

