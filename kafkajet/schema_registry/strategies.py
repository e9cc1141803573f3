"""Subject name strategies: which registry subject a topic's key or value schema lives under.

Each is called as strategy(ctx, record_name) (confluent-kafka's shape); `subject.name.strategy` also takes
their names ("topic", "record", "topic_record", with or without "_subject_name_strategy") and the Java
classes' names (io.confluent.kafka.serializers.subject.TopicNameStrategy, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkajet.errors import ConfigError
from kafkajet.serialization import MessageField, SerializationContext

SubjectNameStrategy = Callable[[SerializationContext, str | None], str | None]


def topic_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str:
    """`<topic>-key` / `<topic>-value`: the default."""
    return f"{ctx.topic}-{'key' if ctx.field == MessageField.KEY else 'value'}"


def record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str | None:
    """The record's fully qualified name: one subject for that type on every topic."""
    return record_name


def topic_record_subject_name_strategy(ctx: SerializationContext, record_name: str | None) -> str | None:
    """`<topic>-<fully qualified record name>`: several types on one topic, each evolving on its own."""
    return None if record_name is None else f"{ctx.topic}-{record_name}"


_BY_NAME: dict[str, SubjectNameStrategy] = {
    "topic": topic_subject_name_strategy,
    "record": record_subject_name_strategy,
    "topic_record": topic_record_subject_name_strategy,
    "topicname": topic_subject_name_strategy,
    "recordname": record_subject_name_strategy,
    "topicrecordname": topic_record_subject_name_strategy,
}

BUILTIN_STRATEGIES = frozenset(_BY_NAME.values())


def resolve_strategy(spec: Any, key: str = "subject.name.strategy") -> SubjectNameStrategy:
    if spec is None:
        return topic_subject_name_strategy
    if callable(spec):
        return spec  # type: ignore[no-any-return]
    if isinstance(spec, str):
        name = spec.rsplit(".", 1)[-1]  # a Java class name's simple name
        norm = name.lower().removesuffix("_subject_name_strategy").removesuffix("strategy")
        if norm in _BY_NAME:
            return _BY_NAME[norm]
    raise ConfigError(f"{key}={spec!r}: expected a callable(ctx, record_name) or one of topic, record, "
                      f"topic_record (or io.confluent.kafka.serializers.subject.TopicNameStrategy, "
                      f"RecordNameStrategy, TopicRecordNameStrategy)")
