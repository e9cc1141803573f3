"""Key and value serializers: the Java built-ins (bytes, string, integer, long, double) plus json.

A serializer is any callable obj -> bytes | None; None stays None (Java: null stays null).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

from kafkajet.errors import ConfigError, SerializationError

Serializer = Callable[[Any], bytes | None]


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
        return spec
    if isinstance(spec, str):
        name = spec.rsplit(".", 1)[-1].removesuffix("Serializer").lower() if "." in spec else spec.lower()
        if name == "bytearray":
            name = "bytes"
        if name in BUILTINS:
            return BUILTINS[name]
    raise ConfigError(f"{what}={spec!r} is not a callable or one of the built-ins: {', '.join(sorted(BUILTINS))}")
