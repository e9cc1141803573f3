"""Decoding hostile input: every failure is a CorruptRecordError that says what was wrong."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet.errors import CorruptRecordError, ProtocolError
from kafkajet.protocol.varint import encode_varint
from kafkajet.records import (
    Compression,
    append_record,
    build_batch,
    decode_batches,
    decode_records,
    decompress,
    encode_batch,
)

CODECS = list(Compression)
RECORDS = [
    (1000, None, b"first value", None),
    (1003, b"key", b"v" * 300, [("trace", b"abc"), ("nil", None)]),
    (999, b"", None, [("é", b"")]),
]


def _batch(codec: Compression) -> bytes:
    return encode_batch(RECORDS, compression=codec, producer_id=9, producer_epoch=1, base_sequence=4)


def _recrc(wire: bytearray) -> bytes:
    """Fix up the CRC so a test reaches the check behind it."""
    wire[17:21] = crc32c.crc32c(bytes(wire[21:])).to_bytes(4, "big")
    return bytes(wire)


def test_corrupt_record_error_is_protocol_error() -> None:
    assert issubclass(CorruptRecordError, ProtocolError)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_any_flipped_byte_under_the_crc_is_caught(codec: Compression) -> None:
    wire = _batch(codec)
    for i in range(21, len(wire)):
        for mask in (0x01, 0x80):
            bad = bytearray(wire)
            bad[i] ^= mask
            with pytest.raises(CorruptRecordError, match="CRC mismatch.*expected 0x[0-9a-f]{8}, computed"):
                decode_batches(bytes(bad))


def test_flipped_crc_field_is_caught() -> None:
    wire = bytearray(_batch(Compression.NONE))
    wire[20] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batches(bytes(wire))


def test_leader_epoch_is_outside_the_crc() -> None:
    wire = bytearray(_batch(Compression.NONE))
    wire[12:16] = (7).to_bytes(4, "big")
    (batch,) = decode_batches(bytes(wire))
    assert batch.partition_leader_epoch == 7


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_truncation_at_every_cut(codec: Compression) -> None:
    one = _batch(codec)
    two = one + encode_batch(RECORDS[:1], compression=codec, base_offset=3)
    for cut in range(1, len(one)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            decode_batches(one[:cut])
        assert decode_batches(one[:cut], allow_partial_tail=True) == []
    full = decode_batches(one)
    for cut in range(len(one) + 1, len(two)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            decode_batches(two[:cut])
        assert decode_batches(two[:cut], allow_partial_tail=True) == full
    assert len(decode_batches(two, allow_partial_tail=True)) == 2
    assert decode_batches(b"") == []


def test_truncated_records_region_with_valid_crc() -> None:
    buf = bytearray()
    for i, (ts, key, value, headers) in enumerate(RECORDS):
        append_record(buf, i, ts - 1000, key, value, headers)
    for cut in range(len(buf)):
        wire = build_batch(buf[:cut], len(RECORDS), base_timestamp=1000, max_timestamp=1003)
        with pytest.raises(CorruptRecordError, match="truncated|disagrees|malformed"):
            decode_batches(wire)
        with pytest.raises(CorruptRecordError):
            decode_records(buf[:cut], len(RECORDS))


def _header_field(wire: bytes, offset: int, fmt: str, value: int) -> bytes:
    bad = bytearray(wire)
    struct.pack_into(fmt, bad, offset, value)
    return _recrc(bad)


def test_bad_header_fields() -> None:
    wire = _batch(Compression.NONE)
    with pytest.raises(CorruptRecordError, match="magic 1"):
        decode_batches(_header_field(wire, 16, ">b", 1))
    with pytest.raises(CorruptRecordError, match="less than the 49-byte minimum"):
        decode_batches(_header_field(wire, 8, ">i", 10))
    with pytest.raises(CorruptRecordError, match="less than the 49-byte minimum"):
        decode_batches(_header_field(wire, 8, ">i", -1), allow_partial_tail=True)
    with pytest.raises(CorruptRecordError, match="truncated batch"):
        decode_batches(_header_field(wire, 8, ">i", 1 << 30))
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        decode_batches(_header_field(wire, 21, ">h", 5))
    with pytest.raises(CorruptRecordError, match="record count 4 disagrees"):
        decode_batches(_header_field(wire, 57, ">i", 4))
    with pytest.raises(CorruptRecordError, match="record count 2 disagrees.*left after"):
        decode_batches(_header_field(wire, 57, ">i", 2))
    with pytest.raises(CorruptRecordError, match="negative record count"):
        decode_batches(_header_field(wire, 57, ">i", -5))
    with pytest.raises(CorruptRecordError, match="record count 2000000000 disagrees"):
        decode_batches(_header_field(wire, 57, ">i", 2_000_000_000))
    # verify_crc=False skips only the CRC
    bad = bytearray(wire)
    bad[-1] ^= 1
    assert decode_batches(bytes(bad), verify_crc=False)


def _region_batch(region: bytes, count: int = 1) -> bytes:
    return build_batch(region, count, base_timestamp=0, max_timestamp=0)


def _rec(body_hex: str) -> bytes:
    body = bytes.fromhex(body_hex)
    return encode_varint(len(body)) + body


# Record bodies are: attributes | timestampDelta | offsetDelta | keyLength [key] | valueLength [value] |
# headersCount [headers]; "01" is -1 (null), "02" is 1.
@pytest.mark.parametrize(("region", "message"), [
    (bytes.fromhex("0f") + bytes.fromhex("000000010100"), "truncated record 0: length -8"),
    (bytes.fromhex("7f") + bytes.fromhex("000000010100"), "truncated record 0: length -64 but"),
    (bytes.fromhex("0e") + bytes.fromhex("000000010100"), "truncated record 0: length 7 but 6 bytes remain"),
    (_rec("000000030100"), "negative key length -2"),
    (_rec("0000007f0100"), "negative key length -64"),
    (_rec("00000001080100"), "value length 4 but only 2 bytes left"),
    (_rec("000000010101"), "header count -1 impossible"),
    (_rec("00000001010200"), "header count 1 impossible with 1 bytes"),
    (_rec("0000000101020101"), "null header key"),
    (_rec("000000010102" + "02ff" + "01"), "header key is not valid UTF-8"),
    (_rec("000000010100ff"), "fields end 1 bytes early"),
    (_rec("00" + "ff" * 10 + "01" + "00010100"), "timestamp delta varint longer than 10"),
    (_rec("0000" + "ffffffff1f" + "010100"), "offset delta varint overflows 32"),
    (bytes.fromhex("ffffffffff01000000010101"), "record length varint longer than 5"),
])
def test_malformed_records(region: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_batches(_region_batch(region))
    with pytest.raises(CorruptRecordError, match=message):
        decode_records(region, 1)


def test_huge_header_count_does_not_allocate() -> None:
    # 2**31 - 1 headers claimed in an 11-byte record: rejected before looping.
    region = _rec("0000000101" + "feffffff0f" + "00")
    with pytest.raises(CorruptRecordError, match="header count 2147483647 impossible"):
        decode_batches(_region_batch(region))


@pytest.mark.parametrize("codec", CODECS[1:], ids=[c.name for c in CODECS[1:]])
def test_decompression_failures(codec: Compression) -> None:
    for junk in (b"", b"\x00", b"not compressed at all", bytes(range(256)) * 4):
        if codec == Compression.SNAPPY and junk == b"\x00":
            continue  # a valid raw snappy stream: zero bytes
        bad = bytearray(_region_batch(junk))
        bad[22] = codec  # attributes low byte
        with pytest.raises(CorruptRecordError, match=f"{codec.name.lower()} decompression failed"):
            decode_batches(_recrc(bad))


@pytest.mark.parametrize("stream", [
    b"\xff\xff\xff\xff\x0f" + b"\x00" * 10,  # raw snappy claiming 4 GiB: cramjam would try to allocate it
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x06\xff\xff\xff\xff\x0f\x00",
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f\xff\xff\xff\x00",
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00",
    b"\x82SNAPPY\x00\x00\x00",
])
def test_snappy_bogus_lengths(stream: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="snappy decompression failed"):
        decompress(Compression.SNAPPY, stream)


def test_zstd_and_lz4_bogus_content_sizes() -> None:
    zstd_frame = b"\x28\xb5\x2f\xfd\xe0" + struct.pack("<Q", 1 << 40) + b"\x01\x00\x00"
    with pytest.raises(CorruptRecordError, match="zstd decompression failed"):
        decompress(Compression.ZSTD, zstd_frame)
    lz4_block = b"\x04\x22\x4d\x18\x60\x40\x82" + struct.pack("<I", 60000) + b"\x00" * 10
    with pytest.raises(CorruptRecordError, match="lz4 decompression failed"):
        decompress(Compression.LZ4, lz4_block)


def test_unknown_codec_in_decompress() -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec 6"):
        decompress(6, b"")


_fuzz = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_corrupt(data: bytes, **kwargs: bool) -> None:
    try:
        decode_batches(data, **kwargs)
    except CorruptRecordError:
        pass


@_fuzz
@given(st.binary(max_size=300), st.booleans())
def test_fuzz_random_bytes(data: bytes, partial: bool) -> None:
    _only_corrupt(data, allow_partial_tail=partial, verify_crc=False)
    _only_corrupt(data, allow_partial_tail=partial)


@_fuzz
@given(st.sampled_from(CODECS), st.data())
def test_fuzz_mutated_valid_batches(codec: Compression, data: st.DataObject) -> None:
    wire = bytearray(_batch(codec))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(wire) - 1))
        wire[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        wire = wire[:data.draw(st.integers(0, len(wire)))]
    # Past the CRC the decoder must still reject garbage cleanly, so fix the CRC up half the time.
    _only_corrupt(_recrc(wire) if len(wire) >= 21 and data.draw(st.booleans()) else bytes(wire),
                  allow_partial_tail=data.draw(st.booleans()))
    _only_corrupt(bytes(wire), verify_crc=False)


@_fuzz
@given(st.binary(max_size=200), st.integers(-3, 40))
def test_fuzz_decode_records(region: bytes, count: int) -> None:
    try:
        decode_records(region, count)
    except CorruptRecordError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CODECS[1:]), st.binary(max_size=200))
def test_fuzz_decompress(codec: Compression, data: bytes) -> None:
    try:
        decompress(codec, data)
    except CorruptRecordError:
        pass
