"""The sink: Arrow record batches from Spark into the producer, one cached producer per worker process."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

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


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


def _inject_failure(fail_after: int | None, marker: str | None, sent: int) -> None:
    """Test hook (options kafkajet.test.fail.after.rows / .marker): fail a task mid-write, once per marker."""
    if fail_after is None or sent < fail_after:
        return
    if marker is not None:
        import os

        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL)  # only the first attempt fails
        except FileExistsError:
            return
        os.close(fd)
    raise RuntimeError(f"injected failure after {sent} rows (kafkajet.test.fail.after.rows)")


def write_batches(cfg: dict[str, str], topic_option: str | None, batches: Iterator[Any],
                  fail_after: int | None = None, fail_marker: str | None = None) -> int:
    """Send every row; flush; raise if any record failed (the task fails and Spark retries it)."""
    producer = _producer(cfg)
    pending = []
    sent = 0
    for rb in batches:
        n = rb.num_rows
        if n == 0:
            continue
        pending.append(producer.send_arrow(topic_option, rb))
        sent += n
        _inject_failure(fail_after, fail_marker, sent)
    producer.flush()
    for result in pending:
        errors = result.errors()
        if errors:
            i, err = errors[0]
            raise RuntimeError(f"{len(errors)} record(s) failed to reach Kafka; first: {err!r}") from err
    return sent


class KafkaArrowWriter(DataSourceArrowWriter):
    def __init__(self, cfg: dict[str, str], topic: str | None, fail_after: int | None = None,
                 fail_marker: str | None = None) -> None:
        self.cfg = cfg
        self.topic = topic
        self.fail_after = fail_after
        self.fail_marker = fail_marker

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return KafkaCommitMessage(write_batches(self.cfg, self.topic, iterator, self.fail_after, self.fail_marker))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("kafkajet sink committed %d records from %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.warning("kafkajet sink aborted; %d records had been written by successful tasks", done)


class KafkaStreamArrowWriter(DataSourceStreamArrowWriter):
    def __init__(self, cfg: dict[str, str], topic: str | None) -> None:
        self.cfg = cfg
        self.topic = topic

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return KafkaCommitMessage(write_batches(self.cfg, self.topic, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("kafkajet stream sink: micro-batch %d committed %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("kafkajet stream sink: micro-batch %d aborted", batchId)
