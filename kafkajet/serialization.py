"""Key and value serializers: the Java built-ins (bytes, string, integer, long, double) plus json.

A serializer is any callable obj -> bytes | None; None stays None (Java: null stays null). One that needs to
know the topic, key-or-value and headers (Java's serialize(topic, headers, data); the Schema Registry
serializers) is called as serializer(obj, SerializationContext): the producer decides once, when it is built,
which form a serializer takes (`wants_context`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

from kafkajet.errors import ConfigError, SerializationError

Serializer = Callable[[Any], bytes | None]


class MessageField:
    """Which part of a record a serializer works on; the values are confluent-kafka's, so they compare equal."""

    NONE = "none"
    KEY = "key"
    VALUE = "value"


class SerializationContext:
    """What a context-aware serializer is told besides the object: topic, key or value, and the record's
    headers (as given to send(); a serializer may append to a list or set in a dict). confluent-kafka's
    serializers read the same attributes, so they take this object too."""

    __slots__ = ("topic", "field", "headers")

    def __init__(self, topic: str, field: str, headers: Any = None) -> None:
        self.topic = topic
        self.field = field
        self.headers = headers

    def __repr__(self) -> str:
        return f"SerializationContext({self.topic!r}, {self.field!r})"


def wants_context(serializer: Any) -> bool:
    """True for serializers called as serializer(obj, ctx): kafkajet's Schema Registry serializers (they set
    `wants_serialization_context`) and confluent-kafka's (subclasses of its Serializer / Deserializer), whose
    __call__ takes the same context."""
    flag = getattr(serializer, "wants_serialization_context", None)
    if flag is not None:
        return bool(flag)
    return any(c.__module__ == "confluent_kafka.serialization" and c.__name__ in ("Serializer", "Deserializer")
               for c in type(serializer).__mro__)


class InContext:
    """A context-aware serializer bound to key or value: call(obj, topic, headers) builds its context.
    Its own type, so the producer's per-record test is one `type(s) is InContext`.

    A record without headers gets its topic's one context, built once (a serializer holds no record's state in
    it: confluent-kafka's programs pass one context per topic the same way); a record with headers gets its own,
    since its serializer may add to them."""

    __slots__ = ("serializer", "field", "_contexts")

    def __init__(self, serializer: Callable[[Any, SerializationContext], bytes | None], field: str) -> None:
        self.serializer = serializer
        self.field = field
        self._contexts: dict[str, SerializationContext] = {}

    def __call__(self, obj: Any) -> bytes | None:
        raise SerializationError(
            f"{self.serializer!r} needs the topic: it is called with a SerializationContext by the producer; "
            f"outside one call it as serializer(obj, SerializationContext(topic, MessageField.VALUE))")

    def call(self, obj: Any, topic: str, headers: Any) -> bytes | None:
        if headers is not None:
            return self.serializer(obj, SerializationContext(topic, self.field, headers))
        ctx = self._contexts.get(topic)
        if ctx is None:
            ctx = self._contexts[topic] = SerializationContext(topic, self.field)
        return self.serializer(obj, ctx)


def adds_headers(serializer: Serializer) -> bool:
    """Whether a resolved serializer writes into its record's headers (the Schema Registry serializers' header
    form of the schema id sets `adds_headers`): the producer then gives it a list to write into even for a record
    sent without headers, as Java's producer hands every serializer the record's Headers."""
    return type(serializer) is InContext and bool(getattr(serializer.serializer, "adds_headers", False))


def _bytes(obj: Any) -> bytes | None:
    if obj is None or type(obj) is bytes:
        return obj  # type: ignore[no-any-return]
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    raise SerializationError(
        f"serializer 'bytes' cannot serialize {type(obj).__name__} {obj!r:.40}; pass bytes, or set "
        f"key.serializer / value.serializer to 'str', 'int', 'json' or a callable")


IDENTITY_BYTES: Serializer = _bytes


def _str(obj: Any) -> bytes | None:
    if obj is None:
        return None
    if not isinstance(obj, str):
        raise SerializationError(f"serializer 'str' cannot serialize {type(obj).__name__}; pass str")
    return obj.encode("utf-8")


def _fixed(fmt: str, name: str, kinds: tuple[type, ...]) -> Serializer:
    s = struct.Struct(fmt)

    def serialize(obj: Any) -> bytes | None:
        if obj is None:
            return None
        if isinstance(obj, bool) or not isinstance(obj, kinds):
            raise SerializationError(f"serializer '{name}' cannot serialize {type(obj).__name__} {obj!r:.40}")
        try:
            return s.pack(obj)
        except struct.error:
            raise SerializationError(f"serializer '{name}': {obj} is out of range for {s.size * 8} bits") from None

    return serialize


def _json(obj: Any) -> bytes | None:
    if obj is None:
        return None
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise SerializationError(f"serializer 'json' cannot serialize {type(obj).__name__}: {e}") from None


BUILTINS: dict[str, Serializer] = {
    "bytes": _bytes,
    "str": _str,
    "string": _str,
    "int": _fixed(">i", "int", (int,)),  # Java IntegerSerializer: 4 bytes, big-endian
    "integer": _fixed(">i", "int", (int,)),
    "long": _fixed(">q", "long", (int,)),  # Java LongSerializer
    "double": _fixed(">d", "double", (int, float)),  # Java DoubleSerializer
    "json": _json,
}


def resolve_serializer(spec: str | Serializer, *, what: str) -> Serializer:
    if callable(spec):
        if wants_context(spec):
            return InContext(spec, MessageField.KEY if what.startswith("key") else MessageField.VALUE)  # type: ignore[arg-type]
        return spec
    if isinstance(spec, str):
        name = spec.rsplit(".", 1)[-1].removesuffix("Serializer").lower() if "." in spec else spec.lower()
        if name == "bytearray":
            name = "bytes"
        if name in BUILTINS:
            return BUILTINS[name]
    raise ConfigError(f"{what}={spec!r} is not a callable or one of the built-ins: {', '.join(sorted(BUILTINS))}")
