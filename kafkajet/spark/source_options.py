"""The source's options, as Spark's Kafka source takes them, checked on the driver at planning time.

Spark hands options over lower-cased with string values. Every check here fails with the option's name and
what to write instead, so a typo never becomes a silently different query.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkajet.config import SECURITY_KEYS, security_config
from kafkajet.errors import ConfigError
from kafkajet.spark.formats.registry_column import RegistryColumn
from kafkajet.spark.group_commit import group_for
from kafkajet.spark.option_names import OptionNames
from kafkajet.spark.registered_columns import SOURCE_FORMAT_OPTIONS, source_columns

EARLIEST, LATEST = -2, -1  # Spark's JSON offsets: -2 earliest, -1 latest

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
               "timestampType int")
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"

# Consumer settings a source manages itself: Spark's Kafka source refuses them with the same advice.
_REFUSED_KAFKA = {
    "auto.offset.reset": "set the source option startingOffsets instead",
    "key.deserializer": "keys are always read as binary: cast the key column in the DataFrame",
    "value.deserializer": "values are always read as binary: cast the value column in the DataFrame",
    "enable.auto.commit": "the query's checkpoint records its offsets; for a lag monitor, set kafka.group.id or "
                          "groupIdPrefix and the source commits the processed offsets after each micro-batch",
    "interceptor.classes": "the source does not run consumer interceptors",
}
_KAFKA_KEYS = {"bootstrap.servers", "isolation.level", "client.id", "request.timeout.ms", "group.id",
               "default.api.timeout.ms", *SECURITY_KEYS}

# The options of Spark's Kafka source this one takes, spelled as Spark documents them.
SOURCE_OPTIONS = OptionNames(
    "source",
    ("subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets", "startingTimestamp",
     "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
     "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
     "minPartitions", "maxRecordsPerPartition", "failOnDataLoss", "includeHeaders",
     # Accepted for compatibility; they tune the JVM consumer Spark uses and mean nothing here.
     "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
     # The group a stream commits its processed offsets to, for lag monitors (kafka.group.id wins).
     "groupIdPrefix",
     # kafkajet's own: the deadline of every broker round trip; Schema Registry formats (registered_columns.py).
     "kafkajet.timeout.ms", *SOURCE_FORMAT_OPTIONS),
    # The refused consumer settings count as known: their own message says what to do instead.
    kafka={f"kafka.{k}" for k in (*_KAFKA_KEYS, *_REFUSED_KAFKA)},
    summary="Spark's Kafka source options (subscribe, subscribePattern, assign, startingOffsets, endingOffsets, "
            "maxOffsetsPerTrigger, failOnDataLoss, includeHeaders, ...) and kafka.bootstrap.servers, "
            "kafka.isolation.level, kafka.client.id, kafka.group.id, kafka.request.timeout.ms and the security settings "
            "(kafka.security.protocol, kafka.ssl.*, kafka.sasl.*)",
)


@dataclass(frozen=True)
class Subscription:
    """What to read: a topic list, a pattern over topic names, or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None  # Java's Matcher.matches(): the whole name
        return topic in self.topics

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern {self.pattern!r}"
        if self.assigned:
            return "assign " + json.dumps(_group(self.assigned))
        return "subscribe " + ",".join(self.topics)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: "earliest", "latest", explicit offsets, or timestamps (ListOffsets)."""

    kind: str  # earliest | latest | offsets | timestamp | timestamps
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)  # offsets or per-partition times
    timestamp: int | None = None  # one time for every partition
    option: str = ""


@dataclass(frozen=True)
class SourceOptions:
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    fetch_config: dict[str, Any]
    group_id: str | None = None  # streams commit processed offsets here (kafkajet.spark.group_commit)
    # The decoded registered columns ("key", "value"), planned against the Schema Registry (registered_columns.py).
    formats: Mapping[str, RegistryColumn] = field(default_factory=dict)

    @property
    def schema(self) -> Any:
        return source_schema(self.include_headers, self.formats)


def source_schema(include_headers: bool, formats: Mapping[str, RegistryColumn]) -> Any:
    """Spark's columns: a DDL string, or with registered columns a StructType with their decoded types."""
    ddl = BASE_SCHEMA + (", " + HEADERS_FIELD if include_headers else "")
    if not formats:
        return ddl
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    from kafkajet.spark.arrow_records import arrow_schema

    # A decoded column is nullable whatever its schema: a tombstone, or PERMISSIVE's null.
    fields = [StructField(f.name, from_arrow_type(formats[f.name].arrow_type() if f.name in formats else f.type),
                          nullable=True)
              for f in arrow_schema(include_headers)]
    return StructType(fields)


