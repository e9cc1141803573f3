"""A small fetch client (not a consumer group): partition offsets and the records between two offsets.

Used by the Spark source and the demo. Every call takes a timeout and goes to the partition's leader.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from kafkajet.addresses import check_resolvable
from kafkajet.backoff import ExponentialBackoff
from kafkajet.cluster import Cluster
from kafkajet.config import FETCH, parse_client_config
from kafkajet.errors import (
    KafkaTimeoutError,
    LeaderNotAvailableError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    make_error,
)
from kafkajet.network.blocking import BlockingConnection, bootstrap_metadata
from kafkajet.protocol import ApiKey
from kafkajet.records import Record, decode_batches
from kafkajet.records.batch import RecordBatch
from kafkajet.records.isolation import committed_batches
from kafkajet.security.connection import connection_security

READ_COMMITTED = 1
EARLIEST = -2  # ListOffsets' timestamp for the log start offset


class FetchClient:
    """Connections to the leaders of one topic's partitions, opened on demand.

    Configured like the Producer, with the common client keys (`python -m kafkajet config --client fetch`);
    request.timeout.ms bounds every round trip. A bare string is shorthand for bootstrap.servers.
    """

    def __init__(self, config: Mapping[str, Any] | str | None = None, /, **kwargs: Any) -> None:
        self.config = parse_client_config(FETCH, config, **kwargs)
        self.security = connection_security(self.config)
        self.servers: list[tuple[str, int]] = check_resolvable(self.config["bootstrap.servers"],
                                                            self.config["client.dns.lookup"])
        self.timeout_s: float = self.config["request.timeout.ms"] / 1000
        # Finding the brokers waits as the admin client and the producer do for a wrong address (60 s).
        self.api_timeout_s: float = self.config["default.api.timeout.ms"] / 1000
        self.client_id: str = self.config["client.id"]
        self.isolation_level = READ_COMMITTED if self.config["isolation.level"] == "read_committed" else 0
        # A leader that moved is asked for again after retry.backoff.ms, doubling to retry.backoff.max.ms.
        self._backoff = ExponentialBackoff(self.config["retry.backoff.ms"], 2, self.config["retry.backoff.max.ms"], 0.2)
        self._conns: dict[int, BlockingConnection] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._brokers: dict[int, tuple[str, int]] = {}

    def __enter__(self) -> FetchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection to the leaders; the client is not to be used after it (`with` calls it)."""
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self.security.close()

    def partitions(self, topic: str) -> list[int]:
        """The partition numbers of `topic`, from the cluster's metadata (which also tells the client each
        partition's leader). Raises UnknownTopicOrPartitionError for a topic the cluster does not have, and
        KafkaTimeoutError when no bootstrap server answers within default.api.timeout.ms."""
        md = bootstrap_metadata(self.servers, self.api_timeout_s, topics=[topic], client_id=self.client_id,
                                security=self.security)
        cluster = Cluster.from_metadata_response(md)
        self._brokers = {n.node_id: (n.host, n.port) for n in cluster.nodes.values()}
        err = cluster.topic_errors.get(topic)
        if err is not None:
            raise err
        if topic not in cluster.partitions:
            raise UnknownTopicOrPartitionError(f"topic '{topic}' is not in the broker's metadata")
        for p in cluster.partitions_for(topic):
            self._leaders[(topic, p.partition)] = p.leader
        return [p.partition for p in cluster.partitions_for(topic)]

    def topics(self) -> list[str]:
        """Every topic the broker lists (internal ones left out), for pattern subscriptions."""
        md = bootstrap_metadata(self.servers, self.api_timeout_s, topics=None, client_id=self.client_id,
                                security=self.security)
        cluster = Cluster.from_metadata_response(md)
        return sorted(t for t in cluster.partitions if t not in cluster.internal_topics)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The earliest offset whose record timestamp is >= timestamp_ms (ListOffsets by time), or None when
        no record is that recent."""
        offset, timestamp = self._list_offsets(topic, partition, timestamp_ms)
        # Kafka says "no record that late" with offset -1 and timestamp -1; some brokers (Tansu) answer offset 0
        # with timestamp -1 instead. A record that was found has a timestamp at or after the one asked for.
        if offset < 0 or timestamp < 0:
            return None
        return offset

    def _list_offsets(self, topic: str, partition: int, timestamp_ms: int) -> tuple[int, int]:
        """ListOffsets for one partition: (offset, timestamp); timestamp_ms -2 asks for the log start."""
        conn = self._conn(topic, partition)
        version = conn.api_version(ApiKey.LIST_OFFSETS)
        resp = conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": self.isolation_level,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp_ms}]}],
        }, version=version, timeout_s=self.timeout_s)
        (p,) = resp["topics"][0]["partitions"]
        err = make_error(p["error_code"], f"list offsets of {topic}-{partition} at timestamp {timestamp_ms}")
        if err is not None:
            raise err
        return int(p["offset"]), int(p.get("timestamp", 0))

    def _conn(self, topic: str, partition: int) -> BlockingConnection:
        if (topic, partition) not in self._leaders:
            self.partitions(topic)
        leader = self._leaders[(topic, partition)]
        conn = self._conns.get(leader)
        if conn is None:
            if leader not in self._brokers:
                # Raised rather than retried: the Spark task that called us is retried by Spark.
                raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now (node {leader})")
            host, port = self._brokers[leader]
            conn = self._conns[leader] = BlockingConnection(host, port, client_id=self.client_id,
                                                            timeout_s=self.timeout_s, security=self.security)
        return conn

    def _fetch(self, topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int) -> dict:
        deadline = time.monotonic() + self.timeout_s
        attempts = 0
        while True:
            resp = self._conn(topic, partition).request(ApiKey.FETCH, {
                "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": self.isolation_level,
                "topics": [{"name": topic, "fetch_partitions": [
                    {"partition_index": partition, "fetch_offset": offset, "log_start_offset": -1,
                     "max_bytes": max_bytes}]}],
            }, timeout_s=self.timeout_s)  # at the version negotiated, within versions.CLIENT_MAX_VERSIONS
            (p,) = resp["responses"][0]["partition_responses"]
            err = make_error(p["error_code"], f"fetch {topic}-{partition} at offset {offset}")
            if err is None:
                return p  # type: ignore[no-any-return]
            delay_s = self._backoff.backoff(attempts) / 1000
            if not err.invalid_metadata or time.monotonic() + delay_s >= deadline:
                raise err
            # The leader moved, or is not serving yet: Apache Kafka answers NOT_LEADER_OR_FOLLOWER for a moment
            # after it created a topic. As Java's consumer: new leaders from metadata, then again (bounded).
            time.sleep(delay_s)
            attempts += 1
            self._leaders.pop((topic, partition), None)

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, end): the end is the high watermark, or at read_committed the last stable offset
        (nothing at or past an open transaction's first record is readable yet). From Fetch, not ListOffsets
        "latest": Tansu answers the latter with the last batch's base offset + 1."""
        # max_wait 0 makes Tansu answer with no partitions at all; with data present it answers at once.
        try:
            p = self._fetch(topic, partition, 0, 1, 100)
        except OffsetOutOfRangeError:
            # Retention or DeleteRecords moved the log's start past 0: ask where it starts, and fetch there.
            start, _ = self._list_offsets(topic, partition, EARLIEST)
            p = self._fetch(topic, partition, start, 1, 100)
        return max(0, p.get("log_start_offset", 0)), self._end_of(p)

    def _end_of(self, p: dict[str, Any]) -> int:
        end: int = p["high_watermark"]
        lso = p.get("last_stable_offset", -1)
        if self.isolation_level == READ_COMMITTED and 0 <= lso < end:
            end = lso
        return end

    def fetch_range(self, topic: str, partition: int, start: int, end: int, *,
                    max_bytes: int = 8 << 20) -> Iterator[Record]:
        """Records with start <= offset < end, control batches skipped; a deadline per round trip."""
        for batches in self.fetch_batches(topic, partition, start, end, max_bytes=max_bytes):
            for batch in batches:
                for rec in batch.records:
                    if start <= rec.offset < end:
                        yield rec

    def fetch_batches(self, topic: str, partition: int, start: int, end: int, *, max_bytes: int = 8 << 20,
                      decode: bool = True) -> Iterator[list[RecordBatch]]:
        """The data batches covering start..end, one list per Fetch answer: control batches (and, at
        read_committed, aborted transactions' batches) left out; the first and last may hold records outside
        the range. decode=False leaves each batch's records undecoded (`records_data`) for a columnar reader.
        A deadline of request.timeout.ms per round trip that brings nothing new."""
        offset = start
        deadline = time.monotonic() + self.timeout_s
        while offset < end:
            p = self._fetch(topic, partition, offset, max_bytes, 500)
            batches = decode_batches(p["record_set"] or b"", allow_partial_tail=True, decode=decode)
            readable = (set(map(id, committed_batches(batches, p.get("aborted_transactions"))))
                        if self.isolation_level == READ_COMMITTED else None)
            out = []
            before = offset
            for batch in batches:
                next_offset = batch.base_offset + batch.last_offset_delta + 1
                if next_offset <= offset:
                    continue  # a batch before the requested offset, as brokers may answer
                offset = next_offset
                if batch.is_control or (readable is not None and id(batch) not in readable):
                    continue  # a marker, or an aborted transaction's batch: its offsets are passed over
                out.append(batch)
            if out:
                yield out
            if offset > before:
                deadline = time.monotonic() + self.timeout_s
            elif self._end_of(p) <= offset or time.monotonic() > deadline:
                if offset < end and self._end_of(p) < end:
                    raise KafkaTimeoutError(
                        f"{topic}-{partition}: offsets up to {end} requested, the log ends at {self._end_of(p)}"
                        + (" (the last stable offset: a transaction is still open)"
                           if self.isolation_level == READ_COMMITTED else ""))
                return
