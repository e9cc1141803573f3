"""What keyless partitioning costs, with no broker and no sender thread: CPU nanoseconds per record of produce()
into the accumulator (the sticky path: 100-byte values, batch.size 16 KiB, six partitions), with and without a
table of adaptive load stats to draw from at each switch; and CPU microseconds of one accumulator.ready() pass
(the sender thread's) over 6 and 100 queued partitions, adaptive partitioning off and on.

    .venv/bin/python benchmarks/partitioner_cost.py                              # as installed (compiled if built)
    KAFKAJET_NO_EXTENSIONS=1 .venv/bin/python benchmarks/partitioner_cost.py     # the Python source

CPU time (thread_time), not wall time, and the median of 40 runs: the figures hold on a shared, loaded machine.
"""

from __future__ import annotations

import statistics
import time

import kafkajet._build
from kafkajet.producer.accumulator import RecordAccumulator
from kafkajet.producer.batch_input import BatchInput, SizeLimits
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.metadata import Cluster, Metadata, Node, PartitionInfo
from kafkajet.producer.partitioner import DefaultPartitioner, PartitionPlanner, StickyPartitioner
from kafkajet.producer.send_path import SendPath
from kafkajet.serialization import resolve_serializer

BATCH = 16384


def _cluster(partitions: int) -> Cluster:
    nodes = {i: Node(i, "h", 9000 + i, f"r{i}") for i in (1, 2, 3)}
    return Cluster(nodes=nodes, partitions={"t": tuple(PartitionInfo("t", p, 1 + p % 3) for p in range(partitions))})


def _accumulator() -> RecordAccumulator:
    return RecordAccumulator(batch_size=BATCH, compression=0, linger_ms=5, retry_backoff_ms=100,
                             retry_backoff_max_ms=1000, delivery_timeout_ms=1e9, pool=BufferPool(1 << 30, BATCH),
                             batch_max_size=BATCH, clock=lambda: 0.0)


def produce_ns(weighted: bool, records: int = 20_000, runs: int = 40) -> float:
    cluster = _cluster(6)
    metadata = Metadata(max_age_ms=1e9, max_idle_ms=1e9, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    metadata.update(cluster, 0.0)
    acc = _accumulator()
    partitioner = DefaultPartitioner(BATCH)
    identity = resolve_serializer("bytes", what="value.serializer")
    path = SendPath(metadata, acc, PartitionPlanner(partitioner, BATCH, False),
                    BatchInput(identity, identity, SizeLimits(1 << 20, 1 << 30)), 60000, lambda: None, None, [],
                    None, None, None)  # type: ignore[arg-type]

    def reset() -> None:
        if weighted:  # what unequal queues give: every switch draws from the table
            partitioner.sticky.update_load_stats("t", [0, 1, 2, 0, 1, 2], list(range(6)), [], 6)
        for dq in list(acc._queues.values()):
            while dq:
                acc.complete(dq.popleft(), 0, -1, None)

    reset()
    produce = path.produce
    value = b"x" * 100
    figures = []
    for _ in range(runs):
        t0 = time.thread_time()
        for _ in range(records):
            produce("t", value)
        figures.append((time.thread_time() - t0) / records * 1e9)
        reset()
    return statistics.median(figures)


def ready_us(partitions: int, adaptive: bool, passes: int = 500, runs: int = 30) -> float:
    cluster = _cluster(partitions)
    acc = _accumulator()
    if adaptive:
        acc.adaptive = StickyPartitioner(BATCH)
    for p in range(partitions):
        for _ in range(1 + p % 3):  # unequal queues: the load stats are built, not skipped
            acc.append("t", p, 0, None, b"x" * 16000, None, None)
    figures = []
    for _ in range(runs):
        t0 = time.thread_time()
        for _ in range(passes):
            acc.ready(cluster, 1.0)
        figures.append((time.thread_time() - t0) / passes * 1e6)
    return statistics.median(figures)


def main() -> None:
    print(kafkajet._build.describe())
    print(f"produce(), keyless, per record: {produce_ns(False):.0f} ns uniform switches, "
          f"{produce_ns(True):.0f} ns weighted switches")
    for partitions in (6, 100):
        print(f"ready() over {partitions} partitions: {ready_us(partitions, False):.1f} us adaptive off, "
              f"{ready_us(partitions, True):.1f} us on")


if __name__ == "__main__":
    main()
