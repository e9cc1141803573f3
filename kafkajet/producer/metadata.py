"""What the producer knows about the cluster: versioned, waitable Metadata around an immutable Cluster."""

from __future__ import annotations

import threading
from typing import Any

from kafkajet.backoff import ExponentialBackoff
from kafkajet.clock import Clock, now_ms

# Cluster and its parts live in kafkajet.cluster (shared with the admin and fetch clients); re-exported here
# for the producer's modules and their tests.
from kafkajet.cluster import Cluster, Node, PartitionInfo
from kafkajet.errors import KafkaError, KafkaTimeoutError

__all__ = ["Cluster", "Metadata", "Node", "PartitionInfo"]


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
        # No jitter: refreshes are per client, not a herd of clients to spread; and tests drive it by the ms.
        self._backoff = ExponentialBackoff(retry_backoff_ms, 2, retry_backoff_max_ms, 0.0)
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
            idle = [t for t, used in self._topics.items() if now_ms - used > self._max_idle_ms]
            for t in idle:
                del self._topics[t]
            return list(self._topics)

    @property
    def last_refresh_ms(self) -> float:
        """When metadata last arrived (kafkajet.clock ms; 0 before the first)."""
        return self._last_refresh_ms

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

