"""kafkajet.records: varints, golden bytes, round trips across codecs and flags, size bound, codecs."""

from __future__ import annotations

import gzip
import struct
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet.errors import CorruptRecordError
from kafkajet.protocol.varint import (
    TABLE_SIZE,
    VARINT,
    encode_varint,
    encode_varint_slow,
    read_varint,
    varint_size,
)
from kafkajet.records import (
    BATCH_HEADER_SIZE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Compression,
    Record,
    append_record,
    build_batch,
    build_control_batch,
    compress,
    control_record_type,
    decode_batches,
    decode_records,
    decompress,
    encode_batch,
    encode_control_record,
    encode_record,
    record_size_upper_bound,
)

CODECS = list(Compression)
INT64 = (-(1 << 63), (1 << 63) - 1)

# --- varints -----------------------------------------------------------------------------------------

# record-format.md 3.3
VARINT_VECTORS = [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804")]


@pytest.mark.parametrize(("n", "hexed"), VARINT_VECTORS)
def test_zigzag_vectors(n: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert encode_varint(n) == raw
    assert encode_varint_slow(n) == raw
    assert read_varint(raw, 0, len(raw), "x") == (n, len(raw))
    assert varint_size(n) == len(raw)


@given(st.integers(*INT64))
def test_varlong_round_trip(n: int) -> None:
    raw = encode_varint(n)
    assert len(raw) == varint_size(n) <= 10
    assert read_varint(raw, 0, len(raw), "x", 10) == (n, len(raw))


def test_varint_table_matches_slow_encoder() -> None:
    assert all(VARINT[n] == encode_varint_slow(n) for n in range(TABLE_SIZE))


def test_varint_extremes() -> None:
    assert encode_varint(-(1 << 31)) == bytes.fromhex("ffffffff0f")
    assert encode_varint((1 << 63) - 1) == bytes.fromhex("feffffffffffffffff01")
    with pytest.raises(ValueError):
        encode_varint(1 << 63)
    too_long = bytes.fromhex("ffffffffff01")
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        read_varint(too_long, 0, len(too_long), "x")
    with pytest.raises(CorruptRecordError, match="overflows 32"):
        read_varint(bytes.fromhex("ffffffff1f"), 0, 5, "x")
    with pytest.raises(CorruptRecordError, match="past the end"):
        read_varint(b"\x80\x80", 0, 2, "x")


# --- golden bytes --------------------------------------------------------------------------------------

# One record, key null, value b"hi", timestamp 1000, no headers, no producer id, uncompressed.
# Record body: attributes 00 | timestampDelta 0 -> 00 | offsetDelta 0 -> 00 | keyLength -1 -> 01 |
#   valueLength 2 -> 04 | "hi" 68 69 | headersCount 0 -> 00                      = 8 bytes
# Record: length 8 -> zig-zag 16 -> 10, then the body                             = 9 bytes
# Header: baseOffset 0 | batchLength 61 - 12 + 9 = 58 = 0x3a | partitionLeaderEpoch -1 | magic 2 |
#   crc | attributes 0 | lastOffsetDelta 0 | baseTimestamp 1000 = 0x3e8 | maxTimestamp 0x3e8 |
#   producerId -1 | producerEpoch -1 | baseSequence -1 | recordsCount 1
GOLDEN_RECORD = bytes.fromhex("10" "00" "00" "00" "01" "04" "6869" "00")
GOLDEN_AFTER_CRC = bytes.fromhex(
    "0000" "00000000" "00000000000003e8" "00000000000003e8" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
) + GOLDEN_RECORD


def _reference_crc32c(data: bytes) -> int:
    # Bitwise CRC-32C (reflected polynomial 0x82F63B78), independent of the crc32c package.
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_golden_batch() -> None:
    assert _reference_crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    crc = _reference_crc32c(GOLDEN_AFTER_CRC)
    golden = bytes.fromhex("0000000000000000" "0000003a" "ffffffff" "02") + crc.to_bytes(4, "big") + GOLDEN_AFTER_CRC
    assert encode_record(0, 0, None, b"hi", None) == GOLDEN_RECORD
    assert encode_batch([(1000, None, b"hi", None)]) == golden
    buf = bytearray()
    assert append_record(buf, 0, 0, None, b"hi", []) == len(GOLDEN_RECORD)
    assert build_batch(buf, 1, base_timestamp=1000, max_timestamp=1000) == golden
    (batch,) = decode_batches(golden)
    assert (batch.batch_length, batch.crc, batch.records_count) == (58, crc, 1)
    assert batch.records == [Record(0, 1000, None, b"hi", [])]


def test_header_size_and_layout() -> None:
    wire = encode_batch([(5, b"k", b"v", [("h", b"x")])], producer_id=0x0102030405060708, producer_epoch=0x0A0B,
                        base_sequence=0x0C0D0E0F, base_offset=77, partition_leader_epoch=9)
    assert BATCH_HEADER_SIZE == 61
    assert struct.unpack_from(">qiib", wire) == (77, len(wire) - 12, 9, 2)
    assert int.from_bytes(wire[17:21], "big") == crc32c.crc32c(wire[21:])
    assert struct.unpack_from(">qhi", wire, 43) == (0x0102030405060708, 0x0A0B, 0x0C0D0E0F)


# --- round trips -----------------------------------------------------------------------------------------

_big = st.builds(lambda n, b: b * n, st.integers(16_000, 70_000), st.binary(min_size=1, max_size=3))
_blob = st.one_of(st.none(), st.just(b""), st.binary(max_size=200), _big)
_small_blob = st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
_headers = st.lists(st.tuples(st.text(max_size=12), _small_blob), max_size=4)
_timestamps = st.one_of(st.integers(0, 10_000), st.integers(-(1 << 61), 1 << 61))
_record_tuples = st.lists(st.tuples(_timestamps, _blob, _blob, st.one_of(st.none(), _headers)), max_size=8)
_batch_kwargs = st.fixed_dictionaries({
    "compression": st.sampled_from(CODECS),
    "producer_id": st.one_of(st.just(-1), st.integers(*INT64)),
    "producer_epoch": st.integers(-(1 << 15), (1 << 15) - 1),
    "base_sequence": st.integers(-(1 << 31), (1 << 31) - 1),
    "transactional": st.booleans(),
    "control": st.booleans(),
    "timestamp_type": st.sampled_from([0, 1]),
    "base_offset": st.integers(0, 1 << 62),
    "partition_leader_epoch": st.integers(-1, (1 << 31) - 1),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_record_tuples, _batch_kwargs)
def test_round_trip_every_field(records: list, kwargs: dict) -> None:
    wire = encode_batch(records, **kwargs)
    (batch,) = decode_batches(wire)
    n = len(records)
    assert batch.base_offset == kwargs["base_offset"]
    assert batch.batch_length == len(wire) - 12
    assert batch.partition_leader_epoch == kwargs["partition_leader_epoch"]
    assert batch.magic == 2
    assert batch.compression == kwargs["compression"]
    assert batch.timestamp_type == kwargs["timestamp_type"]
    assert batch.is_transactional == kwargs["transactional"]
    assert batch.is_control == kwargs["control"]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        kwargs["producer_id"], kwargs["producer_epoch"], kwargs["base_sequence"])
    assert batch.records_count == n
    assert batch.last_offset_delta == n - 1
    assert batch.base_timestamp == (records[0][0] if records else -1)
    assert batch.max_timestamp == (max(r[0] for r in records) if records else -1)
    log_append = kwargs["timestamp_type"] == 1
    assert batch.records == [
        Record(kwargs["base_offset"] + i, batch.max_timestamp if log_append else ts, key, value, list(headers or []))
        for i, (ts, key, value, headers) in enumerate(records)
    ]


_deltas = st.tuples(st.one_of(st.integers(0, 300), st.integers(0, (1 << 31) - 1)),
                    st.one_of(st.integers(-50, 20_000), st.integers(*INT64)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_deltas, _blob, _blob, st.one_of(st.none(), _headers)), min_size=1, max_size=6))
def test_append_record_any_deltas_and_size_bound(records: list) -> None:
    buf = bytearray()
    for (od, td), key, value, headers in records:
        before = len(buf)
        written = append_record(buf, od, td, key, value, headers)
        assert written == len(buf) - before
        assert bytes(buf[before:]) == encode_record(od, td, key, value, headers)
        bound = record_size_upper_bound(-1 if key is None else len(key), -1 if value is None else len(value), headers)
        assert bound >= written
    decoded = decode_records(buf, len(records), base_offset=100, base_timestamp=-7)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (100 + od, -7 + td, key, value, list(headers or [])) for (od, td), key, value, headers in records
    ]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 20_000), st.integers(-1, 40_000), st.integers(-1, 40_000))
