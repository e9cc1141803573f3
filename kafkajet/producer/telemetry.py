"""OpenTelemetry for one producer (the `kafkajet[otel]` extra, on with `opentelemetry.enable=true`).

Per the messaging semantic conventions: a PRODUCER span `send <topic>` per record, started in send() and ended
by the record's delivery callback, that is at the broker's answer (so it carries the partition, the offset or
the broker's error, which wrapper instrumentations ending at the enqueue cannot know); one span per
send_batch() / send_arrow() call with messaging.batch.message_count; the W3C trace context (the global
propagator's headers: traceparent, tracestate) written into every record's headers; and the metrics
messaging.client.sent.messages and messaging.client.operation.duration.

The Producer decides once, at construction, whether to use this: with the setting off its send path is the
plain one and this module is never imported. With the setting on, each send decides again (_idle()): while
no SDK is configured and no trace context is current, the record goes down the plain path, as the API's
no-op tracer would leave it unchanged anyway; a provider set later is used from the next send on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafkajet._version import __version__
from kafkajet.errors import ConfigError

try:
    import opentelemetry.metrics._internal as _metrics_state
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, propagate, trace
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as e:  # pragma: no cover - the extra's absence is tested in a subprocess
    raise ConfigError("opentelemetry.enable=true needs the OpenTelemetry API: pip install 'kafkajet[otel]' "
                      f"(importing it failed: {e})") from None

if TYPE_CHECKING:
    from kafkajet.producer.arrow import ArrowRows
    from kafkajet.producer.futures import BatchFuture, RecordFuture, RecordMetadata
    from kafkajet.producer.metadata import Metadata

_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
# The semantic conventions' advice for messaging.client.operation.duration (seconds).
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_PRODUCER = SpanKind.PRODUCER

Headers = Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None


_get_current = otel_context.get_current
_get_current_span = trace.get_current_span


def _idle() -> bool:
    """True when a send gives the API nothing to do: no SDK to record a span or a metric, and no valid span
    in the current context whose trace context the record should pass on (the no-op tracer's span carries
    the current one, so a service without an SDK still propagates what it received)."""
    return (trace._TRACER_PROVIDER is None and _metrics_state._METER_PROVIDER is None
            and (not _get_current() or not _get_current_span().get_span_context().is_valid))


# get_tracer_provider() would say whether a provider is set too, but at 0.3-2 us a call (it looks the
# environment up each time) it costs as much as the plain send. The API keeps each provider in one module
# global, None until it is set (once; never unset), so reading those is an identity check. On an API that no
# longer has them, every send is traced as before: correct, only not free.
if not (hasattr(trace, "_TRACER_PROVIDER") and hasattr(_metrics_state, "_METER_PROVIDER")):  # pragma: no cover
    def _idle() -> bool:
        return False


def error_type(error: BaseException) -> str:
    """error.type: the exception's class name, as the Python instrumentations report it."""
    return type(error).__qualname__


def message_key(key: Any) -> str | None:
    """messaging.kafka.message.key: the key as text, or None when it has no unambiguous text form."""
    if key is None:
        return None
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray)):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    return None


