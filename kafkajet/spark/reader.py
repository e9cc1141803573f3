"""The source's readers: batch (spark.read) and streaming (spark.readStream), as Spark's Kafka source.

The driver plans offset ranges (`Planner`, one FetchClient); each Spark task reads its range and yields
Arrow record batches (`read_range`). Readers are pickled to the executors, so they hold options and plain
data only; a planner's connections live in the driver process and are made on first use.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kafkajet.cluster import TopicPartitionKey
from kafkajet.errors import ConfigError, KafkaError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from kafkajet.spark.group_commit import GroupCommitter
from kafkajet.spark.offsets import (
    DATA_LOSS_ADVICE,
    OffsetRange,
    Offsets,
    data_loss,
    from_json,
    rate_limit,
    split,
    to_json,
)
from kafkajet.spark.source_options import EARLIEST, LATEST, OffsetSpec, SourceOptions

log = logging.getLogger("kafkajet.spark")


class KafkaInputPartition(InputPartition):
    def __init__(self, index: int, r: OffsetRange) -> None:
        super().__init__(index)
        self.topic = r.topic
        self.partition = r.partition
        self.start = r.start
        self.end = r.end


def read_range(part: KafkaInputPartition, opts: SourceOptions) -> Iterator[Any]:
    """One task: the records of its range as Arrow record batches (one per Fetch answer)."""
    from kafkajet.fetch import FetchClient
    from kafkajet.spark.arrow_records import to_arrow

    start, end = part.start, part.end
    if start >= end:
        return
    with FetchClient(opts.fetch_config) as client:
        try:
            for batches in client.fetch_batches(part.topic, part.partition, start, end, max_bytes=4 << 20,
                                                decode=False):
                rb = to_arrow(batches, part.topic, part.partition, start, end, opts.include_headers)
                if rb.num_rows:
                    if opts.formats:
                        from kafkajet.spark.registered_batches import decode_batch

                        rb = decode_batch(rb, dict(opts.formats), part.topic, part.partition)
                    yield rb
        except OffsetOutOfRangeError as e:
            # Deleted while the query ran (retention): Spark's rule decides between failing and skipping.
            earliest, _ = client.offsets(part.topic, part.partition)
            problem = data_loss((part.topic, part.partition), start, earliest, end)
            if opts.fail_on_data_loss or problem is None:
                raise KafkaError(f"{problem or e}. {DATA_LOSS_ADVICE}") from e
            log.warning("%s; skipping to offset %d (failOnDataLoss=false)", problem, earliest)
            yield from read_range(KafkaInputPartition(0, OffsetRange(part.topic, part.partition, earliest, end)),
                                  opts)


class Planner:
    """The driver's view of the subscription: its partitions, their offsets, and where ranges start."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_client": None}  # connections stay in the process that made them

    @property
    def client(self) -> Any:
        if self._client is None:
            from kafkajet.fetch import FetchClient

            self._client = FetchClient(self.opts.fetch_config)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def partitions(self) -> list[TopicPartitionKey]:
        sub = self.opts.subscription
        if sub.pattern is not None:
            return [(t, p) for t in self.client.topics() if sub.matches(t) for p in self.client.partitions(t)]
        out: list[TopicPartitionKey] = []
        for topic in sub.topics:
            try:
                existing = self.client.partitions(topic)
            except UnknownTopicOrPartitionError:
                raise ConfigError(f"topic {topic!r} ({sub.describe()}) does not exist on "
                                  f"{self.opts.fetch_config['bootstrap.servers']}: create it first") from None
            if sub.assigned:
                wanted = [p for t, p in sub.assigned if t == topic]
                missing = sorted(set(wanted) - set(existing))
                if missing:
                    raise ConfigError(f"option assign names partitions {missing} of {topic!r}, which has "
                                      f"{len(existing)}")
                out.extend((topic, p) for p in wanted)
            else:
                out.extend((topic, p) for p in existing)
        return out

    def bounds(self, tps: list[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        return {tp: self.client.offsets(*tp) for tp in tps}

    def resolve(self, spec: OffsetSpec, bounds: dict[TopicPartitionKey, tuple[int, int]]) -> Offsets:
        """Where `spec` puts each partition (absolute offsets; latest means the end of the log now)."""
        if spec.kind in ("earliest", "latest"):
            return {tp: lo if spec.kind == "earliest" else hi for tp, (lo, hi) in bounds.items()}
        if spec.kind == "offsets":
            missing = sorted(set(bounds) - set(spec.offsets))
            if missing:
                raise ConfigError(f"option {spec.option} gives offsets, so it must name every partition read; "
                                  f"missing: {missing} (use -2 for earliest, -1 for latest)")
            return {tp: bounds[tp][0] if spec.offsets[tp] == EARLIEST else bounds[tp][1]
                    if spec.offsets[tp] == LATEST else spec.offsets[tp] for tp in bounds}
        out: Offsets = {}
        for tp, (_, hi) in bounds.items():
            when = spec.timestamp if spec.kind == "timestamp" else spec.offsets.get(tp)
            if when is None:
                raise ConfigError(f"option {spec.option} must name every partition read; missing: {tp}")
            found = self.client.offset_for_time(tp[0], tp[1], when)
            if found is None:
                # No record that late: an ending range ends at the log's end; a start does so only when asked.
                if not spec.option.startswith("ending") and self.opts.timestamp_strategy != "latest":
                    raise ConfigError(
                        f"option {spec.option}: {tp[0]}-{tp[1]} has no record at or after timestamp {when}; "
                        "set startingOffsetsByTimestampStrategy=latest to start at the end instead")
                found = hi
            out[tp] = found
        return out

    def checked(self, start: Offsets, bounds: dict[TopicPartitionKey, tuple[int, int]]) -> Offsets:
        """start, with data loss (offsets deleted, or past the end) failing or skipped as failOnDataLoss says."""
        out = dict(start)
        for tp, offset in start.items():
            if tp not in bounds:
                problem: str | None = f"{tp[0]}-{tp[1]} is gone (the topic was deleted?)"
            else:
                problem = data_loss(tp, offset, *bounds[tp])
            if problem is None:
                continue
            if self.opts.fail_on_data_loss:
                raise KafkaError(f"{problem}. {DATA_LOSS_ADVICE}")
            log.warning("%s (failOnDataLoss=false: going on)", problem)
            if tp in bounds:
                lo, hi = bounds[tp]
                out[tp] = lo if offset < lo else hi
            else:
                del out[tp]
        return out

    def input_partitions(self, start: Offsets, end: Offsets) -> list[KafkaInputPartition]:
        ranges = [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for (t, p) in sorted(end) if (t, p) in start]
        for r in ranges:
            if r.start > r.end:
                raise ConfigError(f"{r.topic}-{r.partition}: the starting offset {r.start} is after the ending "
                                  f"offset {r.end}")
        parts = split(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return [KafkaInputPartition(i, r) for i, r in enumerate(parts)]


class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[KafkaInputPartition]:
        planner = Planner(self.opts)
        try:
            bounds = planner.bounds(planner.partitions())
            start = planner.checked(planner.resolve(self.opts.starting, bounds), bounds)
            end = planner.resolve(self.opts.ending, bounds)
            end = {tp: min(o, bounds[tp][1]) for tp, o in end.items()}  # nothing past the log's end yet
            return planner.input_partitions(start, end)
        finally:
            planner.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # nothing to read: Spark still runs one task, with a placeholder partition
        return read_range(partition, self.opts)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offset ranges; offsets are Spark's Kafka offset JSON, kept in the checkpoint."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.planner = Planner(opts)
        self._available_now: Offsets | None = None
        self._last_trigger = time.monotonic()
        self.committer = (GroupCommitter(opts.group_id, opts.fetch_config, opts.fetch_config["request.timeout.ms"] / 1000)
                          if opts.group_id else None)

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        bounds = self.planner.bounds(self.planner.partitions())
        return to_json(self.planner.resolve(self.opts.starting, bounds))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        bounds = self.planner.bounds(self.planner.partitions())
        self._available_now = {tp: hi for tp, (_, hi) in bounds.items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802
        latest = self._latest(start, limit)
        self._commit_completed(start, ending=self._available_now is not None and latest == start)
        return latest

    def _commit_completed(self, start: dict[str, Any], *, ending: bool) -> None:
        """Commit `start`, the end of the last completed batch, to the group.

        PySpark calls commit(end) only when it plans a further batch, so the last batch of every burst would
        stay lag forever; latestOffset's start is as safe (its batch has completed) and comes at every
        trigger. With Trigger.AvailableNow the last call finds nothing new and the query ends at once, its
        Python process killed without stop(): that one commit is made before returning, within the timeout.
        """
        if self.committer is None or not start:
            return
        self.committer.submit(from_json(start))
        if ending:
            self.committer.flush(self.committer.timeout_s)

    def _latest(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json(start)
        bounds = self.planner.bounds(self.planner.partitions())
        latest = {tp: hi for tp, (_, hi) in bounds.items()}
        for tp, (lo, _) in bounds.items():
            # A partition new to the query (added to a topic, or a new topic matching the pattern) is read
            # from its beginning, as Spark does.
            begin.setdefault(tp, lo)
        if self._available_now is not None:
            latest = {tp: min(hi, self._available_now.get(tp, begin[tp])) for tp, hi in latest.items()}
        available = sum(max(0, hi - begin[tp]) for tp, hi in latest.items())
        minimum = self.opts.min_offsets_per_trigger
        if (minimum is not None and self._available_now is None and available < minimum
                and (time.monotonic() - self._last_trigger) * 1000 < self.opts.max_trigger_delay_ms):
            return start  # not enough yet, and maxTriggerDelay has not passed: skip this trigger
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        if latest != from_json(start):
            self._last_trigger = time.monotonic()
        return to_json(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[KafkaInputPartition]:
        begin, until = from_json(start), from_json(end)
        if begin == until:
            return []
        tps = sorted(until)
        bounds = self.planner.bounds(tps)
        for tp in tps:
            begin.setdefault(tp, bounds[tp][0])  # new partitions from their beginning
        begin = self.planner.checked({tp: begin[tp] for tp in tps}, bounds)
        return self.planner.input_partitions(begin, until)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # nothing to read: Spark still runs one task, with a placeholder partition
        return read_range(partition, self.opts)

    def commit(self, end: dict[str, Any]) -> None:
        # Spark's checkpoint already records `end`; the group commit is for lag monitors only.
        self._commit_completed(end, ending=False)

    def stop(self) -> None:
        if self.committer is not None:
            self.committer.close()
        self.planner.close()
