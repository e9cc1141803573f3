"""The streaming source's commits of processed offsets to a consumer group, so that lag monitors see a query.

Spark's own Kafka source never commits, so Burrow, kafka-consumer-groups and the Kafka UIs see nothing. The
source commits, as a "simple" group (OffsetCommit at generation -1, no member id), the offsets of batches
Spark has completed. Best effort: the round trips run on a thread of their own, so a trigger never waits for
the coordinator; a failure is logged with its cause and the newest offsets are tried again at the next
trigger. The query's checkpoint, not the group, stays the source of truth for where the query resumes.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from typing import Any

from kafkajet.errors import IllegalGenerationError, KafkaError, RebalanceInProgressError, UnknownMemberIdError
from kafkajet.spark.offsets import Offsets

log = logging.getLogger("kafkajet.spark")

# How a coordinator refuses a generation -1 commit to a group that has live members (Kafka's classic group
# coordinator and Tansu: UNKNOWN_MEMBER_ID; while the group rebalances: the other two).
_LIVE_MEMBERS = (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError)
# The settings of the source's fetch client an admin client does not take.
_FETCH_ONLY = ("isolation.level",)


def group_for(group_id: str | None, prefix: str | None, stable_key: str) -> str | None:
    """The group the source commits to: kafka.group.id as given (it wins over groupIdPrefix, as in Spark), or
    `<prefix>-<16 hex digits>` from `stable_key`, or None (no commits).

    A Python data source is told neither the query's id nor its checkpoint location (PySpark 4.3 hands the
    reader only the options given to readStream), so the suffix is a digest of what the query reads, which
    stays the same when the query restarts from its checkpoint."""
    if group_id:
        return group_id
    if prefix:
        return f"{prefix}-{hashlib.sha256(stable_key.encode()).hexdigest()[:16]}"
    return None


class GroupCommitter:
    """Commits offsets for one group from a thread of its own; `submit` never blocks on the broker."""

    def __init__(self, group_id: str, client_config: Mapping[str, Any], timeout_s: float) -> None:
        self.group_id = group_id
        self.config = {k: v for k, v in client_config.items() if k not in _FETCH_ONLY}
        self.timeout_s = timeout_s
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._cond = threading.Condition()
        self._pending: Offsets | None = None
        self._in_flight = False
        self._committed: Offsets | None = None  # what the broker last accepted
        self._thread: threading.Thread | None = None
        self._closed = False
        self._failing = False
        self._warned_live = False
        self._admin: Any = None

    def __getstate__(self) -> dict[str, Any]:
        # Readers are pickled to Spark's workers: the thread and connections stay in the process that made them.
        return {"group_id": self.group_id, "config": self.config, "timeout_s": self.timeout_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    @property
    def committed(self) -> Offsets | None:
        with self._cond:
            return None if self._committed is None else dict(self._committed)

    def submit(self, offsets: Offsets) -> None:
        """Commit `offsets` soon (the newest submitted wins); returns at once."""
        with self._cond:
            if self._closed or not offsets or offsets == self._committed:
                return
            self._pending = dict(offsets)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"kafkajet-commit-{self.group_id}",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout_s: float) -> bool:
        """Wait until what was submitted has been tried (committed or failed); False if still busy."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending is None and not self._in_flight, timeout_s)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(self.timeout_s)
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._closed)
                if self._closed:
                    return
                offsets, self._pending, self._in_flight = self._pending, None, True
            assert offsets is not None
            try:
                self._commit(offsets)
            finally:
                with self._cond:
                    self._in_flight = False
                    self._cond.notify_all()

    def _commit(self, offsets: Offsets) -> None:
        from kafkajet.admin import Admin

        try:
            if self._admin is None:
                self._admin = Admin(self.config)
            self._admin.commit_consumer_group_offsets(self.group_id, offsets, timeout_s=self.timeout_s)
        except KafkaError as e:
            self._failed(e)
            return
        except Exception as e:  # noqa: BLE001 - a commit is best effort: nothing it raises may reach the query
            log.warning("committing offsets to consumer group %r failed unexpectedly: %r", self.group_id, e)
            return
        with self._cond:
            self._committed = offsets
        if self._failing:
            log.info("committing offsets to consumer group %r works again", self.group_id)
        self._failing = False
        log.debug("committed %s to consumer group %r", offsets, self.group_id)

    def _failed(self, e: KafkaError) -> None:
        cause = getattr(e, "cause", None) or e
        if isinstance(cause, _LIVE_MEMBERS):
            if not self._warned_live:
                self._warned_live = True
                log.warning("consumer group %r has live members, so the broker refuses the query's offset commits "
                            "(%s); the query goes on and tries again at each trigger. Give the query a group of "
                            "its own (kafka.group.id or groupIdPrefix) for its lag to be seen", self.group_id, e)
            else:
                log.debug("consumer group %r still refuses the commit: %s", self.group_id, e)
        elif not self._failing:
            log.warning("committing offsets to consumer group %r failed (%s); the query goes on and tries again "
                        "at the next trigger", self.group_id, e)
        else:
            log.debug("committing offsets to consumer group %r failed again: %s", self.group_id, e)
        self._failing = True
