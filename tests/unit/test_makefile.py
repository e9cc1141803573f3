"""The README's two commands on a fresh machine: `make demo` installs nothing that needs a system package, and
`make test` installs its system packages before the pip step that builds against them.

A green run on a machine where earlier runs installed everything proves neither (issue 44: `gssapi` built
against Kerberos headers that `make test` installed one step too late, and `make demo` failed with it). These
tests read the Makefile's own plan (`make -n -B`, which prints recipes without running them) and ask pip to
resolve the demo's install where the system tools are hidden from PATH.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Tools a fresh machine may lack and the demo must not need: the system package manager, Maven, and the
# Kerberos headers' helper that a source build of gssapi runs.
SYSTEM_TOOLS = ("apt-get", "apt", "sudo", "mvn", "krb5-config")
# Packages the demo may take as a source distribution: pure Python, so they build without a compiler or a
# system package. Any other sdist could need headers (gssapi did): a package that loses its wheel shows up here.
PURE_PYTHON_SDISTS = {"pyspark"}
SYSTEM_STEP = re.compile(r"apt-get install -y")
PIP_EXTRAS = re.compile(r"pip install .*-e '\.\[([a-z,-]+)\]'")


def clean_env(**changes: str) -> dict[str, str]:
    """The environment without a parent make's: `make test` runs these tests inside its own recipe, whose
    jobserver and level a child make would inherit (and warn about)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    env.update(changes)
    return env


def make_plan(*targets: str, jobs: int = 1) -> list[str]:
    """The recipe lines `make` would run for `targets` from nothing (-B: as on a fresh machine), in order."""
    out = subprocess.run(["make", "-n", "-B", f"-j{jobs}", "-C", str(REPO), *targets], capture_output=True,
                         text=True, timeout=60, check=True, env=clean_env()).stdout
    return [line for line in out.splitlines() if not line.startswith("make[")]


def extras_closure(names: list[str]) -> list[str]:
    """The requirements of kafkajet's extras `names`, with kafkajet[...] self-references expanded."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    requirements, seen, todo = list(project["dependencies"]), set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for req in extras[name]:
            own = re.fullmatch(r"kafkajet\[([a-z,-]+)\]", req)
            if own:
                todo.extend(own.group(1).split(","))
            else:
                requirements.append(req)
    return requirements


def needs_system_packages(requirements: list[str]) -> bool:
    return any(re.match(r"gssapi\b", r) for r in requirements)


def path_without(tmp_path: Path, hidden: tuple[str, ...]) -> str:
    """A PATH of one folder holding every command of today's PATH but `hidden`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = bin_dir / entry.name
            if entry.name not in hidden and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return str(bin_dir)


def test_the_demo_plan_has_no_system_step_and_installs_the_demo_extra() -> None:
    plan = make_plan("demo")
    tools = [line for line in plan if re.search(r"\b(apt-get|sudo|mvn|kinit|krb5)\b", line)]
    assert not tools, f"make demo runs a system tool: {tools}"
    installed = [m.group(1) for line in plan for m in [PIP_EXTRAS.search(line)] if m]
    assert installed == ["demo"], f"make demo should install the `demo` extra only, not {installed}"


def test_the_demo_install_resolves_with_no_system_tools_and_builds_only_pure_python(tmp_path: Path) -> None:
    """pip resolves the demo extra's whole closure where apt-get, Maven and krb5-config are hidden; a package it
    would build from source fails here if its build needs them (metadata is built even in a dry run), and every
    source build must be one known to be pure Python: pip's cache may hold a wheel an earlier run built with
    the headers present, which hides the first check on this machine but not the second."""
    requirements = extras_closure(["demo"])
    report = tmp_path / "report.json"
    env = clean_env(PATH=path_without(tmp_path, SYSTEM_TOOLS))
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                          "--report", str(report), *requirements],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"the demo's packages need a system tool ({', '.join(SYSTEM_TOOLS)} hidden):\n" \
                                f"{run.stderr[-3000:]}"
    sdists = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]
              if not item["download_info"]["url"].endswith(".whl")}
    assert sdists <= PURE_PYTHON_SDISTS, \
        f"{sorted(sdists - PURE_PYTHON_SDISTS)}: no wheel for this Python, so `make demo` would build them from " \
        f"source (and may need system headers); keep them out of the demo extra"


@pytest.mark.parametrize("target", ["test", ".venv/.installed", ".venv/.gssapi-installed"])
@pytest.mark.parametrize("jobs", [1, 4])
def test_every_pip_step_that_builds_against_system_headers_comes_after_the_system_step(target: str,
                                                                                        jobs: int) -> None:
    """Asked for that target alone, make plans apt-get before the pip step that needs it: the order is a
    prerequisite, so it holds under -j and whatever else is built first."""
    plan = make_plan(target, jobs=jobs)
    system = [i for i, line in enumerate(plan) if SYSTEM_STEP.search(line)]
    for i, line in enumerate(plan):
        m = PIP_EXTRAS.search(line)
        if m and needs_system_packages(extras_closure(m.group(1).split(","))):
            assert system and system[0] < i, \
                f"`make {target}`: {line.strip()!r} builds against Kerberos' headers before (or without) " \
                f"the apt-get step that installs them"
    if target != ".venv/.installed":  # the suite's whole install includes gssapi, after krb5
        assert any(needs_system_packages(extras_closure(m.group(1).split(",")))
                   for line in plan for m in [PIP_EXTRAS.search(line)] if m), f"`make {target}` installs no gssapi"


def test_make_demo_without_java_says_so_in_one_line_before_installing_anything(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = clean_env(PATH=path_without(tmp_path, ("java",)))
    run = subprocess.run(["make", "-s", "-C", str(REPO), f"VENV={venv}", "demo"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if not line.startswith("make: ***")]
    assert len(errors) == 1 and "Java 17" in errors[0] and "missing" in errors[0], run.stderr
    assert not venv.exists(), "make demo created the virtual environment before checking for Java"


def test_make_demo_with_an_old_python_says_so_in_one_line_before_installing_anything(tmp_path: Path) -> None:
    old = tmp_path / "python3.9"
    old.write_text("#!/bin/sh\ncase \"$1\" in --version) echo 'Python 3.9.2';; *) exit 1;; esac\n")
    old.chmod(0o755)
    venv = tmp_path / "venv"
    run = subprocess.run(["make", "-s", "-C", str(REPO), f"VENV={venv}", f"PYTHON={old}", "demo"],
                         capture_output=True, text=True, timeout=60, env=clean_env())
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if not line.startswith("make: ***")]
    assert len(errors) == 1 and "Python >= 3.11" in errors[0] and "3.9.2" in errors[0], run.stderr
    assert not venv.exists()


@pytest.mark.parametrize("jobs", [1, 4])
def test_make_test_installs_the_system_packages_before_any_pip_step(jobs: int) -> None:
    """On a fresh clone `make test` runs apt-get first: no pip step (the demo's or the suite's) comes before it."""
    plan = make_plan("test", jobs=jobs)
    system = [i for i, line in enumerate(plan) if SYSTEM_STEP.search(line)]
    pips = [i for i, line in enumerate(plan) if "pip install" in line]
    assert system and pips and system[0] < pips[0], \
        f"`make test` plans {plan[pips[0]].strip()!r} before the apt-get step" if pips else "no pip step planned"