def test_size_bound_worst_case_deltas(slack: int, klen: int, vlen: int) -> None:
    key = None if klen < 0 else b"k" * klen
    value = None if vlen < 0 else b"v" * vlen
    worst = encode_record((1 << 31) - 1, -(1 << 63), key, value, [("é" * 3, None), ("h", b"x" * slack)])
    assert record_size_upper_bound(klen, vlen, [("é" * 3, None), ("h", b"x" * slack)]) >= len(worst)


def test_fast_and_general_paths_agree() -> None:
    # The fast path uses pre-joined tables; compare it against the general encoder around every boundary.
    from kafkajet.records.record import _append_general

    for od in (0, 1, 63, 64, 8191, 8192, TABLE_SIZE - 1, TABLE_SIZE):
        for td in (0, 63, 64, TABLE_SIZE - 1, TABLE_SIZE, -1):
            for key in (None, b"", b"k" * 16, b"k" * 8191, b"k" * 8192):
                for value in (b"", b"v" * 100, b"v" * 8191, b"v" * 8192):
                    fast, general = bytearray(), bytearray()
                    assert append_record(fast, od, td, key, value, None) == _append_general(
                        general, od, td, key, value, None)
                    assert fast == general


def test_multiple_batches_and_memoryview_input() -> None:
    a = encode_batch([(1, b"a", b"1", None)], compression=Compression.GZIP)
    b = encode_batch([(2, None, b"2", [("x", None)])], compression=Compression.ZSTD, base_offset=1)
    batches = decode_batches(memoryview(bytearray(a + b)))
    assert [r.value for batch in batches for r in batch.records] == [b"1", b"2"]
    assert [r.offset for batch in batches for r in batch.records] == [0, 1]


