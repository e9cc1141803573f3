"""A wheel built here installs into a new virtual environment and runs its compiled build there; without a
C compiler the build still succeeds, with the pure-Python package, and says so once.

The wheel takes the checkout's in-place build when it is up to date (make test's `build` step sees to that):
then the test takes seconds. It needs hatchling, mypyc (mypy), Cython and setuptools in this environment (the dev extra) and
skips without them, except in make test's compiled run (KAFKAJET_EXPECT_COMPILED=1).
"""

from __future__ import annotations

import os
import shutil
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
        for module in ("hatchling", "mypyc", "Cython", "setuptools"):
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


def test_without_a_c_compiler_the_wheel_is_the_pure_package_and_says_so(tmp_path: Path) -> None:
    if os.environ.get("KAFKAJET_EXPECT_COMPILED", "") in ("", "0"):
        for module in ("hatchling", "mypyc", "Cython", "setuptools"):
            pytest.importorskip(module, reason="building the wheel needs the dev extra's build tools")
    # A copy of the source without its in-place build (the fallback removes a failed build's leftovers).
    src = tmp_path / "src"
    for name in ("pyproject.toml", "hatch_build.py", "README.md"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes((ROOT / name).read_bytes())
    for package in ("kafkajet", "pyspark_kafkajet"):
        shutil.copytree(ROOT / package, src / package,
                        ignore=shutil.ignore_patterns("*.so", "*.c", "_extensions.json", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "KAFKAJET_NO_EXTENSIONS"}
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w",
                        str(tmp_path / "dist"), str(src)], env={**env, "CC": "/bin/false"}, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    wheels = [p.name for p in (tmp_path / "dist").glob("kafkajet-*.whl")]
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-any.whl"), wheels  # pure: any platform
    said = [line for line in (r.stdout + r.stderr).splitlines() if "kafkajet build:" in line]
    assert len(said) == 1 and "building the pure-Python package" in said[0], said
