"""Turn the generated schema table into per-version plans the codec can run without looking at versions.

A plan is the message as it looks at one version: only the fields present in that version, each with its
wire type, nullability, default and whether it travels as a tagged field. Plans are built lazily, once per
(API, request/response, version), and then reused for every frame.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any

import kafkajet.protocol.types as t
from kafkajet.errors import ProtocolError, UnsupportedVersionError
from kafkajet.protocol._schemas import SCHEMAS

# The wire type of a field, independent of version: a primitive name from Kafka's JSON, "struct" or "array".
PRIMITIVES = frozenset(t.FIXED) | {"bool", "string", "bytes", "records", "uuid"}
_MIN_SIZE = {name: st.size for name, st in t.FIXED.items()} | {"bool": 1, "uuid": t.UUID_SIZE}

Range = tuple[int, int | None]


def parse_range(spec: str | None) -> Range | None:
    """Kafka's version spec: "3+" -> (3, None), "0-2" -> (0, 2), "1" -> (1, 1), "none"/None -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), None)
    lo, _, hi = spec.partition("-")
    return (int(lo), int(hi or lo))


def in_range(spec: str | None, version: int) -> bool:
    rng = parse_range(spec)
    return rng is not None and rng[0] <= version and (rng[1] is None or version <= rng[1])


class FieldPlan:
    """One field at one version."""

    __slots__ = ("name", "path", "label", "type", "compact", "nullable", "tag", "default", "struct", "element",
                 "element_min_size")

    def __init__(self, name: str, path: str, type_: str, compact: bool, nullable: bool, tag: int | None,
                 default: Any, struct: StructPlan | None, element: FieldPlan | None) -> None:
        self.name = name
        self.path = path
        # Fixed-width values name their type in errors ("int32 'throttle_time_ms'"); the rest say it themselves.
        self.label = f"{type_} '{path}'" if type_ in _MIN_SIZE else f"'{path}'"
        self.type = type_
        # Flexible versions write strings, bytes and arrays in their compact forms.
        self.compact = compact
        self.nullable = nullable
        self.tag = tag  # not None only where the field travels in the tagged-field section
        self.default = default
        self.struct = struct  # for "struct", and for "array" of structs via element.struct
        self.element = element  # for "array": the plan of one element
        self.element_min_size = 0 if element is None else min_size(element)


class FixedRun:
    """Consecutive fixed-width fields, read with one struct.unpack_from (a Produce response partition has five)."""

    __slots__ = ("fields", "names", "struct", "size")

    def __init__(self, fields: tuple[FieldPlan, ...]) -> None:
        self.fields = fields
        self.names = tuple(f.name for f in fields)
        self.struct = struct.Struct(">" + "".join(t.FIXED[f.type].format.lstrip(">") for f in fields))
        self.size = self.struct.size


def _decode_steps(fields: tuple[FieldPlan, ...]) -> tuple[FieldPlan | FixedRun, ...]:
    steps: list[FieldPlan | FixedRun] = []
    run: list[FieldPlan] = []
    for f in (*fields, None):
        if f is not None and f.type in t.FIXED:
            run.append(f)
            continue
        if len(run) > 1:
            steps.append(FixedRun(tuple(run)))
        else:
            steps.extend(run)
        run = []
        if f is not None:
            steps.append(f)
    return tuple(steps)


class StructPlan:
    """A struct (or a whole message body) at one version."""

    __slots__ = ("path", "flexible", "fields", "tagged", "by_tag", "known", "min_size", "decode_steps")

    def __init__(self, path: str, flexible: bool, fields: tuple[FieldPlan, ...], tagged: tuple[FieldPlan, ...],
                 known: frozenset[str]) -> None:
        self.path = path
        self.flexible = flexible
        self.fields = fields  # in wire order, tagged fields excluded
        self.tagged = tagged  # sorted by tag, as they must be written
        self.by_tag = {f.tag: f for f in tagged}
        # Every name the JSON defines here, at any version: a body may carry fields of other versions (they
        # are ignored), but a name Kafka never defined is a typo the encoder refuses.
        self.known = known
        self.min_size = sum(min_size(f) for f in fields) + (1 if flexible else 0)
        self.decode_steps = _decode_steps(fields)  # fields, with runs of fixed-width ones fused


