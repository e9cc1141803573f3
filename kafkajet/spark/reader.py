"""The batch source: one Spark partition per Kafka partition between starting and ending offsets."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from kafkajet.config import SECURITY_KEYS, security_config
from kafkajet.errors import ConfigError

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int, headers array<struct<key: string, value: binary>>")


class KafkaInputPartition(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__(partition)
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


def _spec(options: dict[str, str], name: str, default: str, topic: str) -> Any:
    raw = options.get(name.lower(), default)
    if raw in ("earliest", "latest"):
        return raw
    try:
        parsed = json.loads(raw)
        return {int(p): int(o) for p, o in parsed[topic].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ConfigError(f"option {name}={raw!r}: use earliest, latest or JSON like "
                          f"{{\"{topic}\": {{\"0\": 23, \"1\": -2}}}} (-2 earliest, -1 latest)") from None


class KafkaReader(DataSourceReader):
    def __init__(self, options: dict[str, str], servers: str, timeout_s: float) -> None:
        topic = options.get("subscribe") or options.get("topic")
        if not topic or "," in topic:
            raise ConfigError("option subscribe (one topic name) is required for reading")
        self.topic = topic
        self.servers = servers
        self.timeout_s = timeout_s
        # The security options (kafka.security.protocol, kafka.ssl.*, kafka.sasl.*) as the sink takes them.
        self.security = {k[len("kafka."):]: v for k, v in options.items()
                         if k.startswith("kafka.") and k[len("kafka."):] in SECURITY_KEYS}
        security_config(self.security)  # a bad setting fails on the driver, not in every task
        # Spark's Kafka source option: read_committed stops at the last stable offset and drops aborted records.
        self.isolation = options.get("kafka.isolation.level", "read_uncommitted")
        if self.isolation not in ("read_uncommitted", "read_committed"):
            raise ConfigError(f"option kafka.isolation.level={self.isolation!r}: expected read_uncommitted or "
                              "read_committed")
        self.starting = _spec(options, "startingOffsets", "earliest", topic)
        self.ending = _spec(options, "endingOffsets", "latest", topic)

    def _fetch_config(self) -> dict[str, Any]:
        return {**self.security, "bootstrap.servers": self.servers, "isolation.level": self.isolation,
                "request.timeout.ms": max(1, int(self.timeout_s * 1000))}

    def partitions(self) -> list[KafkaInputPartition]:
        from kafkajet.fetch import FetchClient

        out = []
        with FetchClient(self._fetch_config()) as client:
            for p in client.partitions(self.topic):
                first, last = client.offsets(self.topic, p)

                def pick(spec: Any, p: int = p, first: int = first, last: int = last) -> int:
                    if spec == "earliest":
                        return first
                    if spec == "latest":
                        return last
                    o = spec.get(p, -1 if spec is self.ending else -2)
                    return first if o == -2 else last if o == -1 else o

                out.append(KafkaInputPartition(self.topic, p, pick(self.starting), pick(self.ending)))
        return out

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        from kafkajet.fetch import FetchClient

        assert isinstance(partition, KafkaInputPartition)
        if partition.start >= partition.end:
            return
        utc = datetime.UTC
        with FetchClient(self._fetch_config()) as client:
            for r in client.fetch_range(partition.topic, partition.partition, partition.start, partition.end):
                yield (r.key, r.value, partition.topic, partition.partition, r.offset,
                       datetime.datetime.fromtimestamp(r.timestamp / 1000.0, tz=utc), 0,
                       [(k, v) for k, v in r.headers])
