"""A quick acceptance check in front of jsonschema: `acceptor(validator)` compiles the validator's schema into
a predicate that answers True only for values jsonschema accepts, and False whenever it is not sure (a value
it rejects, or a shape it does not know); the caller then asks jsonschema, which decides and words the error.
So every record is still validated with jsonschema's semantics (as confluent-kafka's deserializers validate
each record), but the common valid one costs a few closures instead of jsonschema's walk over the schema
(~80 µs for a ten-property record, 90% of a record's decoding in benchmarks/json_schema_decode.py).

Soundness is the rule: a check here may be stricter than jsonschema (types by exact Python type, enum by type
and value), never looser. A schema using a keyword jsonschema enforces and this module does not compile gets
no predicate (None): every value goes to jsonschema, as before. Keywords jsonschema does not know it ignores,
and so does this; `format` is inert unless the validator has a format checker. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Any], bool]

# The JSON types a value of each exact Python type can have, in jsonschema's terms (a float may be an
# "integer" from draft 6 on, 1.0); a value of any other Python type is never surely of any JSON type.
_JSON_TYPES: dict[type, frozenset[str]] = {
    bool: frozenset({"boolean"}), int: frozenset({"integer", "number"}), float: frozenset({"number", "integer"}),
    str: frozenset({"string"}), type(None): frozenset({"null"}), dict: frozenset({"object"}),
    list: frozenset({"array"}),
}
_NUMBER = frozenset({"number"})
# The exact Python types surely of each JSON type (floats left to jsonschema for "integer": drafts differ).
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,), "integer": (int,), "number": (int, float), "string": (str,), "null": (type(None),),
    "object": (dict,), "array": (list,),
}
_COMPILED = frozenset({"type", "properties", "required", "additionalProperties", "minimum", "maximum",
                       "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "enum", "const", "items",
                       "minItems", "maxItems", "allOf", "anyOf", "oneOf", "$ref"})


class _Unsupported(Exception):
    """The schema uses something compiled here only at the risk of accepting what jsonschema refuses."""


def acceptor(validator: Any) -> Predicate | None:
    """The predicate for a jsonschema validator's schema, or None when the schema is beyond this module."""
    known = set(type(validator).VALIDATORS)
    if validator.format_checker is None:
        known.discard("format")  # an annotation only, as jsonschema treats it without a format checker
    try:
        return _Compiler(validator.schema, known).compile(validator.schema, ())
    except _Unsupported:
        return None


def _all(checks: list[Predicate]) -> Predicate:
    if not checks:
        return lambda value: True
    if len(checks) == 1:
        return checks[0]

    def every(value: Any) -> bool:
        for check in checks:
            if not check(value):
                return False
        return True

    return every


def _numeric(bound: Any, ok: Callable[[Any, Any], bool]) -> Predicate:
    if type(bound) not in (int, float):
        raise _Unsupported  # draft 4's boolean exclusiveMinimum, or junk

    def check(value: Any) -> bool:
        # jsonschema applies numeric bounds to numbers only (not bools); other values pass them.
        return ok(value, bound) if type(value) in (int, float) else type(value) in _JSON_TYPES
    return check


def _same(value: Any, allowed: Any) -> bool:
    return type(value) is type(allowed) and type(value) in (str, int, bool, float, type(None)) and value == allowed


