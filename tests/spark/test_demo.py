"""`make demo` end to end: load, a streaming query through the source and sink, and the verdict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-m", "kafkajet", "demo", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env)


def test_the_demo_pipeline_verifies_its_per_user_totals() -> None:
    r = demo("--records", "20000")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert any(line.startswith("load:   20,000 events") for line in lines)
    assert any(line.startswith("read:   20,000 events (") for line in lines)  # every event back, once
    assert sum(line.startswith("stream: micro-batch") for line in lines) >= 4  # progress while it runs
    assert lines[-1].startswith("verdict: OK - 10,000 users"), lines[-3:]


def test_the_demo_takes_an_input_file(tmp_path: Path) -> None:
    data = tmp_path / "orders.csv"
    data.write_text("customer,amount\n" + "".join(f"c{i % 7},{i}\n" for i in range(700)))
    r = demo("--input", str(data))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines()[-1].startswith("verdict: OK - 7 users"), r.stdout
