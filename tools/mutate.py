"""Mutation testing of the producer's core: `make mutate [MODULE=partitioner]`.

Runs mutmut (configured under [tool.mutmut] in pyproject.toml) over one core module, or all of them, against
the fast unit tests, then prints the score per module and each surviving mutant's name; `mutmut show NAME`
prints its diff. A habit, not a gate: `make test` does not run it. `--max-children N` (or `-j N`) caps mutmut's
workers (default: one per core), for a machine shared with other work.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ("partitioner", "accumulator", "batch", "buffer_pool", "idempotence", "sender", "futures", "transactions")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="mutmut over the producer's core modules")
    parser.add_argument("modules", nargs="*", metavar="MODULE")
    parser.add_argument("-j", "--max-children", type=int, default=None, help="mutmut workers (default: one per core)")
    args = parser.parse_args(argv)
    modules = args.modules or list(CORE)
    unknown = [m for m in modules if m not in CORE]
    if unknown:
        print(f"unknown module(s) {unknown}: choose from {', '.join(CORE)}", file=sys.stderr)
        return 2
    mutmut = [sys.executable, "-m", "mutmut"]
    children = [] if args.max_children is None else ["--max-children", str(args.max_children)]
    for module in modules:
        # One module's mutants at a time; mutmut keeps earlier results in mutants/ and reuses them.
        subprocess.run([*mutmut, "run", *children, f"kafkajet.producer.{module}.*"], cwd=ROOT, check=False,
                       stdout=subprocess.DEVNULL)
    out = subprocess.run([*mutmut, "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True).stdout
    status: dict[str, Counter[str]] = {m: Counter() for m in modules}
    survivors: dict[str, list[str]] = {m: [] for m in modules}
    for line in out.splitlines():
        match = re.match(r"\s*kafkajet\.producer\.(\w+)\.(\S+): (.+)$", line)
        if match and match[1] in status:
            status[match[1]][match[3]] += 1
            if match[3] in ("survived", "no tests"):
                survivors[match[1]].append(f"kafkajet.producer.{match[1]}.{match[2]} ({match[3]})")
    print(f"{'module':<14}{'mutants':>9}{'killed':>9}{'survived':>10}{'no tests':>10}{'score':>8}")
    for module in modules:
        c = status[module]
        total = sum(c.values())
        killed = c["killed"] + c["timeout"]
        score = f"{100 * killed / total:.0f}%" if total else "-"
        print(f"{module:<14}{total:>9}{killed:>9}{c['survived']:>10}{c['no tests']:>10}{score:>8}")
    for module in modules:
        for name in survivors[module]:
            print("  ", name)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # piped into head
        sys.exit(0)
