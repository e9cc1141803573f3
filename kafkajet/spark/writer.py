"""The sink: Arrow record batches from Spark into the producer, one cached producer per worker process."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from kafkajet.spark.sink_options import SinkOptions

if TYPE_CHECKING:
    from kafkajet.spark.formats.registry_column import RegistryColumn

log = logging.getLogger("kafkajet.spark")

# Module state survives across tasks in a reused Python worker: one producer per distinct configuration.
_PRODUCERS: dict[tuple[tuple[str, str], ...], Any] = {}
_LOCK = threading.Lock()


def _producer(cfg: dict[str, str]) -> Any:
    from kafkajet.producer.producer import Producer

    key = tuple(sorted(cfg.items()))
    with _LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            p = _PRODUCERS[key] = Producer(cfg)
        return p


def _encoded(batches: Iterator[Any], formats: Mapping[str, RegistryColumn]) -> Iterator[Any]:
    """The batches with the sink's registered columns ("key" / "value") encoded, before the producer sees them."""
    if not formats:
        return batches
    from kafkajet.spark.registered_batches import encode_batch

    return (encode_batch(rb, dict(formats)) for rb in batches)


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


class WriteHook(Protocol):
    """What a data source may add to the sink's writes: the "kafkajet" format adds nothing; the exactly-once
    tests' data source (kafkajet.testing.spark_failures) injects failures with it."""

    def sent(self, rows: int, producer: Any) -> None:
        """In a task, after each batch handed to the producer; `rows`: the task's rows sent so far."""
        ...

    def committed(self, batch_id: int) -> None:
        """On the driver, after a micro-batch's Kafka commit, before Spark records the micro-batch."""
        ...


def write_batches(opts: SinkOptions, batches: Iterator[Any], hook: WriteHook | None = None) -> int:
    """Send every row; flush; raise if any record failed (the task fails and Spark retries it)."""
    producer = _producer(opts.producer)
    sent, pending = _send_all(producer, opts, batches, hook)
    producer.flush()
    _raise_failures(pending)
    return sent


def _trace_context(producer: Any) -> contextlib.AbstractContextManager[None]:
    """With kafka.opentelemetry.enable: the trace context the driver left for the task (trace_context.spark_trace_context),
    so the task's send spans and the records' trace headers continue the driver's trace."""
    if not producer.config["opentelemetry.enable"]:
        return contextlib.nullcontext()
    from kafkajet.spark.trace_context import task_trace_context

    return task_trace_context()


def _send_all(producer: Any, opts: SinkOptions, batches: Iterator[Any],
              hook: WriteHook | None) -> tuple[int, list[Any]]:
    """(rows sent, their futures)."""
    with _trace_context(producer):
        return _send_each(producer, opts.topic, _encoded(batches, opts.formats), hook)


def _send_each(producer: Any, topic_option: str | None, batches: Iterator[Any],
               hook: WriteHook | None) -> tuple[int, list[Any]]:
    pending = []
    sent = 0
    for rb in batches:
        n = rb.num_rows
        if n == 0:
            continue
        pending.append(producer.send_arrow(topic_option, rb))
        sent += n
        if hook is not None:
            hook.sent(sent, producer)
    return sent, pending


def _raise_failures(pending: list[Any]) -> None:
    for result in pending:
        errors = result.errors()
        if errors:
            i, err = errors[0]
            raise RuntimeError(f"{len(errors)} record(s) failed to reach Kafka; first: {err!r}") from err


# How long the driver retries servers that refuse connections before failing the write: a broker restarting
# is back within it; a wrong address or port never is.
UNREACHABLE_WINDOW_S = 3.0


def refuse_unreachable_servers(cfg: Mapping[str, Any]) -> None:
    """Fail on the driver, before any task, when no bootstrap server can be connected to (refused, no such
    host): each task's producer would otherwise wait max.block.ms and fail with "Topic not present in metadata",
    and Spark print that once per task and again for the job."""
    from kafkajet.errors import KafkaConnectionError
    from kafkajet.network.blocking import definitely_unreachable

    why = definitely_unreachable(cfg["bootstrap.servers"], UNREACHABLE_WINDOW_S)
    if why is not None:
        raise KafkaConnectionError(f"the kafkajet sink cannot reach kafka.bootstrap.servers: {why}; check the "
                                   "address, or start the broker (nothing was written)")


class KafkaArrowWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, hook: WriteHook | None = None) -> None:
        self.opts = opts
        self.hook = hook

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return KafkaCommitMessage(write_batches(self.opts, iterator, self.hook))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("kafkajet sink committed %d records from %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.warning("kafkajet sink aborted; %d records had been written by successful tasks", done)


class KafkaStreamArrowWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions, hook: WriteHook | None = None) -> None:
        self.opts = opts
        self.hook = hook

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return KafkaCommitMessage(write_batches(self.opts, iterator, self.hook))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("kafkajet stream sink: micro-batch %d committed %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("kafkajet stream sink: micro-batch %d aborted", batchId)


# --- exactly once: tasks prepare transactions, the driver completes them ------------------------------------


@dataclass
class PreparedCommitMessage(WriterCommitMessage):
    """A task's rows, inside a transaction it left open (None when it had nothing to write, or found its
    micro-batch already committed by an earlier run)."""

    records: int
    prepared: Any  # kafkajet.PreparedTransaction | None


def _task_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("exactlyOnce writes run inside Spark tasks")
    return int(ctx.partitionId())


def _batch_id() -> int | None:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    raw = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    return None if raw is None else int(raw)


def admin_config(cfg: dict[str, str]) -> dict[str, str]:
    from kafkajet.config import COMMON_CONFIG

    names = {k.name for k in COMMON_CONFIG}
    return {k: v for k, v in cfg.items() if k in names}


def write_prepared(opts: SinkOptions, batches: Iterator[Any], prefix: str,
                   hook: WriteHook | None = None) -> PreparedCommitMessage:
    """One task of an exactly-once write: every row inside a transaction that is prepared, not committed.

    The transactional id is the write's prefix and the Spark partition: a retried or speculative attempt of
    the same partition fences the earlier one (init_transactions aborts what it left open), so at most one
    attempt's rows can ever be committed. In a stream, the micro-batch id is committed with the rows as the
    offset of a per-partition group, and a micro-batch found already committed (a replay after a driver
    restart) writes nothing.
    """
    from kafkajet.admin import Admin
    from kafkajet.producer.producer import Producer

    cfg, topic_option = opts.producer, opts.topic
    task = _task_id()
    batch_id = _batch_id()
    group = txn_id = f"{prefix}-{task}"  # the group recording its micro-batches is named after the task's id
    producer = Producer({**cfg, "transactional.id": txn_id})
    try:
        producer.init_transactions()
        if batch_id is not None and topic_option is not None:
            with Admin(admin_config(cfg)) as admin:
                done = admin.list_consumer_group_offsets(group, [(topic_option, 0)]).get((topic_option, 0), 0)
            if done > batch_id:
                log.warning("kafkajet sink: micro-batch %d of partition %d was committed by an earlier run; "
                            "not writing it again", batch_id, task)
                return PreparedCommitMessage(0, None)
        producer.begin_transaction()
        sent, pending = _send_all(producer, opts, batches, hook)
        if sent == 0:
            producer.abort_transaction()
            return PreparedCommitMessage(0, None)
        if batch_id is not None and topic_option is not None:
            producer.send_offsets_to_transaction({(topic_option, 0): batch_id + 1}, group)
        producer.flush()
        _raise_failures(pending)
        return PreparedCommitMessage(sent, producer.prepare_transaction())
    finally:
        producer.close()


def complete_all(cfg: dict[str, str], messages: list[WriterCommitMessage | None], commit: bool,
                 prefix: str) -> int:
    """The driver's half: commit (or abort) every prepared task transaction; on abort also fence the tasks
    that failed (their messages are None), so what they left open is aborted now, not at its timeout."""
    from kafkajet.admin import Admin
    from kafkajet.producer.producer import Producer

    total = 0
    with Admin(admin_config(cfg)) as admin:
        for m in messages:
            if isinstance(m, PreparedCommitMessage) and m.prepared is not None:
                admin.complete_transaction(m.prepared, commit=commit, timeout_s=120)
                total += m.records
    if not commit:
        for task, m in enumerate(messages):
            if m is None:
                with Producer({**cfg, "transactional.id": f"{prefix}-{task}"}) as fence:
                    fence.init_transactions()
    return total


class KafkaExactlyOnceWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, prefix: str, hook: WriteHook | None = None) -> None:
        self.opts = opts
        self.cfg = opts.producer
        self.prefix = prefix
        self.hook = hook

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_prepared(self.opts, iterator, self.prefix, self.hook)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = complete_all(self.cfg, messages, True, self.prefix)
        log.info("kafkajet sink committed %d records exactly once from %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        complete_all(self.cfg, messages, False, self.prefix)
        log.warning("kafkajet sink aborted: no record of this write is visible to read_committed readers")


class KafkaExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions, prefix: str, hook: WriteHook | None = None) -> None:
        self.opts = opts
        self.cfg = opts.producer
        self.prefix = prefix
        self.hook = hook

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_prepared(self.opts, iterator, self.prefix, self.hook)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        total = complete_all(self.cfg, messages, True, self.prefix)
        log.info("kafkajet stream sink: micro-batch %d committed %d records exactly once", batchId, total)
        if self.hook is not None:
            self.hook.committed(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        complete_all(self.cfg, messages, False, self.prefix)
        log.warning("kafkajet stream sink: micro-batch %d aborted", batchId)