def context_headers(ctx: Any = None) -> list[tuple[str, bytes | None]]:
    """The trace context of `ctx` (default: the current one) as record headers; empty when no span is active
    and the propagator has nothing to say."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=ctx)
    return [(k, v.encode("utf-8")) for k, v in carrier.items()]


def merge_headers(headers: Headers, injected: list[tuple[str, bytes | None]]) -> Headers:
    """The record's headers with the trace context's, which replace any the caller set under the same names
    (the record's creation context is this producer span's)."""
    if not injected:
        return headers
    if not headers:
        return list(injected)
    names = {k for k, _ in injected}
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [h for h in items if not (isinstance(h, (tuple, list)) and len(h) == 2 and h[0] in names)] + injected


def _elapsed(start: float) -> float:
    return time.perf_counter() - start


def _current(span: Any) -> contextlib.AbstractContextManager[Any]:
    """`span` current while records are queued; its end and its errors are _refusal_ends()'s and the watch's."""
    return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)


# messaging.client.sent.messages, one instrument for the process: a Counter's add() costs as much as a span's
# attribute work per record, so each producer counts in a plain dict on its sender thread and the SDK reads
# the sums when it collects (an asynchronous counter; the exported data is the same monotonic sum).
_Counts = dict[tuple[str, int, int, "str | None"], list[Any]]  # series -> [metric attributes, records]
_live: weakref.WeakSet[ProducerTelemetry] = weakref.WeakSet()
_retired: dict[frozenset[tuple[str, Any]], int] = {}  # the counts of producers gone, kept so sums never drop
_sent_lock = threading.Lock()
_sent_counter: Any = None


def _add_to(totals: dict[frozenset[tuple[str, Any]], int], counts: _Counts) -> None:
    for attrs, n in list(counts.values()):
        key = frozenset(attrs.items())
        totals[key] = totals.get(key, 0) + n


def _retire(counts: _Counts) -> None:
    with _sent_lock:
        _add_to(_retired, counts)


def _observe_sent(options: CallbackOptions) -> Iterable[Observation]:
    with _sent_lock:
        totals = dict(_retired)
        for telemetry in list(_live):
            _add_to(totals, telemetry._sent_counts)
    return [Observation(n, dict(key)) for key, n in totals.items()]


def _register(telemetry: ProducerTelemetry) -> None:
    global _sent_counter
    with _sent_lock:
        if _sent_counter is None:
            meter = metrics.get_meter("kafkajet", __version__, schema_url=_SCHEMA_URL)
            _sent_counter = meter.create_observable_counter(
                "messaging.client.sent.messages", callbacks=[_observe_sent], unit="{message}",
                description="Number of messages the producer attempted to send to the broker")
        _live.add(telemetry)
    weakref.finalize(telemetry, _retire, telemetry._sent_counts)


class ProducerTelemetry:
    """The tracer, the meter's two instruments and the wrappers that replace one Producer's send methods."""

    def __init__(self, client_id: str, metadata: Metadata) -> None:
        self._client_id = client_id
        self._metadata = metadata
        self._tracer = trace.get_tracer("kafkajet", __version__, schema_url=_SCHEMA_URL)
        meter = metrics.get_meter("kafkajet", __version__, schema_url=_SCHEMA_URL)
        self._duration = meter.create_histogram(
            "messaging.client.operation.duration", unit="s",
            description="Duration of the send operation: from send() to the broker's answer",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS))
        # Metric attributes per (topic, partition, error type): the SDK keys its aggregation on them, and
        # building the dict once per combination keeps the per-record cost down.
        self._metric_attrs: dict[tuple[str, int, int, str | None], dict[str, Any]] = {}
        self._sent_counts: _Counts = {}
        _register(self)

    # --- attributes -------------------------------------------------------------------------------------

    def _start_attributes(self, topic: str) -> dict[str, Any]:
        return {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": topic,
            "messaging.client.id": self._client_id,
        }

    def _server(self, topic: str, partition: int) -> tuple[str, int] | None:
        """The partition leader's address: the broker that answered (or would have) for the record."""
        cluster = self._metadata.cluster
        leader = cluster.leader_for(topic, partition)
        node = None if leader is None else cluster.nodes.get(leader)
        return None if node is None else (node.host, node.port)

    def _metric_key(self, topic: str, partition: int, error: str | None) -> tuple[str, int, int, str | None]:
        """The metric series of a record: its partition's leader is part of it (server.address moves with it)."""
        leader = self._metadata.cluster.leader_for(topic, partition) if partition >= 0 else None
        return topic, partition, -1 if leader is None else leader, error

    def _attrs_for_metrics(self, topic: str, partition: int, error: str | None) -> dict[str, Any]:
        key = self._metric_key(topic, partition, error)
        attrs = self._metric_attrs.get(key)
        if attrs is None:
            attrs = {"messaging.system": "kafka", "messaging.operation.name": "send",
                     "messaging.operation.type": "send", "messaging.destination.name": topic}
            if partition >= 0:
                attrs["messaging.destination.partition.id"] = str(partition)
                server = self._server(topic, partition)
                if server is not None:
                    attrs["server.address"], attrs["server.port"] = server
            if error is not None:
                attrs["error.type"] = error
            if len(self._metric_attrs) < 10_000:  # bounded: leaders move, errors vary
                self._metric_attrs[key] = attrs
        return attrs

    def _count_sent(self, topic: str, partition: int, error: str | None, n: int) -> None:
        """No lock, so the per-record path stays cheap: records complete on the sender thread, and only rarely on
        another (a batch call already finished when its watch is added, close() failing what is left), where
        an increment racing the sender's could be lost."""
        key = self._metric_key(topic, partition, error)
        entry = self._sent_counts.get(key)
        if entry is None:
            entry = self._sent_counts[key] = [self._attrs_for_metrics(topic, partition, error), 0]
        entry[1] += n

    def _fail(self, span: Any, error: BaseException) -> str:
        kind = error_type(error)
        span.set_attribute("error.type", kind)
        span.set_status(Status(StatusCode.ERROR, str(error) or kind))
        span.record_exception(error)
        return kind

    # --- send() ------------------------------------------------------------------------------------------

    def traced_send(self, send: Callable[..., RecordFuture]) -> Callable[..., RecordFuture]:
        """Producer.send with a span per record, ended by the delivery callback the record carries."""
        tracer, start_attributes = self._tracer, self._start_attributes
        ended, partial, idle = self._record_done, functools.partial, _idle

        def traced(topic: str, value: Any = None, key: Any = None, headers: Headers = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   callback: Callable[[RecordMetadata, BaseException | None], object] | None = None
                   ) -> RecordFuture:
            if idle() or (callback is not None and not callable(callback)):  # plain; a bad callback is refused
                return send(topic, value, key, headers, partition, timestamp_ms, callback)
            attributes = start_attributes(topic)
            text_key = message_key(key)
            if text_key is not None:
                attributes["messaging.kafka.message.key"] = text_key
            if value is None:
                attributes["messaging.kafka.message.tombstone"] = True
            if partition is not None:
                attributes["messaging.destination.partition.id"] = str(partition)
            span = tracer.start_span(f"send {topic}", kind=_PRODUCER, attributes=attributes)
            start = time.perf_counter()
            if span.get_span_context().is_valid:
                headers = merge_headers(headers, context_headers(trace.set_span_in_context(span)))

            try:
                return send(topic, value, key, headers, partition, timestamp_ms, partial(ended, span, start, callback))
            except BaseException as e:
                # Refused before it was queued (serializer, size, metadata wait, buffer): no broker answer comes.
                kind = self._fail(span, e)
                span.end()
                self._duration.record(_elapsed(start), self._attrs_for_metrics(topic, -1, kind))
                raise

        return traced

    def _record_done(self, span: Any, start: float, callback: Callable[[RecordMetadata, BaseException | None], object]
                     | None, md: RecordMetadata, error: BaseException | None) -> None:
        """The record's delivery callback: at the broker's answer (or the record's expiry or abort), on the
        sender thread. Then the caller's own callback, if any."""
        topic, partition = md.topic, md.partition
        kind = None
        if span.is_recording():
            attributes: dict[str, Any] = {"messaging.destination.partition.id": str(partition)}
            server = self._server(topic, partition)
            if server is not None:
                attributes["server.address"], attributes["server.port"] = server
            if error is None:
                if md.offset >= 0:
                    attributes["messaging.kafka.offset"] = md.offset
                if md.serialized_value_size >= 0:
                    attributes["messaging.message.body.size"] = md.serialized_value_size
            span.set_attributes(attributes)  # one lock and one pass, not one per attribute
            if error is not None:
                kind = self._fail(span, error)
        elif error is not None:
            kind = error_type(error)
        span.end()
        self._duration.record(_elapsed(start), self._attrs_for_metrics(topic, partition, kind))
        self._count_sent(topic, partition, kind, 1)
        if callback is not None:
            callback(md, error)

    # --- send_batch() / send_arrow() -------------------------------------------------------------------------

    def _start_batch(self, topic: str | None, n: int) -> Any:
        attributes = self._start_attributes(topic or "")
        if topic is None:
            del attributes["messaging.destination.name"]  # several topics: the name would be wrong
        attributes["messaging.batch.message_count"] = n
        return self._tracer.start_span("send" if topic is None else f"send {topic}", kind=_PRODUCER,
                                       attributes=attributes)

    def _watch_batch(self, span: Any, start: float, topic: str | None, n: int, fut: BatchFuture) -> None:
        def done(_: object) -> None:
            errors = fut.errors(0)
            kind = None
            if errors:
                kind = self._fail(span, errors[0][1])
            span.end()
            where = topic or ""
            self._duration.record(_elapsed(start), self._attrs_for_metrics(where, -1, kind))
            if n > len(errors):
                self._count_sent(where, -1, None, n - len(errors))
            if errors:
                self._count_sent(where, -1, kind, len(errors))

        fut.add_done_callback(done)

    def traced_send_batch(self, send_batch: Callable[..., BatchFuture]) -> Callable[..., BatchFuture]:
        def traced(topic: str, values: Sequence[Any], keys: Sequence[Any] | None = None,
                   headers: Sequence[Any] | None = None, partitions: Sequence[int | None] | None = None,
                   timestamps_ms: Sequence[int | None] | None = None, *,
                   timestamps: Sequence[int | None] | None = None) -> BatchFuture:
            if _idle():
                return send_batch(topic, values, keys, headers, partitions, timestamps_ms, timestamps=timestamps)
            n = len(values)
            span = self._start_batch(topic, n)
            start = time.perf_counter()
            if span.get_span_context().is_valid:
                injected = context_headers(trace.set_span_in_context(span))
                if injected:
                    headers = ([list(injected) for _ in range(n)] if headers is None
                               else [merge_headers(h, injected) for h in headers])
            # Current while the records are queued: with interceptors they go through send() one by one, and
            # their spans are then this one's children.
            with self._refusal_ends(span, start, topic), _current(span):
                fut = send_batch(topic, values, keys, headers, partitions, timestamps_ms, timestamps=timestamps)
            self._watch_batch(span, start, topic, n, fut)
            return fut

        return traced

    def traced_send_arrow(self, send_arrow: Callable[[str | None, Any], BatchFuture]
                          ) -> Callable[[str | None, Any], BatchFuture]:
        def traced(topic: str | None, data: Any) -> BatchFuture:
            if _idle():
                return send_arrow(topic, data)
            n = int(data.num_rows)
            span = self._start_batch(topic, n)
            start = time.perf_counter()
            # The span is current while the rows are queued, so the rows' headers get its context
            # (injecting_rows(), around each topic's rows).
            with self._refusal_ends(span, start, topic), _current(span):
                fut = send_arrow(topic, data)
            self._watch_batch(span, start, topic, n, fut)
            return fut

        return traced

    @staticmethod
    def injecting_rows(send_rows: Callable[[str, ArrowRows], BatchFuture]) -> Callable[[str, ArrowRows], BatchFuture]:
        """Producer._send_rows, writing the current trace context into every row's headers."""
        def traced(topic: str, rows: ArrowRows) -> BatchFuture:
            if trace.get_current_span().get_span_context().is_valid:
                injected = context_headers()
                if injected:
                    headers = ([list(injected) for _ in range(rows.n)] if rows.headers is None
                               else [merge_headers(h, injected) for h in rows.headers])
                    rows = dataclasses.replace(rows, headers=headers)  # type: ignore[arg-type]
            return send_rows(topic, rows)

        return traced

    @contextlib.contextmanager
    def _refusal_ends(self, span: Any, start: float, topic: str | None) -> Iterator[None]:
        """A batch call that raises took no record (or no more records): its span ends with the error."""
        try:
            yield
        except BaseException as e:
            kind = self._fail(span, e)
            span.end()
            self._duration.record(_elapsed(start), self._attrs_for_metrics(topic or "", -1, kind))
            raise
