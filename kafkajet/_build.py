"""Which build of the send path runs: the compiled extension modules (hatch_build.py) where they were built
from the sources beside them, else those sources, the pure-Python reference.

An extension module sits beside its .py file and the import system prefers it. This finder, installed before
any compiled module is imported, gives the .py files back when `KAFKAJET_NO_EXTENSIONS=1` is set, or when any
compiled module's source has changed since the build (`kafkajet/_extensions.json` holds the hash of each source
compiled): an edited checkout never runs stale compiled code. All or none: mypyc compiles the modules as one
group whose native classes and calls span them, so one module's Python beside the others' compiled code would
mix two versions of the same classes.

The build's kernels (C through Cython, each a drop-in for one function of the Python reference) follow the same
decision: kernel() gives the compiled one, or None where the Python runs and the caller keeps its own function.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


def extensions_disabled() -> bool:
    return os.environ.get("KAFKAJET_NO_EXTENSIONS", "") not in ("", "0")


def _manifest() -> tuple[str, dict[str, str], dict[str, str]]:
    try:
        data = json.loads((_PACKAGE / "_extensions.json").read_text())
        return str(data["compiler"]), dict(data["modules"]), dict(data.get("kernels", {}))
    except (OSError, ValueError, KeyError, TypeError):
        return "", {}, {}


def _source(fullname: str) -> Path:
    path = _PACKAGE.parent.joinpath(*fullname.split("."))
    return path.with_suffix(".pyx") if fullname in _KERNEL_HASHES else path.with_suffix(".py")


def _changed(hashes: dict[str, str]) -> list[str]:
    """The compiled modules whose source is not the one compiled (none when the sources are not installed:
    the compiled modules are then all there is)."""
    changed = []
    for name, expected in hashes.items():
        try:
            if hashlib.sha256(_source(name).read_bytes()).hexdigest() != expected:
                changed.append(name)
        except OSError:
            return []
    return changed


COMPILER, _COMPILED_HASHES, _KERNEL_HASHES = _manifest()
DISABLED = extensions_disabled()
# Read once, at import: the decision holds for the process (the modules are imported once).
STALE = [] if DISABLED or not _COMPILED_HASHES else _changed({**_COMPILED_HASHES, **_KERNEL_HASHES})
USE_PYTHON = DISABLED or bool(STALE)
if STALE:
    # A warning, not a log line: at import no application has configured logging yet.
    warnings.warn(f"kafkajet: {', '.join(str(_source(n)) for n in STALE)} changed since the send path was "
                  "compiled; running the Python source (python hatch_build.py, or make build, recompiles)",
                  RuntimeWarning, stacklevel=2)


class _SourceFinder:
    """Finds the .py of each compiled module when the build must not run; defers to the normal finders
    otherwise."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in _KERNEL_HASHES:
            # A kernel has no Python of its own: its caller's function is the fallback (kernel()).
            raise ModuleNotFoundError(f"{fullname}: the compiled build is off here", name=fullname)
        if fullname not in _COMPILED_HASHES:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname))


if _COMPILED_HASHES and USE_PYTHON:
    sys.meta_path.insert(0, _SourceFinder())


def kernel(module: str, name: str) -> Any | None:
    """The build's compiled `module.name` (a kernel), or None where the Python reference runs: no build, the
    build off or stale, or a build without that kernel."""
    if USE_PYTHON or module not in _KERNEL_HASHES:
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def is_compiled(module: ModuleType) -> bool:
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


def describe() -> str:
    """One line: which build runs, e.g. for `kafkajet --version` and the DEBUG log line."""
    if DISABLED:
        return "pure Python: KAFKAJET_NO_EXTENSIONS=1"
    if not _COMPILED_HASHES:
        return "pure Python: no compiled modules built"
    import importlib

    loaded = {name: importlib.import_module(name) for name in _COMPILED_HASHES}
    compiled = [name for name, module in loaded.items() if is_compiled(module)]
    if STALE:
        return f"pure Python: {', '.join(STALE)} changed since the build"
    pure = sorted(set(loaded) - set(compiled))
    missing = [name for name in _KERNEL_HASHES if kernel(name, "__name__") is None]
    if not pure and not missing:
        return f"compiled: {COMPILER}, {len(compiled)} modules, {len(_KERNEL_HASHES)} kernels"
    return (f"partly compiled: {COMPILER}, {len(compiled)} of {len(loaded)} modules; Python: "
            f"{', '.join(pure + missing)}")
