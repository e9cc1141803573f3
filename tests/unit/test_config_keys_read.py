"""Every key of every client's configuration table is read by that client's code, or its table says it is
accepted but not read (ConfigKey.not_read, shown by `kafkajet config`) and what happens instead: a setting
that is validated, documented and silently ignored is what this keeps out.

"Read" is found in the source, not at run time: the key's name as a string literal (cfg["linger.ms"],
cfg.get("sasl.username")), or its snake_case name as an attribute of a config object (cfg.linger_ms), in
the modules of that client (never config/, which only defines and validates). A key string in some other
module (the CLI writing compression.type, the Spark sink rejecting key.serializer) is not a read.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from kafkajet import config
from kafkajet.config import ClientTable, ConfigKey

PACKAGE = Path(config.__file__).parent.parent
# Each client's own modules, plus security/: every client hands its whole config to connection_security().
CLIENT_MODULES = {
    "producer": ("producer", "aio.py", "network", "security"),
    "admin": ("admin.py", "security"),
    "fetch": ("fetch.py", "security"),
}
_CONFIG_NAMES = {"cfg", "config", "_config", "conf"}
# Functions of config/sasl.py that read a setting for the security layer (which calls them), not to validate it.
_SECURITY_READERS_IN_CONFIG = ("oauthbearer_method",)


@cache
def _reads(client: str) -> frozenset[str]:
    """The string literals, and the attributes of config objects, in a client's modules."""
    found: set[str] = set()
    for entry in CLIENT_MODULES[client]:
        path = PACKAGE / entry
        for module in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            for node in ast.walk(ast.parse(module.read_text(), str(module))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found.add(node.value)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    base = node.value
                    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
                    if name in _CONFIG_NAMES:
                        found.add(node.attr.replace("_", "."))
    if "security" in CLIENT_MODULES[client]:
        for node in ast.parse((PACKAGE / "config" / "sasl.py").read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name in _SECURITY_READERS_IN_CONFIG:
                found |= {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return frozenset(found)


def _cases() -> list[tuple[ClientTable, ConfigKey]]:
    return [(table, key) for table in config.TABLES.values() for key in table.keys]


@pytest.mark.parametrize(("table", "key"), _cases(), ids=[f"{t.client}:{k.name}" for t, k in _cases()])
def test_every_key_is_read_by_its_client_or_marked_as_not_read(table: ClientTable, key: ConfigKey) -> None:
    read = key.name in _reads(table.client)
    if key.not_read:
        assert not read, (f"{table.client} reads {key.name}, but its table says it does not: remove not_read "
                          f"({key.not_read!r}) from it in kafkajet/config/clients.py")
    else:
        assert read, (f"nothing in the {table.client} client reads {key.name}: read it, or mark it not_read in "
                      "kafkajet/config/clients.py with what happens instead")


def test_every_client_hands_its_config_to_the_security_layer() -> None:
    # What lets security/ count as every client's code above.
    for client, modules in CLIENT_MODULES.items():
        entry = PACKAGE / ("producer/producer.py" if client == "producer" else modules[0])
        assert "connection_security(" in entry.read_text(), client


def test_the_docs_say_which_keys_are_accepted_but_not_read() -> None:
    for table in config.TABLES.values():
        doc = config.config_markdown(table)
        for key in table.keys:
            (line,) = [row for row in doc.splitlines() if row.startswith(f"| `{key.name}` |")]
            assert (key.not_read in line and "not read" in line) if key.not_read else "not read" not in line
