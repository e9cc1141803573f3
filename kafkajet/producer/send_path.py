"""The per-record half of Producer.send(): from the open-producer check to the record's future, in a module of
its own so that hatch_build.py can compile it (mypyc refuses producer.py, which needs weak references).

It inlines the common case of serialization (bytes pass through), the size check and the partition choice
instead of calling out to batch_input and the partitioner per record: a call costs more than that work does,
and this is the path every record of a send()-based program takes. The unusual cases (serializers, headers,
large records, metadata waits) still branch off to the modules that own them.

The arguments are typed as the caller may pass them (Any), not as they must be: compiled code checks declared
types on entry, and a wrong one must get the producer's own error (invalid_partition, check_timestamp, ...),
not the compiler's.

Compiled in place by mypyc (hatch_build.py lists it): after an edit, `python hatch_build.py` rebuilds it;
until then kafkajet._build runs this source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkajet.clock import now_ms, wall_ms
from kafkajet.errors import BufferExhaustedError
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.batch_input import MAX_TIMESTAMP, BatchInput, check_headers, check_timestamp, serialize
from kafkajet.producer.futures import RecordFuture
from kafkajet.producer.metadata import Metadata
from kafkajet.producer.partitioner import STICKY_RECORD_FRAMING, PartitionPlanner, invalid_partition
from kafkajet.producer.transactions import TransactionManager


class SendPath:
    """Producer.send() once the call has been made: the producer's parts that send() reads, as typed attributes."""

    def __init__(self, metadata: Metadata, accumulator: RecordAccumulator, planner: PartitionPlanner,
                 batch_input: BatchInput, max_block_ms: float, wakeup: Callable[[], None],
                 txn: TransactionManager | None, interceptors: list[Any], on_send: Callable[..., Any],
                 refused: Callable[[str], None],
                 explain_exhausted: Callable[[BufferExhaustedError], BufferExhaustedError]) -> None:
        # The one flag send() checks first: set by close(), by fork() in the child, by a fatal error and outside a
        # transaction; `refused` then raises the error that says which.
        self.refusing = False
        self.metadata = metadata
        self.accumulator = accumulator
        self.planner = planner
        self.partitioner = planner.partitioner
        self.sticky = planner.sticky
        self.ignore_keys = planner.ignore_keys
        self.key_hashes = planner.key_hashes
        self.key_serializer = batch_input.key_serializer
        self.value_serializer = batch_input.value_serializer
        # Bytes skip the serializers when they are the identity: the same test as the batch paths'.
        self.key_identity = batch_input.key_identity
        self.value_identity = batch_input.value_identity
        # A serializer writes the schema id into the headers: every record needs a list for it.
        self.serializers_add_headers = batch_input.serializers_add_headers
        self.check_size = batch_input.limits.check
        self.size_check_threshold = batch_input.limits.threshold
        self.max_block_ms = max_block_ms
        self.wakeup = wakeup
        self.txn = txn
        self.interceptors = interceptors
        self.on_send = on_send
        self.refused = refused
        self.explain_exhausted = explain_exhausted
        # Bound once: passing cluster.available_partitions made a bound method per keyless record, and the
        # sticky partitioner calls it only when it changes partition (once per batch.size bytes).
        self.available_partitions: Callable[[str], Any] = self._available_partitions
        # Told how long (ms) send() blocked for a topic's metadata (metadata-wait-time-ns-total); the producer
        # sets it. Only the first send() to a topic that is not in metadata yet gets here.
        self.metadata_waited: Callable[[float], None] = _ignore_wait

    def wait_for_partitions(self, topic: Any) -> tuple[Any, int]:
        """Metadata.wait_for_partitions, timed for metadata-wait-time-ns-total: every send path's one wait on a
        topic metadata does not know yet (the batch paths and AIOProducer come here too)."""
        # Apart from _append: a try/finally there would cost every record, not only the first to a topic.
        started = now_ms()
        try:
            return self.metadata.wait_for_partitions(topic, self.max_block_ms, self.wakeup)
        finally:
            self.metadata_waited(now_ms() - started)

    def _available_partitions(self, topic: str) -> Any:
        return self.metadata.cluster.available_partitions(topic)

    def send(self, topic: Any, value: Any = None, key: Any = None, headers: Any = None, partition: Any = None,
             timestamp_ms: Any = None, callback: Any = None) -> RecordFuture:
        """Producer.send(): see its docstring."""
        fut = self._append(topic, value, key, headers, partition, timestamp_ms, callback, True)
        assert fut is not None
        return fut

    def produce(self, topic: Any, value: Any = None, key: Any = None, *, partition: Any = None,
                timestamp_ms: Any = None, headers: Any = None, callback: Any = None) -> None:
        """Producer.produce(): see its docstring."""
        if self.refusing:
            self.refused("produce")
        self._append(topic, value, key, headers, partition, timestamp_ms, callback, False)

    def send_without_future(self, topic: Any, value: Any, key: Any, headers: Any, partition: Any,
                            timestamp_ms: Any, callback: Any) -> None:
        """send() for a caller that hears of the outcome through `callback` alone (AIOProducer, whose futures
        are asyncio ones): the RecordFuture it would throw away is a tenth of the caller's cost per record."""
        self._append(topic, value, key, headers, partition, timestamp_ms, callback, False)

    def _append(self, topic: Any, value: Any, key: Any, headers: Any, partition: Any, timestamp_ms: Any,
                callback: Any, want_future: bool) -> RecordFuture | None:
        if self.refusing:
            self.refused("send")
        if self.interceptors:
            topic, value, key, headers, partition, timestamp_ms = self.on_send(
                topic, value, key, headers, partition, timestamp_ms)
        deadline: float | None = None
        cluster = self.metadata.cluster
        counted = cluster.partition_counts.get(topic)
        if counted is None:
            deadline = now_ms() + self.max_block_ms
            cluster, counted = self.wait_for_partitions(topic)
        n: int = counted
        kb: bytes | None
        vb: bytes | None
        if headers is None and self.serializers_add_headers:
            headers = []  # a serializer writes the schema id there (Java gives every record its Headers)
        if key is None or (self.key_identity and type(key) is bytes):
            kb = key
        else:
            kb = serialize(self.key_serializer, key, topic, "key", headers)
        if value is None or (self.value_identity and type(value) is bytes):
            vb = value
        else:
            vb = serialize(self.value_serializer, value, topic, "value", headers)
        klen = 0 if kb is None else len(kb)
        vlen = 0 if vb is None else len(vb)
        if headers:
            headers = check_headers(headers)
            self.check_size(kb, vb, headers)
        else:
            headers = None
            if klen + vlen > self.size_check_threshold:
                self.check_size(kb, vb, headers)
        p: int
        if partition is None:
            sticky = self.sticky
            if sticky is None:
                p = self.partitioner.partition(topic, kb, n, cluster.available_partitions(topic))
            elif kb is None or self.ignore_keys:
                p = sticky.take(topic, klen + vlen + STICKY_RECORD_FRAMING, self.available_partitions, n)
            else:
                h = self.key_hashes.get(kb)
                if h is None:
                    h = self.planner.hash_key(kb)
                p = h % n
        elif type(partition) is not int or not 0 <= partition < n:
            raise invalid_partition(topic, partition, n)
        else:
            p = partition
        ts: int
        if timestamp_ms is None:
            ts = wall_ms()
        elif type(timestamp_ms) is not int or not 0 <= timestamp_ms <= MAX_TIMESTAMP:
            ts = check_timestamp(timestamp_ms)
        else:
            ts = timestamp_ms
        if self.txn is not None:
            self.txn.maybe_add_partition((topic, p))
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable as callback(metadata, exception), got {callback!r}")
        try:
            fut, wake = self.accumulator.append(topic, p, ts, kb, vb, headers, deadline, callback, want_future)
        except BufferExhaustedError as e:
            raise self.explain_exhausted(e)  # noqa: B904  (it sets the connection error as the cause)
        if wake:
            self.wakeup()
        return fut


def _ignore_wait(ms: float) -> None:
    pass
