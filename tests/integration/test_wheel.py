"""A wheel built here installs into a new virtual environment and runs its compiled build there.

The wheel takes the checkout's in-place build when it is up to date (make test's `build` step sees to that):
then the test takes seconds. It needs hatchling, mypyc (mypy) and setuptools in this environment (the dev extra) and
skips without them, except in make test's compiled run (KAFKAJET_EXPECT_COMPILED=1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from kafkajet.records.batch import encode_batch

ROOT = Path(__file__).resolve().parents[2]


def test_a_wheel_built_here_installs_and_runs_compiled_in_a_new_venv(tmp_path: Path) -> None:
    if os.environ.get("KAFKAJET_EXPECT_COMPILED", "") in ("", "0"):
        for module in ("hatchling", "mypyc", "setuptools"):
            pytest.importorskip(module, reason="building the wheel needs the dev extra's build tools")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KAFKAJET_NO_EXTENSIONS")}
    build_env = {k: v for k, v in os.environ.items() if k != "KAFKAJET_NO_EXTENSIONS"}
    # Built with this venv's hatchling, Cython and setuptools (the dev extra): no index needed.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(ROOT)], env={**build_env, "KAFKAJET_REQUIRE_EXTENSIONS": "1"},
                   check=True, capture_output=True, timeout=600)
    wheels = list((tmp_path / "dist").glob("kafkajet-*.whl"))
    assert len(wheels) == 1 and "-none-any" not in wheels[0].name, wheels  # a platform wheel: compiled
    venv.create(tmp_path / "venv", with_pip=False)
    target = tmp_path / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    # The new venv takes its dependencies (crc32c, cramjam) from this one's site-packages, after its own:
    # pip's own install of the wheel, with no index, is what is under test.
    (target / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(tmp_path / "venv" / "bin" / "python"), "install",
                    "--no-deps", "--no-index", str(wheels[0])], env=env, check=True, capture_output=True,
                   timeout=300)
    code = ("import kafkajet; from kafkajet import _build; from kafkajet.records.batch import encode_batch\n"
            "print(kafkajet.__file__); print(_build.describe())\n"
            "print(encode_batch([(1000, b'k', b'v' * 100, [('h', b'x')]), (1001, None, b'w', None)]).hex())")
    r = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120, check=True)
    path, described, encoded = r.stdout.splitlines()
    assert path.startswith(str(target)), path
    assert described.startswith("compiled: mypyc"), described
    assert encoded == encode_batch([(1000, b"k", b"v" * 100, [("h", b"x")]), (1001, None, b"w", None)]).hex()
