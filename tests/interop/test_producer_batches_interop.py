"""The batches the running build's producer writes, read by kafka-python's and aiokafka's batch readers, per codec.

test_records_interop checks the record encoders against those readers; this goes through the whole send path
(send() and send_batch(), the accumulator, sealing with the producer id and sequences, compression) of the build
that runs: make test runs this tier on the compiled build and again with KAFKAJET_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import kafkajet.producer.batch
from kafkajet import Producer, _build
from kafkajet.records import Compression
from kafkajet.testing import MockCluster
from tests.interop.test_records_interop import READERS

pytestmark = [pytest.mark.mock_cluster(brokers=1, topics={"t": 1}), pytest.mark.timeout(60)]

SENT = 300  # with 4 KiB batches (batch.max.size too) and 200-byte values: several batches per run, each well compressible
BASE_TS = 1_700_000_000_000


def _expected_build_runs() -> None:
    """The batches below are the build's this run asked for, not a silent fallback's."""
    compiled = _build.is_compiled(kafkajet.producer.batch)
    if _build.DISABLED:
        assert not compiled, _build.describe()
    elif os.environ.get("KAFKAJET_EXPECT_COMPILED", "") not in ("", "0"):
        assert compiled, _build.describe()


def _record(i: int) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    key = None if i % 7 == 0 else b"k%d" % i
    value = None if i % 11 == 5 else b"%05d" % i + b"a" * 195
    headers = [] if i % 3 else [("h", b"%d" % i), ("none", None)]
    return BASE_TS + i, key, value, headers


@pytest.mark.parametrize("codec", list(Compression), ids=[c.name.lower() for c in Compression])
def test_their_readers_read_what_this_build_produced(cluster: MockCluster, codec: Compression) -> None:
    _expected_build_runs()
    expected = [_record(i) for i in range(SENT)]
    half = SENT // 2
    with Producer(bootstrap_servers=cluster.bootstrap_servers, compression_type=codec.name.lower(),
                  batch_size=4096, batch_max_size=4096, linger_ms=20) as p:
        for ts, key, value, headers in expected[:half]:
            p.send("t", value, key, headers=headers, timestamp_ms=ts)
        rest = expected[half:]
        p.send_batch("t", [r[2] for r in rest], keys=[r[1] for r in rest], headers=[r[3] for r in rest],
                     timestamps_ms=[r[0] for r in rest]).result(30)
        p.flush(30)
    wire = cluster.stored_batches("t", 0)
    assert len(wire) > 2  # the sequence check below spans batches

    for name, reader in READERS.items():
        got: list[tuple[int, Any, Any, Any]] = []
        sequences: list[tuple[int, int]] = []
        producer_ids = set()
        offset = 0
        for data in wire:
            batch = reader(data)
            assert batch.validate_crc(), name
            assert batch.compression_type == codec, name
            producer_ids.add((batch.producer_id, batch.producer_epoch))
            sequences.append((batch.base_sequence, batch.last_offset_delta + 1))
            assert batch.base_offset == offset, name
            for r in batch:
                assert r.offset == offset, name
                offset += 1
                got.append((r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]))
        assert got == expected, f"{name} read other records than were sent ({_build.describe()})"
        # Idempotence is on by default: one producer id, and each batch's sequence follows the last one's.
        ((pid, epoch),) = producer_ids
        assert pid >= 0 and epoch >= 0, name
        assert [seq for seq, _ in sequences] == [sum(n for _, n in sequences[:i]) for i in range(len(sequences))]
