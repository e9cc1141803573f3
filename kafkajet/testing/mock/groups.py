"""Committed offsets per consumer group, as Kafka's group coordinator keeps them (GroupMetadata's offsets).

Plain commits (OffsetCommit) take effect at once. Transactional ones (TxnOffsetCommit) are staged per producer id
and become committed only when the transaction's commit marker reaches the group, or vanish on abort. Group
membership (JoinGroup and the generation checks it brings) is not modelled: every commit is taken as from a
consumer that manages its own partitions (generation -1), which is what a transactional producer's offsets are.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkajet.cluster import TopicPartitionKey

# Kafka's offset.metadata.max.bytes default: longer metadata is refused with OFFSET_METADATA_TOO_LARGE.
MAX_METADATA_BYTES = 4096


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


class GroupOffsets:
    """Every group's committed and pending offsets. Not thread-safe: the cluster's lock guards it."""

    def __init__(self) -> None:
        self._committed: dict[str, dict[TopicPartitionKey, OffsetAndMetadata]] = {}
        # group -> producer id -> offsets staged by that producer's ongoing transaction
        self._pending: dict[str, dict[int, dict[TopicPartitionKey, OffsetAndMetadata]]] = {}

    def commit(self, group: str, tp: TopicPartitionKey, offset: OffsetAndMetadata) -> None:
        self._committed.setdefault(group, {})[tp] = offset

    def stage(self, group: str, producer_id: int, tp: TopicPartitionKey, offset: OffsetAndMetadata) -> None:
        self._pending.setdefault(group, {}).setdefault(producer_id, {})[tp] = offset

    def complete(self, group: str, producer_id: int, commit: bool) -> None:
        """The transaction marker reached the group: its staged offsets are committed or dropped."""
        staged = self._pending.get(group, {}).pop(producer_id, {})
        if commit:
            for tp, offset in staged.items():
                self.commit(group, tp, offset)

    def groups(self) -> list[str]:
        """The groups holding committed offsets (the only groups this mock has: it runs no group membership)."""
        return sorted(g for g, offsets in self._committed.items() if offsets)

    def committed(self, group: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return dict(self._committed.get(group, {}))

    def fetch(self, group: str, tp: TopicPartitionKey) -> OffsetAndMetadata | None:
        return self._committed.get(group, {}).get(tp)

    def has_pending(self, group: str, tp: TopicPartitionKey) -> bool:
        """An ongoing transaction will change this partition's offset (OffsetFetch require_stable waits)."""
        return any(tp in staged for staged in self._pending.get(group, {}).values())
