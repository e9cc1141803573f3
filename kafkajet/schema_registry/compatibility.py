"""The registry's compatibility levels, the same for every schema format (Confluent's CompatibilityChecker):
which earlier versions a new one is compared with, and in which direction. What "can read" means is the
format's own rules (SchemaFormat.incompatibilities: avro_compatibility.py, json_compatibility.py,
protobuf_compatibility.py). Pure functions, no I/O.

BACKWARD = the new schema reads the old data, FORWARD = the old schema reads the new, FULL = both; the
*_TRANSITIVE levels compare with every earlier version, the others with the latest only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


def check(level: str, new: Any, previous: list[Any], incompatibilities: Callable[[Any, Any], list[str]]
          ) -> list[str]:
    """Why `new` may not follow `previous` (oldest first) under `level`; empty when it may.
    `incompatibilities(reader, writer)` lists why the reader cannot read the writer's data, by the schemas'
    format (its SchemaFormat.incompatibilities)."""
    level = level.upper()
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            out += [f"BACKWARD: {m}" for m in incompatibilities(new, old)]
        if base in ("FORWARD", "FULL"):
            out += [f"FORWARD: {m}" for m in incompatibilities(old, new)]
    return out
