"""JSON Schema compatibility, as Confluent's registry judges it for the common cases: a reader schema can read
what a writer schema wrote when every document the writer's schema accepts, the reader's accepts too. Pure
functions on the parsed JSON, no I/O; compatibility.check builds the registry's levels on `incompatibilities`.

Checked: `type` (integer widens to number; a reader without a type accepts any), unions (`oneOf` / `anyOf`,
so the null pattern), `enum` / `const`, objects (properties by name, `required`, the content model given by
`additionalProperties`), arrays (`items`), the numeric and length bounds, `pattern`, and local `$ref`s. The
content model is the Confluent rule that surprises people: removing a property from a closed model is
incompatible (old documents hold it, the new model refuses it), and adding one to an open model is too (old
documents may hold anything under that name), unless the added property accepts anything. Keywords not listed
here are not compared.
"""

from __future__ import annotations

from typing import Any

_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
# Bounds a reader may loosen, never tighten: (keyword, True when a larger value is looser).
_BOUNDS = (("minimum", False), ("exclusiveMinimum", False), ("minLength", False), ("minItems", False),
           ("minProperties", False), ("maximum", True), ("exclusiveMaximum", True), ("maxLength", True),
           ("maxItems", True), ("maxProperties", True))


class _Doc:
    """A schema document's root, for resolving its local $refs."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def resolve(self, schema: Any, seen: tuple[str, ...] = ()) -> Any:
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            if not ref.startswith("#") or ref in seen:
                return {}  # remote or recursive: not compared
            seen = (*seen, ref)
            target = self.root
            for part in ref[1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, dict) else None
            schema = target if target is not None else {}
        return schema


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why documents valid under `writer` may be invalid under `reader` (empty: the reader reads them all)."""
    out: list[str] = []
    _check(_Doc(reader), reader, _Doc(writer), writer, "#", out, 0)
    return out


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The types a schema allows (None: any)."""
    kind = schema.get("type")
    if kind is None:
        return None
    kinds = {kind} if isinstance(kind, str) else set(kind)
    if "number" in kinds:
        kinds.add("integer")
    return kinds


def _branches(schema: dict[str, Any]) -> list[Any] | None:
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return list(schema[key])
    return None


def _accepts_anything(schema: Any) -> bool:
    return schema is True or schema == {}


def _check(rdoc: _Doc, reader: Any, wdoc: _Doc, writer: Any, path: str, out: list[str], depth: int) -> None:
    if depth > 64:
        return  # deep or recursive through refs: not compared further
    reader, writer = rdoc.resolve(reader), wdoc.resolve(writer)
    if _accepts_anything(reader) or writer is False:
        return
    if reader is False:
        out.append(f"{path}: the reader accepts nothing")
        return
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return
    # A writer's union: each branch must be readable. A reader's union: some branch reads the writer.
    wb = _branches(writer)
    if wb is not None:
        rest = {k: v for k, v in writer.items() if k not in ("oneOf", "anyOf")}
        for i, b in enumerate(wb):
            branch = wdoc.resolve(b)
            _check(rdoc, reader, wdoc, {**rest, **branch} if isinstance(branch, dict) else branch,
                   f"{path}/oneOf/{i}", out, depth + 1)
        return
    rb = _branches(reader)
    kinds = writer.get("type")
    if rb is not None and isinstance(kinds, list) and len(kinds) > 1:
        for kind in kinds:  # ["string", "null"] against the reader's oneOf: each type by the branch for it
            _check(rdoc, reader, wdoc, {**writer, "type": kind}, path, out, depth + 1)
        return
    if rb is not None:
        rest = {k: v for k, v in reader.items() if k not in ("oneOf", "anyOf")}
        for b in rb:
            branch = rdoc.resolve(b)
            sub: list[str] = []
            _check(rdoc, {**rest, **branch} if isinstance(branch, dict) else branch, wdoc, writer, path, sub,
                   depth + 1)
            if not sub:
                return
        out.append(f"{path}: no branch of the reader's oneOf/anyOf reads the writer's {_describe(writer)}")
        return
    rtypes, wtypes = _types(reader), _types(writer)
    if rtypes is not None:
        if wtypes is None:
            out.append(f"{path}: type narrowed: the writer allowed any type, the reader only "
                       f"{'/'.join(sorted(rtypes))}")
            return
        lost = wtypes - rtypes
        if lost:
            out.append(f"{path}: type narrowed or changed: the writer allowed {'/'.join(sorted(lost))}, the reader "
                       f"does not")
            return
    _enums(reader, writer, path, out)
    for key, larger_looser in _BOUNDS:
        if key in reader and isinstance(reader[key], (int, float)) and not isinstance(reader[key], bool):
            w = writer.get(key)
            if w is None or (reader[key] < w if larger_looser else reader[key] > w):
                out.append(f"{path}: {key} tightened to {reader[key]} (the writer's: {w})")
    if "pattern" in reader and reader.get("pattern") != writer.get("pattern"):
        out.append(f"{path}: pattern {reader['pattern']!r} added or changed")
    can_be = wtypes if wtypes is not None else set(_TYPES)
    if "object" in can_be:
        _objects(rdoc, reader, wdoc, writer, path, out, depth)
    if "array" in can_be and "items" in reader:
        _check(rdoc, reader["items"], wdoc, writer.get("items", {}), f"{path}/items", out, depth + 1)


def _enums(reader: dict[str, Any], writer: dict[str, Any], path: str, out: list[str]) -> None:
    allowed = [reader["const"]] if "const" in reader else reader.get("enum")
    if allowed is None:
        return
    written = [writer["const"]] if "const" in writer else writer.get("enum")
    if written is None:
        out.append(f"{path}: enum/const added: the writer allowed any value")
        return
    missing = [v for v in written if v not in allowed]
    if missing:
        out.append(f"{path}: enum values {missing} removed")


def _objects(rdoc: _Doc, reader: dict[str, Any], wdoc: _Doc, writer: dict[str, Any], path: str, out: list[str],
             depth: int) -> None:
    rprops: dict[str, Any] = reader.get("properties") or {}
    wprops: dict[str, Any] = writer.get("properties") or {}
    rextra = reader.get("additionalProperties", True)
    wextra = writer.get("additionalProperties", True)
    for name, wschema in wprops.items():
        where = f"{path}/properties/{name}"
        if name in rprops:
            _check(rdoc, rprops[name], wdoc, wschema, where, out, depth + 1)
        elif rextra is False:
            out.append(f"{where}: property removed from a closed content model (documents written hold it)")
        else:
            _check(rdoc, rextra, wdoc, wschema, where, out, depth + 1)
    for name, rschema in rprops.items():
        if name in wprops:
            continue
        where = f"{path}/properties/{name}"
        if wextra is False:
            continue  # the writer's documents never hold it
        if _accepts_anything(wextra) and not _accepts_anything(rdoc.resolve(rschema)):
            out.append(f"{where}: property added to an open content model (documents written may hold any "
                       f"value under that name; close the writer's model with additionalProperties false)")
        elif not _accepts_anything(wextra):
            _check(rdoc, rschema, wdoc, wextra, where, out, depth + 1)
    added = [n for n in reader.get("required", ()) if n not in writer.get("required", ())]
    if added:
        out.append(f"{path}/required: required properties {added} added (documents written may lack them)")
    if rextra is False and wextra is not False:
        out.append(f"{path}/additionalProperties: the content model was closed (documents written may hold "
                   f"other properties)")
    elif isinstance(rextra, dict) and wextra is not False:
        _check(rdoc, rextra, wdoc, {} if wextra is True else wextra, f"{path}/additionalProperties", out,
               depth + 1)


def _describe(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    return f"type {kind}" if kind is not None else "schema"
