"""Built-in serializers produce Java's byte layouts and explain wrong input."""

from __future__ import annotations

import pytest

from kafkajet.errors import ConfigError, SerializationError
from kafkajet.serialization import IDENTITY_BYTES, resolve_serializer


def s(name: str):  # type: ignore[no-untyped-def]
    return resolve_serializer(name, what="value.serializer")


def test_java_layouts() -> None:
    assert s("int")(1) == b"\x00\x00\x00\x01"
    assert s("int")(-1) == b"\xff\xff\xff\xff"
    assert s("long")(1) == b"\x00" * 7 + b"\x01"
    assert s("double")(1.0) == b"\x3f\xf0" + b"\x00" * 6
    assert s("str")("é") == "é".encode()
    assert s("json")({"a": [1, "x"]}) == b'{"a":[1,"x"]}'
    assert s("org.apache.kafka.common.serialization.StringSerializer")("x") == b"x"


def test_none_stays_none_for_every_builtin() -> None:
    for name in ("bytes", "str", "int", "long", "double", "json"):
        assert s(name)(None) is None


def test_bytes_is_the_identity_for_bytes_and_copies_buffers() -> None:
    assert s("bytes") is IDENTITY_BYTES
    value = b"ab"
    assert IDENTITY_BYTES(value) is value
    for buf in (bytearray(b"ab"), memoryview(bytearray(b"ab"))):
        out = IDENTITY_BYTES(buf)
        buf[0] = ord("z")  # the caller reuses its buffer after send(): the record must not change with it
        assert type(out) is bytes and out == b"ab"


def test_wrong_types_say_what_to_do() -> None:
    with pytest.raises(SerializationError, match="cannot serialize int 5.*set key.serializer / value.serializer"):
        s("bytes")(5)
    with pytest.raises(SerializationError, match="out of range for 32 bits"):
        s("int")(2**31)
    with pytest.raises(SerializationError, match="'str' cannot serialize bytes"):
        s("str")(b"x")


def test_unknown_builtin_lists_the_names() -> None:
    with pytest.raises(ConfigError, match="bytes, double, int"):
        resolve_serializer("avro", what="key.serializer")


def test_callables_pass_through() -> None:
    def fn(x: object) -> bytes:
        return b"!"
    assert resolve_serializer(fn, what="key.serializer") is fn
