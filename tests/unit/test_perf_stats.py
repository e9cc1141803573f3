"""The perf tool's Stats fed a batch of acknowledgements at a time keep exactly what record-by-record would:
counts, bytes, latency sum and maximum, and the same sampled latencies for the percentiles."""

from __future__ import annotations

import io
import random

from kafkajet.cli.perf import Output, Stats


def test_batches_of_acknowledgements_sample_the_same_records_as_one_at_a_time() -> None:
    rng = random.Random(7)
    num_records = 1_500_000  # sampling every 3rd record: Java keeps at most 500,000 latencies
    latencies = [rng.randrange(0, 500) for _ in range(20_000)]
    out = Output(io.StringIO(), io.StringIO(), progress=False)
    stats = Stats(num_records, out, clock=lambda: 0.0, interval_s=1e9)
    assert stats.sampling == 3
    pos = 0
    while pos < len(latencies):
        n = rng.randrange(1, 700)
        stats.record_many(latencies[pos:pos + n], 100 * len(latencies[pos:pos + n]), 0.0)
        pos += n
    assert stats.count == 20_000 and stats.bytes == 2_000_000
    assert stats.total_latency == sum(latencies) and stats.max_latency == max(latencies)
    assert list(stats.latencies[:stats.index]) == latencies[::3]


def test_the_sample_array_never_overflows() -> None:
    out = Output(io.StringIO(), io.StringIO(), progress=False)
    stats = Stats(10, out, clock=lambda: 0.0, interval_s=1e9)
    stats.record_many(list(range(25)), 2500, 0.0)  # more acknowledgements than the run was sized for
    assert stats.index == len(stats.latencies) and stats.count == 25
