"""The sink's options, checked on the driver at planning time into one frozen SinkOptions (the source's are in
source_options.py): the producer settings (kafka.*), the topic, exactly-once and its transactional ids, the
registered-format columns, and the DataFrame's columns against what the sink writes.

Spark hands options over lower-cased with string values. Every check here fails with the option's name and
what to write instead: a misspelt exactlyOnce must not write at-least-once.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkajet.config import PRODUCER, parse_producer_config
from kafkajet.errors import ConfigError
from kafkajet.spark.formats.registry_column import RegistryColumn
from kafkajet.spark.option_names import OptionNames
from kafkajet.spark.registered_columns import SINK_FORMAT_OPTIONS, sink_columns

REJECTED = ("key.serializer", "value.serializer")

SINK_OPTIONS = OptionNames(
    "sink",
    ("topic", "exactlyOnce", "transactionalIdPrefix",
     # Schema Registry formats (registered_columns.py).
     *SINK_FORMAT_OPTIONS),
    kafka={f"kafka.{k}" for k in PRODUCER.by_name},
    summary="topic, exactlyOnce, transactionalIdPrefix and kafka.* producer settings (kafka.bootstrap.servers, "
            "kafka.linger.ms, ...; python -m kafkajet config lists them)",
)


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, checked. `producer`: the kafka.* settings, prefix removed; `topic`: the topic
    option (None: each row's topic column); `formats`: the registered columns ("key", "value") encoded
    before the producer sees them; `checkpoint_location`: a stream's, which names its transactional ids."""

    producer: dict[str, str]
    topic: str | None
    exactly_once: bool
    transactional_id_prefix: str | None = None
    checkpoint_location: str | None = None
    formats: Mapping[str, RegistryColumn] = field(default_factory=dict)

    def transactional_ids(self, streaming: bool) -> str:
        """The transactional ids' prefix: the user's, or for a stream one derived from what identifies the query
        across restarts (its checkpoint), or fresh for one batch write."""
        if self.transactional_id_prefix:
            return self.transactional_id_prefix
        if streaming and self.checkpoint_location:
            return "kafkajet-spark-" + hashlib.sha256(self.checkpoint_location.encode()).hexdigest()[:16]
        return "kafkajet-spark-" + uuid.uuid4().hex[:16]


def producer_config(options: Mapping[str, str]) -> dict[str, str]:
    """Every kafka.* option, prefix removed, validated against the producer's config table; any other option
    not the sink's is refused (a misspelt exactlyOnce must not write at-least-once)."""
    SINK_OPTIONS.check(options)
    # Spark lower-cases option keys; Kafka's keys are lower case already.
    cfg = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    for key in REJECTED:
        if key in cfg:
            raise ConfigError(f"kafka.{key} is not supported: serialize the key/value columns to string or "
                              "binary in the DataFrame (as with Spark's own Kafka sink)")
    if not cfg.get("bootstrap.servers"):
        raise ConfigError("option kafka.bootstrap.servers is required, e.g. "
                          ".option(\"kafka.bootstrap.servers\", \"host:9092\")")
    if parse_producer_config(cfg)["opentelemetry.enable"]:  # fail on the driver, not in every task
        import kafkajet.spark.trace_context  # noqa: F401  (a ConfigError naming the extra when it is missing)
    return cfg


def parse_sink_options(options: Mapping[str, str], schema: Any) -> SinkOptions:
    """The sink's options checked, and the DataFrame's columns (`schema`, a StructType) against them; the
    registered columns' schemas registered (or looked up) on the registry, once."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    cfg = producer_config(options)
    if "transactional.id" in cfg:
        raise ConfigError("kafka.transactional.id is not supported by the sink: set .option(\"exactlyOnce\", "
                          "\"true\") and the sink runs one transaction per task itself")
    topic = opts.get("topic")
    formats = sink_columns(options, topic, {f.name: f.dataType for f in schema.fields})
    check_columns(schema, topic, formats)
    raw = opts.get("exactlyonce", "false").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"option exactlyOnce={raw!r} must be true or false")
    return SinkOptions(producer=cfg, topic=topic, exactly_once=raw == "true",
                       transactional_id_prefix=opts.get("transactionalidprefix") or None,
                       checkpoint_location=opts.get("checkpointlocation") or None, formats=formats)


def check_columns(schema: Any, topic_option: str | None, encoded: Mapping[str, RegistryColumn]) -> None:
    """The DataFrame's columns as the sink writes them: a value, a topic (or the option), and Spark's Kafka
    sink's types; the registered columns (`encoded`) are checked by their formats instead."""
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, TimestampType

    column_types: dict[str, tuple[type, ...]] = {
        "value": (BinaryType, StringType), "key": (BinaryType, StringType), "topic": (StringType,),
        "partition": (IntegerType, LongType), "timestamp": (TimestampType,),
    }
    fields = {f.name: f.dataType for f in schema.fields if f.name not in encoded}
    if "value" not in fields and "value" not in encoded:
        raise ConfigError(f"the DataFrame needs a 'value' column (string or binary); it has {sorted(fields)}")
    if topic_option is None and "topic" not in fields:
        raise ConfigError("no topic: set .option(\"topic\", name) or add a 'topic' column")
    for name, allowed in column_types.items():
        if name in fields and not isinstance(fields[name], allowed):
            want = " or ".join(t.typeName() for t in allowed)  # type: ignore[attr-defined]
            raise ConfigError(f"column '{name}' is {fields[name].simpleString()}; it must be {want}")
    if "headers" in fields and fields["headers"].simpleString() != "array<struct<key:string,value:binary>>":
        raise ConfigError(f"column 'headers' is {fields['headers'].simpleString()}; it must be "
                          "array<struct<key:string,value:binary>>")
