"""The Producer: send / send_batch / flush / close / transactions / partitions_for / metrics, over the internals
in the modules beside it (accumulator, sender, partitioner, ...).

Mostly wiring. send()'s per-record work is send_path.SendPath's, a module hatch_build.py compiles (this one
needs weak references, which mypyc refuses); each producer binds its send to that object's.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kafkajet._build import describe as describe_build
from kafkajet._version import __version__
from kafkajet.addresses import check_resolvable
from kafkajet.clock import now_ms
from kafkajet.config import ProducerConfig, parse_producer_config
from kafkajet.errors import (
    BufferExhaustedError,
    IllegalStateError,
    KafkaError,
    ProducerClosedError,
    TransactionAbortedError,
)
from kafkajet.network import NetworkClient
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.batch_input import (
    BatchInput,
    PreparedBatch,
    SizeLimits,
    check_lengths,
    timestamps_argument,
)
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.futures import (
    BatchFuture,
    CombinedBatchFuture,
    DeliveryCallback,
    RecordFuture,
    Segment,
)
from kafkajet.producer.idempotence import IdempotenceManager
from kafkajet.producer.loss_report import report_loss
from kafkajet.producer.metadata import Cluster, Metadata, PartitionInfo
from kafkajet.producer.metrics import ProducerMetrics
from kafkajet.producer.metrics_push import ClientMetricsPush
from kafkajet.producer.partitioner import (
    PartitionPlanner,
    resolve_partitioner,
)
from kafkajet.producer.send_gate import AsyncView, SendGate
from kafkajet.producer.send_path import SendPath
from kafkajet.producer.sender import Sender
from kafkajet.producer.transactions import State as TxnState
from kafkajet.producer.transactions import TransactionalResult, TransactionManager
from kafkajet.records import Compression
from kafkajet.security.connection import connection_security
from kafkajet.serialization import resolve_serializer
from kafkajet.transaction import PreparedTransaction

if TYPE_CHECKING:
    from kafkajet.producer.arrow import ArrowRows  # imported when used: it needs pyarrow
    from kafkajet.producer.telemetry import ProducerTelemetry  # imported when used: it needs the otel extra

log = logging.getLogger("kafkajet.producer")

_live_producers: weakref.WeakSet[Producer] = weakref.WeakSet()


def _compression_level(cfg: ProducerConfig) -> int | None:
    """The level key of the codec compression.type names (None: the codec's default, or a codec without)."""
    codec = cfg["compression.type"]
    if codec == "gzip":
        return cfg["compression.gzip.level"]
    if codec == "lz4":
        return cfg["compression.lz4.level"]
    if codec == "zstd":
        return cfg["compression.zstd.level"]
    return None


def _after_fork_in_child() -> None:
    # The sender thread and sockets did not survive fork(); using them would hang, so refuse clearly.
    for p in list(_live_producers):
        p._forked_from = p._owner_pid
        p._refusing = True  # send() checks one flag on its fast path; it then explains the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_at_exit() -> None:
    for p in list(_live_producers):
        try:
            p._close_at_exit()
        except Exception:
            log.exception("closing a producer at interpreter exit")


atexit.register(_close_at_exit)


# Java's total time in each blocking transactional call, by the method that blocks.
_TXN_TIMES = {"init_transactions": "txn-init-time-ns-total",
              "send_offsets_to_transaction": "txn-send-offsets-time-ns-total",
              "commit_transaction": "txn-commit-time-ns-total", "abort_transaction": "txn-abort-time-ns-total"}


class Producer:
    """A thread-safe Kafka producer with the Java producer's semantics.

    ```python
    with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as p:
        p.send("events", value=b"v", key=b"k").result(timeout=30)
    ```
    """

    def __init__(self, config: Mapping[str, Any] | str | None = None, /, **kwargs: Any) -> None:
        cfg = parse_producer_config(config, **kwargs)
        self._bootstrap = check_resolvable(cfg["bootstrap.servers"], cfg["client.dns.lookup"])
        if log.isEnabledFor(logging.DEBUG):  # describe_build() imports and inspects every compiled module
            log.debug("kafkajet %s, %s", __version__, describe_build())
        if cfg["opentelemetry.enable"]:
            # ConfigError naming the extra when it is missing
            from kafkajet.producer.telemetry import ProducerTelemetry
        self.config: ProducerConfig = cfg
        self.client_id: str = cfg["client.id"]
        self._owner_pid = os.getpid()
        self._forked_from: int | None = None
        self._close_called = False
        self._close_lock = threading.Lock()
        self._exit_close_timeout_s = 10.0
        self._exiting = False

        self._key_serializer = resolve_serializer(cfg["key.serializer"], what="key.serializer")
        self._value_serializer = resolve_serializer(cfg["value.serializer"], what="value.serializer")
        self._partitioner = resolve_partitioner(cfg["partitioner"], cfg["batch.size"],
                                                cfg["partitioner.ignore.keys"])
        self._planner = PartitionPlanner(self._partitioner, cfg["batch.size"], cfg["partitioner.ignore.keys"])
        self._interceptors: list[Any] = list(cfg["interceptors"] or [])
        self._max_block_ms: float = cfg["max.block.ms"]
        self._buffer_memory: int = cfg["buffer.memory"]
        self._limits = SizeLimits(cfg["max.request.size"], cfg["buffer.memory"])
        self._batch_input = BatchInput(self._key_serializer, self._value_serializer, self._limits)

        self._metrics = ProducerMetrics()
        self._metadata = Metadata(
            max_age_ms=cfg["metadata.max.age.ms"], max_idle_ms=cfg["metadata.max.idle.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"], retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
        )
        self._pool = BufferPool(cfg["buffer.memory"], cfg["batch.size"])
        self._idempotence = IdempotenceManager() if cfg["enable.idempotence"] else None
        self._txn: TransactionManager | None = None
        if cfg["transactional.id"] is not None:
            assert self._idempotence is not None  # the config check makes transactional.id imply idempotence
            self._txn = TransactionManager(cfg["transactional.id"], cfg["transaction.timeout.ms"],
                                           self._idempotence, cfg["retry.backoff.ms"])
            self._txn.on_state = self._on_transaction_state
        self._accumulator = self._make_accumulator(cfg)
        self._configure_builtin_partitioner(cfg)
        if self._txn is not None:
            self._accumulator.send_allowed = self._txn.is_send_allowed
            self._accumulator.transactional = True
        self._client = self._make_client(cfg)
        self._metrics_push = ClientMetricsPush(
            client=self._client, snapshot=self._metrics.snapshot, client_id=self.client_id,
            retry_backoff_ms=cfg["retry.backoff.ms"]) if cfg["enable.metrics.push"] else None
        self._sender = self._make_sender(cfg)
        self._wakeup = self._sender.wakeup
        self._path = SendPath(self._metadata, self._accumulator, self._planner, self._batch_input, self._max_block_ms,
                              self._wakeup, self._txn, self._interceptors, self._on_send, self._raise_refused,
                              self._explain_exhausted)
        # Each record's call goes straight to the (compiled) send path, not through send() below: a Python call
        # layer costs a tenth of what the compiled send() does. _instrument() wraps this one.
        self.send = self._path.send  # type: ignore[method-assign]
        # AIOProducer's way in while send is still this one (see _async_view()).
        self._plain_send = self.send
        # produce() likewise: straight to the send path, which makes no future for it.
        self.produce = self._path.produce  # type: ignore[method-assign]
        self._accumulator.on_unheard_failure = self._unheard_failed
        if self._txn is not None:
            self._refusing = True  # until begin_transaction(): send() explains why
        # What AIOProducer checks before send() so that its event loop never blocks in it.
        self._send_gate = SendGate(self._metadata, self._pool, self._wakeup, self._max_block_ms,
                                   self._explain_exhausted)
        self._pool.on_block = self._wakeup
        self._pool.on_waited = self._metrics.buffer_waited
        self._pool.on_exhausted = self._metrics.buffer_exhausted
        self._path.metadata_waited = self._metadata_waited
        self._metrics.sources.append(self._client.traffic_snapshot)
        self._accumulator.on_new_batch = self._wakeup
        self._metrics.gauges.update({
            "buffer-available-bytes": self._pool.available_memory,
            "buffer-total-bytes": lambda: self._buffer_memory,
            "bufferpool-wait-time-ns-total": lambda: int(self._pool.wait_time_total_s * 1e9),
            # Deprecated: seconds, under a name Java 4.4 no longer has; removed in the release after next.
            "bufferpool-wait-time-total": lambda: self._pool.wait_time_total_s,
            "requests-in-flight": self._client.in_flight_count,
            "waiting-threads": self._pool.queued,
            "metadata-age": self._metadata_age_s,
        })
        if cfg["opentelemetry.enable"]:
            self._instrument(ProducerTelemetry(self.client_id, self._metadata))
        self._thread = threading.Thread(
            target=self._sender.run, name=f"kafkajet-network-thread | {self.client_id}", daemon=True
        )
        self._thread.start()
        _live_producers.add(self)
        log.info("producer %s started (acks=%s, idempotence=%s)", self.client_id, cfg["acks"],
                 cfg["enable.idempotence"])

    def _instrument(self, telemetry: ProducerTelemetry) -> None:
        """opentelemetry.enable: the send methods of this instance become traced ones, decided once here, so a
        producer without it runs the plain methods and pays nothing."""
        self.send = telemetry.traced_send(self.send)  # type: ignore[method-assign]
        traced_send = self.send

        def traced_produce(topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
                           timestamp_ms: int | None = None, headers: Any = None,
                           callback: DeliveryCallback | None = None) -> None:
            # The span ends in a delivery callback of the tracer's, so the record always has one: a failure
            # with no callback of the caller's is reported per record here, as the batch would report it.
            traced_send(topic, value, key, headers, partition, timestamp_ms,
                        self._unheard_record if callback is None else callback)

        self.produce = traced_produce  # type: ignore[method-assign]
        self.send_batch = telemetry.traced_send_batch(self.send_batch)  # type: ignore[method-assign]
        self.send_arrow = telemetry.traced_send_arrow(self.send_arrow)  # type: ignore[method-assign, assignment]
        self._send_rows = telemetry.injecting_rows(self._send_rows)  # type: ignore[method-assign, assignment]

    def _make_accumulator(self, cfg: ProducerConfig) -> RecordAccumulator:
        return RecordAccumulator(
            batch_size=cfg["batch.size"],
            batch_max_size=min(cfg["batch.max.size"], cfg["max.request.size"]),
            compression=int(Compression.from_name(cfg["compression.type"])),
            compression_level=_compression_level(cfg),
            linger_ms=cfg["linger.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"],
            retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
            delivery_timeout_ms=cfg["delivery.timeout.ms"],
            pool=self._pool,
            max_block_ms=cfg["max.block.ms"],
            idempotence=self._idempotence,
            guarantee_order=cfg["max.in.flight.requests.per.connection"] == 1,
        )

    def _configure_builtin_partitioner(self, cfg: ProducerConfig) -> None:
        """Java's BuiltInPartitioner settings, which a custom or other named partitioner ignores (as in Java)."""
        sticky = self._planner.sticky
        if sticky is None:
            return
        rack = cfg["client.rack"]
        if cfg["partitioner.rack.aware"] and rack:
            metadata = self._metadata
            sticky.rack = rack
            sticky.in_rack = lambda topic: metadata.cluster.available_partitions_in_rack(topic, rack)
        if cfg["partitioner.adaptive.partitioning.enable"]:
            self._accumulator.adaptive = sticky
            self._accumulator.availability_timeout_ms = float(cfg["partitioner.availability.timeout.ms"])

    def _make_client(self, cfg: ProducerConfig) -> NetworkClient:
        client = NetworkClient(
            security=connection_security(cfg),
            client_id=self.client_id,
            request_timeout_ms=cfg["request.timeout.ms"],
            max_in_flight_requests_per_connection=cfg["max.in.flight.requests.per.connection"],
            reconnect_backoff_ms=cfg["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=cfg["reconnect.backoff.max.ms"],
            connections_max_idle_ms=cfg["connections.max.idle.ms"],
            socket_connection_setup_timeout_ms=cfg["socket.connection.setup.timeout.ms"],
            socket_connection_setup_timeout_max_ms=cfg["socket.connection.setup.timeout.max.ms"],
            send_buffer_bytes=cfg["send.buffer.bytes"],
            receive_buffer_bytes=cfg["receive.buffer.bytes"],
            metadata_recovery_strategy=cfg["metadata.recovery.strategy"],
            rebootstrap_trigger_ms=cfg["metadata.recovery.rebootstrap.trigger.ms"],
            metadata_cluster_check=cfg["metadata.cluster.check.enable"],
        )
        client.add_bootstrap(self._bootstrap)
        return client

    def _make_sender(self, cfg: ProducerConfig) -> Sender:
        return Sender(
            client=self._client,
            metadata=self._metadata,
            accumulator=self._accumulator,
            idempotence=self._idempotence,
            metrics=self._metrics,
            acks=cfg["acks"],
            retries=cfg["retries"],
            request_timeout_ms=cfg["request.timeout.ms"],
            max_request_size=cfg["max.request.size"],
            retry_backoff_ms=cfg["retry.backoff.ms"],
            allow_auto_create_topics=cfg["allow.auto.create.topics"],
            interceptors=self._interceptors,
            on_fatal=self._on_fatal,
            transactions=self._txn,
            metrics_push=self._metrics_push,
        )

    # --- send ---------------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        callback: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue one record; returns a future that resolves to RecordMetadata or the record's error.

        `callback(metadata, exception)` runs exactly once when the record's outcome is known (Java's
        send(record, callback)): on the producer's sender thread, in send order within a partition, with
        exception None on success; on failure metadata has the topic and partition and -1 elsewhere. It should
        be quick (it holds up every later completion); an exception it raises is logged. If send() itself
        raises, the record was not accepted and the callback is not called.
        Blocks at most max.block.ms (waiting for the topic's metadata or for buffer memory).
        """
        return self._path.send(topic, value, key, headers, partition, timestamp_ms, callback)

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        callback: DeliveryCallback | None = None,
    ) -> None:
        """Queue one record and return nothing: send() for a caller that does not keep the future.

        The record, its checks and its errors are send()'s: a wrong argument, a serializer's error, a record
        too large or a closed producer raise here, and the call blocks at most max.block.ms (for the topic's
        metadata or for buffer memory). No future is made (a third of send()'s cost in a fire-and-forget loop),
        so the record's outcome reaches the caller only through `callback(metadata, exception)`, called as
        send(callback=) calls it: once, on the sender thread, in send order within a partition.

        Without a callback a failed record is not silent: each failed batch of such records is logged at ERROR
        (on stderr too when no logging handler writes there) and counted in the metrics
        `record-error-no-callback-total` (and, as every failure the broker or the delivery timeout causes,
        `record-error-total`). flush() waits for these records as for any other.
        """
        self._path.produce(topic, value, key, partition=partition, timestamp_ms=timestamp_ms, headers=headers,
                           callback=callback)

    def _unheard_failed(self, batch: Any, error: KafkaError) -> None:
        """A failed batch holds records produce() queued without a callback: their one outcome is this report.
        Called as the batch completes (on the sender thread, or close()'s), under its lock, before flush() can return."""
        self._report_unheard(batch.unheard, batch.topic, batch.partition, error)

    def _unheard_record(self, md: Any, error: BaseException | None) -> None:
        """The delivery callback of a traced produce() without one of the caller's."""
        if error is not None:
            self._report_unheard(1, md.topic, md.partition, error)

    def _report_unheard(self, n: int, topic: str, partition: int, error: BaseException) -> None:
        self._metrics.records_unheard_failed(n)
        if self._exiting or isinstance(error, TransactionAbortedError):
            # At exit _close_at_exit() says what was lost, once; abort_transaction() failed them on the caller's
            # own request, and said so: counted, not reported.
            return
        try:
            report_loss(log, f"producer {self.client_id}: {n} record(s) queued by produce() without a callback "
                             f"failed for {topic}-{partition}: "
                             f"{type(error).__name__}: {error}. Pass callback= to produce() to handle "
                             "failures (metric record-error-no-callback-total counts them)")
        except Exception:  # never into the sender thread: the batch must still complete
            log.exception("reporting failed produce() records")

    @property
    def _refusing(self) -> bool:
        """The one flag send() checks on its fast path: set by close(), by fork() in the child, by a fatal error
        and outside a transaction; _raise_refused() then says which."""
        return self._path.refusing

    @_refusing.setter
    def _refusing(self, refusing: bool) -> None:
        self._path.refusing = refusing

    def send_batch(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        headers: Sequence[Any] | None = None,
        partitions: Sequence[int | None] | None = None,
        timestamps_ms: Sequence[int | None] | None = None,
        *,
        timestamps: Sequence[int | None] | None = None,
    ) -> BatchFuture:
        """Queue many records to one topic at once; the same semantics as send() per record, less work.

        `keys`, `headers`, `partitions` and `timestamps_ms` are None or sequences as long as `values`
        (`timestamps` is the deprecated name of `timestamps_ms`). Returns a BatchFuture: result() gives every
        RecordMetadata in input order or raises a failure.
        """
        if self._refusing:
            self._raise_refused("send_batch")
        if timestamps is not None:
            timestamps_ms = timestamps_argument(timestamps, timestamps_ms)
        return self._send_batch(topic, values, keys, headers, partitions, timestamps_ms, headers_checked=False)

    def _send_batch(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None,
                    headers: Sequence[Any] | None, partitions: Sequence[int | None] | None,
                    timestamps: Sequence[int | None] | None, *, headers_checked: bool) -> BatchFuture:
        """send_batch() and send_arrow() once open: check, prepare, place and queue one topic's records."""
        check_lengths(len(values), keys, headers, partitions, timestamps)
        if self._interceptors:
            return self._send_one_by_one(topic, values, keys, headers, partitions, timestamps)
        deadline = now_ms() + self._max_block_ms
        cluster, count = self._cluster_with(topic)
        batch = self._batch_input.prepare(topic, values, keys, headers, timestamps, headers_checked=headers_checked)
        by_partition = self._planner.plan(topic, batch.keys, batch.values, partitions, count,
                                          cluster.available_partitions(topic), keyless=keys is None,
                                          lens=batch.value_lens)
        return self._queue_batch(topic, batch, by_partition, deadline)

    def _send_one_by_one(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None,
                         headers: Sequence[Any] | None, partitions: Sequence[int | None] | None,
                         timestamps: Sequence[int | None] | None) -> BatchFuture:
        """A batch call through send(): interceptors see records one by one, exactly as send() gives them."""
        futs = [self.send(topic, values[i], None if keys is None else keys[i],
                          None if headers is None else headers[i],
                          None if partitions is None else partitions[i],
                          None if timestamps is None else timestamps[i]) for i in range(len(values))]
        return BatchFuture.of(futs)

    def _wait_for_partitions(self, topic: str) -> None:
        """The topic's metadata, waited for (at most max.block.ms): AIOProducer calls this off its loop."""
        if self._close_called:
            raise ProducerClosedError(f"send to {topic!r} after close(): create a new Producer")
        self._path.wait_for_partitions(topic)

    def _cluster_with(self, topic: str) -> tuple[Cluster, int]:
        """The cluster view once it knows `topic`, and the topic's partition count (waits up to max.block.ms)."""
        cluster = self._metadata.cluster
        count = cluster.partition_count(topic)
        if count is None:
            return self._path.wait_for_partitions(topic)  # type: ignore[no-any-return]
        return cluster, count

    def _async_view(self) -> AsyncView:
        """What AIOProducer reaches under send(), in one place: the gate it checks so that its loop never
        blocks in send(), and the send path that makes no RecordFuture (its records' futures are asyncio ones).
        That path is taken only while send is still the producer's own: a wrapped send (opentelemetry's, or a
        caller's) must see every record."""
        return AsyncView(self._send_gate, self._plain_send, self._path.send_without_future)

    def _explain_exhausted(self, err: BufferExhaustedError) -> BufferExhaustedError:
        """`err` with the reason memory is not coming back, when there is one: the records holding it cannot be
        delivered (no leader, a connection refused or failing TLS/SASL), and a bigger buffer would not help."""
        for batch in sorted(self._accumulator.incomplete_batches(), key=lambda b: b.created_ms):
            cause = batch.last_error or self._sender.cause_for(batch)
            if cause is not None:
                exhausted = BufferExhaustedError(
                    f"{err.facts or err}. The records holding the memory cannot be "
                    f"delivered: {batch.topic}-{batch.partition}: {cause}. Check that the brokers in "
                    "bootstrap.servers are up and reachable with these security settings; a larger buffer.memory "
                    "would not help")
                exhausted.__cause__ = cause
                return exhausted
        return err

    def _queue_batch(self, topic: str, batch: PreparedBatch, by_partition: dict[int, list[int]],
                     deadline: float) -> BatchFuture:
        """Append each partition's records to the accumulator; the future over all of them, in input order."""
        segments: list[Segment] = []
        wake = False
        ts, ks, vals, hs, columns = batch.timestamps, batch.keys, batch.values, batch.headers, batch.columns
        if self._txn is not None:
            for partition in by_partition:
                self._txn.maybe_add_partition((topic, partition))
        try:
            for partition, indices in by_partition.items():
                wake |= self._accumulator.append_many(topic, partition, indices, ts, ks, vals,  # type: ignore[arg-type]
                                                      hs, deadline, segments, columns)
        except BufferExhaustedError as e:
            if wake:
                self._wakeup()
            raise self._explain_exhausted(e)  # noqa: B904  (it sets the connection error as the cause)
        if wake:
            self._wakeup()
        return BatchFuture(len(vals), segments, ts, batch.key_sizes, batch.value_sizes)

    def send_arrow(self, topic: str | None, data: Any) -> BatchFuture:
        """Queue the rows of a pyarrow Table or RecordBatch with the columns of Spark's Kafka sink.

        Columns: value (binary/string, required), key, topic, partition, headers, timestamp (see
        kafkajet.producer.arrow). `topic` names the topic for every row and wins over a topic column; with None, the
        topic column decides per row. Returns one BatchFuture over all rows, in input order. With several
        topics the rows go out one topic at a time: if a later topic's rows are refused (say, a partition it
        does not have), the earlier topics' rows are already queued.
        """
        from kafkajet.producer.arrow import rows_of

        if self._refusing:
            self._raise_refused("send_arrow")
        rows = rows_of(data)
        if topic is not None or rows.topics is None:
            if topic is None:
                raise ValueError("send_arrow: no topic given and no 'topic' column in the data")
            return self._send_rows(topic, rows)
        groups = rows.positions_by_topic()
        if len(groups) == 1:
            (only,) = groups
            return self._send_rows(only, rows)
        parts = [(self._send_rows(t, rows.take(idx)), idx) for t, idx in groups.items()]
        return CombinedBatchFuture(rows.n, parts)

    def _send_rows(self, topic: str, rows: ArrowRows) -> BatchFuture:
        # rows_of() built the headers as lists of (str, bytes | None) pairs: no check per record.
        return self._send_batch(topic, rows.values, rows.keys, rows.headers, rows.partitions, rows.timestamps,
                                headers_checked=True)

    def _on_send(self, *record: Any) -> Any:
        for icp in self._interceptors:
            try:
                out = icp.on_send(record)
                if out is not None:
                    record = tuple(out)
            except Exception:
                log.exception("interceptor %r on_send raised; record passed on unchanged", icp)
        return record

    def _raise_refused(self, api: str) -> None:
        if self._forked_from is not None:
            self._raise_forked()
        if self._txn is not None and not self._close_called:
            raise self._txn.send_refusal()
        fatal = self._sender.fatal_error
        if fatal is not None and not self._close_called:
            # Java's wording (TransactionManager.failIfNotReadyForSend); the cause says what failed.
            raise IllegalStateError(
                "Cannot perform send because at least one previous transactional or idempotent request has failed "
                f"with errors: {fatal}. The producer can only be closed; create a new Producer.") from fatal
        raise ProducerClosedError(f"{api}() called after close(); create a new Producer")

    # --- transactions ---------------------------------------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register transactional.id with its coordinator: fences older producers with the same id and aborts
        what they left open. Call once, before the first begin_transaction(). Waits at most `timeout` seconds
        (default max.block.ms); after a KafkaTimeoutError, calling it again resumes the same request."""
        self._transaction_step("init_transactions", lambda txn: txn.initialize(), timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: from here send() is allowed, and everything sent is committed or aborted together."""
        started = time.perf_counter_ns()
        try:
            self._require_transactions("begin_transaction").begin()
        finally:
            self._metrics.blocked("txn-begin-time-ns-total", time.perf_counter_ns() - started)

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group: Any,
                                    timeout: float | None = None) -> None:
        """Commit consumer offsets as part of the transaction (consume-transform-produce): they become the
        group's committed offsets only if the transaction commits. `offsets` maps TopicPartition (or a
        (topic, partition) tuple) to the next offset to read, or to (offset, metadata); `group` is the group id,
        or a consumer's group metadata (an object or mapping with group_id, generation_id, member_id,
        group_instance_id) so the coordinator can fence zombie consumers."""
        self._require_transactions("send_offsets_to_transaction")
        group_id, member = _group_of(group)
        normalized: dict[tuple[str, int], tuple[int, str | None]] = {}
        for tp, value in offsets.items():
            topic, partition = tp
            offset, metadata = value if isinstance(value, tuple) else (value, None)
            if type(offset) is not int or offset < 0:
                raise ValueError(f"send_offsets_to_transaction: offset for {topic}-{partition} must be an int >= 0, "
                                 f"got {offset!r}")
            normalized[(topic, int(partition))] = (offset, metadata)
        self._transaction_step("send_offsets_to_transaction",
                               lambda t: t.send_offsets(normalized, group_id, member), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send everything of the transaction, then commit it. Raises if any record of the transaction failed
        (then call abort_transaction()); after a KafkaTimeoutError, calling it again resumes the same commit."""
        self._transaction_step("commit_transaction", lambda txn: txn.begin_commit(), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError, and nothing of the
        transaction becomes visible to read_committed readers."""
        self._transaction_step("abort_transaction", lambda txn: txn.begin_abort(), timeout)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Flush, then leave the transaction open for another process to commit or abort with
        `Admin.complete_transaction()` (two-phase commit, as KIP-939's prepareTransaction(); the Spark sink's
        exactly-once mode: tasks prepare, the driver completes). Raises if any record of the transaction failed.
        Afterwards the producer can only be closed, and close() leaves the transaction open; a producer that
        init_transactions() with the same transactional.id aborts it, as does the coordinator after
        transaction.timeout.ms."""
        txn = self._require_transactions("prepare_transaction")
        started = time.perf_counter_ns()
        try:
            self.flush(timeout)
            return txn.prepare(self._accumulator.has_incomplete())
        finally:
            self._metrics.blocked("txn-prepare-time-ns-total", time.perf_counter_ns() - started)

    def _require_transactions(self, api: str) -> TransactionManager:
        if self._forked_from is not None:
            self._raise_forked()
        if self._close_called:
            raise ProducerClosedError(f"{api}() called after close(); create a new Producer")
        if self._txn is None:
            raise IllegalStateError(f"{api}(): this Producer has no transactional.id; set transactional.id to use "
                                    "transactions")
        return self._txn

    def _transaction_step(self, api: str, start: Callable[[TransactionManager], TransactionalResult],
                          timeout: float | None) -> None:
        txn = self._require_transactions(api)
        if threading.current_thread() is self._thread:
            raise IllegalStateError("transactional calls inside a callback are not permitted: the callback runs on "
                                    "the sender thread the call would wait for")
        started = time.perf_counter_ns()
        try:
            result = start(txn)
            self._wakeup()
            result.wait(self._max_block_ms / 1000.0 if timeout is None else timeout)
        finally:
            self._metrics.blocked(_TXN_TIMES[api], time.perf_counter_ns() - started)

    def _on_transaction_state(self, state: TxnState) -> None:
        # send() checks one flag: open only inside a transaction.
        self._refusing = state is not TxnState.IN_TRANSACTION or self._close_called

    def _on_fatal(self, error: KafkaError) -> None:
        # Called on the sender thread once the producer cannot go on: from here on send() raises at once.
        self._refusing = True

    def _raise_forked(self) -> None:
        raise IllegalStateError(
            f"this Producer was created in process {self._forked_from} and cannot be used after fork(): "
            "its network thread and sockets stayed in the parent. Create a new Producer in the child process."
        )

    # --- flush / close --------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send every buffered record now and wait until each has an outcome (KafkaTimeoutError on timeout)."""
        if self._forked_from is not None:
            self._raise_forked()
        if threading.current_thread() is self._thread:
            # Callbacks run on the sender thread, which is what flush() would wait for (Java refuses it too).
            raise IllegalStateError(
                "flush() invocation inside a callback is not permitted because it may lead to deadlock. "
                "Call flush() from another thread, or keep the futures and wait on them there.")
        started = time.perf_counter_ns()
        deadline = None if timeout is None else time.monotonic() + timeout
        self._accumulator.begin_flush()
        try:
            self._wakeup()
            self._accumulator.await_completion(self._accumulator.incomplete_batches(), deadline)
        finally:
            self._accumulator.end_flush()
            self._metrics.blocked("flush-time-ns-total", time.perf_counter_ns() - started)

    def close(self, timeout: float | None = None) -> None:
        """Close: wait for all records (timeout=None), at most `timeout` seconds, or fail them at once (0)."""
        with self._close_lock:
            first = not self._close_called
            self._close_called = True
            self._refusing = True
        if self._forked_from is not None:
            return  # the parent owns the thread and sockets
        if first:
            log.info("closing producer %s (timeout=%s)", self.client_id, timeout)
        if timeout is not None and timeout <= 0:
            self._sender.force_close()
        else:
            self._sender.initiate_close()
        if threading.current_thread() is self._thread:
            return  # close() from a callback on the sender thread: cannot join ourselves
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._sender.force_close()
            self._thread.join(5.0)
        # Java's Metadata.close(): a send() or partitions_for() still waiting for a topic would otherwise wait
        # out max.block.ms for an answer no thread will fetch.
        self._metadata.fatal(ProducerClosedError("the producer was closed while waiting for the topic's metadata"))
        if first:
            self._pool.close()
            for icp in self._interceptors:
                try:
                    icp.close()
                except Exception:
                    log.exception("interceptor %r close raised", icp)
            _live_producers.discard(self)

    def _close_at_exit(self) -> None:
        """The interpreter is exiting and close() was never called: wait a bounded time, as close() would, and
        say how many records that did not save rather than lose them silently."""
        if self._close_called or self._forked_from is not None:
            return
        pending = self._accumulator.incomplete_batches()
        self._exiting = True  # the one report below covers produce()'s records too: no line per batch
        self.close(timeout=self._exit_close_timeout_s)
        lost = [b for b in pending if b.error is not None and not b.is_split]
        if lost:
            b = lost[-1]
            cause = b.last_error or self._sender.cause_for(b) or b.error
            report_loss(log, f"producer {self.client_id}: {sum(x.count for x in lost)} record(s) not delivered: "
                             "the interpreter exited without close() while they were still pending after "
                             f"{self._exit_close_timeout_s:.0f} s (last cause: {cause}). Call flush() or close() "
                             "before exiting, and check the futures.")

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- introspection ----------------------------------------------------------------------------------

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[PartitionInfo]:
        """The topic's partitions, fetching metadata if needed (waits at most timeout or max.block.ms)."""
        wait_ms = self._max_block_ms if timeout is None else timeout * 1000.0
        cluster = self._metadata.cluster
        if not cluster.partition_count(topic):
            if self._close_called:  # no sender thread is left to fetch it: waiting could only time out
                raise ProducerClosedError(f"partitions_for({topic!r}) called after close(); the producer no longer "
                                          "fetches metadata: create a new Producer (or an Admin) to look it up")
            cluster = self._metadata.wait_for_topic(topic, wait_ms, self._wakeup)
        return list(cluster.partitions_for(topic))

    def metrics(self) -> dict[str, float]:
        """Java's producer metrics by their Java names (rates and averages over the last 30 s), plus
        topic.<name>.record-send-rate / byte-rate / compression-rate per topic."""
        return self._metrics.snapshot()

    def _metadata_waited(self, ms: float) -> None:
        self._metrics.blocked("metadata-wait-time-ns-total", int(ms * 1e6))

    def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """The client instance id the brokers assigned for client metrics (KIP-714; Java's clientInstanceId),
        waiting up to `timeout` seconds for it; None if it did not come in time or no broker takes client
        metrics. IllegalStateError with enable.metrics.push=false, as Java."""
        if self._metrics_push is None:
            raise IllegalStateError("Telemetry is not enabled. Set config `enable.metrics.push` to `true`.")
        return self._metrics_push.client_instance_id(timeout)

    def _metadata_age_s(self) -> float:
        last = self._metadata.last_refresh_ms
        return (now_ms() - last) / 1000.0 if last else 0.0

    def __repr__(self) -> str:
        state = "closed" if self._close_called else "failed" if self._sender.fatal_error else "open"
        return f"<Producer {self.client_id} {state} bootstrap={self.config['bootstrap.servers']!r}>"


def _group_of(group: Any) -> tuple[str, dict[str, Any]]:
    """The group id and member fields from a group id or a consumer's group metadata (confluent-kafka's
    ConsumerGroupMetadata, kafka-python's, or a mapping)."""
    if isinstance(group, str):
        if not group:
            raise ValueError("send_offsets_to_transaction: the group id must not be empty")
        return group, {}
    fields = ("group_id", "generation_id", "member_id", "group_instance_id")
    found = {f: (group.get(f) if isinstance(group, Mapping) else getattr(group, f, None)) for f in fields}
    if not isinstance(found["group_id"], str) or not found["group_id"]:
        raise TypeError(f"send_offsets_to_transaction: group must be a group id (str) or a consumer's group metadata "
                        f"with a group_id, got {group!r}")
    return found["group_id"], {k: v for k, v in found.items() if k != "group_id" and v is not None}


__all__ = ["Producer"]