def min_size(f: FieldPlan) -> int:
    """The fewest bytes a value of this field can take (null or empty where allowed)."""
    if f.type in _MIN_SIZE:
        return _MIN_SIZE[f.type]
    if f.type == "struct":
        assert f.struct is not None
        return f.struct.min_size
    if f.compact:
        return 1  # a compact length
    return 2 if f.type == "string" else 4


def _zero(type_: str, nullable: bool, struct: StructPlan | None) -> Any:
    if nullable and type_ in ("string", "bytes", "records", "array", "struct"):
        return None
    if type_ == "struct":
        assert struct is not None
        return default_struct(struct)
    return {"bool": False, "float64": 0.0, "string": "", "bytes": b"", "records": b"", "uuid": bytes(t.UUID_SIZE),
            "array": []}.get(type_, 0)


def default_struct(plan: StructPlan) -> dict[str, Any]:
    return {f.name: fresh(f.default) for f in plan.fields + plan.tagged}


def fresh(value: Any) -> Any:
    """A default safe to hand to a caller who may mutate it (list and dict defaults are shared in plans)."""
    if isinstance(value, list):
        return [fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    return value


def _field_plan(spec: dict[str, Any], version: int, flexible: bool, prefix: str) -> FieldPlan:
    name: str = spec["name"]
    path = f"{prefix}{name}"
    json_type: str = spec["type"]
    nullable = in_range(spec.get("nullable"), version)
    tag = spec["tag"] if flexible and "tag" in spec and in_range(spec.get("tagged"), version) else None
    struct: StructPlan | None = None
    element: FieldPlan | None = None
    if json_type.startswith("[]"):
        type_ = "array"
        elem_type = json_type[2:]
        if elem_type in PRIMITIVES:
            element = FieldPlan(name, path, elem_type, flexible, False, None, None, None, None)
        else:
            sub = struct_plan(spec["fields"], version, flexible, f"{path}.")
            element = FieldPlan(name, path, "struct", flexible, False, None, None, sub, None)
    elif json_type in PRIMITIVES:
        type_ = json_type
    else:
        type_ = "struct"
        struct = struct_plan(spec["fields"], version, flexible, f"{path}.")
    if "default" in spec and (spec["default"] is not None or nullable):
        default = spec["default"]
    else:
        # A JSON default of null only holds where the field is nullable; elsewhere the type's zero stands in.
        default = _zero(type_, nullable, struct)
    return FieldPlan(name, path, type_, flexible, nullable, tag, default, struct, element)


def struct_plan(specs: list[dict[str, Any]], version: int, flexible: bool, prefix: str = "") -> StructPlan:
    fields: list[FieldPlan] = []
    tagged: list[FieldPlan] = []
    for spec in specs:
        if not in_range(spec["versions"], version):
            continue
        f = _field_plan(spec, version, flexible, prefix)
        (fields if f.tag is None else tagged).append(f)
    tagged.sort(key=lambda f: f.tag or 0)
    return StructPlan(prefix.rstrip(".") or "body", flexible, tuple(fields), tuple(tagged),
                      frozenset(s["name"] for s in specs))


class MessagePlan:
    """One direction of one API at one version."""

    __slots__ = ("api_key", "api_name", "kind", "version", "flexible", "body", "context")

    def __init__(self, api_key: int, api_name: str, kind: str, version: int, flexible: bool,
                 body: StructPlan) -> None:
        self.api_key = api_key
        self.api_name = api_name
        self.kind = kind
        self.version = version
        self.flexible = flexible
        self.body = body
        self.context = f"{api_name} v{version} {kind}"  # how errors name this message


def api_entry(api: int) -> dict[str, Any]:
    entry = SCHEMAS.get(api)
    if entry is None:
        raise ProtocolError(f"unknown api key {api}")
    return entry


def check_version(api: int, version: int) -> None:
    entry = api_entry(api)
    lo, hi = entry["versions"]
    if not lo <= version <= hi:
        raise UnsupportedVersionError(f"unsupported version {version} of {entry['name']} (supported {lo}-{hi})")


@cache
def message_plan(api: int, kind: str, version: int) -> MessagePlan:
    """The plan for ``kind`` ("request" or "response") of ``api`` at ``version``; ProtocolError if unknown."""
    check_version(api, version)
    entry = api_entry(api)
    msg = entry[kind]
    flexible = in_range(msg["flexible"], version)
    return MessagePlan(api, entry["name"], kind, version, flexible, struct_plan(msg["fields"], version, flexible))
