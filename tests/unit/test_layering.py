"""The package face (kafkajet/__init__.py) sits on top: the modules it is built from never import it.

An import from a lower layer back up to the face is a cycle in waiting (the face is half-initialised while
it imports them) and hides which module a name really lives in. Front ends built on the public face (the
CLI, the Spark integration, the testing tools, `python -m kafkajet`) may use it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kafkajet

PACKAGE = Path(kafkajet.__file__).parent
FRONT_ENDS = ("__init__.py", "__main__.py", "cli", "spark", "testing")


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, relative imports resolved against `package`."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of_the_face(source: str, package: str) -> list[str]:
    """Each statement of a module of `package` that imports the face itself: `import kafkajet`,
    `from kafkajet import X`, or a relative import that resolves to the package root."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name == "kafkajet"]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, package)
            if target == "kafkajet":
                found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import "
                             + ", ".join(a.name for a in node.names))
    return found


def _lower_layers() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in FRONT_ENDS)


def test_no_module_below_the_face_imports_it() -> None:
    lower = _lower_layers()
    assert {p.relative_to(PACKAGE).parts[0] for p in lower} >= {
        "network", "protocol", "records", "producer", "security", "errors", "config.py", "admin.py"}
    offenders = {}
    for path in lower:
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        if found := _imports_of_the_face(path.read_text(encoding="utf-8"), package):
            offenders[str(path.relative_to(PACKAGE))] = found
    assert offenders == {}


def test_the_check_sees_every_spelling_of_an_import_of_the_face() -> None:
    source = ("import kafkajet\nimport kafkajet.protocol\nfrom kafkajet import __version__\n"
              "from kafkajet.protocol import ApiKey\nfrom .. import errors\nfrom . import versions\n"
              "def f() -> None:\n    from kafkajet import Producer\n")
    assert _imports_of_the_face(source, "kafkajet.network") == [
        "line 1: import kafkajet", "line 3: from kafkajet import __version__", "line 5: from .. import errors",
        "line 8: from kafkajet import Producer"]


# --- layers below the face, and loops ------------------------------------------------------------------------
#
# The base (config.py and the other top-level modules) sits under security/, which sits under network/; the
# producer's telemetry knows nothing of Spark. A loop of two modules (one importing the other inside a function
# or under TYPE_CHECKING to get round it) makes neither of them a layer.


def _imported(source: str, module: str, package: str) -> set[str]:
    """Every kafkajet module `source` names in an import, wherever the statement is (in a function, under
    TYPE_CHECKING): `from a.b import c` names a.b and a.b.c (c may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, package)
            found |= {target} | {f"{target}.{a.name}" for a in node.names}
    return {m for m in found if m.startswith("kafkajet") and m != module}


def _import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        graph[module] = _imported(path.read_text(encoding="utf-8"), module, package)
    return graph


def _loops(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of modules importing each other; a package and its own submodule do not count (the package's
    __init__ re-exports what its modules define)."""
    return sorted((a, b) for a in graph for b in graph[a]
                  if a < b and a in graph.get(b, ()) and not b.startswith(a + ".") and not a.startswith(b + "."))


def _importers(graph: dict[str, set[str]], of: str, below: str) -> dict[str, list[str]]:
    """The modules under `below` that import any module under `of`."""
    return {m: sorted(i for i in imports if i == of or i.startswith(of + "."))
            for m, imports in graph.items() if (m == below or m.startswith(below + "."))
            and any(i == of or i.startswith(of + ".") for i in imports)}


def test_no_two_modules_import_each_other() -> None:
    assert _loops(_import_graph()) == []


def test_the_configuration_imports_no_layer_above_it() -> None:
    graph = _import_graph()
    for upper in ("kafkajet.security", "kafkajet.network", "kafkajet.producer"):
        assert _importers(graph, upper, "kafkajet.config") == {}, upper


def test_security_imports_nothing_of_the_network() -> None:
    assert _importers(_import_graph(), "kafkajet.network", "kafkajet.security") == {}


def test_the_producer_and_its_telemetry_import_nothing_of_spark() -> None:
    graph = _import_graph()
    assert _importers(graph, "kafkajet.spark", "kafkajet.producer") == {}
    assert "pyspark" not in (PACKAGE / "producer" / "telemetry.py").read_text(encoding="utf-8")


def test_the_loop_check_sees_imports_inside_functions_and_type_checking() -> None:
    graph = {"kafkajet.a": _imported("def f() -> None:\n    from kafkajet.b import x\n", "kafkajet.a", "kafkajet"),
             "kafkajet.b": _imported("if TYPE_CHECKING:\n    from .a import y\n", "kafkajet.b", "kafkajet"),
             "kafkajet.c": _imported("from kafkajet.c.d import z\n", "kafkajet.c", "kafkajet.c"),
             "kafkajet.c.d": _imported("from kafkajet.c import w\n", "kafkajet.c.d", "kafkajet.c")}
    assert _loops(graph) == [("kafkajet.a", "kafkajet.b")]