def parse_source_options(options: Mapping[str, str], *, streaming: bool,
                         formats: Mapping[str, RegistryColumn] | None = None) -> SourceOptions:
    """The source's options, checked. `formats`: the registered columns already planned (by the data
    source's schema()); planned here when not given."""
    opts = {k.lower(): v for k, v in options.items()}
    kafka = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    SOURCE_OPTIONS.check(opts)
    for key in kafka:
        if key in _REFUSED_KAFKA:
            raise ConfigError(f"kafka.{key} is not supported by the source: {_REFUSED_KAFKA[key]}")
    if not kafka.get("bootstrap.servers"):
        raise ConfigError("option kafka.bootstrap.servers is required, e.g. "
                          ".option(\"kafka.bootstrap.servers\", \"host:9092\")")
    isolation = kafka.get("isolation.level", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigError(f"option kafka.isolation.level={isolation!r}: expected read_uncommitted or read_committed")
    security = {k: v for k, v in kafka.items() if k in SECURITY_KEYS}
    security_config(security)  # a bad setting fails on the driver, not in every task
    timeout_ms = _int(opts, "kafkajet.timeout.ms", 30_000, minimum=1)
    fetch_config: dict[str, Any] = {**security, "bootstrap.servers": kafka["bootstrap.servers"],
                                    "isolation.level": isolation,
                                    "request.timeout.ms": int(kafka.get("request.timeout.ms", timeout_ms))}
    for key in ("client.id", "default.api.timeout.ms"):  # the latter: how long a wrong address is waited for
        if key in kafka:
            fetch_config[key] = kafka[key]

    subscription = _subscription(opts)
    starting = _offset_spec(opts, "starting", streaming)
    ending = _offset_spec(opts, "ending", streaming)
    if streaming and ending.option:
        raise ConfigError(f"option {ending.option} is for batch queries (spark.read); a stream has no end")
    if not streaming and starting.kind == "latest" and starting.option:
        raise ConfigError("option startingOffsets=latest is not allowed for batch queries (spark.read): use "
                          "earliest or JSON offsets")
    if not streaming and ending.kind == "earliest":
        raise ConfigError("option endingOffsets=earliest is not allowed: use latest or JSON offsets")
    if ending.kind == "offsets" and any(o == EARLIEST for o in ending.offsets.values()):
        raise ConfigError("option endingOffsets: -2 (earliest) is not allowed as an ending offset")
    if not streaming and starting.kind == "offsets" and any(o == LATEST for o in starting.offsets.values()):
        raise ConfigError("option startingOffsets: -1 (latest) is not allowed for batch queries")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(f"option startingOffsetsByTimestampStrategy={strategy!r}: expected error or latest")
    max_per_trigger = _int(opts, "maxoffsetspertrigger", None, minimum=1)
    min_per_trigger = _int(opts, "minoffsetspertrigger", None, minimum=0)
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise ConfigError(f"option minOffsetsPerTrigger={min_per_trigger} is above maxOffsetsPerTrigger="
                          f"{max_per_trigger}")
    return SourceOptions(
        subscription=subscription, starting=starting, ending=ending, timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger, min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(opts.get("maxtriggerdelay", "15m")),
        min_partitions=_int(opts, "minpartitions", None, minimum=1),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", None, minimum=1),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
        fetch_config=fetch_config,
        group_id=group_for(kafka.get("group.id"), opts.get("groupidprefix"),
                           f"{kafka['bootstrap.servers']} {subscription.describe()}") if streaming else None,
        formats=(formats if formats is not None
                 else source_columns(options, subscription.topics if subscription.pattern is None else ())),
    )


def subscribed_topics(options: Mapping[str, str]) -> tuple[str, ...]:
    """The topics named by subscribe or assign (none for a pattern): the default subjects' topics."""
    sub = _subscription({k.lower(): v for k, v in options.items()})
    return sub.topics if sub.pattern is None else ()


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(given) != 1:
        found = ", ".join(SOURCE_OPTIONS.spelled(k) for k in given) or "none"
        raise ConfigError(f"set exactly one of the options subscribe (comma-separated topics), subscribePattern "
                          f"(a regex over topic names) or assign (JSON like {{\"topic\": [0, 1]}}); given: {found}")
    if "subscribe" in given:
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise ConfigError("option subscribe names no topic: give a comma-separated list of topics")
        return Subscription(topics=topics)
    if "subscribepattern" in given:
        try:
            re.compile(opts["subscribepattern"])
        except re.error as e:
            raise ConfigError(f"option subscribePattern={opts['subscribepattern']!r} is not a regex: {e}") from None
        return Subscription(pattern=opts["subscribepattern"])
    raw = opts["assign"]
    try:
        parsed = json.loads(raw)
        assigned = tuple(sorted((str(t), int(p)) for t, ps in parsed.items() for p in ps))
    except (ValueError, TypeError, AttributeError):
        raise ConfigError(f"option assign={raw!r}: expected JSON like {{\"topicA\": [0, 1], \"topicB\": [2]}}") from None
    if not assigned:
        raise ConfigError(f"option assign={raw!r} names no partition")
    return Subscription(topics=tuple(sorted({t for t, _ in assigned})), assigned=assigned)


def _offset_spec(opts: Mapping[str, str], which: str, streaming: bool) -> OffsetSpec:
    """Spark's precedence: {which}Timestamp, then {which}OffsetsByTimestamp, then {which}Offsets."""
    if opts.get(f"{which}timestamp"):
        name = f"{which}Timestamp"
        return OffsetSpec("timestamp", timestamp=_int(opts, f"{which}timestamp", None, minimum=0), option=name)
    if opts.get(f"{which}offsetsbytimestamp"):
        name = f"{which}OffsetsByTimestamp"
        return OffsetSpec("timestamps", offsets=_partition_json(opts[f"{which}offsetsbytimestamp"], name), option=name)
    name = f"{which}Offsets"
    raw = opts.get(f"{which}offsets")
    if raw is None:
        default = "latest" if which == "ending" or streaming else "earliest"
        return OffsetSpec(default)
    if raw.strip().lower() in ("earliest", "latest"):
        return OffsetSpec(raw.strip().lower(), option=name)
    return OffsetSpec("offsets", offsets=_partition_json(raw, name), option=name)


def _partition_json(raw: str, name: str) -> dict[tuple[str, int], int]:
    try:
        parsed = json.loads(raw)
        return {(str(t), int(p)): int(v) for t, parts in parsed.items() for p, v in parts.items()}
    except (ValueError, TypeError, AttributeError):
        raise ConfigError(f"option {name}={raw!r}: use earliest, latest or JSON like "
                          "{\"topicA\": {\"0\": 23, \"1\": -2}} (-2 earliest, -1 latest)") from None


def _int(opts: Mapping[str, str], key: str, default: int | None, *, minimum: int) -> Any:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"option {SOURCE_OPTIONS.spelled(key)}={raw!r} must be an integer") from None
    if value < minimum:
        raise ConfigError(f"option {SOURCE_OPTIONS.spelled(key)}={value} must be at least {minimum}")
    return value


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option {SOURCE_OPTIONS.spelled(key)}={raw!r} must be true or false")
    return raw.strip().lower() == "true"


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(raw: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    if match is None or match[2] not in ("", *_UNITS_MS):
        raise ConfigError(f"option maxTriggerDelay={raw!r}: use a duration like 30s, 15m or 1h")
    return int(match[1]) * _UNITS_MS.get(match[2] or "ms", 1)


def _group(tps: tuple[tuple[str, int], ...]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in tps:
        out.setdefault(t, []).append(p)
    return out
