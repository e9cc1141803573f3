"""Cython against mypyc on the send() path: the measurement that chose the compiler of issue 30.

    .venv/bin/python benchmarks/compile_bound.py [--records 300000] [--reps 3]

Copies the package three times to a temporary directory: as it is (interpreted), with the send path's
modules compiled by Cython in pure-Python mode (hatch_build.py's CYTHON_MODULES, unchanged, producer.py and
futures.py included), and with the modules mypyc accepts unchanged compiled by mypyc (hatch_build.py's
MODULES: mypyc refuses producer.py's weak references and futures.py's Future subclass). Runs the same send() loop, plain and with a
delivery callback, against each copy in its own process, interleaved. Needs Cython, mypyc and a C compiler.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import create_topic, paired_loop_args, spawn
from mypyc_bound import worker

ROOT = Path(__file__).resolve().parents[1]


BUILT = shutil.ignore_patterns("*.so", "*.c", "_extensions.json", "__pycache__")


def build(dest: Path, compiler: str) -> None:
    """A copy of the package compiled by hatch_build.py with `compiler` (mypyc reuses the checkout's in-place
    build when it is up to date)."""
    shutil.copytree(ROOT / "kafkajet", dest / "kafkajet", ignore=None if compiler == "mypyc" else BUILT)
    shutil.copy(ROOT / "hatch_build.py", dest / "hatch_build.py")
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")  # mypy's settings, for mypyc
    # Without PYTHONPATH's checkout: mypy would find the package twice (the copy and the checkout) and stop.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                       if p and Path(p).resolve() != ROOT)}
    subprocess.run([sys.executable, "hatch_build.py", compiler], cwd=dest, check=True, capture_output=True, env=env)


def main() -> None:
    args = paired_loop_args(__doc__)
    if args.worker:
        bootstrap, topic, mode = args.worker
        worker(bootstrap, topic, args.records, mode == "callback")
        return
    from kafkajet.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="kafkajet-compile-") as tmp:
        copies = {"interpreted": Path(tmp) / "pure", "cython": Path(tmp) / "cython", "mypyc": Path(tmp) / "mypyc"}
        shutil.copytree(ROOT / "kafkajet", copies["interpreted"] / "kafkajet", ignore=BUILT)
        print("  compiling with Cython and mypyc ...", file=sys.stderr, flush=True)
        build(copies["cython"], "cython")
        build(copies["mypyc"], "mypyc")
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        env = {k: v for k, v in os.environ.items() if k != "KAFKAJET_NO_EXTENSIONS"}
        with EmbeddedBroker() as broker:
            for rep in range(args.reps):
                for mode in ("plain", "callback"):
                    for name, path in copies.items():
                        topic = f"compile-{rep}-{mode}-{name}"
                        create_topic(broker.bootstrap_servers, topic)
                        r = spawn([__file__, "--records", str(args.records), "--worker", broker.bootstrap_servers,
                                   topic, mode], f"{name} {mode}", 600, cwd=tmp,
                                  env={**env, "PYTHONPATH": f"{path}{os.pathsep}{ROOT / 'benchmarks'}"})
                        if r is None or not r["file"].startswith(str(path)) or r["acked"] != args.records:
                            sys.exit(f"{name} {mode}: wrong package or lost records: {r}")
                        results.setdefault((mode, name), []).append(r)
                        print(f"  rep {rep + 1}/{args.reps} {mode:8s} {name:11s} {r['rps']:>9,.0f} records/s, "
                              f"caller {r['caller_us']:.2f} us per send()", file=sys.stderr, flush=True)
    print("| send() loop | interpreted records/s | Cython records/s | mypyc records/s | caller us: interpreted, "
          "Cython, mypyc |")
    print("| --- | ---: | ---: | ---: | --- |")
    for mode in ("plain", "callback"):
        med = {name: statistics.median(r["rps"] for r in results[(mode, name)]) for name in copies}
        cost = {name: statistics.median(r["caller_us"] for r in results[(mode, name)]) for name in copies}
        base = med["interpreted"]
        print(f"| {mode} | {base:,.0f} | {med['cython']:,.0f} ({med['cython'] / base:.2f}x) "
              f"| {med['mypyc']:,.0f} ({med['mypyc'] / base:.2f}x) "
              f"| {cost['interpreted']:.2f}, {cost['cython']:.2f}, {cost['mypyc']:.2f} |")


if __name__ == "__main__":
    main()
