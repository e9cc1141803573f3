"""Which build of the send path runs: the compiled extension modules (hatch_build.py) where they were built
from the source beside them, else that source, the pure-Python reference.

An extension module sits beside its .py file and the import system prefers it. This finder, installed before
any compiled module is imported, gives the .py back when `KAFKAJET_NO_EXTENSIONS=1` is set, or when the
source has changed since the build (`kafkajet/_extensions.json` holds the hash of each source compiled): an
edited checkout never runs stale compiled code.
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

_PACKAGE = Path(__file__).resolve().parent


def extensions_disabled() -> bool:
    return os.environ.get("KAFKAJET_NO_EXTENSIONS", "") not in ("", "0")


def _manifest() -> tuple[str, dict[str, str]]:
    try:
        data = json.loads((_PACKAGE / "_extensions.json").read_text())
        return str(data["compiler"]), dict(data["modules"])
    except (OSError, ValueError, KeyError, TypeError):
        return "", {}


COMPILER, _COMPILED_HASHES = _manifest()
DISABLED = extensions_disabled()


def _source(fullname: str) -> Path:
    return _PACKAGE.parent.joinpath(*fullname.split(".")).with_suffix(".py")


class _SourceFinder:
    """Finds the .py of a compiled module that must run as Python; defers to the normal finders otherwise."""

    def __init__(self) -> None:
        self.stale: list[str] = []

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        expected = _COMPILED_HASHES.get(fullname)
        if expected is None:
            return None
        source = _source(fullname)
        if not DISABLED:
            try:
                if hashlib.sha256(source.read_bytes()).hexdigest() == expected:
                    return None
            except OSError:  # a wheel installed without its sources: the compiled module is all there is
                return None
            self.stale.append(fullname)
            # A warning, not a log line: at import no application has configured logging yet.
            warnings.warn(f"kafkajet: {source} changed since it was compiled; running its Python source "
                          "(python hatch_build.py rebuilds the compiled modules)", RuntimeWarning, stacklevel=2)
        return importlib.util.spec_from_file_location(fullname, source)


_FINDER = _SourceFinder()
if _COMPILED_HASHES:
    sys.meta_path.insert(0, _FINDER)


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
    if len(compiled) == len(loaded):
        return f"compiled: {COMPILER}, {len(compiled)} modules"
    pure = sorted(set(loaded) - set(compiled))
    return f"partly compiled: {COMPILER}, {len(compiled)} of {len(loaded)} modules; Python: {', '.join(pure)}"
