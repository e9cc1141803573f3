"""The sink's options -> producer settings, checked at planning time with clear messages (the source's are in
source_options.py)."""

from __future__ import annotations

from collections.abc import Mapping

from kafkajet.config import PRODUCER, parse_producer_config
from kafkajet.errors import ConfigError
from kafkajet.spark.option_names import OptionNames
from kafkajet.spark.registry_formats import SINK_FORMAT_OPTIONS

REJECTED = ("key.serializer", "value.serializer")

SINK_OPTIONS = OptionNames(
    "sink",
    ("topic", "exactlyOnce", "transactionalIdPrefix",
     # Test hooks (writer.py): fail a task, or the driver after its Kafka commit, once.
     "kafkajet.test.fail.after.rows", "kafkajet.test.fail.marker", "kafkajet.test.fail.after.commit.marker",
     # Schema Registry formats (registry_formats.py).
     *SINK_FORMAT_OPTIONS),
    kafka={f"kafka.{k}" for k in PRODUCER.by_name},
    summary="topic, exactlyOnce, transactionalIdPrefix and kafka.* producer settings (kafka.bootstrap.servers, "
            "kafka.linger.ms, ...; python -m kafkajet config lists them)",
)


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
        import kafkajet.otel  # noqa: F401  (a ConfigError naming the extra when it is missing)
    return cfg