def test_build_batch_accepts_bytearray_and_last_offset_delta() -> None:
    buf = bytearray()
    append_record(buf, 0, 0, None, b"x", None)
    append_record(buf, 5, 3, None, b"y", None)
    wire = build_batch(buf, 2, base_timestamp=10, max_timestamp=13, last_offset_delta=5)
    (batch,) = decode_batches(wire)
    assert batch.last_offset_delta == 5
    assert [(r.offset, r.timestamp) for r in batch.records] == [(0, 10), (5, 13)]


def test_build_batch_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="codec"):
        build_batch(b"", 0, base_timestamp=0, max_timestamp=0, compression=7)
    with pytest.raises(ValueError, match="out of range"):
        build_batch(b"", 0, base_timestamp=0, max_timestamp=0, producer_epoch=1 << 15)
    with pytest.raises(ValueError, match="offset delta"):
        append_record(bytearray(), 1 << 31, 0, None, b"", None)


# --- control batches -------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit: bool) -> None:
    key, value = encode_control_record(commit, coordinator_epoch=3)
    assert key == struct.pack(">hh", 0, 1 if commit else 0)
    assert value == struct.pack(">hi", 0, 3)
    wire = build_control_batch(commit, producer_id=42, producer_epoch=2, timestamp=99, coordinator_epoch=3)
    (batch,) = decode_batches(wire)
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.records_count) == (42, 2, 1)
    assert control_record_type(batch.records[0].key) == (CONTROL_COMMIT if commit else CONTROL_ABORT)
    with pytest.raises(CorruptRecordError):
        control_record_type(b"\x00")


# --- codecs -------------------------------------------------------------------------------------------


def test_compression_from_name() -> None:
    assert [Compression.from_name(n) for n in ("none", "gzip", "snappy", "lz4", "zstd")] == CODECS
    assert Compression.from_name("LZ4") is Compression.LZ4
    with pytest.raises(ValueError, match="brotli"):
        Compression.from_name("brotli")


_payloads = st.one_of(st.binary(max_size=2000), st.builds(lambda n, b: b * n, st.integers(0, 200_000),
                                                          st.binary(min_size=1, max_size=7)))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), _payloads)
