"""Avro schema compatibility by the specification's schema-resolution rules, on the schemas' JSON (no
fastavro: the registry server needs only the standard library). Pure functions, no I/O.

`incompatibilities(reader, writer)` says why data written with `writer` cannot be read with `reader`;
compatibility.check builds the registry's levels on it (formats/avro.py hands it over).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kafkajet.schema_registry.schema_format import InvalidSchemaError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# The specification's promotions: writer type -> reader types that read it.
_PROMOTIONS = {"int": {"long", "float", "double"}, "long": {"float", "double"}, "float": {"double"},
               "string": {"bytes"}, "bytes": {"string"}}


class _Named:
    """A named type (record, enum, fixed) once its name is resolved, so recursive references terminate."""

    __slots__ = ("kind", "name", "aliases", "fields", "symbols", "default", "size")

    def __init__(self, kind: str, name: str, aliases: set[str]) -> None:
        self.kind = kind
        self.name = name
        self.aliases = aliases
        self.fields: list[tuple[str, Any, bool, set[str]]] = []  # (name, type, has default, aliases)
        self.symbols: list[str] = []
        self.default: str | None = None
        self.size = 0


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def parse(schema_str: str, referenced: Sequence[str] = ()) -> Any:
    """The schema as nested primitives-as-str, lists (unions), ("array", t), ("map", t) and _Named objects.
    `referenced`: the texts of the schemas its references name, dependencies first, whose named types it may
    use."""
    names: dict[str, _Named] = {}
    for text in (*referenced, schema_str):
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise InvalidSchemaError(f"not JSON: {e}") from None
        parsed = _parse(obj, None, names)
    return parsed


def _parse(obj: Any, namespace: str | None, names: dict[str, _Named]) -> Any:
    if isinstance(obj, str):
        if obj in PRIMITIVES:
            return obj
        full = _fullname(obj, namespace)
        for candidate in (full, obj):
            if candidate in names:
                return names[candidate]
        raise InvalidSchemaError(f"unknown type {obj!r}")
    if isinstance(obj, list):
        branches = [_parse(b, namespace, names) for b in obj]
        if any(isinstance(b, list) for b in branches):
            raise InvalidSchemaError("a union may not directly contain a union")
        return branches
    if not isinstance(obj, dict) or "type" not in obj:
        raise InvalidSchemaError(f"expected a type name, union or object with 'type', got {obj!r:.80}")
    t = obj["type"]
    if t in PRIMITIVES:
        return t  # logicalType annotations do not change what can be read
    if t == "array":
        if "items" not in obj:
            raise InvalidSchemaError("an array needs 'items'")
        return ("array", _parse(obj["items"], namespace, names))
    if t == "map":
        if "values" not in obj:
            raise InvalidSchemaError("a map needs 'values'")
        return ("map", _parse(obj["values"], namespace, names))
    if t in ("record", "error", "enum", "fixed"):
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidSchemaError(f"a {t} needs a 'name'")
        ns = obj.get("namespace", namespace)
        full = _fullname(name, ns)
        ns = full.rsplit(".", 1)[0] if "." in full else None
        named = _Named("record" if t == "error" else t, full,
                       {_fullname(a, ns) for a in obj.get("aliases", [])})
        if full in names:
            raise InvalidSchemaError(f"type {full!r} is defined twice")
        names[full] = named
        if t in ("record", "error"):
            fields = obj.get("fields")
            if not isinstance(fields, list):
                raise InvalidSchemaError(f"record {full!r} needs a 'fields' list")
            seen = set()
            for f in fields:
                if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                    raise InvalidSchemaError(f"record {full!r}: every field needs a 'name' and a 'type'")
                if f["name"] in seen:
                    raise InvalidSchemaError(f"record {full!r}: field {f['name']!r} is defined twice")
                seen.add(f["name"])
                named.fields.append((f["name"], _parse(f["type"], ns, names), "default" in f,
                                     set(f.get("aliases", []))))
        elif t == "enum":
            symbols = obj.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise InvalidSchemaError(f"enum {full!r} needs a 'symbols' list of strings")
            named.symbols = symbols
            named.default = obj.get("default")
        else:
            if not isinstance(obj.get("size"), int):
                raise InvalidSchemaError(f"fixed {full!r} needs an integer 'size'")
            named.size = obj["size"]
        return named
    if isinstance(t, (dict, list)):
        return _parse(t, namespace, names)
    return _parse(t, namespace, names)  # a named type's name used as {"type": "com.x.Name"}


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: _Named, writer: _Named) -> bool:
    # Java's SchemaCompatibility compares unqualified names (and the reader's aliases).
    return _short(reader.name) == _short(writer.name) or writer.name in reader.aliases or \
        _short(writer.name) in {_short(a) for a in reader.aliases}


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why `reader` cannot read data written with `writer` (empty: it can)."""
    out: list[str] = []
    _check(reader, writer, "/", out, set())
    return out


