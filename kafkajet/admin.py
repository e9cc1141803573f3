"""Admin client: create, delete and list topics, describe the cluster, list consumer groups and their lag.

What tests, the CLI and the Spark data source need, over blocking connections (kafkajet.network.blocking).
Every call is bounded by its `timeout_s`; retriable failures (connection errors, NOT_CONTROLLER, leaders
still being elected) are retried with backoff until then, and a timeout carries the last cause.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from kafkajet.addresses import check_resolvable, format_address
from kafkajet.backoff import ExponentialBackoff
from kafkajet.clock import now_ms
from kafkajet.cluster import Cluster, Node, PartitionInfo, metadata_request_body
from kafkajet.config import ADMIN, ignored_security_keys, parse_client_config
from kafkajet.errors import (
    NO_ERROR,
    BrokerError,
    ConcurrentTransactionsError,
    ConfigError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    make_error,
)
from kafkajet.fetch import FetchClient
from kafkajet.last_resort import log_even_unconfigured
from kafkajet.network.blocking import BlockingConnection, warn_unreachable
from kafkajet.network.connection import NotKafkaError
from kafkajet.network.versions import for_transaction_version
from kafkajet.protocol import ApiKey
from kafkajet.security.connection import ConnectionSecurity, connection_security
from kafkajet.transaction import GROUP_COORDINATOR, TXN_COORDINATOR, PreparedTransaction

log = logging.getLogger("kafkajet.admin")

T = TypeVar("T")



@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create; None fields take create_topics()' num_partitions / replication_factor / configs."""

    name: str
    num_partitions: int | None = None
    replication_factor: int | None = None
    configs: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]
    is_internal: bool = False
    topic_id: Any = None