class _Compiler:
    def __init__(self, root: Any, known: set[str]) -> None:
        self.root = root
        self.known = known

    def compile(self, schema: Any, refs: tuple[str, ...]) -> Predicate:
        if schema is True:
            return lambda value: True
        if schema is False:
            return lambda value: False
        if not isinstance(schema, Mapping):
            raise _Unsupported
        enforced = [k for k in schema if k in self.known]
        if any(k not in _COMPILED for k in enforced) or (refs and ("$id" in schema or "id" in schema)):
            raise _Unsupported
        if "$ref" in schema:
            if len(enforced) > 1:
                raise _Unsupported  # drafts differ on $ref's siblings (ignored up to draft 7)
            return self._ref(schema["$ref"], refs)
        checks = [self._keyword(k, schema, refs) for k in enforced if k not in ("required", "additionalProperties")]
        if "required" in schema or "additionalProperties" in schema:
            if "properties" not in schema:
                checks.append(self._object(schema, refs))
        return _all(checks)

    def _ref(self, ref: Any, refs: tuple[str, ...]) -> Predicate:
        if ref in refs:
            raise _Unsupported  # recursive
        return self.compile(self._resolve(ref), (*refs, ref))

    def _resolve(self, ref: Any) -> Any:
        """The part of the root schema a local $ref ("#/definitions/x", a JSON pointer) points at."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise _Unsupported  # remote
        target = self.root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                raise _Unsupported
            target = target[part]
        return target

    def _keyword(self, key: str, schema: Mapping[str, Any], refs: tuple[str, ...]) -> Predicate:
        arg = schema[key]
        if key == "type":
            names = [arg] if isinstance(arg, str) else arg
            if not isinstance(names, list) or any(not isinstance(n, str) or n not in _PYTHON_TYPES for n in names):
                raise _Unsupported
            accepted = tuple({t for n in names for t in _PYTHON_TYPES[n]})
            return lambda value: type(value) in accepted
        if key == "properties":
            return self._object(schema, refs)
        if key in ("minimum", "maximum") and isinstance(schema.get("exclusiveM" + key[1:]), bool):
            raise _Unsupported  # draft 4: the bound's own keyword reads the boolean exclusive flag beside it
        if key == "minimum":
            return _numeric(arg, lambda v, b: v >= b)
        if key == "maximum":
            return _numeric(arg, lambda v, b: v <= b)
        if key == "exclusiveMinimum":
            return _numeric(arg, lambda v, b: v > b)
        if key == "exclusiveMaximum":
            return _numeric(arg, lambda v, b: v < b)
        if key in ("minLength", "maxLength", "minItems", "maxItems"):
            if type(arg) is not int:
                raise _Unsupported
            kind = str if key.endswith("Length") else list
            low = key.startswith("min")
            return lambda value: (type(value) in _JSON_TYPES if type(value) is not kind
                                  else len(value) >= arg if low else len(value) <= arg)
        if key in ("enum", "const"):
            allowed = arg if key == "enum" else [arg]
            if not isinstance(allowed, list):
                raise _Unsupported
            return lambda value: any(_same(value, a) for a in allowed)
        if key == "items":
            if isinstance(arg, list):
                raise _Unsupported  # tuple validation
            each = self.compile(arg, refs)
            return lambda value: (type(value) in _JSON_TYPES if type(value) is not list
                                  else all(each(v) for v in value))
        if key in ("allOf", "anyOf", "oneOf"):
            if not isinstance(arg, list) or not arg:
                raise _Unsupported
            branches = [self.compile(s, refs) for s in arg]
            if key == "allOf":
                return _all(branches)
            if key == "anyOf":
                return lambda value: any(b(value) for b in branches)
            return self._one_of(arg, branches, refs)
        raise _Unsupported

    def _one_of(self, schemas: list[Any], branches: list[Predicate], refs: tuple[str, ...]) -> Predicate:
        # Exactly one branch: sure when one accepts and every other one's type rules the value out (the null
        # pattern, oneOf [{"type": "null"}, T], and unions of distinct types).
        excluded = [self._types(s, refs) for s in schemas]

        def check(value: Any) -> bool:
            kinds = _JSON_TYPES.get(type(value))
            if kinds is None:
                return False
            if type(value) is float and not value.is_integer():
                kinds = _NUMBER  # no draft takes 2.5 for an "integer"
            hit = -1
            for i, branch in enumerate(branches):
                types = excluded[i]
                if types is not None and not (kinds & types):
                    continue
                if hit >= 0 or not branch(value):
                    return False
                hit = i
            return hit >= 0
        return check

    def _types(self, schema: Any, refs: tuple[str, ...]) -> frozenset[str] | None:
        """The JSON types a branch admits at most (its `type`), or None when it may admit any."""
        while isinstance(schema, Mapping) and "$ref" in schema:
            schema = self._resolve(schema["$ref"])
        if schema is False:
            return frozenset()
        if not isinstance(schema, Mapping) or "type" not in schema:
            return None
        names = schema["type"]
        return frozenset([names] if isinstance(names, str) else names)

    def _object(self, schema: Mapping[str, Any], refs: tuple[str, ...]) -> Predicate:
        properties = schema.get("properties", {})
        if not isinstance(properties, Mapping):
            raise _Unsupported
        props = {name: self.compile(s, refs) for name, s in properties.items()}
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _Unsupported
        extra = schema.get("additionalProperties", True)
        additional = None if extra is True else self.compile(extra, refs)

        def check(value: Any) -> bool:
            if type(value) is not dict:
                # jsonschema applies these to objects only; a dict subclass is left to it.
                return type(value) in _JSON_TYPES
            for name in required:
                if name not in value:
                    return False
            for name, v in value.items():
                prop = props.get(name)
                if prop is not None:
                    if not prop(v):
                        return False
                elif additional is not None and not additional(v):
                    return False
            return True
        return check
