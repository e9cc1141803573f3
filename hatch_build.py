"""The optional compiled build: mypyc compiles the send path's own .py files (no second source) into
extension modules beside them, and Cython two kernels (KERNELS: C where measurement showed the compiled Python
cannot get there, each a drop-in for one Python function). The .py files stay the reference and the fallback.

mypyc, not Cython, by benchmarks/compile_bound.py's figures: compiling the same unchanged files, Cython's
generic attribute and call code gained nothing over CPython 3.11's specialising interpreter (1.07x on send()),
while mypyc's native classes and typed attributes made send() 2x faster. mypyc refuses producer.py (weak
references) and futures.py (a concurrent.futures.Future subclass): they stay Python, and send()'s per-record
work lives in send_path.py, which compiles.

hatchling runs this as a build hook (pyproject.toml [tool.hatch.build.targets.wheel.hooks.custom]):
- the modules are built in place, beside their sources (again only when a source changed since the last build),
  with `kafkajet/_extensions.json`: the hash of each source compiled, which kafkajet/_build.py checks at import;
- an editable install (`pip install -e .`) imports them from there, the source tree its .pth points at;
- a wheel includes them, mypyc's shared library and the manifest, with a platform tag.
No mypyc, no C compiler, a compiler error, or `KAFKAJET_NO_EXTENSIONS=1`: the build says so once and the
package is the pure one; `pip install` never fails for want of a compiler. After editing a compiled module in a
checkout, `python hatch_build.py` (make build) rebuilds in place; until then kafkajet/_build.py runs Python.
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

# What profiling benchmarks/send_cost.py showed the caller's and the sender's threads spend their time in,
# less what mypyc refuses (producer.py, futures.py: send_path.py holds send()'s per-record work) and buffer_pool.py (once per batch, not per record; the
# tests subclass BufferPool, which a compiled class refuses to interpreted code).
MODULES = [
    "kafkajet/clock.py",
    "kafkajet/records/record.py",
    "kafkajet/records/batch.py",
    "kafkajet/producer/batch.py",
    "kafkajet/producer/accumulator.py",
    "kafkajet/producer/partitioner.py",
    "kafkajet/producer/sender.py",
    "kafkajet/producer/send_path.py",
    # The Avro serializer's per-field encoders (stdlib only): most of a registered Avro record's send() cost.
    "kafkajet/avro_binary.py",
]
# Kernels: C (through Cython) where measurement showed the compiled Python cannot get there, each a drop-in for
# one function of the Python reference, which tests compare it with (issue 30). Part of the compiled build: built
# with the modules above, or not at all.
KERNELS = [
    "kafkajet/records/record_kernel.pyx",  # record.append_record: 110 -> under 40 ns a record; columns.append_columns
    "kafkajet/producer/metadata_kernel.pyx",  # a RecordMetadata for each delivery callback: 112 -> 60 ns
]
# Cython accepts every module unchanged: benchmarks/compile_bound.py compiles these with it for the comparison.
CYTHON_MODULES = [*MODULES, "kafkajet/producer/producer.py", "kafkajet/producer/futures.py",
                  "kafkajet/producer/buffer_pool.py"]
MANIFEST = "kafkajet/_extensions.json"
MYPYC_GROUP = "kafkajet"  # mypyc's shared library: kafkajet__mypyc.<EXT_SUFFIX>, beside the package
CYTHON_DIRECTIVES = {
    "language_level": 3,
    # The annotations are the Python reference's: Cython must not turn `x: float` into a C double or `x: bytes`
    # into an exact-type check (a bytearray passed where bytes is annotated works in Python).
    "annotation_typing": False,
    "binding": True,
    # The compiled modules keep no module-level state beyond what the Python source has.
    "freethreading_compatible": True,
}


def extensions_disabled() -> bool:
    return os.environ.get("KAFKAJET_NO_EXTENSIONS", "") not in ("", "0")


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _extensions(compiler: str, modules: list[str]) -> tuple[list[Any], str]:
    if compiler == "cython":
        from Cython import __version__ as version
        from Cython.Build import cythonize
        from setuptools import Extension

        exts = [Extension(m[:-3].replace("/", "."), [m]) for m in modules]
        return cythonize(exts, compiler_directives=CYTHON_DIRECTIVES, quiet=True, force=True,
                         nthreads=os.cpu_count() or 1), f"Cython {version}"
    from Cython import __version__ as cython_version
    from Cython.Build import cythonize
    from mypy.version import __version__ as version
    from mypyc.build import mypycify
    from setuptools import Extension

    # One group: calls and attribute reads between the modules go native, not through Python.
    exts = mypycify(modules, opt_level="3", debug_level="0", group_name=MYPYC_GROUP)
    kernels = cythonize([Extension(k[:-4].replace("/", "."), [k]) for k in KERNELS],
                        compiler_directives=CYTHON_DIRECTIVES, quiet=True, force=True)
    return [*exts, *kernels], f"mypyc {version}, Cython {cython_version}"


def build(root: Path, compiler: str = "mypyc") -> dict[str, Path]:
    """Compile the modules in place under `root` with mypyc (or Cython: compile_bound.py's comparison), unless
    the manifest says the extension files there were built from these very sources. Returns each file a wheel
    must carry (extension modules, mypyc's shared library, the manifest) by its path in the wheel. Raises
    whatever the compiler does."""
    from setuptools import Distribution

    modules = CYTHON_MODULES if compiler == "cython" else MODULES
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    hashes = {m[:-3].replace("/", "."): source_hash(root / m) for m in modules}
    built = {m[:-3] + suffix: root / (m[:-3] + suffix) for m in modules}
    kernels: dict[str, str] = {}
    if compiler == "mypyc":
        built[MYPYC_GROUP + "__mypyc" + suffix] = root / (MYPYC_GROUP + "__mypyc" + suffix)
        kernels = {k[:-4].replace("/", "."): source_hash(root / k) for k in KERNELS}
        built.update({k[:-4] + suffix: root / (k[:-4] + suffix) for k in KERNELS})
    done = _read_manifest(root / MANIFEST)
    up_to_date = (done.get("kind") == compiler and done.get("modules") == hashes
                  and done.get("kernels", {}) == kernels and all(p.exists() for p in built.values()))
    if not up_to_date:
        clean(root)
        cwd = os.getcwd()
        os.chdir(root)  # the compilers take the package's relative paths
        try:
            exts, label = _extensions(compiler, modules)
            dist = Distribution({"ext_modules": exts, "script_name": "hatch_build.py"})
            cmd: Any = dist.get_command_obj("build_ext")
            cmd.inplace = True
            cmd.build_temp = str(Path(tempfile.gettempdir()) / f"kafkajet-build-{os.getpid()}")
            cmd.parallel = os.cpu_count() or 1
            cmd.force = True
            cmd.ensure_finalized()
            cmd.run()
        finally:
            os.chdir(cwd)
        missing = [str(p) for p in built.values() if not p.exists()]
        if missing:
            raise RuntimeError(f"extension modules not built: {missing}")
        (root / MANIFEST).write_text(json.dumps({"compiler": label, "kind": compiler, "modules": hashes,
                                                 "kernels": kernels}, indent=1) + "\n")
        _say(f"compiled {len(modules)} modules and {len(kernels)} kernels in place ({label})")
    else:
        _say(f"the {len(modules)} compiled modules and {len(kernels)} kernels are up to date ({done['compiler']})")
    built[MANIFEST] = root / MANIFEST
    return built


def clean(root: Path) -> None:
    """Remove in-place extension modules and the manifest: the checkout imports its .py files again."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for stem in [m[:-3] for m in CYTHON_MODULES] + [k[:-4] for k in KERNELS]:
        for p in (root / (stem + suffix), root / (stem + ".c")):
            p.unlink(missing_ok=True)
    (root / (MYPYC_GROUP + "__mypyc" + suffix)).unlink(missing_ok=True)
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
            # them from there (a checkout whose build is up to date compiles nothing again).
            built = build(root)
        # SystemExit too: mypyc exits when mypy reports an error. No mypyc, no compiler, a compiler error: the
        # pure package still installs.
        except (Exception, SystemExit) as exc:
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
        build(here, sys.argv[1] if sys.argv[1:] else "mypyc")