def test_codec_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_codec_framing() -> None:
    import lz4.frame
    import snappy
    import zstandard

    data = b"kafkajet " * 20_000  # 180 000 bytes: several xerial and lz4 blocks
    gz = compress(Compression.GZIP, data)
    assert gzip.decompress(gz) == data
    assert decompress(Compression.GZIP, gzip.compress(data[:5]) + gzip.compress(data[5:])) == data

    sn = compress(Compression.SNAPPY, data)
    assert sn[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    first_block = int.from_bytes(sn[16:20], "big")
    assert snappy.uncompress(sn[20:20 + first_block]) == data[:32 * 1024]
    assert decompress(Compression.SNAPPY, snappy.compress(data)) == data  # raw snappy, as librdkafka writes

    lz = compress(Compression.LZ4, data)
    assert lz[:7] == bytes.fromhex("04224d18604082")
    assert lz.endswith(b"\x00\x00\x00\x00")
    assert lz4.frame.decompress(lz) == data  # validates the header checksum
    assert decompress(Compression.LZ4, lz4.frame.compress(data, block_linked=True, content_checksum=True)) == data

    zs = compress(Compression.ZSTD, data)
    assert zstandard.ZstdDecompressor().decompress(zs) == data
    streamed = zstandard.ZstdCompressor().compressobj()  # no content size in the frame, like zstd-jni streams
    assert decompress(Compression.ZSTD, streamed.compress(data) + streamed.flush()) == data


def test_lz4_incompressible_block_stored_raw() -> None:
    import os

    import lz4.frame

    data = os.urandom(70_000)
    lz = compress(Compression.LZ4, data)
    assert int.from_bytes(lz[7:11], "little") == 0x80000000 | 65536
    assert lz4.frame.decompress(lz) == data
    assert decompress(Compression.LZ4, lz) == data


def test_codec_levels() -> None:
    data = bytes(range(200)) * 500
    for codec in (Compression.GZIP, Compression.ZSTD):
        assert decompress(codec, compress(codec, data, level=1)) == data
        assert len(compress(codec, data, level=1)) >= len(compress(codec, data))
    assert compress(Compression.GZIP, data, level=-1) == compress(Compression.GZIP, data)  # Java's "default"


def test_lz4_levels_keep_javas_frame_and_take_any_buffer() -> None:
    import random

    import lz4.frame

    rng = random.Random(3)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(2, 8))) for _ in range(300)]
    # Several 64 KiB blocks, the last ones incompressible (stored raw), as a view: what a batch hands over.
    data = memoryview(bytearray(b" ".join(rng.choice(words) for _ in range(40_000)) + rng.randbytes(70_000)))
    default = compress(Compression.LZ4, data)
    assert compress(Compression.LZ4, data, level=9) == default  # Java's default level: the fast compressor
    for level in (3, 12, 17):
        hc = compress(Compression.LZ4, data, level=level)
        assert hc[:7] == bytes.fromhex("04224d18604082") and hc.endswith(b"\x00\x00\x00\x00")
        assert lz4.frame.decompress(hc) == data and decompress(Compression.LZ4, hc) == data
        assert len(hc) < len(default), level


def test_codec_empty_input() -> None:
    for codec in CODECS:
        assert decompress(codec, compress(codec, b"")) == b""
    (batch,) = decode_batches(encode_batch([], compression=Compression.SNAPPY))
    assert batch.records == [] and batch.records_count == 0


# --- append_run: the batch path's encoder must write exactly what append_record writes ---------------------

# Near 8 KiB, past two-byte length varints. Built from a short pattern: Hypothesis drawing 8 KiB byte by
# byte spent most of a minute of the suite generating data and threw most draws away as too large.
_big = st.builds(lambda n, b: (b * n)[:n], st.integers(min_value=8190, max_value=8200),
                 st.binary(min_size=1, max_size=7))
_run_record = st.tuples(
    st.integers(min_value=-5, max_value=40_000),  # timestamp delta: negative and past the varint tables too
    st.one_of(st.none(), st.binary(max_size=20), _big),
    st.one_of(st.none(), st.binary(max_size=30), _big),
    st.one_of(st.none(), st.lists(st.tuples(st.sampled_from(["a", "trace-id", "é"]),
                                            st.one_of(st.none(), st.binary(max_size=10))), max_size=3)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_run_record, min_size=1, max_size=12), st.integers(min_value=0, max_value=12),
       st.integers(min_value=-1, max_value=1), st.integers(min_value=0, max_value=3),
       st.sampled_from([0, 1, 127, 128, 16_380]))
def test_append_run_writes_what_append_record_writes(records: list, cut: int, slack: int, pos: int,
                                                     first_offset: int) -> None:
    from kafkajet.records import append_run

    base_ts = 1_700_000_000_000
    timestamps = [base_ts + d for d, _, _, _ in records]
    keys = [k for _, k, _, _ in records]
    values = [v for _, _, v, _ in records]
    headers = [h for _, _, _, h in records]
    indices = list(range(len(records)))[::-1]  # runs follow `indices`, not input order
    pos = min(pos, len(indices))
    # A limit right at (or one byte either side of) the end of the cut-th record: the fit rule's edge.
    sizes = [len(encode_record(first_offset + j, timestamps[i] - base_ts, keys[i], values[i], headers[i]))
             for j, i in enumerate(indices[pos:])]
    limit = len(b"prefix") + sum(sizes[:cut]) + slack
    buf = bytearray(b"prefix")
    end, offset, max_ts = append_run(buf, limit, first_offset, base_ts, indices, pos, timestamps, keys, values,
                                     headers)
    # The reference: one append_record per record, the same fit rule as ProducerBatch (the first record of an
    # empty batch always goes in; any later one must keep the buffer within the limit).
    ref = bytearray(b"prefix")
    ref_pos, ref_offset, ref_max = pos, first_offset, -1
    while ref_pos < len(indices):
        i = indices[ref_pos]
        mark = len(ref)
        append_record(ref, ref_offset, timestamps[i] - base_ts, keys[i], values[i], headers[i])
        if len(ref) > limit and ref_offset:
            del ref[mark:]
            break
        ref_offset += 1
        ref_max = max(ref_max, timestamps[i])
        ref_pos += 1
    assert (bytes(buf), end, offset, max_ts) == (bytes(ref), ref_pos, ref_offset, ref_max)


