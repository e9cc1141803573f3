"""What compiling the send() path unchanged buys, by compiler: the measurement that chose mypyc for issue 30.

    .venv/bin/python benchmarks/compile_bound.py [--records 300000] [--reps 3] [--compilers cython,mypyc]

Copies the package to a temporary directory as it is (interpreted) and once per compiler: with the send path's
modules compiled by Cython in pure-Python mode (hatch_build.py's CYTHON_MODULES, unchanged, producer.py and
futures.py included), and with the modules mypyc accepts unchanged compiled by mypyc (hatch_build.py's
MODULES: mypyc refuses producer.py's weak references and futures.py's Future subclass). Runs the same send()
loop, plain and with a delivery callback, against each copy in its own process, interleaved. Needs a C
compiler and each compiler asked for (`--compilers mypyc` when Cython is not installed).
"""

from __future__ import annotations

import argparse
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


BUILT = shutil.ignore_patterns("*.so", "*.c", "_extensions.json", "__pycache__")
COMPILERS = ("cython", "mypyc")


def worker(bootstrap: str, topic: str, n: int, callback: bool) -> None:
    """send_cost.py's kafkajet loop, against whichever copy of the package PYTHONPATH put first."""
    from send_cost import run

    import kafkajet

    r = run("kafkajet callback" if callback else "kafkajet", bootstrap, topic, n)
    print(json.dumps({"file": kafkajet.__file__, "rps": n / r["wall"], "caller_us": r["main"] / n * 1e6,
                      "acked": r["ok"]}))


def compilers_option(ap: argparse.ArgumentParser) -> None:
    def names(text: str) -> list[str]:
        chosen = [c for c in COMPILERS if c in text.split(",")]  # in COMPILERS' order, each once
        if not chosen or set(text.split(",")) - set(COMPILERS):
            raise argparse.ArgumentTypeError(f"a comma-separated choice of {', '.join(COMPILERS)}: {text!r}")
        return chosen

    ap.add_argument("--compilers", type=names, default=list(COMPILERS),
                    help="which compiled copies to time against the interpreted one (default: cython,mypyc)")


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
    args = paired_loop_args(__doc__, compilers_option)
    if args.worker:
        bootstrap, topic, mode = args.worker
        worker(bootstrap, topic, args.records, mode == "callback")
        return
    from kafkajet.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="kafkajet-compile-") as tmp:
        copies = {"interpreted": Path(tmp) / "pure", **{c: Path(tmp) / c for c in args.compilers}}
        shutil.copytree(ROOT / "kafkajet", copies["interpreted"] / "kafkajet", ignore=BUILT)
        print(f"  compiling with {' and '.join(args.compilers)} ...", file=sys.stderr, flush=True)
        for compiler in args.compilers:
            build(copies[compiler], compiler)
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
    label = {"interpreted": "interpreted", "cython": "Cython", "mypyc": "mypyc"}
    print(f"| send() loop | {' | '.join(f'{label[n]} records/s' for n in copies)} "
          f"| caller us: {', '.join(label[n] for n in copies)} |")
    print(f"| --- | {' | '.join('---:' for _ in copies)} | --- |")
    for mode in ("plain", "callback"):
        med = {name: statistics.median(r["rps"] for r in results[(mode, name)]) for name in copies}
        cost = {name: statistics.median(r["caller_us"] for r in results[(mode, name)]) for name in copies}
        base = med["interpreted"]
        rates = [f"{base:,.0f}", *(f"{med[c]:,.0f} ({med[c] / base:.2f}x)" for c in args.compilers)]
        print(f"| {mode} | {' | '.join(rates)} | {', '.join(f'{cost[n]:.2f}' for n in copies)} |")


if __name__ == "__main__":
    main()
