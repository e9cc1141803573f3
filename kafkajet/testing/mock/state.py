"""What the mock cluster knows: brokers, topics, partitions and their leaders, producer ids.

One lock guards all of it; the server thread takes it per request and the test thread per call, so a test
always sees a request either wholly applied or not at all.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkajet.records import build_control_batch
from kafkajet.testing.mock.groups import GroupOffsets
from kafkajet.testing.mock.log import PartitionLog
from kafkajet.testing.mock.sasl import Credentials, SaslAuthRecord
from kafkajet.testing.mock.sequences import SequenceChecker
from kafkajet.testing.mock.transactions import PartitionTransactions, TransactionCoordinator
from kafkajet.transaction import GROUP_COORDINATOR as GROUP_COORDINATOR  # the mock's modules import them here
from kafkajet.transaction import TXN_COORDINATOR as TXN_COORDINATOR

# Kafka's rule for topic names (Topic.validate): at most 249 of these characters, not "." or "..".
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
NO_LEADER = -1
# The partition counts of __consumer_offsets and __transaction_state (offsets.topic.num.partitions,
# transaction.state.log.num.partitions): a key's coordinator is the leader of partition hash(key) % 50.
_COORDINATOR_PARTITIONS = 50


@dataclass
class MockConfig:
    auto_create_topics: bool = True
    default_partitions: int = 1
    replication_factor: int = 3  # reported in metadata, capped by the number of brokers; nothing is replicated
    # Kafka's message.max.bytes default: 1 MiB plus the 12-byte log overhead of a batch.
    max_message_bytes: int = 1048588
    # Kafka's socket.request.max.bytes: a larger request frame closes the connection.
    max_request_bytes: int = 100 * 1024 * 1024
    duplicate_error: str | None = None
    stale_epoch_error: str = "INVALID_PRODUCER_EPOCH"
    unknown_producer_error: str | None = "UNKNOWN_PRODUCER_ID"
    # SASL on every connection when non-empty (read as connections are accepted); see mock/sasl.py.
    sasl_mechanisms: tuple[str, ...] = ()
    # SessionLifetimeMs of SaslAuthenticate v1+ answers (KIP-368); 0: sessions never expire.
    sasl_session_lifetime_ms: int = 0
    # After a failed authentication the answer goes out at once and the close follows this much later, like
    # Kafka's connection.failed.authentication.delay.ms (100 ms; Kafka also holds the answer back). Closing at
    # once would lose the answer in clients that drop data read together with the EOF (kafka-python).
    sasl_failure_close_delay_ms: int = 100
    # How long a transaction stays in PrepareCommit/PrepareAbort after EndTxn before its markers are written;
    # meanwhile its producer's requests get CONCURRENT_TRANSACTIONS. 0: markers are written inside EndTxn.
    txn_marker_delay_ms: int = 0


@dataclass
class BrokerState:
    node_id: int
    host: str
    port: int
    up: bool = True
    rtt_ms: float = 0.0
    rack: str | None = None  # broker.rack, as Metadata and DescribeCluster report it


@dataclass
class PartitionState:
    index: int
    leader: int
    replicas: list[int]
    sequences: SequenceChecker
    leader_epoch: int = 0
    log: PartitionLog = field(default_factory=PartitionLog)
    txns: PartitionTransactions = field(default_factory=PartitionTransactions)

    @property
    def last_stable_offset(self) -> int:
        return self.txns.last_stable_offset(self.log.log_end_offset)


@dataclass
class TopicState:
    name: str
    partitions: list[PartitionState]
    topic_id: bytes = field(default_factory=lambda: uuid.uuid4().bytes)


class ClusterState:
    def __init__(self, config: MockConfig, broker_ids: list[int]) -> None:
        self.config = config
        self.lock = threading.RLock()
        # Notified after every append, so tests can wait for records without polling.
        self.changed = threading.Condition(self.lock)
        self.broker_ids = broker_ids
        self.brokers: dict[int, BrokerState] = {}
        self.topics: dict[str, TopicState] = {}
        self.cluster_id = "kafkajet-mock-" + uuid.uuid4().hex[:12]
        # Produce outcomes per partition answered: error names, and "duplicate_batches" for retries recognised.
        self.stats: Counter[str] = Counter()
        self.sasl_credentials = Credentials()
        # SASL exchanges finished or refused, oldest first; bounded, as a client may retry bad credentials forever.
        self.sasl_log: deque[SaslAuthRecord] = deque(maxlen=10_000)
        self._next_producer_id = 1000
        self._topics_created = 0
        # Seconds, monotonic: transaction timeouts are measured on it (tests may replace it to jump ahead).
        self.clock: Callable[[], float] = time.monotonic
        self.transactions = TransactionCoordinator(self.next_producer_id, self)
        self.group_offsets = GroupOffsets()
        # (key type, key) -> broker id: coordinators moved by a test instead of placed by hashing.
        self.coordinator_overrides: dict[tuple[int, str], int] = {}

    @property
    def controller_id(self) -> int:
        return self.broker_ids[0]

    def topic_name_error(self, name: str) -> str | None:
        if not _TOPIC_NAME.match(name) or name in (".", ".."):
            return f"{name!r} is not a valid topic name"
        return None

    def create_topic(self, name: str, partitions: int, replication_factor: int | None = None,
                     leaders: list[int] | None = None) -> TopicState:
        """Leaders go round the brokers starting one further for each new topic, as Kafka spreads them."""
        if name in self.topics:
            raise ValueError(f"topic {name!r} already exists")
        error = self.topic_name_error(name)
        if error:
            raise ValueError(error)
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, not {partitions}")
        n = len(self.broker_ids)
        rf = min(replication_factor or self.config.replication_factor, n)
        start = self._topics_created
        self._topics_created += 1
        parts = []
        for p in range(partitions):
            first = (start + p) % n
            replicas = [self.broker_ids[(first + i) % n] for i in range(rf)]
            leader = replicas[0]
            if leaders is not None:
                leader = leaders[p]
                if leader not in replicas:
                    replicas = [leader, *replicas[: rf - 1]]
            parts.append(PartitionState(p, leader, replicas, self._sequence_checker()))
        topic = self.topics[name] = TopicState(name, parts)
        return topic

    def _sequence_checker(self) -> SequenceChecker:
        c = self.config
        return SequenceChecker(duplicate_error=c.duplicate_error, stale_epoch_error=c.stale_epoch_error,
                               unknown_producer_error=c.unknown_producer_error)

    def partition(self, topic: str, index: int) -> PartitionState | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def require_partition(self, topic: str, index: int) -> PartitionState:
        p = self.partition(topic, index)
        if p is None:
            raise KeyError(f"no partition {topic}-{index}")
        return p

    def set_leader(self, topic: str, index: int, broker_id: int) -> None:
        p = self.require_partition(topic, index)
        if broker_id != NO_LEADER and broker_id not in self.brokers:
            raise ValueError(f"no broker {broker_id}; brokers are {sorted(self.brokers)}")
        if broker_id != NO_LEADER and broker_id not in p.replicas:
            p.replicas = [broker_id, *[r for r in p.replicas if r != broker_id]][: len(p.replicas)]
        p.leader = broker_id
        # A new epoch per election, so clients using KIP-320 epochs see the move as newer metadata.
        p.leader_epoch += 1

    def next_producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid

    def now_ms(self) -> float:
        return self.clock() * 1000.0

    # --- coordinators -----------------------------------------------------------------------------------

    def coordinator(self, key_type: int, key: str) -> int:
        """The broker coordinating a group or transactional id: a test's choice, else the key's hash over the
        brokers that are up (as the leader of its __consumer_offsets/__transaction_state partition would be)."""
        override = self.coordinator_overrides.get((key_type, key))
        if override is not None:
            return override
        live = [b for b in self.broker_ids if b in self.brokers and self.brokers[b].up] or self.broker_ids
        return live[coordinator_partition(key) % len(live)]

    def set_coordinator(self, key_type: int, key: str, broker_id: int) -> None:
        if broker_id not in self.brokers:
            raise ValueError(f"no broker {broker_id}; brokers are {sorted(self.brokers)}")
        self.coordinator_overrides[(key_type, key)] = broker_id
        if key_type == TXN_COORDINATOR:
            # A moved coordinator is a new leader of the transaction log partition: a new coordinator epoch.
            self.transactions.coordinator_epoch += 1

    def tick_transactions(self) -> bool:
        """Abort timed-out transactions, finish delayed ones; True if a marker may have been written."""
        self.transactions.marker_delay_ms = self.config.txn_marker_delay_ms
        return self.transactions.tick(self.now_ms())

    # --- what the transaction coordinator writes (MarkerWriter) -----------------------------------------

    def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int) -> None:
        """Append a COMMIT/ABORT control batch, as a partition leader does on WriteTxnMarkers."""
        p = self.partition(topic, partition)
        if p is None:
            return  # deleted meanwhile: Kafka drops markers for partitions that are gone
        timestamp = int(time.time() * 1000)
        data = build_control_batch(commit, producer_id=producer_id, producer_epoch=producer_epoch,
                                   timestamp=timestamp, coordinator_epoch=coordinator_epoch)
        offset = p.log.append(data, 0, timestamp, p.leader_epoch)
        p.sequences.on_marker(producer_id, producer_epoch)
        p.txns.on_marker(producer_id, commit, offset)

    def complete_txn_offsets(self, group: str, producer_id: int, commit: bool) -> None:
        self.group_offsets.complete(group, producer_id, commit)


def coordinator_partition(key: str) -> int:
    """Kafka's partitionFor: Utils.abs(key.hashCode) % partitions, with Java's String.hashCode (UTF-16 units)."""
    h = 0
    units = key.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % _COORDINATOR_PARTITIONS
