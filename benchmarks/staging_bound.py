"""What staging records in send() (encoding them by column at drain) could save the caller, at most.

    .venv/bin/python benchmarks/staging_bound.py [--records 300000] [--reps 3]

Runs the same send() loop twice per rep, each in its own process, interleaved: once as it is, once with the
record encoder replaced by what staging would do in its place (append the record's fields to a list). The
sender thread is held idle (its passes only sleep), so nothing is drained in either run and batches grow as
they do under backlog: the figure is the caller thread's CPU per send() alone, at the default batch sizes. The difference is the most staging could take off send(); staging
then pays for the encoding on the sender thread (under the same GIL) at drain: the script also times that,
with the batch path's per-record encoder (`append_run`, what send_batch() uses for records that differ in
timestamp) over the same records, in 1 MiB batches.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from _common import create_topic, paired_loop_args, spawn


def run(mode: str, bootstrap: str, topic: str, n: int) -> dict[str, float]:
    if mode == "staged":
        import kafkajet.producer.batch as batch_module

        staged: list[tuple[object, ...]] = []
        stage = staged.append

        def append_record(buf: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                          value: bytes | None, headers: object) -> int:
            stage((timestamp_delta, key, value, headers))
            return 8 + (len(value) if value is not None else 0)

        batch_module.append_record = append_record  # type: ignore[assignment]
    from kafkajet import Producer

    value = b"x" * 100
    p = Producer(bootstrap_servers=bootstrap, buffer_memory=1 << 30)
    try:
        p.partitions_for(topic)
        import kafkajet.producer.sender as sender_module

        # From here the sender's passes only sleep: nothing drains, the caller's work is all that is measured.
        sender_module.Sender.run_once = lambda self, now=None: time.sleep(0.01)  # type: ignore[method-assign]
        send = p.send
        start = time.thread_time()
        for _ in range(n):
            send(topic, value)
        caller = time.thread_time() - start
    finally:
        p.close(0)
    return {"us_per_send": caller / n * 1e6}


def drain_encoding_us(n: int) -> float:
    """CPU per record of encoding staged records at drain: append_run over 1 MiB batches, best of 3."""
    from kafkajet.records.record import append_run

    value = b"x" * 100
    base = 1_700_000_000_000
    timestamps = [base + i // 100 for i in range(n)]  # about what a send() loop's wall clock gives
    keys: list[bytes | None] = [None] * n
    values: list[bytes | None] = [value] * n
    indices = list(range(n))
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        pos = 0
        while pos < n:
            buf = bytearray()
            offset_end = append_run(buf, 1 << 20, 0, timestamps[indices[pos]], indices, pos, timestamps, keys,
                                    values, None)
            pos = offset_end[0]
        best = min(best, time.thread_time() - start)
    return best / n * 1e6


def main() -> None:
    args = paired_loop_args(__doc__)
    if args.worker:
        mode, bootstrap, topic = args.worker
        print(json.dumps(run(mode, bootstrap, topic, args.records)), flush=True)
        return
    from kafkajet.testing import EmbeddedBroker

    costs: dict[str, list[float]] = {"encoded": [], "staged": []}
    with EmbeddedBroker() as broker:
        topic = "staging-bound"
        create_topic(broker.bootstrap_servers, topic)
        for rep in range(args.reps):
            for mode in costs:
                r = spawn([__file__, "--records", str(args.records), "--worker", mode, broker.bootstrap_servers,
                           topic], mode)
                if r is None:
                    sys.exit(f"{mode}: the worker failed")
                costs[mode].append(r["us_per_send"])
                print(f"  rep {rep + 1}/{args.reps} {mode:8s} {r['us_per_send']:.2f} us per send()", file=sys.stderr)
    enc, stg = statistics.median(costs["encoded"]), statistics.median(costs["staged"])
    drain = drain_encoding_us(args.records)
    print(f"send() caller CPU, median of {args.reps}: encoded {enc:.2f} us, staged {stg:.2f} us: staging takes at "
          f"most {enc - stg:.2f} us ({(enc - stg) / enc:.0%}) off send()")
    print(f"encoding those records at drain (append_run, 1 MiB batches): {drain:.2f} us per record on the sender "
          f"thread; net per record: {enc - stg - drain:+.2f} us")


if __name__ == "__main__":
    main()
