"""`make test`'s compiled run relies on pytest-xdist's `--dist loadgroup` keeping a file's tests in one worker
(tests/conftest.py gives each test its group). When the grouping silently stops working, every worker starts its
own copy of each module's brokers (three-node clusters, the secured Apache Kafka) and up to four Spark sessions run
at once: pytest 9.2 did that to pytest-xdist 3.8 (xdist renames the test ids to carry the group, and pytest 9.2
no longer reads the name it sets), and the suite got minutes slower with no test failing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ("tests/unit/test_transaction_bounds.py", "tests/unit/test_network_util.py")


def test_a_files_tests_run_in_one_worker_under_loadgroup() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KAFKAJET_EXPECT"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                          "-p", "no:cacheprovider", *FILES],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d+)\].*?PASSED (\S+)", run.stdout, re.M):
        workers[nodeid.split("::")[0]].add(worker)
    assert set(workers) == set(FILES), run.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), (
        f"a file's tests ran in several workers: {dict(workers)}; pytest-xdist's loadgroup is not grouping "
        "(a pytest or pytest-xdist upgrade? pyproject.toml pins the pair that works)")
