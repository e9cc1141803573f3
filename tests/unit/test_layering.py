"""The import table: which parts of the package each part may import, checked against the code.

A part is a folder of kafkajet (`producer`, `spark.formats`: a subfolder listed on its own is its own part) or a
top-level module (`config`, `backoff`); `kafkajet` is the package face (kafkajet/__init__.py). Every import a
module makes counts, wherever it stands (module level, inside a function, under TYPE_CHECKING), and so does a
module named in a string ("kafkajet.security.sasl:plain_client", importlib.import_module("kafkajet.x")): a
string-named import is an import that waits. A part may always import itself. An import the table does not
allow fails the test, unless EXCEPTIONS lists it with its reason; an exception no longer used fails it too.

This is Kafka's checkstyle/import-control.xml for this package: one entry per part, and the build fails when
one is crossed. Read a row as "this part sits on these"; add a part to a row only when the arrow cannot go the
other way. The parts of one row's set sit below it; the whole table has no loop.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from pathlib import Path

import kafkajet

PACKAGE = Path(kafkajet.__file__).parent

# Bottom up. Each part: the parts it may import.
STDLIB_ONLY = ("_version", "_build", "errors", "clock", "backoff", "last_resort", "transaction", "avro_binary",
               "stats", "tls_context")
TABLE: dict[str, frozenset[str]] = {
    **{part: frozenset() for part in STDLIB_ONLY},
    # The base every client shares: addresses, the cluster as Metadata describes it, the serializers.
    "addresses": frozenset({"errors"}),
    "cluster": frozenset({"errors"}),
    "serialization": frozenset({"errors"}),
    # Sans-I/O: the wire protocol and record batches (no socket, no clock).
    "protocol": frozenset({"errors"}),
    "records": frozenset({"errors", "protocol"}),
    # The configuration tables sit under everything that reads them, security included.
    "config": frozenset({"addresses", "errors"}),
    "security": frozenset({"config", "errors", "backoff", "tls_context"}),
    "network": frozenset({"_version", "addresses", "backoff", "clock", "cluster", "errors", "protocol", "stats",
                          "security"}),
    # The registry client speaks HTTP with the standard library: none of the broker's layers. Its keys are a
    # table of config's (which sits on addresses and errors only), so Spark's options take theirs from it.
    "schema_registry": frozenset({"errors", "backoff", "config", "serialization", "avro_binary",
                                  "tls_context"}),
    "producer": frozenset({"_build", "_version", "addresses", "backoff", "clock", "cluster", "config", "errors",
                           "last_resort", "network", "protocol", "records", "security", "serialization", "stats",
                           "transaction"}),
    "fetch": frozenset({"addresses", "backoff", "cluster", "config", "errors", "network", "protocol", "records",
                        "security"}),
    "admin": frozenset({"addresses", "backoff", "clock", "cluster", "config", "errors", "fetch", "last_resort",
                        "network", "protocol", "security", "transaction"}),
    "aio": frozenset({"producer"}),
    # The package face: what users import.
    "kafkajet": frozenset({"_build", "_version", "admin", "cluster", "errors", "producer", "records",
                           "transaction"}),
    # Front ends. Spark's formats map the registry's formats to Spark columns and import nothing of spark/
    # above them.
    "spark.formats": frozenset({"errors", "serialization", "schema_registry"}),
    "spark": frozenset({"spark.formats", "admin", "cluster", "config", "errors", "fetch", "network", "producer",
                        "records", "schema_registry", "serialization"}),
    "testing": frozenset({"kafkajet", "admin", "cluster", "config", "errors", "fetch", "network", "protocol", "records",
                          "schema_registry", "security", "spark", "transaction"}),
    "cli": frozenset({"kafkajet", "_build", "admin", "cluster", "config", "errors", "fetch", "producer", "spark",
                      "testing"}),
    "__main__": frozenset({"cli"}),
}

# (importing module, imported module): why the table's rule does not hold there.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("kafkajet.config.sasl", "kafkajet.security.sasl"): (
        "the SASL table names each mechanism's client and login as 'module:function' strings, which "
        "security/mechanism.py imports when a connection uses the mechanism: config lists what it checks, "
        "security (above it) loads it"),
    ("kafkajet.config.sasl", "kafkajet.security.aws_msk"): "the SASL table's AWS_MSK_IAM row (as security.sasl's)",
    ("kafkajet.config.sasl", "kafkajet.security.kerberos"): "the SASL table's GSSAPI row (as security.sasl's)",
}

# A whole string naming a module of the package, optionally with ':attribute' (an entry point).
_MODULE_STRING = re.compile(r"kafkajet(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def part_of(module: str) -> str:
    """The table's part a module belongs to: its longest listed folder, else its top-level folder or module."""
    rest = module.split(".")[1:]
    if not rest:
        return "kafkajet"
    for n in range(len(rest), 0, -1):
        if ".".join(rest[:n]) in TABLE:
            return ".".join(rest[:n])
    return rest[0]


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, relative imports resolved against `package`."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _logger_names(tree: ast.AST) -> set[int]:
    """Strings given to logging.getLogger: a logger's name (what users configure) imports nothing."""
    return {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "getLogger"
            for arg in node.args}


