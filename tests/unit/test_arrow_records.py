"""The Spark source's columnar decoder against the record-by-record decoder, on batches our encoder wrote."""

from __future__ import annotations

import random

import pytest

from kafkajet.errors import CorruptRecordError
from kafkajet.records import decode_batches
from kafkajet.records.batch import encode_batch
from kafkajet.spark.arrow_records import to_arrow


def rows_by_records(data: bytes, start: int, end: int) -> list[tuple]:
    out = []
    for b in decode_batches(data):
        for r in b.records:
            if start <= r.offset < end:
                out.append((r.key, r.value, r.offset, r.timestamp, b.timestamp_type,
                            [(k, v) for k, v in r.headers]))
    return out


def rows_by_arrow(data: bytes, start: int, end: int, topic: str = "t", partition: int = 3) -> list[tuple]:
    rb = to_arrow(decode_batches(data, decode=False), topic, partition, start, end, include_headers=True)
    cols = rb.to_pydict()
    assert set(cols["topic"]) <= {topic} and set(cols["partition"]) <= {partition}
    assert rb.schema.field("timestamp").type.tz == "UTC"
    return [(k, v, o, int(ts.timestamp() * 1000) if ts is not None else None, tt,
             [(h["key"], h["value"]) for h in hs])
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
