"""Interop with kafka-python's and aiokafka's record batch readers and builders, every codec, both ways."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkajet.records import Compression, build_batch, decode_batches, encode_batch

kafka_records = importlib.import_module("kafka.record.default_records")  # test dependencies: never skipped
kafka_memory = importlib.import_module("kafka.record.memory_records")
aiokafka_records = importlib.import_module("aiokafka.record.default_records")

READERS: dict[str, Callable[[bytes], Any]] = {
    "kafka-python": kafka_records.DefaultRecordBatch,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchPy,
}
BUILDERS: dict[str, Callable[..., Any]] = {
    "kafka-python": kafka_records.DefaultRecordBatchBuilder,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchBuilderPy,
}
# The aiokafka wheel ships its Cython extension; a missing one must fail here, not drop these cases silently.
from aiokafka.record import _crecords  # noqa: E402

READERS["aiokafka-cython"] = _crecords.DefaultRecordBatch
BUILDERS["aiokafka-cython"] = _crecords.DefaultRecordBatchBuilder

CODECS = list(Compression)

_blob = st.one_of(st.none(), st.just(b""), st.binary(max_size=100),
                  st.builds(lambda n: b"z" * n, st.integers(10_000, 40_000)))
_headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
_records = st.lists(
    st.tuples(st.integers(0, 1 << 45), _blob, _blob, _headers), min_size=1, max_size=6
)
_producer = st.one_of(
    st.just((-1, -1, -1, False)),
    st.tuples(st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 15) - 1), st.integers(0, (1 << 31) - 100),
              st.booleans()),
)
_settings = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read_with(reader: Callable[[bytes], Any], wire: bytes) -> tuple[Any, list[tuple]]:
    batch = reader(wire)
    assert batch.validate_crc()
    records = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]
    return batch, records


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@pytest.mark.parametrize("reader_name", list(READERS))
@_settings
@given(records=_records, producer=_producer, base_offset=st.integers(0, 1 << 40))
def test_they_read_our_batches(reader_name: str, codec: Compression, records: list,
                               producer: tuple[int, int, int, bool], base_offset: int) -> None:
    pid, epoch, seq, transactional = producer
    wire = encode_batch(records, compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=transactional, base_offset=base_offset)
    batch, got = _read_with(READERS[reader_name], wire)
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional == transactional
    assert batch.base_offset == base_offset
    assert batch.last_offset_delta == len(records) - 1
    assert batch.max_timestamp == max(r[0] for r in records)
    assert got == [(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@pytest.mark.parametrize("builder_name", list(BUILDERS))
@_settings
@given(records=_records, producer=_producer)
def test_we_read_their_batches(builder_name: str, codec: Compression, records: list,
                               producer: tuple[int, int, int, bool]) -> None:
    pid, epoch, seq, transactional = producer
    builder = BUILDERS[builder_name](
        magic=2, compression_type=int(codec), is_transactional=transactional, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30,
    )
    for offset, (ts, key, value, headers) in enumerate(records):
        assert builder.append(offset, timestamp=ts, key=key, value=value, headers=headers) is not None
    wire = bytes(builder.build())
    (batch,) = decode_batches(wire)
    # Both builders fall back to no compression when compressing would not shrink the records.
    assert batch.compression in (codec, Compression.NONE)
    assert batch.compression == kafka_records.DefaultRecordBatch(wire).compression_type
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional == transactional
    assert batch.records_count == len(records)
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(records)
    ]


def test_memory_records_reads_concatenated_batches() -> None:
    wire = b"".join(
        encode_batch([(1000 + i, b"k%d" % i, b"v%d" % i, None)], compression=codec, base_offset=i)
        for i, codec in enumerate(CODECS)
    )
    records = kafka_memory.MemoryRecords(wire)
    seen = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        seen.extend((r.offset, r.value) for r in batch)
    assert seen == [(i, b"v%d" % i) for i in range(len(CODECS))]


@pytest.mark.parametrize("reader_name", list(READERS))
def test_log_append_time_and_control_flags(reader_name: str) -> None:
    buf = bytearray()
    from kafkajet.records import append_record

    append_record(buf, 0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", None)
    wire = build_batch(buf, 1, base_timestamp=10, max_timestamp=20, timestamp_type=1, control=True,
                       transactional=True, producer_id=5, producer_epoch=0)
    batch = READERS[reader_name](wire)
    assert batch.validate_crc()
    assert batch.timestamp_type == 1 and batch.is_control_batch and batch.is_transactional
    # LogAppendTime records carry the batch's max timestamp, in both libraries, in Java and in kafkajet.
    assert [r.timestamp for r in batch] == [20]
    (ours,) = decode_batches(wire)
    assert ours.timestamp_type == 1 and ours.max_timestamp == 20 and ours.records[0].timestamp == 20


@pytest.mark.parametrize("codec", CODECS[1:], ids=[c.name for c in CODECS[1:]])
@pytest.mark.parametrize("builder_name", list(BUILDERS))
def test_we_read_their_compressed_batches(builder_name: str, codec: Compression) -> None:
    builder = BUILDERS[builder_name](magic=2, compression_type=int(codec), is_transactional=False,
                                     producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    values = [b"%d" % i * 5000 for i in range(20)]  # ~100 KB: several snappy/lz4 blocks
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=1_700_000_000_000 + offset, key=None, value=value, headers=[("i", None)])
    (batch,) = decode_batches(bytes(builder.build()))
    assert batch.compression == codec
    assert [r.value for r in batch.records] == values