def imports_of(source: str, module: str, package: str, modules: Iterable[str]) -> list[tuple[int, str]]:
    """(line, module) for every module of the package `source` imports or names in a string, resolved to the
    longest module that exists (`from a.b import c` names a.b.c when c is a module, else a.b)."""
    known = set(modules)
    tree = ast.parse(source)
    skip = _docstrings(tree) | _logger_names(tree)
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, package)
            names = [f"{target}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
              and _MODULE_STRING.fullmatch(node.value)):
            names = [node.value.partition(":")[0]]
            if names[0] not in known:
                continue  # "kafkajet.timeout.ms": an option's name, not a module's
        else:
            continue
        for name in names:
            parts = name.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts and ".".join(parts) != module:
                found.add((node.lineno, ".".join(parts)))
    return sorted(found)


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def crossings(sources: dict[str, str]) -> list[str]:
    """Each import that crosses the table, exceptions aside, in `sources` (module name -> its text)."""
    out = []
    for module, source in sources.items():
        for line, target in imports_of(source, module, _package(module), MODULES):
            mine, theirs = part_of(module), part_of(target)
            if mine != theirs and theirs not in TABLE.get(mine, ()) and (module, target) not in EXCEPTIONS:
                out.append(f"{module} line {line} imports {target}: {mine} may not import {theirs}")
    return out


@functools.cache
def _sources() -> dict[str, str]:
    return {m: p.read_text(encoding="utf-8") for m, p in MODULES.items()}


@functools.cache
def _imports() -> dict[str, set[str]]:
    return {m: {t for _, t in imports_of(source, m, _package(m), MODULES)} for m, source in _sources().items()}


def test_every_part_of_the_package_has_a_row() -> None:
    assert {part_of(m) for m in MODULES} == set(TABLE)
    assert all(allowed <= set(TABLE) for allowed in TABLE.values())


def test_no_import_crosses_the_table() -> None:
    assert crossings(_sources()) == []


def test_every_exception_is_still_used_and_still_needed() -> None:
    for (module, target), why in EXCEPTIONS.items():
        assert target in _imports()[module], (module, target)
        assert part_of(target) not in TABLE[part_of(module)], f"{module} -> {target} is allowed anyway"
        assert why


def test_the_table_is_layered() -> None:
    # No loop among the parts: every row can be placed above all of its set.
    placed: set[str] = set()
    while len(placed) < len(TABLE):
        ready = {p for p, allowed in TABLE.items() if p not in placed and allowed <= placed}
        assert ready, f"a loop among {sorted(set(TABLE) - placed)}"
        placed |= ready


def test_a_planted_import_fails_the_table_wherever_it_stands() -> None:
    # Planted in a module of the config package (a relative import climbs two levels from there).
    config = _sources()["kafkajet.config.clients"]
    for plant in ("\n\ndef _planted() -> None:\n    import kafkajet.spark\n",
                  "\nif TYPE_CHECKING:\n    from kafkajet.producer import producer\n",
                  "\nfrom ..network import client\n",
                  '\n_X = importlib.import_module("kafkajet.admin")\n',
                  '\n_Y = "kafkajet.fetch:FetchClient"\n'):
        found = crossings({"kafkajet.config.clients": config + plant})
        assert len(found) == 1 and found[0].startswith("kafkajet.config.clients line"), (plant, found)
    formats = _sources()["kafkajet.spark.formats.avro"]
    assert crossings({"kafkajet.spark.formats.avro": formats + "\nfrom kafkajet.spark import writer\n"})
    assert not crossings({"kafkajet.config.clients": config + '\nlog = logging.getLogger("kafkajet.spark")\n'})
    assert not crossings({"kafkajet.config.clients": config + '\n_OPTION = "kafkajet.timeout.ms"\n'})


# --- loops between modules -----------------------------------------------------------------------------------
#
# A loop of two modules (one importing the other inside a function or under TYPE_CHECKING to get round it)
# makes neither of them a layer, inside a part as much as across parts.


def _import_graph() -> dict[str, set[str]]:
    # An exception's string-named import is loaded by the part it names, not by its own module.
    return {m: {t for t in imports if (m, t) not in EXCEPTIONS} for m, imports in _imports().items()}


def _loops(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of modules importing each other; a package and its own submodule do not count (the package's
    __init__ re-exports what its modules define)."""
    return sorted((a, b) for a in graph for b in graph[a]
                  if a < b and a in graph.get(b, ()) and not b.startswith(a + ".") and not a.startswith(b + "."))


def test_no_two_modules_import_each_other() -> None:
    assert _loops(_import_graph()) == []


def test_the_loop_check_sees_imports_inside_functions_and_type_checking() -> None:
    known = ("kafkajet", "kafkajet.a", "kafkajet.b", "kafkajet.c", "kafkajet.c.d")

    def graph_of(source: str, module: str, package: str) -> set[str]:
        return {t for _, t in imports_of(source, module, package, known)}

    graph = {"kafkajet.a": graph_of("def f() -> None:\n    from kafkajet.b import x\n", "kafkajet.a", "kafkajet"),
             "kafkajet.b": graph_of("if TYPE_CHECKING:\n    from .a import y\n", "kafkajet.b", "kafkajet"),
             "kafkajet.c": graph_of("from kafkajet.c.d import z\n", "kafkajet.c", "kafkajet.c"),
             "kafkajet.c.d": graph_of("from kafkajet.c import w\n", "kafkajet.c.d", "kafkajet.c")}
    assert _loops(graph) == [("kafkajet.a", "kafkajet.b")]
