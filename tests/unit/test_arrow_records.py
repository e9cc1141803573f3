"""The Spark source's columnar decoder against the record-by-record decoder, on batches our encoder wrote."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from kafkajet.errors import CorruptRecordError
from kafkajet.records import decode_batches
from kafkajet.records.batch import encode_batch
from kafkajet.spark.arrow_records import to_arrow

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def rows_by_records(data: bytes, start: int, end: int) -> list[tuple]:
    out = []
    for b in decode_batches(data):
        for r in b.records:
            if start <= r.offset < end:
                out.append((r.key, r.value, r.offset, r.timestamp, b.timestamp_type,
                            [(k, v) for k, v in r.headers] if r.headers else None))
    return out


def rows_by_arrow(data: bytes, start: int, end: int, topic: str = "t", partition: int = 3) -> list[tuple]:
    rb = to_arrow(decode_batches(data, decode=False), topic, partition, start, end, include_headers=True)
    cols = rb.to_pydict()
    assert set(cols["topic"]) <= {topic} and set(cols["partition"]) <= {partition}
    assert rb.schema.field("timestamp").type.tz == "UTC"
    # Milliseconds by integer division: float seconds * 1000 truncates 1.001 s to 1000 ms.
    return [(k, v, o, (ts - EPOCH) // timedelta(milliseconds=1) if ts is not None else None, tt,
             None if hs is None else [(h["key"], h["value"]) for h in hs])
            for k, v, o, ts, tt, hs in zip(cols["key"], cols["value"], cols["offset"], cols["timestamp"],
                                            cols["timestampType"], cols["headers"], strict=True)]


def sample(seed: int, n: int, base_offset: int = 0, **kw: object) -> bytes:
    rnd = random.Random(seed)
    records = []
    for _ in range(n):
        key = None if rnd.random() < 0.3 else rnd.randbytes(rnd.choice([0, 1, 5, 70, 300]))
        value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice([0, 3, 63, 64, 200, 20000]))
        headers = [] if rnd.random() < 0.7 else [(f"h{j}", None if j == 2 else rnd.randbytes(j * 40))
                                                 for j in range(rnd.randint(1, 3))]
        records.append((1_700_000_000_000 + rnd.randint(-5000, 10**7), key, value, headers))
    return encode_batch(records, base_offset=base_offset, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_columns_equal_what_the_record_decoder_reads(compression: int) -> None:
    data = b"".join(sample(seed, 150, base_offset=seed * 150, compression=compression) for seed in range(4))
    assert rows_by_arrow(data, 0, 10**9) == rows_by_records(data, 0, 10**9)
    assert len(rows_by_arrow(data, 0, 10**9)) == 600


def test_only_offsets_in_the_range_are_kept() -> None:
    data = sample(1, 100, base_offset=1000) + sample(2, 100, base_offset=1100)
    got = rows_by_arrow(data, 1050, 1120)
    assert [r[2] for r in got] == list(range(1050, 1120))
    assert got == rows_by_records(data, 1050, 1120)


def test_log_append_time_batches_report_the_batch_time() -> None:
    raw = bytearray(encode_batch([(5, None, b"a", None), (9, None, b"b", None)], max_timestamp=77_000))
    raw[22] |= 0x08  # the timestamp-type bit in the attributes' low byte (the CRC is not checked below)
    data = bytes(raw)
    rb = to_arrow(decode_batches(data, decode=False, verify_crc=False), "t", 0, 0, 10, include_headers=False)
    assert rb.column("timestampType").to_pylist() == [1, 1]
    assert [int(t.timestamp() * 1000) for t in rb.column("timestamp").to_pylist()] == [77_000, 77_000]
    assert rb.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_no_records_gives_an_empty_batch_with_the_schema() -> None:
    rb = to_arrow([], "t", 0, 0, 10, include_headers=True)
    assert rb.num_rows == 0 and rb.schema.names[-1] == "headers"


def test_a_record_whose_fields_overrun_its_length_is_corrupt() -> None:
    data = bytearray(encode_batch([(1, b"k", b"value", None)]))
    # The record's length prefix (first byte of the records region) is shortened by one.
    data[61] -= 2
    with pytest.raises(CorruptRecordError):
        to_arrow(decode_batches(bytes(data), decode=False, verify_crc=False), "t", 0, 0, 10, include_headers=False)


def runs_sample() -> bytes:
    """What producers mostly write: long runs of one record length (the run guess's and the strided copy's
    path), broken by offset deltas growing a byte at 64 and 8192, a null value, a stretch of varied sizes, and
    same-size keys at changing strides, and two lengths whose length prefixes differ in their second byte only."""
    records: list[tuple] = [(1_000, None, b"v%05d" % i + b"x" * 94, None) for i in range(9000)]
    records[100] = (1_000, None, None, None)
    records[200:300] = [(1_000 + i, b"k" * (i % 7), b"y" * (i % 13), None) for i in range(100)]
    records[5000:5003] = [(1_000, b"key", b"z" * 100, [("h", b"1")])] * 3
    first = encode_batch(records, base_offset=0)  # type: ignore[arg-type]
    # Lengths 64 apart share the first byte of their two-byte length prefix: only the second tells them apart.
    second = encode_batch([(2_000, b"kk", b"w" * 300, None)] * 40 + [(2_000, b"kk", b"u" * 364, None)] * 40,
                          base_offset=9000)  # type: ignore[arg-type]
    return first + second


def test_runs_of_one_length_decode_as_the_record_decoder_reads_them() -> None:
    data = runs_sample()
    assert rows_by_arrow(data, 0, 10**9) == rows_by_records(data, 0, 10**9)
    assert len(rows_by_arrow(data, 0, 10**9)) == 9080


def test_a_batch_with_bytes_after_its_runs_is_corrupt() -> None:
    data = bytearray(encode_batch([(1, None, b"v" * 50, None)] * 100))  # type: ignore[list-item]
    # The batch claims 99 records: its records region then ends 52 bytes after the last record walked.
    data[57:61] = (99).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="bytes after its 99 records"):
        to_arrow(decode_batches(bytes(data), decode=False, verify_crc=False), "t", 0, 0, 10**9, include_headers=False)
