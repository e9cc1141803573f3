"""KafkaDataSource: register it, then format("kafkajet") reads and writes Kafka from PySpark."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
)
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructType, TimestampType

from kafkajet.errors import ConfigError
from kafkajet.spark.options import producer_config
from kafkajet.spark.reader import KafkaBatchReader, KafkaStreamReader
from kafkajet.spark.registry_formats import RegistryColumn, sink_columns, source_columns
from kafkajet.spark.source_options import parse_source_options
from kafkajet.spark.writer import (
    KafkaArrowWriter,
    KafkaExactlyOnceStreamWriter,
    KafkaExactlyOnceWriter,
    KafkaStreamArrowWriter,
)

_COLUMN_TYPES: dict[str, tuple[type, ...]] = {
    "value": (BinaryType, StringType), "key": (BinaryType, StringType), "topic": (StringType,),
    "partition": (IntegerType, LongType), "timestamp": (TimestampType,),
}


def _check_schema(schema: StructType, topic_option: str | None, encoded: Mapping[str, RegistryColumn]) -> None:
    fields = {f.name: f.dataType for f in schema.fields if f.name not in encoded}
    if "value" not in fields and "value" not in encoded:
        raise ConfigError(f"the DataFrame needs a 'value' column (string or binary); it has {sorted(fields)}")
    if topic_option is None and "topic" not in fields:
        raise ConfigError("no topic: set .option(\"topic\", name) or add a 'topic' column")
    for name, allowed in _COLUMN_TYPES.items():
        if name in fields and not isinstance(fields[name], allowed):
            want = " or ".join(t.typeName() for t in allowed)  # type: ignore[attr-defined]
            raise ConfigError(f"column '{name}' is {fields[name].simpleString()}; it must be {want}")
    if "headers" in fields and fields["headers"].simpleString() != "array<struct<key:string,value:binary>>":
        raise ConfigError(f"column 'headers' is {fields['headers'].simpleString()}; it must be "
                          "array<struct<key:string,value:binary>>")


def _any_format(options: Mapping[str, str]) -> bool:
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
        from kafkajet.spark.source_options import source_schema, subscribed_topics

        include = str(self.options.get("includeHeaders", self.options.get("includeheaders", "false")))
        if _any_format(self.options):
            # Spark pickles this instance after schema() and calls reader() on the copy: the columns planned
            # here travel with it, so a version registered in between cannot change what the readers decode
            # into (the schema Spark was given).
            self._planned = source_columns(self.options, subscribed_topics(self.options))
        return source_schema(include.strip().lower() == "true", self._planned or {})

    def _writer_args(self, schema: StructType) -> tuple[dict[str, str], str | None, dict[str, RegistryColumn]]:
        cfg = producer_config(self.options)
        if "transactional.id" in cfg:
            raise ConfigError("kafka.transactional.id is not supported by the sink: set .option(\"exactlyOnce\", "
                              "\"true\") and the sink runs one transaction per task itself")
        topic = self.options.get("topic")
        formats = sink_columns(self.options, topic, {f.name: f.dataType for f in schema.fields})
        _check_schema(schema, topic, formats)
        return cfg, topic, formats

    def _exactly_once(self) -> bool:
        raw = str(self.options.get("exactlyOnce", "false")).strip().lower()
        if raw not in ("true", "false"):
            raise ConfigError(f"option exactlyOnce={raw!r} must be true or false")
        return raw == "true"

    def _prefix(self, stable_key: str | None) -> str:
        """The transactional ids' prefix: the user's, or one derived from what identifies the query across
        restarts (its checkpoint), or fresh for one batch write."""
        given = self.options.get("transactionalIdPrefix")
        if given:
            return str(given)
        if stable_key:
            return "kafkajet-spark-" + hashlib.sha256(stable_key.encode()).hexdigest()[:16]
        return "kafkajet-spark-" + uuid.uuid4().hex[:16]

    def _failure_hook(self) -> tuple[int | None, str | None]:
        fail_after = self.options.get("kafkajet.test.fail.after.rows")
        return (int(fail_after) if fail_after else None), self.options.get("kafkajet.test.fail.marker")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise ConfigError("save mode overwrite is not supported: Kafka topics are append-only; use "
                              "mode(\"append\")")
        cfg, topic, formats = self._writer_args(schema)
        fail_after, marker = self._failure_hook()
        if self._exactly_once():
            return KafkaExactlyOnceWriter(cfg, topic, self._prefix(None), fail_after, marker, formats)
        return KafkaArrowWriter(cfg, topic, fail_after, marker, formats)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:  # noqa: N802
        # Output mode complete arrives as overwrite: each trigger appends the whole result table, as Spark's
        # Kafka sink does (a topic cannot be truncated; readers take the latest record per key).
        cfg, topic, formats = self._writer_args(schema)
        if self._exactly_once():
            if topic is None:
                raise ConfigError("exactlyOnce streams need .option(\"topic\", name): the micro-batch ids that "
                                  "keep a replayed batch from being written twice are recorded against it")
            return KafkaExactlyOnceStreamWriter(cfg, topic, self._prefix(self.options.get("checkpointLocation")),
                                                self.options.get("kafkajet.test.fail.after.commit.marker"), formats)
        return KafkaStreamArrowWriter(cfg, topic, formats)

    def reader(self, schema: Any) -> DataSourceReader:
        return KafkaBatchReader(parse_source_options(self.options, streaming=False, formats=self._planned))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802
        return KafkaStreamReader(parse_source_options(self.options, streaming=True, formats=self._planned))
