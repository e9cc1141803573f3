"""The optional compiled build: Cython compiles the send path's own .py files (pure-Python mode, no second
source) into extension modules beside them. The .py files stay the reference and the fallback.

hatchling runs this as a build hook (pyproject.toml [tool.hatch.build.targets.wheel.hooks.custom]):
- they are built in place, beside their sources (only those whose source changed since the last build), with
  `kafkajet/_extensions.json`: the hash of each source compiled, which kafkajet/_build.py checks at import;
- an editable install (`pip install -e .`) imports them from there, the source tree its .pth points at;
- a wheel includes them and the manifest, with a platform tag.
No Cython, no C compiler, or `KAFKAJET_NO_EXTENSIONS=1`: the build says so once and the package is the pure
one; `pip install` never fails for want of a compiler. After editing a compiled module in a checkout,
`python hatch_build.py` rebuilds in place (until then kafkajet/_build.py imports that module's .py).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

# What profiling benchmarks/send_cost.py showed the caller's and the sender's threads spend their time in.
MODULES = [
    "kafkajet/clock.py",
    "kafkajet/records/record.py",
    "kafkajet/records/batch.py",
    "kafkajet/producer/producer.py",
    "kafkajet/producer/futures.py",
    "kafkajet/producer/batch.py",
    "kafkajet/producer/accumulator.py",
    "kafkajet/producer/partitioner.py",
    "kafkajet/producer/sender.py",
    "kafkajet/producer/buffer_pool.py",
]
MANIFEST = "kafkajet/_extensions.json"
DIRECTIVES = {
    "language_level": 3,
    # The annotations are the Python reference's: Cython must not turn `x: float` into a C double or `x: bytes`
    # into an exact-type check (a bytearray passed where bytes is annotated works in Python).
    "annotation_typing": False,
    # Compiled functions keep Python's introspection (signatures, __wrapped__, pickling by name).
    "binding": True,
    # The compiled modules keep no module-level state beyond what the Python source has, which takes its own
    # locks: they need no GIL of their own (free-threaded CPython).
    "freethreading_compatible": True,
}


def extensions_disabled() -> bool:
    return os.environ.get("KAFKAJET_NO_EXTENSIONS", "") not in ("", "0")


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_manifest(path: Path) -> dict[str, str]:
    try:
        return dict(json.loads(path.read_text())["modules"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def build(root: Path, build_lib: Path | None) -> dict[str, Path]:
    """Compile MODULES under `root`; the extension files go beside their sources (build_lib None) or under
    build_lib (compile_bound.py's copies). In place, a module whose extension exists and whose source is the one the manifest says was
    compiled is not compiled again (a rebuild after an edit takes seconds). Returns each extension's path
    relative to its package root, and writes the manifest beside them. Raises whatever the compiler does."""
    from Cython import __version__ as cython_version
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = build_lib if build_lib is not None else root
    hashes = {m: source_hash(root / m) for m in MODULES}
    done = _read_manifest(out / MANIFEST) if build_lib is None else {}
    todo = [m for m in MODULES
            if done.get(m[:-3].replace("/", ".")) != hashes[m] or not (out / (m[:-3] + suffix)).exists()]
    if todo:
        exts = [Extension(m[:-3].replace("/", "."), [m]) for m in todo]
        cwd = os.getcwd()
        os.chdir(root)  # cythonize and build_ext take the package's relative paths
        try:
            dist = Distribution({"ext_modules": cythonize(exts, compiler_directives=DIRECTIVES, quiet=True,
                                                          nthreads=os.cpu_count() or 1, force=True),
                                 "script_name": "hatch_build.py"})
            cmd: Any = dist.get_command_obj("build_ext")
            cmd.inplace = build_lib is None
            if build_lib is not None:
                cmd.build_lib = str(build_lib)
            cmd.build_temp = str(Path(tempfile.gettempdir()) / f"kafkajet-build-{os.getpid()}")
            cmd.parallel = os.cpu_count() or 1
            cmd.force = True  # `todo` is what needs building: no timestamp guesses
            cmd.ensure_finalized()
            cmd.run()
        finally:
            os.chdir(cwd)
    built = {m[:-3] + suffix: out / (m[:-3] + suffix) for m in MODULES}
    missing = [str(p) for p in built.values() if not p.exists()]
    if missing:
        raise RuntimeError(f"extension modules not built: {missing}")
    manifest = {"compiler": f"Cython {cython_version}",
                "modules": {m[:-3].replace("/", "."): hashes[m] for m in MODULES}}
    (out / MANIFEST).parent.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    built[MANIFEST] = out / MANIFEST
    _say(f"compiled {len(todo)} of {len(MODULES)} modules (Cython {cython_version})"
         + ("" if len(todo) == len(MODULES) else ", the others up to date"))
    return built


def clean(root: Path) -> None:
    """Remove in-place extension modules and the manifest: the checkout imports its .py files again."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for m in MODULES:
        for p in (root / (m[:-3] + suffix), root / (m[:-3] + ".c")):
            p.unlink(missing_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)


def _say(msg: str) -> None:
    print(f"kafkajet build: {msg}", file=sys.stderr, flush=True)


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, outside a hatchling build
    BuildHookInterface = object  # type: ignore[assignment,misc]


class CompiledBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        if extensions_disabled():
            _say("KAFKAJET_NO_EXTENSIONS is set: building the pure-Python package")
            if version == "editable":
                clean(root)
            return
        try:
            # In place in both cases: an editable install imports them from the source tree, and a wheel takes
            # them from there (a checkout whose build is up to date compiles nothing again; an sdist's
            # unpacked tree compiles everything).
            built = build(root, None)
        except Exception as exc:  # no Cython, no compiler, a compiler error: the pure package still installs
            if os.environ.get("KAFKAJET_REQUIRE_EXTENSIONS", "") not in ("", "0"):  # CI: both builds, really
                raise
            _say(f"compiled modules unavailable ({type(exc).__name__}: {exc}); building the pure-Python package")
            clean(root)
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            # The extension files are gitignored, which hatchling's wheel follows: include them by name.
            build_data.setdefault("force_include", {}).update({str(src): rel for rel, src in built.items()})


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    if extensions_disabled() or sys.argv[1:] == ["clean"]:
        clean(here)
        _say("removed the in-place compiled modules: the checkout runs pure Python")
    else:
        build(here, None)
