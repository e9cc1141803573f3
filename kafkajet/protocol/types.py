"""Primitive types of the Kafka protocol: writers that return bytes, and a bounds-checked Reader.

Every read checks what is left before touching the buffer, so a truncated or lying frame becomes a
ProtocolError naming the field and offset, never an IndexError, struct.error or a giant allocation.
Writers raise ProtocolError for values the type cannot hold.

``label`` arguments name what is being read in error messages, e.g. "int32 'throttle_time_ms'".
"""

from __future__ import annotations

import struct

from kafkajet.errors import ProtocolError
from kafkajet.protocol.varint import encode_unsigned, zigzag

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

# Fixed-width types by their name in Kafka's JSON definitions.
FIXED: dict[str, struct.Struct] = {
    "int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64,
    "uint16": UINT16, "uint32": UINT32, "float64": FLOAT64,
}

UVARINT_MAX = 0xFFFFFFFF
UUID_SIZE = 16

_NULL_INT16 = INT16.pack(-1)
_NULL_INT32 = INT32.pack(-1)

BytesLike = bytes | bytearray | memoryview


# --- writers ---------------------------------------------------------------------------------------------


def fixed(st: struct.Struct, value: int | float, label: str = "value") -> bytes:
    try:
        return st.pack(value)
    except struct.error as e:
        raise ProtocolError(f"cannot encode {value!r} as {label}: {e}") from None


