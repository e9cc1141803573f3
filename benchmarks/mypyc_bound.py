"""What compiling the send() path as it is (mypyc, no rewrite) would buy: a decision input for issue 16.

    .venv/bin/python benchmarks/mypyc_bound.py [--records 300000] [--reps 3]

Copies the package to a temporary directory, compiles the modules a send() runs through that mypyc accepts
unchanged (records/record.py, producer/batch.py, accumulator.py, partitioner.py, clock.py; producer.py needs
weak references and futures.py subclasses concurrent.futures.Future, which mypyc's native classes refuse),
and runs the same send() loop, plain and with a delivery callback, against the interpreted and the compiled
copy, each run in its own process, interleaved. Needs mypyc (installed with mypy) and a C compiler: this is a
measurement for a decision, not a way to ship.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import create_topic, paired_loop_args, spawn

ROOT = Path(__file__).resolve().parents[1]
COMPILED = ["kafkajet/records/record.py", "kafkajet/producer/batch.py", "kafkajet/producer/accumulator.py",
            "kafkajet/producer/partitioner.py", "kafkajet/clock.py"]


def worker(bootstrap: str, topic: str, n: int, callback: bool) -> None:
    """send_cost.py's kafkajet loop, against whichever copy of the package PYTHONPATH put first."""
    from send_cost import run

    import kafkajet

    r = run("kafkajet callback" if callback else "kafkajet", bootstrap, topic, n)
    print(json.dumps({"file": kafkajet.__file__, "rps": n / r["wall"], "caller_us": r["main"] / n * 1e6,
                      "acked": r["ok"]}))


def main() -> None:
    args = paired_loop_args(__doc__)
    if args.worker:
        bootstrap, topic, mode = args.worker
        worker(bootstrap, topic, args.records, mode == "callback")
        return
    mypyc = shutil.which("mypyc", path=str(Path(sys.executable).parent)) or shutil.which("mypyc")
    if mypyc is None or shutil.which("cc") is None:
        sys.exit("mypyc_bound needs mypyc (pip install mypy) and a C compiler (cc)")
    from kafkajet.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="kafkajet-mypyc-") as tmp:
        shutil.copytree(ROOT / "kafkajet", Path(tmp) / "kafkajet")
        print(f"  compiling {len(COMPILED)} modules with mypyc ...", file=sys.stderr, flush=True)
        subprocess.run([mypyc, *COMPILED], cwd=tmp, check=True, capture_output=True)
        copies = {"interpreted": str(ROOT), "mypyc": tmp}
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        with EmbeddedBroker() as broker:
            for rep in range(args.reps):
                for mode in ("plain", "callback"):
                    for name, path in copies.items():
                        topic = f"mypyc-{rep}-{mode}-{name}"
                        create_topic(broker.bootstrap_servers, topic)
                        r = spawn([__file__, "--records", str(args.records), "--worker", broker.bootstrap_servers,
                                   topic, mode], f"{name} {mode}", 600, cwd=tmp,
                                  env={**os.environ, "PYTHONPATH": path})
                        if r is None or not r["file"].startswith(path) or r["acked"] != args.records:
                            sys.exit(f"{name} {mode}: wrong package or lost records: {r}")
                        results.setdefault((mode, name), []).append(r)
                        print(f"  rep {rep + 1}/{args.reps} {mode:8s} {name:11s} {r['rps']:>9,.0f} records/s, "
                              f"caller {r['caller_us']:.2f} us per send()", file=sys.stderr, flush=True)
    print("| send() loop | interpreted records/s | mypyc records/s | ratio | caller us, interpreted -> mypyc |")
    print("| --- | ---: | ---: | ---: | --- |")
    for mode in ("plain", "callback"):
        med = {name: statistics.median(r["rps"] for r in results[(mode, name)]) for name in copies}
        cost = {name: statistics.median(r["caller_us"] for r in results[(mode, name)]) for name in copies}
        print(f"| {mode} | {med['interpreted']:,.0f} | {med['mypyc']:,.0f} | {med['mypyc'] / med['interpreted']:.2f}x "
              f"| {cost['interpreted']:.2f} -> {cost['mypyc']:.2f} |")


if __name__ == "__main__":
    main()
