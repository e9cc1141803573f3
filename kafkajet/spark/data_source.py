"""KafkaDataSource, the "kafkajet" format: Spark's Kafka source and sink in one data source (PySpark's Python
Data Source API). Register it (kafkajet.spark.register, or Spark finds it through pyspark_kafkajet), then
format("kafkajet") reads and writes Kafka.

Spark imports this module in every application where kafkajet is installed (pyspark_kafkajet), to learn the
format's name: it imports nothing beyond PySpark's data source API until the format is used. The options are
checked in source_options.py and sink_options.py, the readers are reader.py's, the writers writer.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from kafkajet.spark.formats.registry_column import RegistryColumn
    from kafkajet.spark.sink_options import SinkOptions
    from kafkajet.spark.writer import WriteHook


def _any_format(options: Any) -> bool:
    return any(k.lower() in ("valueformat", "keyformat") for k in options)


class KafkaDataSource(DataSource):
    """Spark's Kafka source and sink, in Python. Short name "kafkajet" ("kafka" belongs to Spark)."""

    # The registered columns schema() planned; None until it has (or when Spark was given a schema instead,
    # and the readers plan them themselves).
    _planned: dict[str, RegistryColumn] | None = None

    @classmethod
    def name(cls) -> str:
        return "kafkajet"

    def schema(self) -> Any:
        # Spark's columns; headers only with includeHeaders=true, as Spark's Kafka source; registered
        # key/value columns as the structs of their planned schemas.
        from kafkajet.spark.registered_columns import source_columns
        from kafkajet.spark.source_options import source_schema, subscribed_topics

        include = str(self.options.get("includeHeaders", self.options.get("includeheaders", "false")))
        if _any_format(self.options):
            # Spark pickles this instance after schema() and calls reader() on the copy: the columns planned
            # here travel with it, so a version registered in between cannot change what the readers decode
            # into (the schema Spark was given).
            self._planned = source_columns(self.options, subscribed_topics(self.options))
        return source_schema(include.strip().lower() == "true", self._planned or {})

    def sink_options(self, schema: StructType) -> SinkOptions:
        """The sink's options, checked against the DataFrame's columns (once per query planned)."""
        from kafkajet.spark.sink_options import parse_sink_options

        return parse_sink_options(self.options, schema)

    def write_hook(self) -> WriteHook | None:
        """What this data source adds to its writes: nothing here (the exactly-once tests' data source,
        kafkajet.testing.spark_failures, injects failures)."""
        return None

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        from kafkajet.errors import ConfigError
        from kafkajet.spark.writer import KafkaArrowWriter, KafkaExactlyOnceWriter, refuse_unreachable_servers

        if overwrite:
            raise ConfigError("save mode overwrite is not supported: Kafka topics are append-only; use "
                              "mode(\"append\")")
        opts = self.sink_options(schema)
        refuse_unreachable_servers(opts.producer)
        if opts.exactly_once:
            return KafkaExactlyOnceWriter(opts, opts.transactional_ids(streaming=False), self.write_hook())
        return KafkaArrowWriter(opts, self.write_hook())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:  # noqa: N802
        from kafkajet.errors import ConfigError
        from kafkajet.spark.writer import (
            KafkaExactlyOnceStreamWriter,
            KafkaStreamArrowWriter,
            refuse_unreachable_servers,
        )

        # Output mode complete arrives as overwrite: each trigger appends the whole result table, as Spark's
        # Kafka sink does (a topic cannot be truncated; readers take the latest record per key).
        opts = self.sink_options(schema)
        refuse_unreachable_servers(opts.producer)
        if opts.exactly_once:
            if opts.topic is None:
                raise ConfigError("exactlyOnce streams need .option(\"topic\", name): the micro-batch ids that "
                                  "keep a replayed batch from being written twice are recorded against it")
            return KafkaExactlyOnceStreamWriter(opts, opts.transactional_ids(streaming=True), self.write_hook())
        return KafkaStreamArrowWriter(opts, self.write_hook())

    def reader(self, schema: Any) -> DataSourceReader:
        from kafkajet.spark.reader import KafkaBatchReader
        from kafkajet.spark.source_options import parse_source_options

        return KafkaBatchReader(parse_source_options(self.options, streaming=False, formats=self._planned))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        from kafkajet.spark.reader import KafkaStreamReader
        from kafkajet.spark.source_options import parse_source_options

        return KafkaStreamReader(parse_source_options(self.options, streaming=True, formats=self._planned))