def boolean(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def uvarint(n: int) -> bytes:
    """Unsigned 32-bit base-128 varint, least significant group first (no zig-zag)."""
    if not 0 <= n <= UVARINT_MAX:
        raise ProtocolError(f"unsigned varint out of range: {n}")
    if n < 0x80:
        return bytes((n,))
    return encode_unsigned(n)


def varint(n: int) -> bytes:
    """Signed 32-bit zig-zag varint."""
    if not -(2**31) <= n < 2**31:
        raise ProtocolError(f"varint out of range: {n}")
    return encode_unsigned(zigzag(n))


def varlong(n: int) -> bytes:
    """Signed 64-bit zig-zag varint."""
    if not -(2**63) <= n < 2**63:
        raise ProtocolError(f"varlong out of range: {n}")
    return encode_unsigned(zigzag(n))


def string(value: str | None, compact: bool) -> bytes:
    """STRING / NULLABLE_STRING, or their COMPACT forms; None is written as null."""
    if value is None:
        return b"\x00" if compact else _NULL_INT16
    raw = value.encode("utf-8")
    if compact:
        return uvarint(len(raw) + 1) + raw
    if len(raw) > 0x7FFF:
        raise ProtocolError(f"string of {len(raw)} UTF-8 bytes does not fit an int16 length")
    return INT16.pack(len(raw)) + raw


def bytes_parts(value: BytesLike | None, compact: bool) -> tuple[bytes, BytesLike | None]:
    """BYTES / NULLABLE_BYTES (and COMPACT forms) as (length prefix, payload).

    Kept apart so a caller joining many parts copies a large payload (a record batch) exactly once.
    """
    if value is None:
        return (b"\x00" if compact else _NULL_INT32), None
    n = value.nbytes if isinstance(value, memoryview) else len(value)
    if compact:
        return uvarint(n + 1), value
    if n > 0x7FFFFFFF:
        raise ProtocolError(f"{n} bytes do not fit an int32 length")
    return INT32.pack(n), value


def bytes_(value: BytesLike | None, compact: bool) -> bytes:
    prefix, payload = bytes_parts(value, compact)
    return prefix if payload is None else prefix + bytes(payload)


def array_length(n: int | None, compact: bool) -> bytes:
    """ARRAY / COMPACT_ARRAY element count; None is a null array."""
    if n is None:
        return b"\x00" if compact else _NULL_INT32
    return uvarint(n + 1) if compact else INT32.pack(n)


def uuid(value: BytesLike) -> bytes:
    raw = bytes(value)
    if len(raw) != UUID_SIZE:
        raise ProtocolError(f"a uuid is {UUID_SIZE} bytes, got {len(raw)}")
    return raw


# --- reader ----------------------------------------------------------------------------------------------


class Reader:
    """A cursor over one frame. ``context`` (e.g. "Metadata v9 response") prefixes every error message."""

    __slots__ = ("data", "pos", "end", "context")

    def __init__(self, data: bytes | bytearray | memoryview, context: str = "data", *,
                 pos: int = 0, end: int | None = None) -> None:
        # One copy of a bytearray/memoryview payload buys immutable slices for the decoded strings and
        # records, which must not change when the network layer reuses its receive buffer.
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.pos = pos
        self.end = len(self.data) if end is None else end
        self.context = context

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, label: str) -> None:
        if n > self.end - self.pos:
            raise ProtocolError(
                f"truncated {self.context}: needed {n} bytes for {label} at offset {self.pos}, "
                f"{self.end - self.pos} left")

    def error(self, message: str) -> ProtocolError:
        return ProtocolError(f"{self.context}: {message} at offset {self.pos}")

    def fixed(self, st: struct.Struct, label: str) -> int | float:
        pos = self.pos
        if st.size > self.end - pos:
            self.need(st.size, label)
        self.pos = pos + st.size
        return st.unpack_from(self.data, pos)[0]  # type: ignore[no-any-return]

    def int8(self, label: str) -> int:
        return int(self.fixed(INT8, label))

    def int16(self, label: str) -> int:
        return int(self.fixed(INT16, label))

    def int32(self, label: str) -> int:
        return int(self.fixed(INT32, label))

    def int64(self, label: str) -> int:
        return int(self.fixed(INT64, label))

    def boolean(self, label: str) -> bool:
        self.need(1, label)
        value = self.data[self.pos]
        self.pos += 1
        return value != 0  # the spec: any non-zero byte reads as true

    def uuid(self, label: str) -> bytes:
        return self.raw(UUID_SIZE, label)

    def _varbits(self, label: str, max_bytes: int) -> int:
        result = shift = 0
        for _ in range(max_bytes):
            self.need(1, label)
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise self.error(f"varint for {label} is longer than {max_bytes} bytes")

    def uvarint(self, label: str) -> int:
        pos = self.pos
        if pos < self.end:
            b = self.data[pos]
            if b < 0x80:  # one byte: most lengths, counts and tag sections
                self.pos = pos + 1
                return b
        value = self._varbits(label, 5)
        if value > UVARINT_MAX:
            raise self.error(f"unsigned varint {value} for {label} overflows 32 bits")
        return value

    def varint(self, label: str) -> int:
        zz = self._varbits(label, 5)
        if zz > 0xFFFFFFFF:
            raise self.error(f"varint for {label} overflows 32 bits")
        return (zz >> 1) ^ -(zz & 1)

    def varlong(self, label: str) -> int:
        zz = self._varbits(label, 10)
        if zz > 0xFFFFFFFFFFFFFFFF:
            raise self.error(f"varlong for {label} overflows 64 bits")
        return (zz >> 1) ^ -(zz & 1)

    def raw(self, n: int, label: str) -> bytes:
        if n < 0:
            raise self.error(f"negative length {n} for {label}")
        pos = self.pos
        if n > self.end - pos:
            self.need(n, label)
        self.pos = pos + n
        return self.data[pos:pos + n]

    def _length(self, compact: bool, wide: bool, label: str) -> int:
        if compact:
            return self.uvarint(label) - 1
        return self.int32(label) if wide else self.int16(label)

    def _null_or_bad(self, n: int, nullable: bool, kind: str, label: str) -> None:
        if n == -1 and nullable:
            return
        if n == -1:
            raise self.error(f"null {kind} for non-nullable {label}")
        raise self.error(f"negative {kind} length {n} for {label}")

    def string(self, compact: bool, nullable: bool, label: str) -> str | None:
        n = self._length(compact, False, label)
        if n < 0:
            self._null_or_bad(n, nullable, "string", label)
            return None
        raw = self.raw(n, label)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.error(f"{label} is not valid UTF-8 ({e.reason} at byte {e.start})") from None

    def bytes_(self, compact: bool, nullable: bool, label: str) -> bytes | None:
        n = self._length(compact, True, label)
        if n < 0:
            self._null_or_bad(n, nullable, "bytes", label)
            return None
        return self.raw(n, label)

    def array_length(self, compact: bool, nullable: bool, min_element_size: int, label: str) -> int | None:
        """The element count, refused before any allocation if the elements cannot fit in what is left."""
        n = self._length(compact, True, label)
        if n < 0:
            self._null_or_bad(n, nullable, "array", label)
            return None
        if n * max(min_element_size, 1) > self.end - self.pos:
            raise self.error(
                f"array {label} claims {n} elements of at least {max(min_element_size, 1)} bytes "
                f"but only {self.end - self.pos} bytes remain")
        return n
