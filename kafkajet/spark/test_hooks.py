"""For tests only: the "kafkajet-test-hooks" format, the kafkajet data source that also takes the options which
inject failures into a write (the "kafkajet" format refuses them as unknown options):

- kafkajet.test.fail.after.rows and kafkajet.test.fail.marker: fail a task once it has sent that many rows,
  once per marker file (every time without one);
- kafkajet.test.fail.after.commit.marker: fail a stream's driver once, after the Kafka commit of a
  micro-batch, before Spark records it.

Register it with `spark.dataSource.register(KafkaDataSourceWithTestHooks)`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kafkajet.spark.data_source import KafkaDataSource
from kafkajet.spark.sink_options import FailureHooks, SinkOptions

AFTER_ROWS = "kafkajet.test.fail.after.rows"
MARKER = "kafkajet.test.fail.marker"
AFTER_COMMIT_MARKER = "kafkajet.test.fail.after.commit.marker"
HOOKS = (AFTER_ROWS, MARKER, AFTER_COMMIT_MARKER)


def failure_hooks(options: Any) -> FailureHooks:
    opts = {k.lower(): str(v) for k, v in options.items()}
    after_rows = opts.get(AFTER_ROWS)
    return FailureHooks(int(after_rows) if after_rows else None, opts.get(MARKER), opts.get(AFTER_COMMIT_MARKER))


class KafkaDataSourceWithTestHooks(KafkaDataSource):
    @classmethod
    def name(cls) -> str:
        return "kafkajet-test-hooks"

    def sink_options(self, schema: Any) -> SinkOptions:
        from kafkajet.spark.sink_options import parse_sink_options

        sink = {k: v for k, v in self.options.items() if k.lower() not in HOOKS}
        return replace(parse_sink_options(sink, schema), failures=failure_hooks(self.options))
