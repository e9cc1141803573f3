"""`import kafkajet.spark` where PySpark is missing or too old says what to install, not a bare import error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("blocked", ["pyspark", "pyspark.sql.datasource"])  # absent; older than the API
def test_import_without_pyspark_names_the_extra(blocked: str) -> None:
    # None in sys.modules makes the import fail as a missing module does (ModuleNotFoundError naming it).
    code = f"import sys; sys.modules[{blocked!r}] = None; import kafkajet.spark"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: kafkajet.spark needs PySpark 4.2 or later"), r.stderr
    assert "pip install 'kafkajet[spark]'" in last, r.stderr
