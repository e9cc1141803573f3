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
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
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
