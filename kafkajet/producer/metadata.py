"""What the producer knows about the cluster: versioned, waitable Metadata around an immutable Cluster."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from kafkajet.backoff import ExponentialBackoff
from kafkajet.clock import Clock, now_ms

# Cluster and its parts live in kafkajet.cluster (shared with the admin and fetch clients); re-exported here
# for the producer's modules and their tests.
from kafkajet.cluster import Cluster, Node, PartitionInfo, TopicPartitionKey
from kafkajet.errors import KafkaError, KafkaTimeoutError

__all__ = ["Cluster", "Metadata", "Node", "PartitionInfo"]

log = logging.getLogger("kafkajet.producer.metadata")

# Metadata answers from v9 carry leader epochs a client may compare (Java's MetadataResponse.hasReliableLeaderEpochs).
RELIABLE_EPOCHS_FROM_VERSION = 9


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
        # Java's requestVersion: counts the updates asked for, so that an answer to a request sent before the
        # latest ask does not clear it (that answer may predate the change the ask was for).
        self._asked = 0
        self._asked_at_attempt = 0
        self._last_refresh_ms = 0.0
        self._last_attempt_ms = 0.0
        self._failures = 0
        self._max_age_ms = max_age_ms
        self._max_idle_ms = max_idle_ms
        self._backoff_ms = retry_backoff_ms
        # No jitter: refreshes are per client, not a herd of clients to spread; and tests drive it by the ms.
        self._backoff = ExponentialBackoff(retry_backoff_ms, 2, retry_backoff_max_ms, 0.0)
        self.last_error: KafkaError | None = None
        self._fatal: KafkaError | None = None
        # The last connection's authentication failure; cleared by the next metadata response.
        self.authentication_error: KafkaError | None = None
        # The newest leader epoch seen per partition, from metadata or a Produce answer's leader hint (Java's
        # lastSeenLeaderEpochs): an answer naming an older one never moves a leader back (KIP-320).
        self._epochs: dict[TopicPartitionKey, int] = {}
        self._topic_ids: dict[str, bytes | None] = {}

    # --- called by any thread -------------------------------------------------------------------

    def add_topic(self, topic: str, now_ms: float) -> None:
        with self._cond:
            if topic not in self._topics:
                self._need_update = True
                self._asked += 1
            self._topics[topic] = now_ms

    def request_update(self) -> int:
        with self._cond:
            self._need_update = True
            self._asked += 1
            return self.version

    def topics(self) -> list[str]:
        with self._cond:
            return list(self._topics)

    def wait_for_partitions(self, topic: Any, max_wait_ms: float, wake: Any) -> tuple[Cluster, int]:
        """What every send path does on a topic metadata does not know yet (send(), the batch paths, and
        AIOProducer off its loop): refuse a topic that is not a name, then wait for its partitions (at most
        max_wait_ms). The cluster view that knows it, and its partition count."""
        if type(topic) is not str or not topic:
            raise TypeError(f"topic must be a non-empty str, got {topic!r}")
        cluster = self.wait_for_topic(topic, max_wait_ms, wake)
        return cluster, cluster.partition_count(topic) or 0

    def wait_for_topic(self, topic: str, max_wait_ms: float, wake: Any, clock: Clock = now_ms) -> Cluster:
        """Block until `topic` has partitions in metadata, at most max_wait_ms (then KafkaTimeoutError)."""
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
                self._asked += 1
                wake()
                self._cond.wait(remaining / 1000.0)

    # --- called by the sender thread ------------------------------------------------------------

    def time_to_next_update(self, now_ms: float) -> float:
        """ms until a metadata request is due (0 = now): on demand with backoff, else at max age."""
        with self._cond:
            if not self._need_update:
                return max(0.0, self._last_refresh_ms + self._max_age_ms - now_ms)
            if self._failures:
                due = self._last_attempt_ms + self._backoff.backoff(self._failures - 1)
            elif self._last_refresh_ms:
                # Right after a response, asking again at once would hammer a broker while a leader moves.
                due = self._last_refresh_ms + self._backoff_ms
            else:
                due = 0.0
            return max(0.0, due - now_ms)

    def attempt_started(self, now_ms: float) -> list[str]:
        with self._cond:
            self._last_attempt_ms = now_ms
            self._asked_at_attempt = self._asked
            idle = [t for t, used in self._topics.items() if now_ms - used > self._max_idle_ms]
            for t in idle:
                del self._topics[t]
            return list(self._topics)

    @property
    def last_refresh_ms(self) -> float:
        """When metadata last arrived (kafkajet.clock ms; 0 before the first)."""
        return self._last_refresh_ms

    def update(self, cluster: Cluster, now_ms: float, *, reliable_epochs: bool = True) -> None:
        """Take a Metadata answer's view; a partition whose leader epoch is older than the one already seen
        keeps what the producer knew (`reliable_epochs`: the answer's version carries comparable epochs)."""
        with self._cond:
            cluster = self._keep_newer_leaders(cluster, reliable_epochs)
            self.cluster = cluster
            self.version += 1
            self._last_refresh_ms = now_ms
            self._failures = 0
            self.authentication_error = None
            missing = [t for t in self._topics if cluster.partition_count(t) is None]
            # A topic we asked for but did not get back is still pending (e.g. being auto-created); an update
            # asked for while this answer's request was out is still owed.
            self._need_update = bool(missing) or self._asked != self._asked_at_attempt
            self._cond.notify_all()

    def _keep_newer_leaders(self, new: Cluster, reliable_epochs: bool) -> Cluster:
        """Java's Metadata.updateLatestMetadata, partition by partition: an epoch at least as new as the one
        seen is taken and remembered; an older one keeps the cached partition; no epoch forgets the one seen. A
        topic whose id changed was re-created: its epochs start again."""
        old = self.cluster
        kept: dict[str, tuple[PartitionInfo, ...]] = {}
        for topic, parts in new.partitions.items():
            topic_id = new.topic_ids.get(topic)
            recreated = topic_id is not None and topic_id != self._topic_ids.get(topic)
            out: list[PartitionInfo] = []
            stale = False
            for p in parts:
                tp = (topic, p.partition)
                seen = self._epochs.get(tp)
                if not reliable_epochs or p.leader_epoch < 0:
                    self._epochs.pop(tp, None)
                    out.append(p)
                elif recreated or seen is None or p.leader_epoch >= seen:
                    self._epochs[tp] = p.leader_epoch
                    out.append(p)
                else:
                    log.debug("metadata names leader epoch %d for %s-%d, older than %d: keeping leader %s",  # pragma: no mutate (log text)
                              p.leader_epoch, topic, p.partition, seen, old.leader_for(topic, p.partition))
                    cached = old.partition_info(topic, p.partition)
                    # Nothing cached (the topic left the view meanwhile): no leader, until an answer as new.
                    out.append(cached if cached is not None else dataclasses.replace(p, leader=-1))
                    stale = True
            if stale:
                kept[topic] = tuple(out)
        for topic in new.partitions:
            self._topic_ids[topic] = new.topic_ids.get(topic)
        for tp in [tp for tp in self._epochs if tp[0] not in new.partitions]:
            del self._epochs[tp]
        if not kept:
            return new
        # The brokers are this answer's, as Java's MetadataCache: a kept leader it no longer lists has no address,
        # and its partition waits for an answer that knows where the leader went.
        return dataclasses.replace(new, partitions={**new.partitions, **kept})

    def update_leaders(self, leaders: Mapping[TopicPartitionKey, tuple[int, int]],
                       nodes: Iterable[Node]) -> set[TopicPartitionKey]:
        """Leader hints from a Produce answer (KIP-951): (leader id, epoch) per partition and the leaders'
        addresses. As Java's Metadata.updatePartitionLeadership, a hint is taken only when its epoch is newer
        than the one known, its leader's address is known and the partition is in the view. Returns the
        partitions whose leader moved."""
        with self._cond:
            old = self.cluster
            all_nodes = {n.node_id: n for n in nodes}
            for node_id, node in old.nodes.items():
                all_nodes.setdefault(node_id, node)
            updated: dict[str, dict[int, PartitionInfo]] = {}
            for (topic, partition), (leader, epoch) in leaders.items():
                if leader < 0 or epoch < 0:
                    continue
                known = old.leader_epoch_for(topic, partition)
                if known >= 0 and epoch <= known:
                    continue
                cached = old.partition_info(topic, partition)
                if leader not in all_nodes or cached is None:
                    continue
                updated.setdefault(topic, {})[partition] = dataclasses.replace(cached, leader=leader,
                                                                                 leader_epoch=epoch)
                self._epochs[(topic, partition)] = epoch
            if not updated:
                return set()
            partitions = dict(old.partitions)
            for topic, parts in updated.items():
                partitions[topic] = tuple(parts.get(p.partition, p) for p in old.partitions[topic])
            self.cluster = dataclasses.replace(old, nodes=all_nodes, partitions=partitions)
            self._cond.notify_all()
            return {(t, p) for t, parts in updated.items() for p in parts}

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