# --- append_columns: the column-wise encoder must write exactly what append_record writes ------------------

_lengths = st.one_of(st.integers(min_value=0, max_value=300), st.sampled_from([63, 64, 8000, 8119]))


_header_lists = st.one_of(st.none(), st.lists(st.tuples(st.sampled_from(["a", "trace-id", "é"]),
                                                        st.one_of(st.none(), st.binary(max_size=10))), max_size=3))


@st.composite
def _column_runs(draw: st.DrawFn) -> tuple[list[bytes] | None, list[bytes], list[Any] | None]:
    n = draw(st.integers(min_value=1, max_value=40))
    uniform = draw(st.booleans())  # every record the same size takes a shortcut of its own

    def column() -> list[bytes]:
        if uniform:  # one length, and a different content per record, so a record put in another's place shows
            length = draw(_lengths)
            return [bytes([i % 251]) * length for i in range(n)]
        return [bytes([i % 251]) * draw(_lengths) for i in range(n)]

    values = column()
    keys = column() if draw(st.booleans()) else None
    headers = None
    if draw(st.booleans()):
        headers = [draw(_header_lists)] * n if uniform else [draw(_header_lists) for _ in range(n)]
    return keys, values, headers


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_column_runs(), st.integers(min_value=0, max_value=40), st.integers(min_value=-1, max_value=1),
       st.sampled_from([0, 1, 63, 64, 8191, 16_370]), st.sampled_from([0, 1, 63, 64, 16_383]))
def test_append_columns_writes_what_append_record_writes(run: tuple, cut: int, slack: int, first_offset: int,
                                                         delta: int) -> None:
    from kafkajet.records import TABLE_SIZE, append_columns
    from kafkajet.records.record import encode_headers

    keys, values, headers = run
    n = len(values)
    hs = [None] * n if headers is None else headers
    sizes = [len(encode_record(first_offset + j, delta, None if keys is None else keys[j], values[j], hs[j]))
             for j in range(n)]
    limit = len(b"prefix") + sum(sizes[:cut]) + slack
    buf = bytearray(b"prefix")
    sections = None if headers is None else [encode_headers(h) if h else b"\x00" for h in headers]
    went = append_columns(buf, limit, first_offset, delta, keys, values,
                          None if keys is None else [len(k) for k in keys], [len(v) for v in values],
                          sections, None if sections is None else [len(x) for x in sections])
    ref = bytearray(b"prefix")
    ref_went = 0
    for j in range(min(n, TABLE_SIZE - first_offset)):  # past the tables the caller takes the record loop
        mark = len(ref)
        append_record(ref, first_offset + j, delta, None if keys is None else keys[j], values[j], hs[j])
        if len(ref) > limit and first_offset + j:
            del ref[mark:]
            break
        ref_went += 1
    assert (bytes(buf), went) == (bytes(ref), ref_went)


@pytest.mark.parametrize("compression", [0, 3])
def test_seal_in_place_is_build_batch_without_the_copy(compression: int) -> None:
    from kafkajet.records import BATCH_HEADER_SIZE, build_batch, seal_in_place

    region = bytearray()
    for i in range(50):
        append_record(region, i, i, b"key-%d" % i, b"value-%d" % i * 3, None)
    buf = bytearray(BATCH_HEADER_SIZE) + region
    args = {"base_timestamp": 1_700_000_000_000, "max_timestamp": 1_700_000_000_049, "compression": compression,
            "producer_id": 42, "producer_epoch": 3, "base_sequence": 1000}
    sealed = seal_in_place(buf, 50, **args)
    assert bytes(sealed) == build_batch(bytes(region), 50, **args)
    if compression == 0:
        assert isinstance(sealed, memoryview) and sealed.obj is buf  # the buffer itself, no copy
    (batch,) = decode_batches(bytes(sealed))
    assert [r.value for r in batch.records] == [b"value-%d" % i * 3 for i in range(50)]
