"""Primitive types of the Kafka protocol: a bounds-checked reader and byte-producing writers.

Every read checks what is left before touching the buffer, so a truncated or lying frame becomes a
ProtocolError naming the field, never an IndexError or a giant allocation.
"""

from __future__ import annotations

import struct

from kafkajet.errors import ProtocolError

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_U16, _F64 = struct.Struct(">H"), struct.Struct(">d")
FIXED = {"int8": _I8, "int16": _I16, "int32": _I32, "int64": _I64, "uint16": _U16, "float64": _F64}


class Reader:
    __slots__ = ("data", "pos", "end", "context")

    def __init__(self, data: bytes | memoryview, context: str = "") -> None:
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.pos = 0
        self.end = len(self.data)
        self.context = context

    def need(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            raise ProtocolError(
                f"truncated {self.context}: needed {n} bytes for {what} at offset {self.pos}, "
                f"{self.end - self.pos} left")

    def fixed(self, st: struct.Struct, what: str) -> int | float:
        self.need(st.size, what)
        (v,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v  # type: ignore[no-any-return]

    def boolean(self, what: str) -> bool:
        self.need(1, what)
        v = self.data[self.pos]
        self.pos += 1
        return v != 0

    def uvarint(self, what: str, max_bytes: int = 5) -> int:
        result = shift = 0
        for _ in range(max_bytes):
            self.need(1, what)
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise ProtocolError(f"{self.context}: unsigned varint for {what} longer than {max_bytes} bytes")

    def varint(self, what: str) -> int:
        zz = self.uvarint(what)
        return (zz >> 1) ^ -(zz & 1)

    def varlong(self, what: str) -> int:
        zz = self.uvarint(what, 10)
        return (zz >> 1) ^ -(zz & 1)

    def raw(self, n: int, what: str) -> bytes:
        if n < 0:
            raise ProtocolError(f"{self.context}: negative length {n} for {what}")
        self.need(n, what)
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return v

    def string(self, compact: bool, nullable: bool, what: str) -> str | None:
        n = self.uvarint(what) - 1 if compact else int(self.fixed(_I16, what))
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProtocolError(f"{self.context}: invalid string length {n} for {what}")
        try:
            return self.raw(n, what).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"{self.context}: {what} is not valid UTF-8 ({e.reason})") from None

    def bytes_(self, compact: bool, nullable: bool, what: str) -> bytes | None:
        n = self.uvarint(what) - 1 if compact else int(self.fixed(_I32, what))
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProtocolError(f"{self.context}: invalid bytes length {n} for {what}")
        return self.raw(n, what)

    def array_length(self, compact: bool, nullable: bool, what: str) -> int | None:
        n = self.uvarint(what) - 1 if compact else int(self.fixed(_I32, what))
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProtocolError(f"{self.context}: invalid array length {n} for {what}")
        if n > self.end - self.pos:
            # Every element takes at least one byte: a longer count is a lie, refuse before allocating.
            raise ProtocolError(
                f"{self.context}: array {what} claims {n} elements but only {self.end - self.pos} bytes remain")
        return n


def uvarint(n: int) -> bytes:
    if n < 0:
        raise ProtocolError(f"cannot encode negative unsigned varint {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n: int) -> bytes:
    return uvarint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def varlong(n: int) -> bytes:
    return uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def string(v: str | None, compact: bool) -> bytes:
    if v is None:
        return b"\x00" if compact else b"\xff\xff"
    b = v.encode("utf-8")
    if compact:
        return uvarint(len(b) + 1) + b
    if len(b) > 0x7FFF:
        raise ProtocolError(f"string of {len(b)} bytes is too long for an int16 length")
    return _I16.pack(len(b)) + b


def bytes_(v: bytes | bytearray | memoryview | None, compact: bool) -> list[bytes | bytearray | memoryview]:
    """Length prefix and payload as separate parts, so large payloads (records) are not copied here."""
    if v is None:
        return [b"\x00" if compact else b"\xff\xff\xff\xff"]
    n = len(v)
    return [uvarint(n + 1) if compact else _I32.pack(n), v]


def array_length(n: int | None, compact: bool) -> bytes:
    if n is None:
        return b"\x00" if compact else b"\xff\xff\xff\xff"
    return uvarint(n + 1) if compact else _I32.pack(n)