# DescribeConfigs' resource type of a topic, and the config source of a value nobody set (Java's
# ConfigResource.Type.TOPIC and ConfigEntry.ConfigSource.DEFAULT_CONFIG).
_TOPIC_RESOURCE = 2
_DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One setting as DescribeConfigs gives it (Java's ConfigEntry): `source` is the wire's ConfigSource
    (1 topic, 4 the broker's static file, 5 Kafka's default, ...); `value` is None for a sensitive one."""
    name: str
    value: str | None
    source: int
    read_only: bool = False
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == _DEFAULT_CONFIG


# A broker as DescribeCluster and Metadata describe it: the same thing the producer's cluster view holds.
BrokerDescription = Node


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ConsumerGroupListing:
    """A group as ListGroups names it: protocol_type is "consumer" for groups of consumers, and "" on Kafka for
    a group that only has committed offsets (a "simple" group, as the Spark source commits to). state (e.g.
    "Stable", "Empty") and type ("classic", "consumer") are None from a broker too old to give them (ListGroups
    v4 and v5), as Java's ConsumerGroupListing.state() and type() are empty then."""

    group_id: str
    protocol_type: str
    state: str | None = None
    type: str | None = None



def list_groups_request_body(version: int, states: Collection[str], types: Collection[str]) -> dict[str, Any]:
    """ListGroups' body at `version` with the filters asked for; UnsupportedVersionError when the version
    cannot carry one of them (Java's ListGroupsRequest.Builder.build refuses the same way)."""
    if states and version < 4:
        raise UnsupportedVersionError(f"the broker supports ListGroups up to v{version}; filtering groups by "
                                      f"state ({sorted(states)}) needs v4")
    if types and version < 5:
        raise UnsupportedVersionError(f"the broker supports ListGroups up to v{version}; filtering groups by "
                                      f"type ({sorted(types)}) needs v5")
    return {"states_filter": list(states), "types_filter": list(types)}

@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition of a group: its committed offset, the log's end (high watermark) and the difference."""

    topic: str
    partition: int
    committed_offset: int
    log_end_offset: int

    @property
    def lag(self) -> int:
        # A log truncated below the commit (a recreated topic) shows no lag rather than a negative one.
        return max(0, self.log_end_offset - self.committed_offset)


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    partitions: list[PartitionLag]

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """A live member of a group as DescribeGroups gives it (Java's MemberDescription): host as the broker saw
    the connection ("/127.0.0.1"), and the partitions its consumer protocol assignment holds."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None
    assignment: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupMembers:
    group_id: str
    state: str
    protocol_type: str
    members: list[MemberDescription]


def consumer_assignment(data: bytes | None) -> list[tuple[str, int]]:
    """The partitions of a consumer group member's assignment (Java's ConsumerProtocolAssignment v0-v3, never
    flexible: version int16, [topic string, [partition int32]], user data); [] for none or a layout it is not."""
    import struct

    if not data:
        return []
    try:
        (count,) = struct.unpack_from(">i", data, 2)
        pos, out = 6, []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2:pos + 2 + length].decode()
            pos += 2 + length
            (n,) = struct.unpack_from(">i", data, pos)
            out += [(topic, p) for p in struct.unpack_from(f">{max(n, 0)}i", data, pos + 4)]
            pos += 4 + 4 * max(n, 0)
        return out
    except (struct.error, UnicodeDecodeError):
        return []


_COORDINATOR_RETRY = (NotCoordinatorError.code, CoordinatorNotAvailableError.code,
                      CoordinatorLoadInProgressError.code, ConcurrentTransactionsError.code)


class _Retry(Exception):
    """A retriable outcome inside an admin call: wait and try again while the deadline allows."""

    def __init__(self, cause: KafkaError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Admin:
    """Topic and cluster administration. Thread-safe: calls are serialised.

    ```python
    with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics("events", num_partitions=6)
    ```

    Configured like the Producer, with the common client keys (`python -m kafkajet config --client admin`):
    Java names in a mapping, snake_case keywords, or both; unknown keys and bad values raise ConfigError.
    A bare string is shorthand for bootstrap.servers: Admin("host:9092").
    """

    def __init__(self, config: Mapping[str, Any] | str | None = None, /, **kwargs: Any) -> None:
        self.config = parse_client_config(ADMIN, config, **kwargs)
        self._security: ConnectionSecurity = connection_security(self.config)
        self._bootstrap: list[tuple[str, int]] = check_resolvable(self.config["bootstrap.servers"],
                                                                 self.config["client.dns.lookup"])
        self.client_id: str = self.config["client.id"]
        self.request_timeout_ms = float(self.config["request.timeout.ms"])
        # Java's admin client: retry.backoff.ms doubling up to retry.backoff.max.ms, with 20% jitter.
        self._backoff = ExponentialBackoff(self.config["retry.backoff.ms"], 2,
                                           self.config["retry.backoff.max.ms"], 0.2)
        self._brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[tuple[str, int], BlockingConnection] = {}
        self._unreachable: set[tuple[str, int]] = set()  # warned about once; cleared when it answers again
        self._lock = threading.RLock()
        self._closed = False

    # --- public API -------------------------------------------------------------------------------

    def create_topics(
        self,
        topics: Sequence[NewTopic | str] | NewTopic | str,
        num_partitions: int = 1,
        replication_factor: int = 1,
        *,
        timeout_s: float | None = None,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
        if_not_exists: bool = False,
    ) -> None:
        """Create topics on the controller and wait until every partition of each has a leader. With
        if_not_exists, a topic that exists already is left as it is, with a warning if its partition count is not
        the one asked for (on stderr even when the application has not configured logging)."""
        timeout_s = self._timeout(timeout_s)
        specs = _topic_specs(topics, num_partitions, replication_factor, configs)
        with self._lock:
            deadline = self._deadline(timeout_s)
            pending = {s.name: s for s in specs}
            existed: set[str] = set()

            def attempt() -> None:
                conn = self._controller(deadline)
                body = {
                    "topics": [_creatable(s) for s in pending.values()],
                    "timeout_ms": self._request_timeout_ms(deadline),
                    "validate_only": validate_only,
                }
                response = conn.request(ApiKey.CREATE_TOPICS, body, timeout_s=self._request_timeout_s(deadline))
                results = response.get("topics") or []
                if if_not_exists:
                    existed.update(str(r.get("name")) for r in results
                                   if r.get("error_code") == TopicAlreadyExistsError.code)
                self._settle(results, pending, ok_codes={TopicAlreadyExistsError.code} if if_not_exists
                             else set(), what="create")

            self._retry(deadline, timeout_s, f"creating topic(s) {_names(specs)}", attempt)
            if validate_only:
                return
            # A topic that existed is not waited for: its partition count need not be the one asked for.
            expected = {s.name: max(s.num_partitions or 1, 1) for s in specs if s.name not in existed}
            if expected:
                self._retry(deadline, timeout_s, f"waiting for topic(s) {_names(list(expected))} to get leaders",
                            lambda: self._check_leaders(expected, deadline))
            asked = {s.name: s.num_partitions for s in specs if s.name in existed and (s.num_partitions or 0) > 0}
            if asked:
                md = self._retry(deadline, timeout_s, f"describing topic(s) {_names(list(asked))}",
                                 lambda: self._metadata(deadline, list(asked)))
                for name, count in asked.items():
                    has = len(md.partitions_for(name)) if name in md.partitions else None
                    if has is not None and has != count:
                        # The caller's own request not met: said on stderr even before logging is set up.
                        log_even_unconfigured(log, logging.WARNING, "topic %r exists already with %d partitions, "
                                              "not %d: left as it is (if_not_exists)", name, has, count)

    def delete_topics(self, names: Sequence[str] | str, timeout_s: float | None = None, *,
                      if_exists: bool = False) -> list[str]:
        """Delete topics on the controller and wait until metadata no longer lists them. Returns the names it
        deleted: with if_exists, one that did not exist is left out (so a caller never reports it deleted)."""
        timeout_s = self._timeout(timeout_s)
        topic_names = [names] if isinstance(names, str) else list(names)
        with self._lock:
            deadline = self._deadline(timeout_s)
            pending = {n: n for n in topic_names}
            absent: set[str] = set()

            def attempt() -> None:
                conn = self._controller(deadline)
                body = {
                    "topics": [{"name": n, "topic_id": None} for n in pending],
                    "topic_names": list(pending),
                    "timeout_ms": self._request_timeout_ms(deadline),
                }
                response = conn.request(ApiKey.DELETE_TOPICS, body, timeout_s=self._request_timeout_s(deadline))
                results = response.get("responses") or []
                if if_exists:
                    absent.update(str(r.get("name")) for r in results
                                  if r.get("error_code") == UnknownTopicOrPartitionError.code)
                self._settle(results, pending,
                             ok_codes={UnknownTopicOrPartitionError.code} if if_exists else set(), what="delete",
                             fatal_codes={UnknownTopicOrPartitionError.code})

            self._retry(deadline, timeout_s, f"deleting topic(s) {_names(topic_names)}", attempt)
            self._retry(deadline, timeout_s, f"waiting for topic(s) {_names(topic_names)} to disappear",
                        lambda: self._check_gone(topic_names, deadline))
        return [n for n in topic_names if n not in absent]

    def list_topics(self, timeout_s: float | None = None, *, include_internal: bool = False) -> dict[str, TopicDescription]:
        """Every topic of the cluster by name, each with its partitions (leader, replicas, ISR); internal
        topics (__consumer_offsets, __transaction_state) only with include_internal."""
        timeout_s = self._timeout(timeout_s)
        with self._lock:
            deadline = self._deadline(timeout_s)
            md = self._retry(deadline, timeout_s, "listing topics", lambda: self._metadata(deadline, None))
        return {name: _describe_topic(md, name) for name in sorted(md.partitions)
                if include_internal or name not in md.internal_topics}

    def describe_topics(self, names: Sequence[str] | str, timeout_s: float | None = None) -> dict[str, TopicDescription]:
        """Descriptions of the named topics; UnknownTopicOrPartitionError naming a missing one."""
        timeout_s = self._timeout(timeout_s)
        topic_names = [names] if isinstance(names, str) else list(names)
        with self._lock:
            deadline = self._deadline(timeout_s)
            md = self._retry(deadline, timeout_s, f"describing topic(s) {_names(topic_names)}",
                             lambda: self._metadata(deadline, topic_names))
        for err in md.topic_errors.values():
            raise err
        return {name: _describe_topic(md, name) for name in md.partitions}

    def describe_topic_configs(self, names: Sequence[str] | str,
                               timeout_s: float | None = None) -> dict[str, dict[str, ConfigEntry]]:
        """Each named topic's settings by name, defaults included (DescribeConfigs, as Java's
        Admin.describeConfigs for topic resources); UnknownTopicOrPartitionError naming a missing topic. A
        broker that keeps no topic settings (Tansu) answers none."""
        timeout_s = self._timeout(timeout_s)
        topic_names = [names] if isinstance(names, str) else list(names)
        with self._lock:
            deadline = self._deadline(timeout_s)

            def attempt() -> dict[str, dict[str, ConfigEntry]]:
                conn = self._any_connection(deadline)
                body = conn.request(ApiKey.DESCRIBE_CONFIGS, {
                    "resources": [{"resource_type": _TOPIC_RESOURCE, "resource_name": n, "configuration_keys": None}
                                  for n in topic_names],
                    "include_synonyms": False, "include_documentation": False,
                }, timeout_s=self._request_timeout_s(deadline))
                out: dict[str, dict[str, ConfigEntry]] = {}
                for result in body.get("results") or ():
                    name = result["resource_name"]
                    err = make_error(result["error_code"], _topic_message("describe the settings of", name,
                                                                        result.get("error_message")))
                    if err is not None:
                        if err.retriable and not isinstance(err, UnknownTopicOrPartitionError):
                            raise _Retry(err)
                        raise err
                    out[name] = {c["name"]: ConfigEntry(c["name"], c["value"], c["config_source"], c["read_only"],
                                                        c["is_sensitive"]) for c in result.get("configs") or ()}
                return out

            return self._retry(deadline, timeout_s, f"describing the settings of topic(s) {_names(topic_names)}",
                               attempt)

    def describe_cluster(self, timeout_s: float | None = None) -> ClusterDescription:
        """Cluster id, controller and brokers; DescribeCluster where the broker supports it, else Metadata."""
        timeout_s = self._timeout(timeout_s)
        with self._lock:
            deadline = self._deadline(timeout_s)
            return self._retry(deadline, timeout_s, "describing the cluster", lambda: self._describe(deadline))

    def complete_transaction(self, prepared: PreparedTransaction, *, commit: bool, timeout_s: float | None = None) -> None:
        """Commit (or abort) a transaction another producer left open with prepare_transaction(): EndTxn at its
        coordinator with the producer id and epoch it was prepared under. Safe to repeat after an unknown
        outcome: the coordinator answers a repeated commit of a committed transaction with success."""
        timeout_s = self._timeout(timeout_s)
        deadline = self._deadline(timeout_s)
        what = f"{'commit' if commit else 'abort'} of transaction {prepared.transactional_id!r}"

        def attempt() -> None:
            conn = self._coordinator(prepared.transactional_id, TXN_COORDINATOR, deadline)
            # EndTxn at the version the transaction was opened under, as its producer would have sent it: v4 at
            # most under transaction version 1 (v5 is version 2's, which bumps the epoch).
            version = for_transaction_version(ApiKey.END_TXN, conn.api_version(ApiKey.END_TXN),
                                              prepared.transaction_version)
            body = conn.request(ApiKey.END_TXN, {
                "transactional_id": prepared.transactional_id, "producer_id": prepared.producer_id,
                "producer_epoch": prepared.producer_epoch, "committed": commit,
            }, version=version, timeout_s=self._request_timeout_s(deadline))
            self._coordinator_answer(body.get("error_code", NO_ERROR), prepared.transactional_id,
                                     TXN_COORDINATOR, what)

        with self._lock:
            self._retry(deadline, timeout_s, what, attempt)

    def list_consumer_group_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]] | None = None,
                                    timeout_s: float | None = None) -> dict[tuple[str, int], int]:
        """The group's committed offsets for `partitions` (those without one are left out), or for every
        partition of every topic when None; only stable ones: an offset committed by a transaction that is
        still open is waited for, as Java's requireStable."""
        timeout_s = self._timeout(timeout_s)
        deadline = self._deadline(timeout_s)

        def attempt() -> dict[tuple[str, int], int]:
            # Every partition named rather than OffsetFetch's null "all topics": Tansu answers that with a null
            # array the protocol does not allow, and a partition without a commit is simply left out.
            wanted = partitions if partitions is not None else self._all_partitions(deadline)
            by_topic: dict[str, list[int]] = {}
            for topic, partition in wanted:
                by_topic.setdefault(topic, []).append(partition)
            conn = self._coordinator(group_id, GROUP_COORDINATOR, deadline)
            version = conn.api_version(ApiKey.OFFSET_FETCH)
            if version < 7:
                raise KafkaError(f"the broker answers OffsetFetch up to v{version}; reading offsets committed by "
                                 "transactions needs v7 (require_stable)")
            body = conn.request(ApiKey.OFFSET_FETCH, {
                "group_id": group_id, "require_stable": True,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
            }, version=version, timeout_s=self._request_timeout_s(deadline))
            self._coordinator_answer(body.get("error_code", NO_ERROR), group_id, GROUP_COORDINATOR,
                                     f"offsets of group {group_id!r}")
            out: dict[tuple[str, int], int] = {}
            for t in body.get("topics") or ():
                for p in t["partitions"]:
                    self._coordinator_answer(p["error_code"], group_id, GROUP_COORDINATOR,
                                             f"offsets of group {group_id!r}")
                    if p["committed_offset"] >= 0:
                        out[(t["name"], p["partition_index"])] = p["committed_offset"]
            return out

        with self._lock:
            return self._retry(deadline, timeout_s, f"offsets of group {group_id!r}", attempt)

    def describe_consumer_group_members(self, group_id: str, timeout_s: float | None = None) -> GroupMembers:
        """The group's state and live members with their assigned partitions (DescribeGroups at its
        coordinator, as Java's Admin.describeConsumerGroups for a classic group). A group the coordinator does
        not know is "Dead" with no members, as Kafka's tool says."""
        timeout_s = self._timeout(timeout_s)

        def attempt() -> GroupMembers:
            conn = self._coordinator(group_id, GROUP_COORDINATOR, deadline)
            body = conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group_id], "include_authorized_operations": False},
                                timeout_s=self._request_timeout_s(deadline))
            for g in body.get("groups") or ():
                if g["group_id"] != group_id:
                    continue
                if g["error_code"] == GroupIdNotFoundError.code:  # DescribeGroups v6 says so; before, "Dead"
                    return GroupMembers(group_id, "Dead", "", [])
                self._coordinator_answer(g["error_code"], group_id, GROUP_COORDINATOR,
                                         g.get("error_message") or "DescribeGroups")
                consumer = g["protocol_type"] == "consumer"
                members = [MemberDescription(m["member_id"], m["client_id"], m["client_host"],
                                             m.get("group_instance_id"),
                                             consumer_assignment(m["member_assignment"]) if consumer else [])
                           for m in g.get("members") or ()]
                return GroupMembers(group_id, g["group_state"], g["protocol_type"], members)
            raise KafkaError(f"DescribeGroups answered nothing for group {group_id!r}")

        with self._lock:
            deadline = self._deadline(timeout_s)
            return self._retry(deadline, timeout_s, f"describing group {group_id!r}", attempt)

    def delete_consumer_groups(self, group_ids: Sequence[str] | str,
                               timeout_s: float | None = None) -> dict[str, KafkaError | None]:
        """Delete groups and their committed offsets (DeleteGroups at each group's coordinator, as Java's
        Admin.deleteConsumerGroups): each group id with None when deleted, else the broker's answer
        (GroupNotEmptyError while consumers are in it, GroupIdNotFoundError for an unknown group). Moved or
        loading coordinators are retried within the timeout; what stays refused is returned, not raised."""
        timeout_s = self._timeout(timeout_s)
        groups = [group_ids] if isinstance(group_ids, str) else list(group_ids)
        outcome: dict[str, KafkaError | None] = {}
        with self._lock:
            deadline = self._deadline(timeout_s)
            for group in groups:
                def attempt(group: str = group) -> KafkaError | None:
                    conn = self._coordinator(group, GROUP_COORDINATOR, deadline)
                    body = conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [group]},
                                        timeout_s=self._request_timeout_s(deadline))
                    for result in body.get("results") or ():
                        if result["group_id"] != group:
                            continue
                        try:
                            self._coordinator_answer(result["error_code"], group, GROUP_COORDINATOR,
                                                     result.get("error_message") or "DeleteGroups")
                        except _Retry:
                            raise
                        except KafkaError as e:
                            return e
                        return None
                    raise KafkaError(f"DeleteGroups answered nothing for group {group!r}")

                outcome[group] = self._retry(deadline, timeout_s, f"deleting group {group!r}", attempt)
        return outcome

    def commit_consumer_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int], *,
                                      metadata: str | None = None, timeout_s: float | None = None) -> None:
        """Commit `offsets` (the next offset to read, per partition) for a group that has no live members:
        OffsetCommit at generation -1 with no member id, which Kafka's coordinator accepts for an empty
        group (a "simple" group). A group with live members refuses it (UnknownMemberIdError, or
        IllegalGenerationError / RebalanceInProgressError while it rebalances): its own consumers own it."""
        timeout_s = self._timeout(timeout_s)
        deadline = self._deadline(timeout_s)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                   "committed_metadata": metadata})
        what = f"commit of offsets for group {group_id!r}"

        def attempt() -> None:
            conn = self._coordinator(group_id, GROUP_COORDINATOR, deadline)
            body = conn.request(ApiKey.OFFSET_COMMIT, {
                "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }, version=conn.api_version(ApiKey.OFFSET_COMMIT), timeout_s=self._request_timeout_s(deadline))
            for t in body.get("topics") or ():
                for p in t["partitions"]:
                    self._coordinator_answer(p["error_code"], group_id, GROUP_COORDINATOR,
                                             f"{what}, at {t['name']}-{p['partition_index']}")

        with self._lock:
            self._retry(deadline, timeout_s, what, attempt)

    def list_consumer_groups(self, timeout_s: float | None = None, *, states: Collection[str] = (),
                             types: Collection[str] = ()) -> list[ConsumerGroupListing]:
        """Every group the cluster knows, sorted by id: ListGroups at each broker (each lists the groups it
        coordinates), as Java's Admin.listConsumerGroups does.

        `states` (e.g. "Stable", "Empty") and `types` ("classic", "consumer"), when given, ask the brokers for
        only the groups in those states or of those types (ListConsumerGroupsOptions.inGroupStates and
        withTypes). The brokers filter, not the client: a broker that ignores a filter lists every group. A
        broker too old for a filter asked for (states: ListGroups v4, types: v5) fails the call with
        UnsupportedVersionError, as Java's does, rather than listing groups the caller filtered out.
        """
        timeout_s = self._timeout(timeout_s)
        deadline = self._deadline(timeout_s)

        def attempt() -> list[ConsumerGroupListing]:
            self._metadata(deadline, [])
            found: dict[str, ConsumerGroupListing] = {}
            for address in sorted(set(self._brokers.values()) or set(self._bootstrap)):
                conn = self._connect(address, deadline)
                version = conn.api_version(ApiKey.LIST_GROUPS)
                body = conn.request(ApiKey.LIST_GROUPS, list_groups_request_body(version, states, types),
                                    version=version, timeout_s=self._request_timeout_s(deadline))
                self._coordinator_answer(body.get("error_code", NO_ERROR), "", GROUP_COORDINATOR,
                                         f"ListGroups at {format_address(*address)}")
                for g in body.get("groups") or ():
                    found[g["group_id"]] = ConsumerGroupListing(g["group_id"], g.get("protocol_type") or "",
                                                                g.get("group_state"), g.get("group_type"))
            return [found[k] for k in sorted(found)]

        with self._lock:
            return self._retry(deadline, timeout_s, "listing consumer groups", attempt)

    def describe_consumer_group(self, group_id: str, timeout_s: float | None = None) -> ConsumerGroupDescription:
        """The group's committed offsets with each partition's log end offset (high watermark) and lag, the
        numbers kafka-consumer-groups --describe shows."""
        timeout_s = self._timeout(timeout_s)
        deadline = self._deadline(timeout_s)
        committed = self.list_consumer_group_offsets(group_id, timeout_s=timeout_s)
        remaining_ms = max(1, int(deadline - now_ms()))
        rows = []
        # End offsets as the Spark source sees them (FetchClient.offsets: the high watermark, from Fetch).
        # The admin's settings are the common client settings, which the fetch client takes as they are; only
        # those the user set and the protocol uses: this client warned about the others when it was built.
        ignored = ignored_security_keys(self.config["security.protocol"], self.config.explicit)
        given = {k: self.config[k] for k in self.config.explicit if k not in ignored}
        timeout_ms = min(int(self.request_timeout_ms), remaining_ms)
        with FetchClient({**given, "client.id": self.config["client.id"], "request.timeout.ms": timeout_ms}) as fetch:
            for (topic, partition), offset in sorted(committed.items()):
                _, end = fetch.offsets(topic, partition)
                rows.append(PartitionLag(topic, partition, offset, end))
        return ConsumerGroupDescription(group_id, rows)

    def close(self) -> None:
        """Close the connections; later calls raise (`with Admin(...)` calls it)."""
        with self._lock:
            self._closed = True
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()
            self._security.close()

    def __repr__(self) -> str:
        # What tells two clients apart in a log line; never the configuration (it may hold passwords).
        servers = ",".join(format_address(h, port) for h, port in self._bootstrap)
        return f"<Admin {self.client_id} {'closed' if self._closed else 'open'} bootstrap={servers!r}>"

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- steps ------------------------------------------------------------------------------------

    def _describe(self, deadline: float) -> ClusterDescription:
        conn = self._any_connection(deadline)
        if conn.supports(ApiKey.DESCRIBE_CLUSTER):
            body = {"include_cluster_authorized_operations": False}
            r = self._request(conn, ApiKey.DESCRIBE_CLUSTER, body, deadline)
            err = make_error(r.get("error_code", NO_ERROR), r.get("error_message"))
            if err is not None:
                raise _Retry(err) if err.retriable else err
            brokers = [BrokerDescription(b["broker_id"], b["host"], b["port"], b.get("rack"))
                       for b in r.get("brokers") or []]
            return ClusterDescription(r.get("cluster_id"), r.get("controller_id", -1), brokers)
        md = self._metadata(deadline, [])
        brokers = list(md.nodes.values())
        return ClusterDescription(md.cluster_id, md.controller_id, brokers)

    def _settle(self, results: list[dict[str, Any]], pending: dict[str, Any], *, ok_codes: set[int], what: str,
                fatal_codes: frozenset[int] | set[int] = frozenset()) -> None:
        """Drop finished topics from `pending`; raise the first fatal error, or _Retry if some may succeed later."""
        retriable: KafkaError | None = None
        fatal: list[BrokerError] = []
        for result in results:
            name = str(result.get("name"))
            code = result.get("error_code", NO_ERROR)
            err = make_error(code, _topic_message(what, name, result.get("error_message")))
            if err is None or code in ok_codes:
                pending.pop(name, None)
                continue
            if err.retriable and code not in fatal_codes:
                retriable = err
            else:
                fatal.append(err)
        if fatal:
            if len(fatal) > 1:
                log.warning("%s failed for %d topics; raising the first: %s", what, len(fatal), fatal)
            raise fatal[0]
        if pending:
            raise _Retry(retriable or KafkaError(f"broker did not answer for topic(s) {_names(pending)}"))

    def _check_leaders(self, expected: Mapping[str, int], deadline: float) -> None:
        md = self._metadata(deadline, list(expected))
        for name, count in expected.items():
            err = md.topic_errors.get(name)
            if err is not None:
                raise _Retry(err)
            if name not in md.partitions:
                raise _Retry(KafkaError(f"topic {name!r} not yet in metadata"))
            partitions = md.partitions_for(name)
            leaderless = [p.partition for p in partitions if p.leader < 0]
            if len(partitions) < count or leaderless:
                raise _Retry(KafkaError(
                    f"topic {name!r} has {len(partitions)}/{count} partitions, without leader: {leaderless}"))

    def _check_gone(self, names: Sequence[str], deadline: float) -> None:
        md = self._metadata(deadline, None)
        listed = md.topics | set(md.topic_errors)
        still = [n for n in names if n in listed]
        if still:
            raise _Retry(KafkaError(f"topic(s) {still} still listed in metadata"))

    # --- connections ------------------------------------------------------------------------------

    def _metadata(self, deadline: float, topics: list[str] | None) -> Cluster:
        conn = self._any_connection(deadline)
        version = conn.api_version(ApiKey.METADATA)
        body = conn.request(ApiKey.METADATA, metadata_request_body(topics, version=version), version=version,
                            timeout_s=self._request_timeout_s(deadline))
        md = Cluster.from_metadata_response(body)
        if md.nodes:
            self._brokers = {n.node_id: (n.host, n.port) for n in md.nodes.values()}
        return md

    def _all_partitions(self, deadline: float) -> list[tuple[str, int]]:
        md = self._metadata(deadline, None)
        return [(t, p.partition) for t in sorted(md.partitions) if t not in md.internal_topics
                for p in md.partitions_for(t)]

    def _controller(self, deadline: float) -> BlockingConnection:
        md = self._metadata(deadline, [])
        address = self._brokers.get(md.controller_id)
        if address is None:
            # No controller known (yet, or the broker hides it): any broker forwards admin requests in KRaft.
            return self._any_connection(deadline)
        return self._connect(address, deadline)

    def _coordinator(self, key: str, key_type: int, deadline: float) -> BlockingConnection:
        """A connection to the coordinator of a transactional id or group (FindCoordinator, asked each time:
        an admin call is rare, and a moved coordinator is then found at the next attempt)."""
        conn = self._any_connection(deadline)
        version = conn.api_version(ApiKey.FIND_COORDINATOR)
        body = conn.request(ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, version=version,
                            timeout_s=self._request_timeout_s(deadline))
        self._coordinator_answer(body.get("error_code", NO_ERROR), key, key_type, "FindCoordinator")
        return self._connect((body["host"], body["port"]), deadline)

    @staticmethod
    def _coordinator_answer(code: int, key: str, key_type: int, what: str) -> None:
        """Raise the answer's error: _Retry for a coordinator that moved, loads or is busy, else the error."""
        err = make_error(code, f"{what} ({'transactional.id' if key_type == TXN_COORDINATOR else 'group'} {key!r})")
        if err is None:
            return
        if code in _COORDINATOR_RETRY or err.retriable:
            raise _Retry(err)
        raise err

    def _any_connection(self, deadline: float) -> BlockingConnection:
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        last: KafkaError | None = None
        candidates = list(dict.fromkeys([*self._brokers.values(), *self._bootstrap]))
        not_kafka = 0
        for address in candidates:
            try:
                conn = self._connect(address, deadline)
            except KafkaConnectionError as e:
                last = e
                not_kafka += isinstance(e, NotKafkaError)
                if not_kafka == len(candidates):
                    raise  # no address of the list is a Kafka broker: waiting will not make one
                if address not in self._unreachable:  # as the producer's network client: once per run of failures
                    self._unreachable.add(address)
                    warn_unreachable(log, address, e)
                continue
            self._unreachable.discard(address)
            return conn
        tried = ", ".join(format_address(h, p) for h, p in candidates)
        raise _Retry(KafkaConnectionError(f"no broker reachable (tried {tried}); last error: {last}"))

    def _connect(self, address: tuple[str, int], deadline: float) -> BlockingConnection:
        if self._closed:
            raise KafkaError("the admin client is closed")
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        conn = BlockingConnection(address[0], address[1], client_id=self.client_id,
                                  timeout_s=self._request_timeout_s(deadline), security=self._security)
        self._connections[address] = conn
        return conn

    def _request(self, conn: BlockingConnection, api: ApiKey, body: dict[str, Any], deadline: float) -> dict[str, Any]:
        return conn.request(api, body, timeout_s=self._request_timeout_s(deadline))

    # --- time -------------------------------------------------------------------------------------

    # Deadlines are in the one clock's milliseconds (kafkajet.clock); calls take seconds, as Python APIs do.

    def _timeout(self, timeout_s: float | None) -> float:
        """A call's timeout: its own, else default.api.timeout.ms (60 s, as the producer's max.block.ms)."""
        return self.config["default.api.timeout.ms"] / 1000 if timeout_s is None else timeout_s

    @staticmethod
    def _deadline(timeout_s: float) -> float:
        return now_ms() + timeout_s * 1000.0

    def _request_timeout_ms(self, deadline: float) -> int:
        return max(1, int(min(self.request_timeout_ms, deadline - now_ms())))

    def _request_timeout_s(self, deadline: float) -> float:
        return self._request_timeout_ms(deadline) / 1000.0

    def _retry(self, deadline: float, timeout_s: float, what: str, fn: Callable[[], T]) -> T:
        """Run fn until it succeeds, raises a fatal error, or the deadline passes (KafkaTimeoutError).

        fn signals "try again" with _Retry or a connection error; any other error is final, so a broker
        error that Kafka flags retriable but that is an answer here (deleting an unknown topic) is not retried.
        """
        attempts = 0
        last: KafkaError | None = None
        answer: KafkaError | None = None  # the last error a broker answered, not a connection's failure
        while True:
            try:
                return fn()
            except _Retry as r:
                last = r.cause
            except NotKafkaError:
                raise
            except KafkaConnectionError as e:
                last = e
            if not isinstance(last, KafkaConnectionError):
                answer = last
            remaining = deadline - now_ms()
            if remaining <= 0:
                # The deadline often cuts the last attempt short (its request timeout is what was left), and
                # "request timed out" alone would hide why the earlier attempts failed: the broker's last
                # answer stays the cause, and the last attempt's own failure is named beside it.
                if answer is not None and answer is not last:
                    raise KafkaTimeoutError(f"{what} did not complete within {timeout_s} s; the last attempt "
                                            f"failed: {last}", cause=answer)
                raise KafkaTimeoutError(f"{what} did not complete within {timeout_s} s", cause=last)
            log.debug("%s: retrying after %s", what, last)
            # Bounded by the caller's deadline: waits for the broker to elect leaders or come back.
            time.sleep(min(self._backoff.backoff(attempts), remaining) / 1000.0)
            attempts += 1


def _topic_specs(topics: Sequence[NewTopic | str] | NewTopic | str, num_partitions: int, replication_factor: int,
                 configs: Mapping[str, str] | None) -> list[NewTopic]:
    items: Sequence[NewTopic | str] = [topics] if isinstance(topics, str | NewTopic) else topics
    specs = []
    for item in items:
        spec = NewTopic(item) if isinstance(item, str) else item
        if not spec.name:
            raise ConfigError("a topic name must not be empty")
        specs.append(NewTopic(
            spec.name,
            num_partitions if spec.num_partitions is None else spec.num_partitions,
            replication_factor if spec.replication_factor is None else spec.replication_factor,
            {**(configs or {}), **(spec.configs or {})},
        ))
    if not specs:
        raise ConfigError("create_topics() needs at least one topic")
    return specs


def _creatable(spec: NewTopic) -> dict[str, Any]:
    return {
        "name": spec.name,
        "num_partitions": spec.num_partitions,
        "replication_factor": spec.replication_factor,
        "assignments": [],
        "configs": [{"name": k, "value": None if v is None else str(v)} for k, v in (spec.configs or {}).items()],
    }


def _describe_topic(cluster: Cluster, name: str) -> TopicDescription:
    return TopicDescription(name, [_describe_partition(p) for p in cluster.partitions_for(name)],
                            name in cluster.internal_topics, cluster.topic_ids.get(name))


def _describe_partition(p: PartitionInfo) -> PartitionDescription:
    return PartitionDescription(p.partition, p.leader, list(p.replicas), list(p.isr), p.leader_epoch)


def _topic_message(what: str, name: str, detail: str | None) -> str:
    return f"cannot {what} topic {name!r}" + (f": {detail}" if detail else "")


def _names(names: Any) -> str:
    return ", ".join(repr(n.name if isinstance(n, NewTopic) else n) for n in names)
