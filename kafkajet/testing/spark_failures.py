"""Failures injected into the Spark sink's writes, for the exactly-once tests: the "kafkajet-test-hooks" format,
the kafkajet data source plus the options that say where a write fails (the "kafkajet" format refuses them as
unknown options):

- kafkajet.test.fail.after.rows and kafkajet.test.fail.marker: fail a task once it has sent that many rows,
  once per marker file (every time without one), after flushing what it sent, so the failed attempt's rows
  are on the broker (the hard case);
- kafkajet.test.fail.after.commit.marker: fail a stream's driver once, after the Kafka commit of a
  micro-batch, before Spark records it, as a driver dying there would.

Register it with `spark.dataSource.register(KafkaDataSourceWithTestHooks)` (needs the `spark` extra).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from kafkajet.spark.data_source import KafkaDataSource

AFTER_ROWS = "kafkajet.test.fail.after.rows"
MARKER = "kafkajet.test.fail.marker"
AFTER_COMMIT_MARKER = "kafkajet.test.fail.after.commit.marker"
OPTIONS = (AFTER_ROWS, MARKER, AFTER_COMMIT_MARKER)


def first_time(marker: str) -> bool:
    """True once per marker file, across processes: only the first attempt of a test hook fails."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


@dataclass(frozen=True)
class InjectedFailures:
    """The sink's write hook (kafkajet.spark.writer.WriteHook) that fails a task after `after_rows` rows, once
    per `marker` file, and a stream's driver once after a Kafka commit (`after_commit_marker`)."""

    after_rows: int | None = None
    marker: str | None = None
    after_commit_marker: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> InjectedFailures:
        opts = {k.lower(): str(v) for k, v in options.items()}
        after_rows = opts.get(AFTER_ROWS)
        return cls(int(after_rows) if after_rows else None, opts.get(MARKER), opts.get(AFTER_COMMIT_MARKER))

    def sent(self, rows: int, producer: Any) -> None:
        if self.after_rows is None or rows < self.after_rows:
            return
        if self.marker is not None and not first_time(self.marker):
            return
        producer.flush()
        raise RuntimeError(f"injected failure after {rows} rows ({AFTER_ROWS})")

    def committed(self, batch_id: int) -> None:
        if self.after_commit_marker is not None and first_time(self.after_commit_marker):
            raise RuntimeError(f"injected failure after the Kafka commit of micro-batch {batch_id}")


class KafkaDataSourceWithTestHooks(KafkaDataSource):
    """The kafkajet data source, taking the failure options out of its options before the sink checks them."""

    def __init__(self, options: MutableMapping[str, str]) -> None:
        self.failures = InjectedFailures.from_options(options)
        kept = copy.copy(options)  # Spark's case-insensitive mapping stays one
        for key in [k for k in kept if k.lower() in OPTIONS]:
            del kept[key]
        super().__init__(kept)

    @classmethod
    def name(cls) -> str:
        return "kafkajet-test-hooks"

    def write_hook(self) -> InjectedFailures:
        return self.failures
