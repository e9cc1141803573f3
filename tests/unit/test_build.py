"""The optional compiled build (hatch_build.py, kafkajet/_build.py): the compiled encoders write the bytes the
Python reference writes, `KAFKAJET_NO_EXTENSIONS=1` runs the Python source, a source edited after the build
runs as Python, and `kafkajet --version` says which build runs.

Tests that need the compiled modules skip when this checkout has none built, unless
`KAFKAJET_EXPECT_COMPILED=1` (make test's compiled run) makes that a failure: a build that silently fell back to
Python must not pass as the compiled one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kafkajet
from kafkajet import _build

ROOT = Path(__file__).resolve().parents[2]
HASHES = _build._COMPILED_HASHES


def _env(pythonpath: Path = ROOT, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKAJET_NO_EXTENSIONS"}
    return {**env, "PYTHONPATH": str(pythonpath), **extra}


def _python(code: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=True)


def _require_compiled() -> None:
    if HASHES and not _build.DISABLED:
        return
    if os.environ.get("KAFKAJET_EXPECT_COMPILED", "") not in ("", "0") and not _build.DISABLED:
        pytest.fail(f"the compiled build was expected but this checkout runs {_build.describe()}")
    pytest.skip(f"no compiled build to compare ({_build.describe()})")


def test_make_tests_compiled_run_runs_compiled_modules() -> None:
    if os.environ.get("KAFKAJET_EXPECT_COMPILED", "") in ("", "0"):
        pytest.skip("only make test's compiled run expects the compiled build")
    assert _build.describe().startswith("compiled: mypyc"), _build.describe()


def test_compiled_and_python_encoders_write_the_same_bytes() -> None:
    _require_compiled()
    runs = {}
    for name, extra in (("compiled", {}), ("python", {"KAFKAJET_NO_EXTENSIONS": "1"})):
        r = subprocess.run([sys.executable, "-m", "tests.helpers.encoder_corpus"], cwd=ROOT, env=_env(**extra),
                           capture_output=True, text=True, timeout=120, check=True)
        runs[name] = json.loads(r.stdout)
    assert runs["compiled"]["compiled"] == [True, True, True], runs["compiled"]["build"]
    assert runs["python"]["compiled"] == [False, False, False], runs["python"]["build"]
    assert runs["compiled"]["kernels"] == [True, True], runs["compiled"]["build"]
    assert runs["python"]["kernels"] == [False, False], runs["python"]["build"]
    compiled, python = runs["compiled"]["corpus"], runs["python"]["corpus"]
    assert len(compiled) == len(python) >= 20
    for i, (c, p) in enumerate(zip(compiled, python, strict=True)):
        assert c == p, f"encoding {i} differs between the compiled and the Python build"


def test_no_extensions_runs_every_compiled_module_from_its_source() -> None:
    _require_compiled()
    code = ("import importlib, json, kafkajet; from kafkajet import _build\n"
            "mods = {n: importlib.import_module(n) for n in _build._COMPILED_HASHES}\n"
            "print(json.dumps({n: [_build.is_compiled(m), m.__file__] for n, m in mods.items()}))")
    pure = json.loads(_python(code, _env(KAFKAJET_NO_EXTENSIONS="1")).stdout)
    assert set(pure) == set(HASHES)
    assert all(not compiled and path.endswith(".py") for compiled, path in pure.values()), pure
    compiled = json.loads(_python(code, _env()).stdout)
    assert all(c for c, _ in compiled.values()), compiled


def test_a_source_edited_after_the_build_runs_as_python(tmp_path: Path) -> None:
    # All of it: mypyc's modules share native classes, so the edited module cannot run beside compiled ones.
    _require_compiled()
    shutil.copytree(Path(kafkajet.__file__).parent, tmp_path / "kafkajet",
                    ignore=shutil.ignore_patterns("__pycache__", "*.c"))
    for shared in ROOT.glob("kafkajet__mypyc*"):
        shutil.copy(shared, tmp_path)
    clock = tmp_path / "kafkajet" / "clock.py"
    clock.write_text(clock.read_text() + "\nEDITED = True\n")
    code = ("import json, kafkajet.clock, kafkajet.producer.batch; from kafkajet import _build\n"
            "print(json.dumps([_build.is_compiled(kafkajet.clock), getattr(kafkajet.clock, 'EDITED', False), "
            "_build.is_compiled(kafkajet.producer.batch), _build.describe()]))")
    r = _python(code, _env(tmp_path), cwd=tmp_path)
    clock_compiled, edited, batch_compiled, described = json.loads(r.stdout)
    assert (clock_compiled, edited, batch_compiled) == (False, True, False)
    assert "changed since the send path was compiled" in r.stderr and "clock.py" in r.stderr
    assert described == "pure Python: kafkajet.clock changed since the build"
    shutil.copy(Path(kafkajet.__file__).parent / "clock.py", clock)  # restored: the same copy runs compiled
    unedited = _python(code, _env(tmp_path), cwd=tmp_path)
    assert json.loads(unedited.stdout)[:3] == [True, False, True] and "changed" not in unedited.stderr


@pytest.mark.parametrize("disabled", [False, True])
def test_version_says_which_build_runs(disabled: bool) -> None:
    env = _env(KAFKAJET_NO_EXTENSIONS="1") if disabled else _env()
    r = subprocess.run([sys.executable, "-m", "kafkajet", "--version"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    if disabled:
        assert r.stdout.strip() == f"kafkajet {kafkajet.__version__} (pure Python: KAFKAJET_NO_EXTENSIONS=1)"
    elif HASHES:
        assert r.stdout.startswith(f"kafkajet {kafkajet.__version__} (compiled: mypyc "), r.stdout
    else:
        assert r.stdout.strip() == f"kafkajet {kafkajet.__version__} (pure Python: no compiled modules built)"


def test_producer_logs_which_build_runs_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    from kafkajet import Producer

    with caplog.at_level("DEBUG", logger="kafkajet.producer"):
        Producer(bootstrap_servers="127.0.0.1:1", client_id="build-line").close(0)
    assert f"kafkajet {kafkajet.__version__}, {_build.describe()}" in caplog.messages


def test_producer_describes_the_build_only_when_debug_is_on(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    # describe() imports and inspects every compiled module: a Producer() at INFO must not pay for a line
    # nobody sees.
    import kafkajet.producer.producer as producer_module

    calls: list[int] = []
    monkeypatch.setattr(producer_module, "describe_build", lambda: calls.append(1) or "counted")
    with caplog.at_level("INFO", logger="kafkajet.producer"):
        producer_module.Producer(bootstrap_servers="127.0.0.1:1", client_id="build-line-info").close(0)
    assert calls == []
    with caplog.at_level("DEBUG", logger="kafkajet.producer"):
        producer_module.Producer(bootstrap_servers="127.0.0.1:1", client_id="build-line-debug").close(0)
    assert calls == [1]
