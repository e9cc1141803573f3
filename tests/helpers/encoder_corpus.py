"""The same records encoded by whichever build of the encoders this process runs (compiled or pure Python):
`python -m tests.helpers.encoder_corpus` prints the build and every encoding as JSON, for tests/unit/
test_build.py to compare the two builds' bytes.

The corpus reaches every branch of the encoders: append_record's table paths (null key, key, headers) and its
general path (values from 8 KiB, deltas past the tables, negative deltas, null values), append_run stopping at
its limit, each compression codec, a producer batch sealed in place, control batches and decoding back; and
the compiled build's kernels (hatch_build.KERNELS) against the same inputs: record encoding (with the shape the
kernel hands back to the Python: headers) and the delivery callbacks' RecordMetadata.
"""

from __future__ import annotations

import json
import random
import sys

from kafkajet._build import describe, is_compiled
from kafkajet.producer import batch as producer_batch
from kafkajet.records import batch as records_batch
from kafkajet.records import record

Row = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]


def _rows(rng: random.Random, n: int) -> list[Row]:
    rows: list[Row] = []
    ts = 1_700_000_000_000
    for i in range(n):
        shape = i % 9
        key = None if shape in (0, 3) else rng.randbytes(rng.choice((0, 1, 7, 200, 9000)))
        value = None if shape == 5 else rng.randbytes(rng.choice((0, 1, 100, 8191, 8192, 20000)))
        headers = None if shape < 4 else [("h", rng.randbytes(3)), ("ü" * (i % 4), None)][: 1 + i % 2]
        ts += rng.choice((0, 1, 16383, 16384, 10_000_000, -5))
        rows.append((ts, key, value, headers))
    return rows


def corpus() -> list[str]:
    rng = random.Random(30)
    out: list[bytes] = []
    rows = _rows(rng, 120)
    for delta in (0, 1, 127, 128, 16383, 16384, -1, 2**31):  # offset and timestamp deltas around the tables
        buf = bytearray()
        record.append_record(buf, delta % 20000, delta, b"k", b"v" * 10, None)
        record.append_record(buf, 3, delta, None, b"v" * 10, [("a", b"b")])
        out.append(bytes(buf))
    for codec in (0, 1, 2, 3, 4):
        out.append(records_batch.encode_batch(rows, compression=codec, producer_id=7, producer_epoch=1,
                                              base_sequence=42, transactional=codec == 2))
    for limit in (200, 5000, 1 << 20):
        buf = bytearray()
        ts = [r[0] for r in rows]
        pos, offset, max_ts = record.append_run(buf, limit, 0, ts[0], list(range(len(rows))), 0, ts,
                                                [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows])
        out.append(bytes(buf) + f"|{pos},{offset},{max_ts}".encode())
    pb = producer_batch.ProducerBatch("t", 0, bytearray(), 1 << 20, 0.0)
    for ts_, key, value, headers in rows[:60]:
        pb.try_append(ts_, key, value, headers)
    out.append(bytes(pb.seal(0, 5, 0, 10)))
    out.append(bytes(pb.seal(3, 5, 1, 11)))
    out.append(records_batch.build_control_batch(True, producer_id=9, producer_epoch=2, timestamp=1_700_000_000_123,
                                                     coordinator_epoch=3))
    decoded = [(r.offset, r.timestamp, r.key, r.value, r.headers)
               for b in records_batch.decode_batches(out[8 + 4]) for r in b.records]  # the zstd batch
    out.append(repr(decoded).encode())
    buf = bytearray()
    for i, (ts_, key, value, headers) in enumerate(rows):
        producer_batch._append_record(buf, i * 997, ts_ - rows[0][0], key, value, headers)
    out.append(bytes(buf))
    out.append(repr(_callback_metadata(rows)).encode())
    return [b.hex() for b in out]


def _callback_metadata(rows: list[Row]) -> list[tuple[object, ...]]:
    """What send(callback=) callbacks receive for a batch that succeeded and one that failed."""
    from kafkajet.errors import NotLeaderOrFollowerError

    seen: list[tuple[object, ...]] = []
    for outcome in ("ok", "log-append-time", "failed"):
        pb = producer_batch.ProducerBatch("t", 3, bytearray(), 1 << 20, 0.0)
        for ts_, key, value, headers in rows[:20]:
            pb.try_append(ts_, key, value, headers, lambda md, exc: seen.append((type(md).__name__, *md, repr(exc))))
        assert pb.callbacks is not None
        if outcome == "failed":
            pb.error = NotLeaderOrFollowerError("moved")
        else:
            pb.base_offset = 1 << 40
            pb.log_append_time = 1_700_000_009_999 if outcome == "log-append-time" else -1
        producer_batch.fire_callbacks(pb, pb.callbacks)
    return seen


if __name__ == "__main__":
    modules = (record, records_batch, producer_batch)
    kernels = (producer_batch._append_record is not record.append_record, producer_batch._new_metadata is not None)
    json.dump({"build": describe(), "compiled": [is_compiled(m) for m in modules], "kernels": kernels,
               "corpus": corpus()}, sys.stdout)