def _describe(t: Any) -> str:
    if isinstance(t, _Named):
        return f"{t.kind} {t.name}"
    if isinstance(t, tuple):
        return t[0]
    if isinstance(t, list):
        return "union"
    return str(t)


def _check(reader: Any, writer: Any, path: str, out: list[str], seen: set[tuple[int, int]]) -> None:
    if isinstance(writer, list):  # every branch the writer may have written must be readable
        for i, w in enumerate(writer):
            sub: list[str] = []
            _check(reader, w, f"{path}{i}/", sub, seen)
            out.extend(sub)
        return
    if isinstance(reader, list):
        for r in reader:
            sub = []
            _check(r, writer, path, sub, set(seen))
            if not sub:
                return
        out.append(f"{path}: reader union lacks a branch for the writer's {_describe(writer)}")
        return
    if isinstance(reader, str) or isinstance(writer, str):
        if reader == writer or (isinstance(writer, str) and reader in _PROMOTIONS.get(writer, ())):
            return
        out.append(f"{path}: reader type {_describe(reader)} cannot read writer type {_describe(writer)}")
        return
    if isinstance(reader, tuple) or isinstance(writer, tuple):
        if isinstance(reader, tuple) and isinstance(writer, tuple) and reader[0] == writer[0]:
            _check(reader[1], writer[1], f"{path}{'items' if reader[0] == 'array' else 'values'}/", out, seen)
        else:
            out.append(f"{path}: reader type {_describe(reader)} cannot read writer type {_describe(writer)}")
        return
    assert isinstance(reader, _Named) and isinstance(writer, _Named)
    if reader.kind != writer.kind:
        out.append(f"{path}: reader type {_describe(reader)} cannot read writer type {_describe(writer)}")
        return
    if not _names_match(reader, writer):
        out.append(f"{path}: reader {reader.kind} name {reader.name} does not match writer's {writer.name}")
        return
    pair = (id(reader), id(writer))
    if pair in seen:
        return  # a recursive type already being checked
    seen = seen | {pair}
    if reader.kind == "fixed":
        if reader.size != writer.size:
            out.append(f"{path}: fixed size {writer.size} written, {reader.size} expected")
    elif reader.kind == "enum":
        missing = [s for s in writer.symbols if s not in reader.symbols]
        if missing and reader.default is None:
            out.append(f"{path}: reader enum {reader.name} lacks symbols {missing} (and has no default)")
    else:
        by_name = {f[0]: f for f in writer.fields}
        for name, rtype, has_default, aliases in reader.fields:
            wf = by_name.get(name) or next((by_name[a] for a in aliases if a in by_name), None)
            if wf is None:
                if not has_default:
                    out.append(f"{path}{name}: reader field '{name}' has no default and is missing from the "
                               f"writer's schema")
            else:
                _check(rtype, wf[1], f"{path}{name}/", out, seen)
