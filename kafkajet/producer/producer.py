"""The Producer facade: send / flush / close / partitions_for / metrics. Wiring only; the work is elsewhere."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from kafkajet.clock import now_ms, wall_ms
from kafkajet.config import ProducerConfig, parse_producer_config
from kafkajet.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    SerializationError,
)
from kafkajet.network import NetworkClient
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.batch import Columns
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.futures import BatchFuture, CombinedBatchFuture, RecordFuture, Segment
from kafkajet.producer.idempotence import IdempotenceManager
from kafkajet.producer.metadata import Metadata, PartitionInfo
from kafkajet.producer.metrics import ProducerMetrics
from kafkajet.producer.partitioner import (
    DefaultPartitioner,
    invalid_partition,
    murmur2,
    resolve_partitioner,
    sticky_run_ends,
)
from kafkajet.producer.sender import Sender
from kafkajet.records import (
    BATCH_HEADER_SIZE,
    MAX_COLUMN_LEN,
    Compression,
    encode_headers,
    record_size_upper_bound,
)
from kafkajet.security.connection import connection_security
from kafkajet.serialization import IDENTITY_BYTES, resolve_serializer

log = logging.getLogger("kafkajet.producer")

_live_producers: weakref.WeakSet[Producer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The sender thread and sockets did not survive fork(); using them would hang, so refuse clearly.
    for p in list(_live_producers):
        p._forked_from = p._owner_pid
        p._closed = True  # send() checks one flag on its fast path; it then explains the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_at_exit() -> None:
    for p in list(_live_producers):
        try:
            p.close(timeout=p._exit_close_timeout_s)
        except Exception:
            log.exception("closing a producer at interpreter exit")


atexit.register(_close_at_exit)


_BYTES_OR_NONE = frozenset((bytes, type(None)))


def _header_sections(headers: Sequence[Any]) -> list[bytes]:
    """Each record's encoded header section (b"\\x00" for none). Rows often carry the same headers (a source
    tag): each distinct list is encoded once per call."""
    first = headers[0] if headers else None
    if first and headers.count(first) == len(headers):  # identity first: [h] * n costs no comparisons
        return [encode_headers(first)] * len(headers)
    memo: dict[tuple[Any, ...], bytes] = {}
    out: list[bytes] = []
    for h in headers:
        if not h:
            out.append(b"\x00")
            continue
        key = tuple(h)
        section = memo.get(key)
        if section is None:
            section = encode_headers(h)
            if len(memo) < 1024:
                memo[key] = section
        out.append(section)
    return out


def invalid_timestamp(timestamp: int, record: int | None = None) -> ValueError:
    # Java's ProducerRecord refuses negative timestamps in its constructor, with this message.
    where = "" if record is None else f" (record {record})"
    return ValueError(f"Invalid timestamp: {timestamp}{where}. Timestamp should always be non-negative or None.")


def _deprecated_timestamps(timestamps: Sequence[int | None],
                           timestamps_ms: Sequence[int | None] | None) -> Sequence[int | None]:
    """send_batch(timestamps=) is the old name of timestamps_ms= (send() says timestamp_ms=)."""
    if timestamps_ms is not None:
        raise TypeError("send_batch() got both timestamps_ms= and its deprecated alias timestamps=; pass timestamps_ms=")
    warnings.warn("send_batch(timestamps=) is deprecated; pass timestamps_ms= (the name send() uses)",
                  DeprecationWarning, stacklevel=3)
    return timestamps


def _only_bytes(items: Sequence[Any]) -> bool:
    """Whether every item is bytes or None (the type test in C, not a generator step per item)."""
    return set(map(type, items)) <= _BYTES_OR_NONE


class Producer:
    """A thread-safe Kafka producer with the Java producer's semantics.

    >>> with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as p:
    ...     p.send("events", value=b"v", key=b"k").result(timeout=30)
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        cfg = parse_producer_config(config, **kwargs)
        self.config: ProducerConfig = cfg
        self.client_id: str = cfg["client.id"]
        self._owner_pid = os.getpid()
        self._forked_from: int | None = None
        self._closed = False
        self._close_lock = threading.Lock()
        self._exit_close_timeout_s = 10.0

        self._key_serializer = resolve_serializer(cfg["key.serializer"], what="key.serializer")
        self._value_serializer = resolve_serializer(cfg["value.serializer"], what="value.serializer")
        self._key_identity = self._key_serializer is IDENTITY_BYTES
        self._value_identity = self._value_serializer is IDENTITY_BYTES
        self._partitioner = resolve_partitioner(cfg["partitioner"], cfg["batch.size"],
                                                cfg["partitioner.ignore.keys"])
        # The default partitioner's keyless path is inlined into send(): one call instead of two.
        self._sticky = self._partitioner.sticky if isinstance(self._partitioner, DefaultPartitioner) else None
        self._ignore_keys: bool = cfg["partitioner.ignore.keys"]
        self._key_hashes: dict[bytes, int] = {}
        self._interceptors: list[Any] = list(cfg["interceptors"] or [])
        self._max_block_ms: float = cfg["max.block.ms"]
        self._max_request_size: int = cfg["max.request.size"]
        self._buffer_memory: int = cfg["buffer.memory"]
        # Records whose key+value fit under this need no exact size check: the common case stays cheap.
        self._size_check_threshold = min(self._max_request_size, self._buffer_memory) - BATCH_HEADER_SIZE - 64

        self._metrics = ProducerMetrics()
        self._metadata = Metadata(
            max_age_ms=cfg["metadata.max.age.ms"], max_idle_ms=cfg["metadata.max.idle.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"], retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
        )
        self._pool = BufferPool(cfg["buffer.memory"], cfg["batch.size"])
        self._idempotence = IdempotenceManager() if cfg["enable.idempotence"] else None
        self._accumulator = RecordAccumulator(
            batch_size=cfg["batch.size"],
            compression=int(Compression.from_name(cfg["compression.type"])),
            linger_ms=cfg["linger.ms"],
            retry_backoff_ms=cfg["retry.backoff.ms"],
            retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
            delivery_timeout_ms=cfg["delivery.timeout.ms"],
            pool=self._pool,
            max_block_ms=cfg["max.block.ms"],
            idempotence=self._idempotence,
        )
        self._client = NetworkClient(
            security=connection_security(cfg),
            client_id=self.client_id,
            request_timeout_ms=cfg["request.timeout.ms"],
            max_in_flight_requests_per_connection=cfg["max.in.flight.requests.per.connection"],
            reconnect_backoff_ms=cfg["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=cfg["reconnect.backoff.max.ms"],
            connections_max_idle_ms=cfg["connections.max.idle.ms"],
            socket_connection_setup_timeout_ms=cfg["socket.connection.setup.timeout.ms"],
            send_buffer_bytes=cfg["send.buffer.bytes"],
            receive_buffer_bytes=cfg["receive.buffer.bytes"],
        )
        self._client.add_bootstrap(cfg["bootstrap.servers"])
        self._sender = Sender(
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
        )
        self._wakeup = self._sender.wakeup
        self._pool.on_block = self._wakeup
        self._accumulator.on_new_batch = self._wakeup
        self._metrics.gauges.update({
            "buffer-available-bytes": self._pool.available_memory,
            "buffer-total-bytes": lambda: self._buffer_memory,
            "bufferpool-wait-time-total": lambda: self._pool.wait_time_total_s,
            "requests-in-flight": self._client.in_flight_count,
            "waiting-threads": self._pool.queued,
        })
        self._thread = threading.Thread(
            target=self._sender.run, name=f"kafkajet-network-thread | {self.client_id}", daemon=True
        )
        self._thread.start()
        _live_producers.add(self)
        log.info("producer %s started (acks=%s, idempotence=%s)", self.client_id, cfg["acks"],
                 cfg["enable.idempotence"])

    # --- send ---------------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queue one record; returns a future that resolves to RecordMetadata or the record's error.

        Blocks at most max.block.ms (waiting for the topic's metadata or for buffer memory).
        """
        if self._closed:
            self._raise_closed("send")
        if self._interceptors:
            topic, value, key, headers, partition, timestamp_ms = self._on_send(
                topic, value, key, headers, partition, timestamp_ms)
        deadline = None
        cluster = self._metadata.cluster
        n = cluster.partition_counts.get(topic)
        if n is None:
            if self._sender.fatal_error is not None:
                raise self._sender.fatal_error
            if type(topic) is not str or not topic:
                raise TypeError(f"topic must be a non-empty str, got {topic!r}")
            deadline = now_ms() + self._max_block_ms
            cluster = self._metadata.wait_for_topic(topic, self._max_block_ms, self._wakeup)
            n = cluster.partition_count(topic) or 0
        if key is None or (self._key_identity and type(key) is bytes):
            kb = key
        else:
            kb = self._serialize(self._key_serializer, key, topic, "key")
        if value is None or (self._value_identity and type(value) is bytes):
            vb = value
        else:
            vb = self._serialize(self._value_serializer, value, topic, "value")
        klen = 0 if kb is None else len(kb)
        vlen = 0 if vb is None else len(vb)
        if headers:
            headers = self._check_headers(headers)
            self._check_size(kb, vb, headers)
        else:
            headers = None
            if klen + vlen > self._size_check_threshold:
                self._check_size(kb, vb, headers)
        if partition is None:
            if self._sticky is None:
                partition = self._partitioner.partition(topic, kb, n, cluster.available_partitions(topic))
            elif kb is None or self._ignore_keys:
                partition = self._sticky.take(topic, klen + vlen + 16, cluster.available_partitions, n)
            else:
                h = self._key_hashes.get(kb)
                if h is None:
                    h = self._hash_key(kb)
                partition = h % n
        elif type(partition) is not int or not 0 <= partition < n:
            raise invalid_partition(topic, partition, n)
        if timestamp_ms is None:
            timestamp_ms = wall_ms()
        elif timestamp_ms < 0:
            raise invalid_timestamp(timestamp_ms)
        fut, wake = self._accumulator.append(topic, partition, timestamp_ms, kb, vb, headers, deadline)
        if wake:
            self._wakeup()
        return fut

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
        if self._closed:
            self._raise_closed("send_batch")
        if timestamps is not None:
            timestamps_ms = _deprecated_timestamps(timestamps, timestamps_ms)
        return self._send_batch(topic, values, keys, headers, partitions, timestamps_ms, headers_checked=False)

    def _send_batch(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None,
                    headers: Sequence[Any] | None, partitions: Sequence[int | None] | None,
                    timestamps: Sequence[int | None] | None, *, headers_checked: bool) -> BatchFuture:
        """send_batch(); `headers_checked` when the headers are already lists of (str, bytes | None) pairs
        (send_arrow() builds them so), which spares a check per record."""
        n = len(values)
        for name, seq in (("keys", keys), ("headers", headers), ("partitions", partitions),
                          ("timestamps_ms", timestamps)):
            if seq is not None and len(seq) != n:
                raise ValueError(f"send_batch: {name} has {len(seq)} items but values has {n}")
        if self._interceptors:
            # Interceptors see records one by one, so this path gives them exactly what send() would.
            futs = [self.send(topic, values[i], None if keys is None else keys[i],
                              None if headers is None else headers[i],
                              None if partitions is None else partitions[i],
                              None if timestamps is None else timestamps[i]) for i in range(n)]
            return BatchFuture.of(futs)
        start = now_ms()
        cluster = self._metadata.cluster
        count = cluster.partition_count(topic)
        if count is None:
            if type(topic) is not str or not topic:
                raise TypeError(f"topic must be a non-empty str, got {topic!r}")
            cluster = self._metadata.wait_for_topic(topic, self._max_block_ms, self._wakeup)
            count = cluster.partition_count(topic) or 0
        deadline = start + self._max_block_ms
        vals = values if self._value_identity and _only_bytes(values) else [
            None if v is None else self._serialize(self._value_serializer, v, topic, "value") for v in values]
        try:
            vlens: list[int] | None = list(map(len, vals))  # type: ignore[arg-type]
        except TypeError:  # null values (tombstones)
            vlens = None
        klens: list[int] | None = None
        if keys is None:
            ks: Sequence[bytes | None] = [None] * n
        else:
            if self._key_identity and _only_bytes(keys):
                ks = keys
            else:
                ks = [None if k is None else self._serialize(self._key_serializer, k, topic, "key") for k in keys]
            try:
                klens = list(map(len, ks))  # type: ignore[arg-type]
            except TypeError:  # some null keys
                klens = None
        if headers is None:
            hs = None
        elif headers_checked:
            hs = headers  # type: ignore[assignment]
        else:
            hs = [self._check_headers(h) if h else None for h in headers]
        if hs is not None and not any(hs):
            hs = None
        now_ts = wall_ms()
        if timestamps is None:
            ts = [now_ts] * n
        else:
            ts = [now_ts if t is None else t for t in timestamps]
            if n and min(ts) < 0:
                i = next(i for i, t in enumerate(ts) if t < 0)
                raise invalid_timestamp(ts[i], i)
        limit = self._size_check_threshold
        # Every record's sizes (-1 for null), once: for the size check here and for the BatchFuture.
        value_sizes = vlens if vlens is not None else [-1 if v is None else len(v) for v in vals]
        key_sizes = None if keys is None else klens if klens is not None else [
            -1 if k is None else len(k) for k in ks]
        sections = None if hs is None else _header_sections(hs)
        hlens = None if sections is None else list(map(len, sections))
        # The largest key, value and header section bound every record: one pass in C each, and the per-record
        # check only when that bound comes near a limit.
        max_v = max(max(value_sizes, default=0), 0)
        max_k = 0 if key_sizes is None else max(max(key_sizes, default=0), 0)
        max_h = 0 if hlens is None else max(hlens)
        if max_v + max_k + max_h > limit:
            for i in range(n):
                size = max(value_sizes[i], 0) + (max(key_sizes[i], 0) if key_sizes else 0) + (hlens[i] if hlens else 0)
                if size > limit:
                    self._check_size(ks[i], vals[i], hs[i] if hs else None)
        columns = None
        if (timestamps is None and vlens is not None and (keys is None or klens is not None)
                and max(max_v, max_k, max_h) < MAX_COLUMN_LEN):
            # The common shape (one timestamp, no nulls, no huge records): encoded by column.
            columns = Columns(now_ts, None if keys is None else ks, klens, vlens,  # type: ignore[arg-type]
                              sections, hlens)
        by_partition = self._partition_batch(topic, ks, vals, partitions, count, cluster.available_partitions(topic),
                                             keyless=keys is None, lens=vlens)
        segments: list[Segment] = []
        wake = False
        for partition, indices in by_partition.items():
            wake |= self._accumulator.append_many(topic, partition, indices, ts, ks, vals, hs,  # type: ignore[arg-type]
                                                  deadline, segments, columns)
        if wake:
            self._wakeup()
        return BatchFuture(n, segments, ts, key_sizes, value_sizes)

    def send_arrow(self, topic: str | None, data: Any) -> BatchFuture:
        """Queue the rows of a pyarrow Table or RecordBatch with the columns of Spark's Kafka sink.

        Columns: value (binary/string, required), key, topic, partition, headers, timestamp (see
        kafkajet.producer.arrow). `topic` names the topic for every row and wins over a topic column; with None, the
        topic column decides per row. Returns one BatchFuture over all rows, in input order. With several
        topics the rows go out one topic at a time: if a later topic's rows are refused (say, a partition it
        does not have), the earlier topics' rows are already queued.
        """
        from kafkajet.producer.arrow import rows_of

        if self._closed:
            self._raise_closed("send_arrow")
        rows = rows_of(data)
        if topic is not None or rows.topics is None:
            if topic is None:
                raise ValueError("send_arrow: no topic given and no 'topic' column in the data")
            return self._send_batch(topic, rows.values, rows.keys, rows.headers, rows.partitions, rows.timestamps,
                                    headers_checked=True)
        groups: dict[str, list[int]] = {}
        for i, t in enumerate(rows.topics):
            if t is None:
                raise ValueError(f"send_arrow: row {i} has a null topic and no topic was given")
            groups.setdefault(t, []).append(i)
        if len(groups) == 1:
            (only,) = groups
            return self._send_batch(only, rows.values, rows.keys, rows.headers, rows.partitions, rows.timestamps,
                                    headers_checked=True)

        def pick(col: list[Any] | None, idx: list[int]) -> list[Any] | None:
            return None if col is None else [col[i] for i in idx]

        parts = [(self._send_batch(t, pick(rows.values, idx), pick(rows.keys, idx),  # type: ignore[arg-type]
                                   pick(rows.headers, idx), pick(rows.partitions, idx), pick(rows.timestamps, idx),
                                   headers_checked=True), idx)
                 for t, idx in groups.items()]
        return CombinedBatchFuture(rows.n, parts)

    def _partition_batch(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None],
                         partitions: Sequence[int | None] | None, count: int, available: Sequence[int], *,
                         keyless: bool, lens: list[int] | None = None) -> dict[int, list[int]]:
        """Input positions per partition, in input order; `keyless` when the caller gave no keys at all."""
        out: dict[int, list[int]] = {}
        part = self._partitioner
        batch_size = self.config["batch.size"]
        if keyless and partitions is None:
            return self._sticky_runs(topic, values, count, available, lens)
        memo = self._key_hashes if self._sticky is not None and not self._ignore_keys else None
        if partitions is None and memo is not None and not keyless and None not in keys:
            return self._keyed_runs(keys, count, memo)
        i, n = 0, len(values)
        while i < n:
            explicit = None if partitions is None else partitions[i]
            key = keys[i]
            if explicit is not None:
                if type(explicit) is not int or not 0 <= explicit < count:
                    raise invalid_partition(topic, explicit, count, i)
                out.setdefault(explicit, []).append(i)
                i += 1
            elif key is not None:
                if memo is None:
                    p = part.partition(topic, key, count, available)
                else:  # the default partitioner, with send()'s memo of key hashes
                    h = memo.get(key)
                    if h is None:
                        h = self._hash_key(key)
                    p = h % count
                out.setdefault(p, []).append(i)
                i += 1
            else:
                # A run of keyless records goes to the sticky partition until batch.size bytes went there.
                p = part.partition(topic, None, count, available)
                bucket = out.setdefault(p, [])
                size = 0
                while i < n and keys[i] is None and (partitions is None or partitions[i] is None) \
                        and size < batch_size:
                    v = values[i]
                    size += (0 if v is None else len(v)) + 16
                    bucket.append(i)
                    i += 1
                part.record_appended(topic, p, size)
        return out

    def _keyed_runs(self, keys: Sequence[bytes | None], count: int, memo: dict[bytes, int]) -> dict[int, list[int]]:
        """Every record keyed, none placed by the caller, the default partitioner: murmur2 of the key (from the
        memo where it can), with the per-record work cut to a look-up, a modulo and an append."""
        hashes = list(map(memo.get, keys))  # type: ignore[arg-type]
        if None in hashes:
            for i, h in enumerate(hashes):
                if h is None:
                    hashes[i] = self._hash_key(keys[i])  # type: ignore[arg-type]
        parts = [h % count for h in hashes]  # type: ignore[operator]
        out: dict[int, list[int]] = {p: [] for p in sorted(set(parts))}
        add = {p: positions.append for p, positions in out.items()}
        for i, p in enumerate(parts):
            add[p](i)
        return out

    def _hash_key(self, key: bytes) -> int:
        """murmur2 of a key the memo missed, remembered. Keys repeat (user ids, device ids): a bounded memo
        skips most murmur2 calls; callers look it up inline and come here only on a miss."""
        if len(self._key_hashes) >= 65536:
            self._key_hashes.clear()
        h = self._key_hashes[key] = murmur2(key) & 0x7FFFFFFF
        return h

    def _sticky_runs(self, topic: str, values: Sequence[bytes | None], count: int,
                     available: Sequence[int], lens: list[int] | None = None) -> dict[int, list[int]]:
        """All records keyless and unplaced: runs of batch.size bytes to one sticky partition each (KIP-794),
        the run ends found without a step per record."""
        out: dict[int, list[int]] = {}
        part = self._partitioner
        batch_size = self.config["batch.size"]
        if lens is None:  # null values among them
            lens = [0 if v is None else len(v) for v in values]
        i = 0
        for j in sticky_run_ends(lens, batch_size):
            p = part.partition(topic, None, count, available)
            out.setdefault(p, []).extend(range(i, j))
            part.record_appended(topic, p, sum(lens[i:j]) + 16 * (j - i))  # the same estimate as send()
            i = j
        return out

    def _serialize(self, serializer: Any, obj: Any, topic: str, what: str) -> bytes | None:
        try:
            out = serializer(obj)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(
                f"{what}.serializer failed on {type(obj).__name__} for topic '{topic}': {e}") from e
        if out is not None and type(out) is not bytes:
            if isinstance(out, (bytearray, memoryview)):
                return bytes(out)
            raise SerializationError(
                f"{what}.serializer returned {type(out).__name__}, not bytes, for topic '{topic}'")
        return out  # type: ignore[no-any-return]

    @staticmethod
    def _check_headers(headers: Any) -> list[tuple[str, bytes | None]]:
        if type(headers) is list and all(type(h) is tuple and len(h) == 2 and type(h[0]) is str
                                         and (type(h[1]) is bytes or h[1] is None) for h in headers):
            return headers  # already what the encoder takes (the Spark sink's shape): no copy
        items: Iterable[Any]
        if isinstance(headers, Mapping):
            items = headers.items()
        elif isinstance(headers, (list, tuple)):
            items = headers
        else:  # a str or bytes would be taken apart character by character, each "pair" a bogus header
            raise SerializationError(
                f"headers must be a list of (str key, bytes | None value) pairs or a dict, "
                f"got {type(headers).__name__} {headers!r:.60}")
        out: list[tuple[str, bytes | None]] = []
        for item in items:
            if (type(item) is not tuple and type(item) is not list) or len(item) != 2:
                # A 2-character str would otherwise unpack as a (key, value) pair.
                raise SerializationError(
                    f"each header must be a (str key, bytes | None value) pair, got {type(item).__name__} "
                    f"{item!r:.60}")
            k, v = item
            if type(k) is not str:
                raise SerializationError(f"header key must be str, got {type(k).__name__} {k!r}")
            if v is not None and type(v) is not bytes:
                if isinstance(v, str):
                    v = v.encode()
                elif isinstance(v, (bytearray, memoryview)):
                    v = bytes(v)
                else:
                    raise SerializationError(
                        f"header '{k}' value must be bytes, str or None, got {type(v).__name__}")
            out.append((k, v))
        return out

    def _check_size(self, kb: bytes | None, vb: bytes | None, headers: Any) -> None:
        size = BATCH_HEADER_SIZE + record_size_upper_bound(
            -1 if kb is None else len(kb), -1 if vb is None else len(vb), headers)
        if size > self._max_request_size:
            raise RecordTooLargeError(
                f"The record is {size} bytes when serialized, larger than max.request.size "
                f"({self._max_request_size}); raise max.request.size (and the broker's message.max.bytes) "
                "or send smaller records")
        if size > self._buffer_memory:
            raise RecordTooLargeError(
                f"The record is {size} bytes when serialized, larger than buffer.memory ({self._buffer_memory})")

    def _on_send(self, *record: Any) -> Any:
        for icp in self._interceptors:
            try:
                out = icp.on_send(record)
                if out is not None:
                    record = tuple(out)
            except Exception:
                log.exception("interceptor %r on_send raised; record passed on unchanged", icp)
        return record

    def _raise_closed(self, api: str) -> None:
        # A forked child's producers are marked closed too: the fork is the explanation it needs, not close().
        if self._forked_from is not None:
            self._raise_forked()
        raise ProducerClosedError(f"{api}() called after close(); create a new Producer")

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
        deadline = None if timeout is None else time.monotonic() + timeout
        self._accumulator.begin_flush()
        try:
            self._wakeup()
            self._accumulator.await_completion(self._accumulator.incomplete_batches(), deadline)
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Close: wait for all records (timeout=None), at most `timeout` seconds, or fail them at once (0)."""
        with self._close_lock:
            first = not self._closed
            self._closed = True
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
        if first:
            self._pool.close()
            for icp in self._interceptors:
                try:
                    icp.close()
                except Exception:
                    log.exception("interceptor %r close raised", icp)
            _live_producers.discard(self)

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
            cluster = self._metadata.wait_for_topic(topic, wait_ms, self._wakeup)
        return list(cluster.partitions_for(topic))

    def metrics(self) -> dict[str, float]:
        return self._metrics.snapshot()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Producer {self.client_id} {state} bootstrap={self.config['bootstrap.servers']!r}>"


__all__ = ["Producer", "KafkaTimeoutError"]
