"""Offset arithmetic of the source, without I/O: Spark's offset JSON, the per-trigger rate limit, splitting
ranges across tasks, and what counts as data loss. The rules are those of Spark's Kafka source
(KafkaMicroBatchStream.rateLimit, KafkaOffsetRangeCalculator), so a query behaves as it would with Spark's."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from kafkajet.cluster import TopicPartitionKey

Offsets = dict[TopicPartitionKey, int]


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON: {"topic": {"0": 23, "1": 42}}."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def rate_limit(start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int], limit: int) -> Offsets:
    """At most `limit` records in all, shared in proportion to what each partition has waiting; a partition
    with little waiting still gets at least one (Spark: "don't completely starve small topic partitions")."""
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1 or total <= limit:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        share = limit * (sizes[tp] / total)
        out[tp] = min(end, start[tp] + (math.ceil(share) if share < 1 else math.floor(share)))
    return out


def split(ranges: list[OffsetRange], min_partitions: int | None,
          max_records_per_partition: int | None) -> list[OffsetRange]:
    """Non-empty ranges, cut so none holds more than max_records_per_partition, then (when there are fewer
    than min_partitions) the large ones cut further in proportion to their size."""
    out = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        out = [part for r in out for part in _divide(r, math.ceil(r.size / max_records_per_partition))]
    if min_partitions is not None and len(out) < min_partitions:
        total = sum(r.size for r in out)
        out = [part for r in out for part in _divide(r, max(round(r.size / total * min_partitions), 1))]
    return out


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    if parts <= 1:
        return [r]
    bounds = [r.start + (r.size * i) // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def data_loss(tp: TopicPartitionKey, start: int, earliest: int, latest: int) -> str | None:
    """Why reading from `start` would lose or skip data, or None: records before it were deleted (retention,
    a recreated topic), or it lies past the log's end."""
    topic, partition = tp
    if start < earliest:
        return (f"{topic}-{partition}: offsets {start} to {earliest - 1} are no longer in Kafka (aged out by "
                "retention, or the topic was deleted and recreated); some data may have been lost")
    if start > latest:
        return (f"{topic}-{partition}: offset {start} is past the end of the log ({latest}); the topic may have "
                "been deleted and recreated, so data may have been missed")
    return None


DATA_LOSS_ADVICE = ("If you want the query to go on in such cases, set the source option failOnDataLoss to false "
                    "(it then skips to what is available, with a warning).")
