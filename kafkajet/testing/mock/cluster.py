"""MockCluster: a multi-broker Kafka cluster in process, on real TCP sockets, with fault injection.

    with MockCluster(brokers=3) as cluster:
        cluster.create_topic("t", partitions=6)
        producer = Producer(bootstrap_servers=cluster.bootstrap_servers)
        cluster.push_request_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
        ...
        assert [r.value for r in cluster.records("t", 0)] == [...]

It speaks the real wire protocol (kafkajet.protocol) and stores real record batches, so independent clients
(kafka-python, confluent-kafka) produce into it and read back from it. It is not replicated and forgets
everything on stop(). Served: ApiVersions, Metadata, Produce, Fetch, ListOffsets, CreateTopics, DeleteTopics,
InitProducerId, DescribeCluster, and the coordinator APIs: FindCoordinator, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit, OffsetCommit, OffsetFetch (kafkajet.testing.mock.handlers: one module per API or
family, each with the versions it serves). Faults are described in kafkajet.testing.mock.faults; they
apply to every API (push_request_errors("EndTxn", ["CONCURRENT_TRANSACTIONS"]) and the like).

Transactions (kafkajet.testing.mock.transactions) as a Kafka broker runs them: a transaction coordinator per
transactional id (placed by hashing the id over the brokers that are up, or moved with set_coordinator(); other
brokers answer NOT_COORDINATOR), epochs that fence older producers, COMMIT/ABORT control batches written to every
partition of a transaction, timeouts that abort (and fence) a transaction left open, the last stable offset, and
read_committed Fetch/ListOffsets. A group coordinator (kafkajet.testing.mock.groups) keeps committed offsets,
transactional ones staged until their transaction commits. Groups have no members: JoinGroup is not served.

    cluster.transaction_state("txn-1")            # "Ongoing", "CompleteCommit", ...
    cluster.committed_offsets("group")            # {("t", 0): 42}
    cluster.last_stable_offset("t", 0)
    [b for b in cluster.batches("t", 0) if b.is_control]   # the markers

SASL (SASL_PLAINTEXT; kafkajet.testing.mock.sasl):

    MockCluster(brokers=1, sasl_mechanisms=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                sasl_users={"alice": "alice-secret"}, sasl_session_lifetime_ms=0)

With sasl_mechanisms (any of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) every connection must authenticate:
ApiVersions (which then lists SaslHandshake and SaslAuthenticate) and SaslHandshake v0/v1 are all it may send
before; anything else closes it. An unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled
list, a wrong password SASL_AUTHENTICATION_FAILED with a message, and the connection is then closed (after
cluster.config.sasl_failure_close_delay_ms, 100 by default, as Kafka's connection.failed.authentication.delay.ms).
sasl_users maps usernames to passwords (SCRAM credentials are salted with 4096 iterations); change them with
set_sasl_user() / remove_sasl_user(). sasl_session_lifetime_ms is the SessionLifetimeMs of SaslAuthenticate
v1+ answers (KIP-368; also cluster.config.sasl_session_lifetime_ms, read at each authentication): once it
has passed, a connection that sent no new SaslHandshake is closed at its next request. sasl_authentications()
lists the exchanges; requests() records the principal of each request. Without sasl_mechanisms the cluster
takes no SASL at all (and does not list the SASL APIs), as before. OAUTHBEARER tokens are checked by
sasl_oauthbearer_validator (token, extensions) -> (principal, expiry); kafkajet.testing.oidc makes one that
checks a local identity provider's JWTs; AWS_MSK_IAM messages by sasl_aws_msk_iam_validator
(kafkajet.testing.aws_msk checks both MSK forms). As Kafka, a credential's expiry caps the session lifetime.
GSSAPI contexts are accepted with the service principals of sasl_gssapi_keytab (kafka/127.0.0.1@REALM for
the default host; kafkajet.testing.kdc runs a local KDC that makes them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType

from kafkajet.protocol import ApiKey
from kafkajet.records import Record, RecordBatch, decode_batches
from kafkajet.testing.mock.faults import (
    DROP,
    DROP_AFTER,
    Action,
    ControlFn,
    Faults,
    RawResponse,
    api_key,
    parse_error_action,
)
from kafkajet.testing.mock.sasl import SERVER_MECHANISMS, NativeMskValidator, SaslAuthRecord, TokenValidator
from kafkajet.testing.mock.server import MockServer, RequestRecord
from kafkajet.testing.mock.state import (
    GROUP_COORDINATOR,
    NO_LEADER,
    TXN_COORDINATOR,
    BrokerState,
    ClusterState,
    MockConfig,
)

log = logging.getLogger("kafkajet.testing.mock")

__all__ = ["MockCluster", "MockConfig", "RequestRecord", "NO_LEADER", "SaslAuthRecord"]


class MockCluster:
    """brokers are numbered 1..n, each with its own port on `host` (and `racks[i]` the rack of broker i + 1).
    Methods that wait take a timeout (seconds)."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        auto_create_topics: bool = True,
        default_partitions: int = 1,
        replication_factor: int = 3,
        max_message_bytes: int = 1048588,
        duplicate_error: str | None = None,
        stale_epoch_error: str = "INVALID_PRODUCER_EPOCH",
        unknown_producer_error: str | None = "UNKNOWN_PRODUCER_ID",
        host: str = "127.0.0.1",
        sasl_mechanisms: Iterable[str] | None = None,
        sasl_users: Mapping[str, str] | None = None,
        sasl_session_lifetime_ms: int = 0,
        sasl_oauthbearer_validator: TokenValidator | None = None,
        sasl_aws_msk_iam_validator: NativeMskValidator | None = None,
        sasl_gssapi_keytab: str | None = None,
        racks: Sequence[str | None] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        if racks is not None and len(racks) != brokers:
            raise ValueError(f"racks={list(racks)}: give one rack (or None) per broker, {brokers} in all")
        mechanisms = tuple(sasl_mechanisms or ())
        unknown = [m for m in mechanisms if m not in SERVER_MECHANISMS]
        if unknown:
            raise ValueError(f"SASL mechanisms {unknown} are not served; choose from {list(SERVER_MECHANISMS)}")
        if "GSSAPI" in mechanisms and sasl_gssapi_keytab is None:
            raise ValueError("GSSAPI needs sasl_gssapi_keytab: the brokers' service keytab "
                             "(kafkajet.testing.kdc.LocalKdc makes one)")
        if sasl_users and not mechanisms:
            raise ValueError("sasl_users without sasl_mechanisms: say which mechanisms the cluster takes")
        if sasl_session_lifetime_ms < 0:
            raise ValueError(f"sasl_session_lifetime_ms must be >= 0, not {sasl_session_lifetime_ms}")
        for name in (duplicate_error, stale_epoch_error, unknown_producer_error):
            if name is not None:
                parse_error_action(name)
        config = MockConfig(auto_create_topics=auto_create_topics, default_partitions=default_partitions,
                            replication_factor=replication_factor, max_message_bytes=max_message_bytes,
                            duplicate_error=duplicate_error, stale_epoch_error=stale_epoch_error,
                            unknown_producer_error=unknown_producer_error, sasl_mechanisms=mechanisms,
                            sasl_session_lifetime_ms=sasl_session_lifetime_ms)
        self._host = host
        self._racks = list(racks) if racks is not None else [None] * brokers
        self._state = ClusterState(config, list(range(1, brokers + 1)))
        for user, password in (sasl_users or {}).items():
            self._state.sasl_credentials.set(user, password)
        self._state.sasl_credentials.oauthbearer_validator = sasl_oauthbearer_validator
        self._state.sasl_credentials.aws_msk_iam_validator = sasl_aws_msk_iam_validator
        self._state.sasl_credentials.gssapi_keytab = sasl_gssapi_keytab
        self._faults = Faults()
        self._server: MockServer | None = None

    # --- life cycle -----------------------------------------------------------------------------------

    def start(self) -> MockCluster:
        if self._server is not None:
            raise RuntimeError("the mock cluster was already started")
        server = self._server = MockServer(self._state, self._faults, self._host)
        try:
            for broker_id in self._state.broker_ids:
                port = server.listen(broker_id)
                self._state.brokers[broker_id] = BrokerState(broker_id, self._host, port,
                                                             rack=self._racks[broker_id - 1])
            server.start(f"kafkajet-mock-cluster-{self._state.cluster_id[-12:]}")
        except BaseException:
            server.stop(5.0)
            raise
        log.info("mock cluster %s up: %s", self._state.cluster_id, self.bootstrap_servers)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Close every socket and join the server thread."""
        if self._server is not None:
            self._server.stop(timeout)

    @property
    def running(self) -> bool:
        """True while the server thread is alive."""
        return self._server is not None and self._server.running

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- topology -------------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self._state.brokers.values())

    @property
    def broker_ids(self) -> list[int]:
        return list(self._state.broker_ids)

    @property
    def config(self) -> MockConfig:
        """Mutable: e.g. cluster.config.max_message_bytes = 10_000 takes effect at the next request."""
        return self._state.config

    def address(self, broker_id: int) -> str:
        b = self._broker(broker_id)
        return f"{b.host}:{b.port}"

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None) -> None:
        with self._state.lock:
            self._state.create_topic(name, partitions, replication_factor)

    def delete_topic(self, name: str) -> None:
        with self._state.lock:
            if self._state.topics.pop(name, None) is None:
                raise KeyError(f"no topic {name!r}")

    def topics(self) -> dict[str, int]:
        """Topic name -> number of partitions."""
        with self._state.lock:
            return {name: len(t.partitions) for name, t in self._state.topics.items()}

    def leader(self, topic: str, partition: int) -> int:
        with self._state.lock:
            return self._state.require_partition(topic, partition).leader

    def set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move leadership (NO_LEADER = -1 for none: metadata then says LEADER_NOT_AVAILABLE). The old leader
        answers NOT_LEADER_OR_FOLLOWER from the next request on."""
        with self._state.lock:
            self._state.set_leader(topic, partition, broker_id)

    def partitions_led_by(self, broker_id: int) -> list[tuple[str, int]]:
        with self._state.lock:
            return [(t.name, p.index) for t in self._state.topics.values() for p in t.partitions
                    if p.leader == broker_id]

    # --- faults ---------------------------------------------------------------------------------------

    def control(self, api: ApiKey | int | str, fn: ControlFn) -> int:
        """Add a hook fn(request_header, body, broker_id) -> action; returns a handle for remove_control().
        The actions are listed in kafkajet.testing.mock.faults.

        A hook runs on a thread of its own, NOT on the server thread, and may block (wait on an event, sleep
        to delay an answer, call back into the cluster): while it runs, its connection takes no further
        request, so its answer and those behind it stay in order, and every other connection and broker is
        served. It stalls that one connection: don't make it wait for something the client can only do
        through that connection (answer a retriable error until then). Hooks of different connections run
        concurrently."""
        return self._faults.add_hook(api_key(api), fn)

    def remove_control(self, handle: int) -> bool:
        return self._faults.remove_hook(handle)

    def push_request_errors(self, api: ApiKey | int | str, errors: Iterable[str], *,
                            broker_id: int | None = None) -> None:
        """The next len(errors) requests of `api` (to `broker_id`, or any broker) fail one error each, every
        partition in them getting it. Wrap a name in faults.after_append() to have the request handled first."""
        names = list(errors)
        for name in names:
            parse_error_action(name)
        self._enqueue(api, list(names), broker_id)

    def drop_requests(self, api: ApiKey | int | str, count: int = 1, *, broker_id: int | None = None) -> None:
        """Close the connection on the next `count` requests of `api`, without handling them."""
        self._enqueue(api, [DROP] * count, broker_id)

    def drop_after_append(self, api: ApiKey | int | str = "Produce", count: int = 1, *,
                          broker_id: int | None = None) -> None:
        """Handle the next `count` requests of `api` (a Produce appends), then close the connection unanswered."""
        self._enqueue(api, [DROP_AFTER] * count, broker_id)

    def inject_response_bytes(self, api: ApiKey | int | str, data: RawResponse, *,
                              broker_id: int | None = None) -> None:
        """Answer the next request of `api` with raw bytes (whole frame: size prefix, header, body), or with
        data(request_header) if callable. The request itself is not handled."""
        self._enqueue(api, [data], broker_id)

    def pending_faults(self, api: ApiKey | int | str) -> int:
        """Queued one-shot faults not yet consumed by a request."""
        return self._faults.pending(api_key(api))

    def clear_faults(self) -> None:
        """Remove every hook and queued fault, and every rtt."""
        self._faults.clear()
        with self._state.lock:
            for b in self._state.brokers.values():
                b.rtt_ms = 0.0

    def _enqueue(self, api: ApiKey | int | str, actions: list[Action], broker_id: int | None) -> None:
        if broker_id is not None:
            self._broker(broker_id)
        self._faults.enqueue(api_key(api), actions, broker_id)

    def set_rtt(self, broker_id: int, ms: float) -> None:
        """Delay every answer of the broker by `ms` (from the moment it is ready); other brokers are unaffected."""
        if ms < 0:
            raise ValueError(f"rtt must be >= 0, not {ms}")
        with self._state.lock:
            self._broker(broker_id).rtt_ms = float(ms)

    def broker_down(self, broker_id: int, timeout: float = 5.0) -> None:
        """Close the broker's listener and connections: clients get connection refused. Metadata keeps listing
        it and its leadership (the cluster has not noticed); use set_leader() for a failover."""
        broker = self._broker(broker_id)
        self._require_server().call(lambda: self._require_server().close_broker(broker_id), timeout)
        with self._state.lock:
            broker.up = False

    def broker_up(self, broker_id: int, timeout: float = 5.0) -> None:
        """Listen again on the broker's old port."""
        broker = self._broker(broker_id)
        if broker.up:
            return
        server = self._require_server()
        server.call(lambda: server.listen(broker_id, broker.port), timeout)
        with self._state.lock:
            broker.up = True

    # --- SASL -----------------------------------------------------------------------------------------

    def set_sasl_user(self, user: str, password: str) -> None:
        """Add a user or change a password; takes effect at the next authentication (connections already
        authenticated stay so until they re-authenticate)."""
        with self._state.lock:
            self._state.sasl_credentials.set(user, password)

    def remove_sasl_user(self, user: str) -> None:
        with self._state.lock:
            self._state.sasl_credentials.remove(user)

    def sasl_authentications(self) -> list[SaslAuthRecord]:
        """Every SASL exchange finished or refused, oldest first: broker, mechanism, principal, ok, reauth."""
        with self._state.lock:
            return list(self._state.sasl_log)

    # --- what the cluster holds -----------------------------------------------------------------------

    def records(self, topic: str, partition: int) -> list[Record]:
        """Every data record of a partition with its offset (aborted ones too; not the transaction markers,
        which batches() shows), decoded from the stored batches."""
        with self._state.lock:
            plog = self._state.require_partition(topic, partition).log
            stored = plog.stored()
        # Decoded outside the lock: the server keeps answering meanwhile.
        return [r for b in decode_batches(b"".join(s.data for s in stored)) if not b.is_control for r in b.records]

    def batches(self, topic: str, partition: int) -> list[RecordBatch]:
        """The stored batches, decoded: producer id, epoch, base sequence, offsets, records, attributes
        (is_transactional; is_control for the COMMIT/ABORT markers, see kafkajet.records.control_record_type)."""
        with self._state.lock:
            return self._state.require_partition(topic, partition).log.decoded()

    def stored_batches(self, topic: str, partition: int) -> list[bytes]:
        """The stored batches as the producer wrote them (base offset and leader epoch stamped, as a Fetch hands
        them out), for independent readers to decode."""
        with self._state.lock:
            return [s.data for s in self._state.require_partition(topic, partition).log.stored()]

    def high_watermark(self, topic: str, partition: int) -> int:
        with self._state.lock:
            return self._state.require_partition(topic, partition).log.log_end_offset

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The first offset of the oldest transaction still open on the partition, else the high watermark."""
        with self._state.lock:
            return self._state.require_partition(topic, partition).last_stable_offset

    def aborted_transactions(self, topic: str, partition: int) -> list[tuple[int, int, int]]:
        """(producer id, first offset, abort marker offset) of each transaction aborted on the partition."""
        with self._state.lock:
            p = self._state.require_partition(topic, partition)
            return [(a.producer_id, a.first_offset, a.last_offset) for a in p.txns.aborted]

    # --- coordinators ---------------------------------------------------------------------------------

    def transaction_state(self, transactional_id: str) -> str | None:
        """The coordinator's state of the id ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
        "CompleteCommit", "CompleteAbort"), None if no InitProducerId named it."""
        with self._state.lock:
            meta = self._state.transactions.transactions.get(transactional_id)
            return None if meta is None else meta.state.value

    def transaction_history(self, transactional_id: str) -> list[str]:
        """Every state the id went through, oldest first (empty if unknown)."""
        with self._state.lock:
            meta = self._state.transactions.transactions.get(transactional_id)
            return [] if meta is None else [s.value for s in meta.history]

    def transaction_producer(self, transactional_id: str) -> tuple[int, int] | None:
        """(producer id, epoch) the coordinator holds for the id."""
        with self._state.lock:
            meta = self._state.transactions.transactions.get(transactional_id)
            return None if meta is None else (meta.producer_id, meta.producer_epoch)

    def transaction_partitions(self, transactional_id: str) -> set[tuple[str, int]]:
        """The partitions in the id's current transaction."""
        with self._state.lock:
            meta = self._state.transactions.transactions.get(transactional_id)
            return set() if meta is None else set(meta.partitions)

    def coordinator(self, kind: str, key: str) -> int:
        """The broker coordinating `key`: kind "txn" (a transactional id) or "group"."""
        with self._state.lock:
            return self._state.coordinator(_coordinator_type(kind), key)

    def set_coordinator(self, kind: str, key: str, broker_id: int) -> None:
        """Move the coordinator of a transactional id (kind "txn") or group ("group"): from the next request
        on the old one answers NOT_COORDINATOR and FindCoordinator names the new one. Its state moves along
        (Kafka's new coordinator loads it from the log)."""
        self._broker(broker_id)
        with self._state.lock:
            self._state.set_coordinator(_coordinator_type(kind), key, broker_id)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets; offsets of transactions still open are not among them."""
        with self._state.lock:
            return {tp: om.offset for tp, om in self._state.group_offsets.committed(group).items()}

    def record_count(self, topic: str) -> int:
        """Offsets used over all partitions: transaction markers take one each, like records."""
        with self._state.lock:
            t = self._state.topics.get(topic)
            return 0 if t is None else sum(p.log.log_end_offset for p in t.partitions)

    def stats(self) -> dict[str, int]:
        """Produce outcomes answered per partition since start: error names (forced ones included), and
        "duplicate_batches" for retried idempotent batches recognised and not written again."""
        with self._state.lock:
            return dict(self._state.stats)

    def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str = "condition") -> None:
        """Wait until predicate() holds, re-checking after every request the cluster handles."""
        with self._state.changed:
            if not self._state.changed.wait_for(predicate, timeout):
                raise TimeoutError(f"{what} not reached within {timeout} s")

    def wait_for_records(self, topic: str, count: int, timeout: float) -> None:
        """Wait until the topic holds at least `count` records (over all partitions)."""
        try:
            self.wait_until(lambda: self.record_count(topic) >= count, timeout)
        except TimeoutError:
            raise TimeoutError(f"{count} records in {topic!r} not reached within {timeout} s "
                               f"(have {self.record_count(topic)})") from None

    def requests(self, api: ApiKey | int | str | None = None) -> list[RequestRecord]:
        """Request history, oldest first: api name, version, broker, time.monotonic(), correlation id, client id."""
        history = self._require_server().history()
        if api is None:
            return history
        name = api_key(api).name
        return [r for r in history if r.api == name]

    # --- helpers --------------------------------------------------------------------------------------

    def _broker(self, broker_id: int) -> BrokerState:
        b = self._state.brokers.get(broker_id)
        if b is None:
            raise ValueError(f"no broker {broker_id}; brokers are {self._state.broker_ids}")
        return b

    def _require_server(self) -> MockServer:
        if self._server is None:
            raise RuntimeError("the mock cluster is not started")
        return self._server

    def __repr__(self) -> str:
        return f"MockCluster({self.bootstrap_servers or 'not started'})"


def _coordinator_type(kind: str) -> int:
    types = {"group": GROUP_COORDINATOR, "txn": TXN_COORDINATOR, "transaction": TXN_COORDINATOR}
    if kind not in types:
        raise ValueError(f"coordinator kind {kind!r}: use 'txn' or 'group'")
    return types[kind]
