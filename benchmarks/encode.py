"""Record batch encoding speed: kafkajet vs kafka-python vs aiokafka (pure Python and Cython).

Usage:
    .venv/bin/python benchmarks/encode.py [--records 500000] [--value-size 100] [--batch-size 16384] [--runs 3]

Every library encodes the same records (no key, then 16-byte keys; 100-byte values; timestamps advancing
1 ms per 1024 records) into batches of at most --batch-size bytes, uncompressed, and the median of --runs
runs is reported as records/s. kafkajet runs the producer's real path: append_record per record into a
growing bytearray, and build_batch when the next record would overflow the batch (the record is then
moved to the next batch). The others use their DefaultRecordBatchBuilder: append until it refuses, build.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from kafkajet.records import BATCH_HEADER_SIZE, append_record, build_batch, decode_batches

TS0 = 1_700_000_000_000

Runner = Callable[[int, bytes | None, bytes, int], int]  # (records, key, value, batch_size) -> batches


def run_kafkajet(n: int, key: bytes | None, value: bytes, batch_size: int) -> int:
    limit = batch_size - BATCH_HEADER_SIZE
    batches: list[bytes] = []
    buf = bytearray()
    count = 0
    base_ts = max_ts = TS0
    for i in range(n):
        ts = TS0 + (i >> 10)
        if count == 0:
            base_ts = ts
        written = append_record(buf, count, ts - base_ts, key, value, None)
        if len(buf) > limit and count:
            del buf[-written:]
            batches.append(build_batch(buf, count, base_timestamp=base_ts, max_timestamp=max_ts))
            buf = bytearray()
            count = 0
            base_ts = ts
            append_record(buf, 0, 0, key, value, None)
        count += 1
        if ts > max_ts:
            max_ts = ts
    if count:
        batches.append(build_batch(buf, count, base_timestamp=base_ts, max_timestamp=max_ts))
    return len(batches)


def builder_runner(builder_cls: type) -> Runner:
    def run(n: int, key: bytes | None, value: bytes, batch_size: int) -> int:
        def new() -> object:
            return builder_cls(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                               producer_epoch=-1, base_sequence=-1, batch_size=batch_size)

        batches = []
        builder = new()
        offset = 0
        headers: list[tuple[str, bytes]] = []
        for i in range(n):
            ts = TS0 + (i >> 10)
            if builder.append(offset, ts, key, value, headers) is None:  # type: ignore[attr-defined]
                batches.append(builder.build())  # type: ignore[attr-defined]
                builder = new()
                offset = 0
                builder.append(offset, ts, key, value, headers)  # type: ignore[attr-defined]
            offset += 1
        batches.append(builder.build())  # type: ignore[attr-defined]
        return len(batches)

    return run


def contenders() -> dict[str, Runner]:
    found: dict[str, Runner] = {"kafkajet": run_kafkajet}
    try:
        from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

        found["kafka-python"] = builder_runner(KafkaPythonBuilder)
    except ImportError:
        pass
    try:
        from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy

        found["aiokafka (pure Python)"] = builder_runner(_DefaultRecordBatchBuilderPy)
    except ImportError:
        pass
    try:
        from aiokafka.record._crecords import DefaultRecordBatchBuilder as CythonBuilder

        found["aiokafka (Cython)"] = builder_runner(CythonBuilder)
    except ImportError:
        pass
    return found


def sanity_check(key: bytes | None, value: bytes, batch_size: int) -> None:
    """The benchmarked path must produce valid batches that hold every record."""
    limit = batch_size - BATCH_HEADER_SIZE
    buf = bytearray()
    count = 0
    while True:
        written = append_record(buf, count, 0, key, value, None)
        if len(buf) > limit:
            del buf[-written:]
            break
        count += 1
    wire = build_batch(buf, count, base_timestamp=TS0, max_timestamp=TS0)
    (batch,) = decode_batches(wire)
    assert len(wire) <= batch_size and batch.records_count == count
    assert all(r.key == key and r.value == value for r in batch.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    value = b"v" * args.value_size
    runners = contenders()
    print(f"{args.records:,} records, {args.value_size}-byte values, {args.batch_size}-byte batches, "
          f"uncompressed; median of {args.runs} runs")
    for label, key in (("no key", None), ("16-byte key", b"k" * 16)):
        sanity_check(key, value, args.batch_size)
        times: dict[str, list[float]] = {name: [] for name in runners}
        batches: dict[str, int] = {}
        for run in runners.values():
            run(20_000, key, value, args.batch_size)  # warm up allocator and specialised bytecode
        # Round-robin rather than one contender at a time, so a burst of load on a shared machine hurts
        # every contender's median alike.
        for _ in range(args.runs):
            for name, run in runners.items():
                start = time.perf_counter()
                batches[name] = run(args.records, key, value, args.batch_size)
                times[name].append(time.perf_counter() - start)
        rates = {name: args.records / statistics.median(t) for name, t in times.items()}
        print(f"\n{label}:")
        for name, rate in rates.items():
            print(f"  {name:<24} {rate:>12,.0f} records/s  ({batches[name]} batches)")
        ours = rates["kafkajet"]
        for name, rate in rates.items():
            if name != "kafkajet":
                print(f"  kafkajet / {name:<21} {ours / rate:6.2f}x")


if __name__ == "__main__":
    main()
