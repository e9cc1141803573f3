"""Primitive types of the protocol codec (kafkajet.protocol.types), tested alone."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkajet.errors import ProtocolError
from kafkajet.protocol import types as t

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}


# --- round trips -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(INT_RANGES))
@given(data=st.data())
def test_fixed_width_integers_round_trip(name: str, data: st.DataObject) -> None:
    lo, hi = INT_RANGES[name]
    value = data.draw(st.integers(lo, hi))
    encoded = t.fixed(t.FIXED[name], value, name)
    assert len(encoded) == t.FIXED[name].size
    r = t.Reader(encoded)
    assert r.fixed(t.FIXED[name], name) == value
    assert r.remaining == 0


@pytest.mark.parametrize("name", sorted(INT_RANGES))
def test_fixed_width_integers_refuse_out_of_range_values(name: str) -> None:
    lo, hi = INT_RANGES[name]
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ProtocolError, match=f"cannot encode {bad} as {name}"):
            t.fixed(t.FIXED[name], bad, name)


@given(st.floats(allow_nan=False))
def test_float64_round_trip(value: float) -> None:
    assert t.Reader(t.fixed(t.FLOAT64, value)).fixed(t.FLOAT64, "f") == value


def test_big_endian_on_the_wire() -> None:
    assert t.fixed(t.INT32, 1).hex() == "00000001"
    assert t.fixed(t.INT16, -2).hex() == "fffe"
    assert t.fixed(t.INT64, 258).hex() == "0000000000000102"
    assert t.fixed(t.UINT16, 65535).hex() == "ffff"
    assert t.fixed(t.FLOAT64, 1.0).hex() == "3ff0000000000000"


@given(st.booleans())
def test_bool_round_trip(value: bool) -> None:
    assert t.Reader(t.boolean(value)).boolean("b") is value


def test_any_non_zero_byte_reads_as_true() -> None:
    assert t.Reader(b"\x02").boolean("b") is True
    assert t.Reader(b"\x00").boolean("b") is False


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(n: int) -> None:
    encoded = t.uvarint(n)
    assert len(encoded) == max(1, (n.bit_length() + 6) // 7)
    r = t.Reader(encoded)
    assert r.uvarint("u") == n and r.remaining == 0


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    r = t.Reader(t.varint(n))
    assert r.varint("v") == n and r.remaining == 0


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    r = t.Reader(t.varlong(n))
    assert r.varlong("v") == n and r.remaining == 0


def test_varint_vectors() -> None:
    # Zig-zag as in protocol-guide.md Part 4: 0->0, -1->1, 1->2, -2->3; then base-128, low group first.
    for n, hx in [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
                  (150, "ac02"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")]:
        assert t.varint(n).hex() == hx, n
    # Unsigned: no zig-zag. 300 = 0b10_0101100 -> 0xac (0x2c | 0x80), 0x02.
    for n, hx in [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**32 - 1, "ffffffff0f")]:
        assert t.uvarint(n).hex() == hx, n
    assert t.varlong(-(2**63)).hex() == "ff" * 9 + "01"


def test_varints_refuse_values_their_width_cannot_hold() -> None:
    for call, bad in [(t.uvarint, -1), (t.uvarint, 2**32), (t.varint, 2**31), (t.varint, -(2**31) - 1),
                      (t.varlong, 2**63)]:
        with pytest.raises(ProtocolError, match="out of range"):
            call(bad)


@given(st.one_of(st.none(), st.text(max_size=40)), st.booleans())
def test_strings_round_trip(value: str | None, compact: bool) -> None:
    r = t.Reader(t.string(value, compact))
    assert r.string(compact, True, "s") == value and r.remaining == 0


@given(st.one_of(st.none(), st.binary(max_size=40)), st.booleans())
def test_bytes_round_trip(value: bytes | None, compact: bool) -> None:
    encoded = t.bytes_(value, compact)
    r = t.Reader(encoded)
    assert r.bytes_(compact, True, "b") == value and r.remaining == 0
    prefix, payload = t.bytes_parts(value, compact)
    assert prefix + (payload or b"") == encoded


@given(st.one_of(st.none(), st.integers(0, 10_000)), st.booleans())
def test_array_lengths_round_trip(n: int | None, compact: bool) -> None:
    encoded = t.array_length(n, compact) + bytes(n or 0)
    assert t.Reader(encoded).array_length(compact, True, 1, "a") == n


@given(st.binary(min_size=16, max_size=16))
def test_uuid_round_trip(raw: bytes) -> None:
    assert t.Reader(t.uuid(raw)).uuid("u") == raw


def test_string_and_bytes_encodings_by_hand() -> None:
    assert t.string("kj", compact=False).hex() == "00026b6a"  # int16 length 2
    assert t.string("kj", compact=True).hex() == "036b6a"  # uvarint length+1 = 3
    assert t.string(None, compact=False).hex() == "ffff"  # int16 -1
    assert t.string(None, compact=True).hex() == "00"  # uvarint 0
    assert t.string("é", compact=False).hex() == "0002c3a9"  # the length counts UTF-8 bytes
    assert t.bytes_(b"\x01", compact=False).hex() == "0000000101"
    assert t.bytes_(None, compact=False).hex() == "ffffffff"
    assert t.bytes_(b"", compact=True).hex() == "01"
    assert t.array_length(None, compact=False).hex() == "ffffffff"
    assert t.array_length(2, compact=True).hex() == "03"


def test_bytes_parts_do_not_copy_the_payload() -> None:
    payload = memoryview(bytearray(b"records"))
    prefix, part = t.bytes_parts(payload, compact=False)
    assert part is payload and prefix == struct.pack(">i", 7)


# --- bad input -------------------------------------------------------------------------------------------


def test_truncated_reads_name_the_field_offset_and_what_is_left() -> None:
    r = t.Reader(b"\x00\x00\x00\x01\x00\x00\x00", "Metadata v9 response")
    r.int32("int32 'correlation_id'")
    with pytest.raises(ProtocolError) as e:
        r.int32("int32 'throttle_time_ms'")
    assert str(e.value) == ("truncated Metadata v9 response: needed 4 bytes for int32 'throttle_time_ms' "
                            "at offset 4, 3 left")


@pytest.mark.parametrize("read", ["int8", "int16", "int32", "int64", "boolean", "uuid", "uvarint", "varint",
                                  "varlong"])
def test_every_fixed_read_on_empty_input_is_a_protocol_error(read: str) -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        getattr(t.Reader(b""), read)("x")


def test_overlong_and_overflowing_varints() -> None:
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        t.Reader(b"\xff" * 6).uvarint("len")
    with pytest.raises(ProtocolError, match="longer than 10 bytes"):
        t.Reader(b"\xff" * 11).varlong("v")
    with pytest.raises(ProtocolError, match="overflows 32 bits"):
        t.Reader(b"\xff\xff\xff\xff\x1f").uvarint("len")  # 35 significant bits
    with pytest.raises(ProtocolError, match="truncated"):
        t.Reader(b"\x80\x80").uvarint("len")  # continuation bit set on the last byte


def test_impossible_lengths_are_refused_before_allocating() -> None:
    with pytest.raises(ProtocolError, match="negative string length -5 for 's'"):
        t.Reader(struct.pack(">h", -5)).string(False, True, "'s'")
    with pytest.raises(ProtocolError, match="null string for non-nullable 's'"):
        t.Reader(struct.pack(">h", -1)).string(False, False, "'s'")
    with pytest.raises(ProtocolError, match="null string for non-nullable"):
        t.Reader(b"\x00").string(True, False, "'s'")
    with pytest.raises(ProtocolError, match="needed 32767 bytes for 's' at offset 2, 1 left"):
        t.Reader(struct.pack(">h", 32767) + b"x").string(False, False, "'s'")
    with pytest.raises(ProtocolError, match="negative bytes length -2"):
        t.Reader(struct.pack(">i", -2)).bytes_(False, True, "'b'")
    with pytest.raises(ProtocolError, match="needed 2147483646 bytes"):
        t.Reader(t.uvarint(2**31 - 1)).bytes_(True, True, "'b'")
    with pytest.raises(ProtocolError, match="negative array length -5 for 'topics'"):
        t.Reader(struct.pack(">i", -5)).array_length(False, True, 1, "'topics'")
    with pytest.raises(ProtocolError, match="claims 2000000000 elements of at least 6 bytes but only 10"):
        t.Reader(struct.pack(">i", 2_000_000_000) + bytes(10)).array_length(False, False, 6, "'topics'")
    # An element needs at least its minimum size: 2 elements of 6 bytes do not fit in 11.
    with pytest.raises(ProtocolError, match="claims 2 elements"):
        t.Reader(struct.pack(">i", 2) + bytes(11)).array_length(False, False, 6, "'topics'")
    assert t.Reader(struct.pack(">i", 2) + bytes(12)).array_length(False, False, 6, "'topics'") == 2


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="'s' is not valid UTF-8"):
        t.Reader(b"\x00\x02\xc3\x28").string(False, False, "'s'")


def test_writers_refuse_what_the_wire_cannot_carry() -> None:
    with pytest.raises(ProtocolError, match="does not fit an int16 length"):
        t.string("x" * 40_000, compact=False)
    assert len(t.string("x" * 40_000, compact=True)) == 40_003  # compact lengths are varints
    with pytest.raises(ProtocolError, match="a uuid is 16 bytes, got 3"):
        t.uuid(b"abc")


def test_reader_accepts_memoryview_and_bytearray() -> None:
    data = bytearray(t.string("abc", compact=True))
    assert t.Reader(memoryview(data)).string(True, False, "s") == "abc"
    assert t.Reader(data).string(True, False, "s") == "abc"


@given(st.binary(max_size=24), st.booleans(), st.booleans())
def test_random_bytes_never_raise_anything_but_protocol_error(data: bytes, compact: bool, nullable: bool) -> None:
    for read in (lambda r: r.string(compact, nullable, "s"), lambda r: r.bytes_(compact, nullable, "b"),
                 lambda r: r.array_length(compact, nullable, 1, "a"), lambda r: r.varlong("v"),
                 lambda r: r.varint("v"), lambda r: r.uvarint("u")):
        try:
            read(t.Reader(data))
        except ProtocolError:
            pass
