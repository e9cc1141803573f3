"""Encode and decode request/response bodies by interpreting the generated schema table.

Bodies are plain dicts keyed by snake_case field names; nested structs are dicts, arrays are lists.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkajet.errors import ProtocolError, UnsupportedVersionError
from kafkajet.protocol import types as t
from kafkajet.protocol._schemas import SCHEMAS

Field = dict[str, Any]


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


class MessageSchema:
    """One direction of one API: which fields exist at which version, and whether the version is flexible."""

    def __init__(self, api_key: int, name: str, kind: str, versions: tuple[int, int], spec: dict[str, Any]) -> None:
        self.api_key = api_key
        self.name = name
        self.kind = kind
        self.versions = versions
        self.flexible_from: int | None = spec["flexible_from"]
        self.fields: list[Field] = spec["fields"]

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def check_version(self, version: int) -> None:
        lo, hi = self.versions
        if not lo <= version <= hi:
            raise UnsupportedVersionError(f"unsupported version {version} of {self.name} (supported {lo}-{hi})")

    # --- encode -------------------------------------------------------------------------------------

    def encode(self, body: dict[str, Any], version: int, out: list[Any]) -> None:
        self.check_version(version)
        _encode_struct(self.fields, body, version, self.flexible(version), out, self.name)

    # --- decode -------------------------------------------------------------------------------------

    def decode(self, reader: t.Reader, version: int) -> dict[str, Any]:
        self.check_version(version)
        return _decode_struct(self.fields, reader, version, self.flexible(version), self.name)


def _encode_value(f: Field, value: Any, v: int, flex: bool, out: list[Any], path: str) -> None:
    ftype = f["type"]
    nullable = _in(f["nullable"], v)
    if value is None and not nullable and ftype not in t.FIXED and ftype not in ("bool", "uuid"):
        raise ProtocolError(f"{path}: null is not allowed in version {v}")
    try:
        st = t.FIXED.get(ftype)
        if st is not None:
            out.append(st.pack(value))
        elif ftype == "bool":
            out.append(b"\x01" if value else b"\x00")
        elif ftype == "string":
            out.append(t.string(value, flex))
        elif ftype in ("bytes", "records"):
            out.extend(t.bytes_(value, flex))
        elif ftype == "uuid":
            raw = bytes(16) if value is None else bytes(value)
            if len(raw) != 16:
                raise ProtocolError(f"{path}: a uuid is 16 bytes, got {len(raw)}")
            out.append(raw)
        elif ftype == "struct":
            _encode_struct(f["fields"], value or {}, v, flex, out, path)
        elif ftype.startswith("[]"):
            out.append(t.array_length(None if value is None else len(value), flex))
            if value:
                if ftype == "[]":
                    for item in value:
                        _encode_struct(f["fields"], item, v, flex, out, path)
                else:
                    elem = {"type": ftype[2:], "nullable": None}
                    for item in value:
                        _encode_value(elem, item, v, flex, out, path)
        else:
            raise ProtocolError(f"{path}: unknown type {ftype}")
    except struct.error as e:
        raise ProtocolError(f"{path}: cannot encode {value!r} as {ftype}: {e}") from None
    except (TypeError, AttributeError) as e:
        raise ProtocolError(f"{path}: cannot encode {value!r} as {ftype}: {e}") from None


_NAMES: dict[int, frozenset[str]] = {}


def _check_names(fields: list[Field], body: dict[str, Any], path: str) -> None:
    names = _NAMES.get(id(fields))
    if names is None:
        names = _NAMES[id(fields)] = frozenset(f["name"] for f in fields)
    if not names.issuperset(body):
        # A misspelt key would otherwise be replaced by the field's default without a word.
        unknown = sorted(set(body) - names)
        raise ProtocolError(f"{path}: unknown field(s) {', '.join(unknown)}; this message has {', '.join(sorted(names))}")


def _encode_struct(fields: list[Field], body: dict[str, Any], v: int, flex: bool, out: list[Any], path: str) -> None:
    _check_names(fields, body, path)
    tagged: list[tuple[int, Field, Any]] = []
    for f in fields:
        if not _in(f["versions"], v):
            continue
        value = body.get(f["name"], f["default"])
        if f["tag"] is not None and flex and _in(f["tagged"], v):
            if value != f["default"]:
                tagged.append((f["tag"], f, value))
            continue
        _encode_value(f, value, v, flex, out, f"{path}.{f['name']}")
    if flex:
        out.append(t.uvarint(len(tagged)))
        for tag, f, value in sorted(tagged, key=lambda x: x[0]):
            parts: list[Any] = []
            _encode_value(f, value, v, flex, parts, f"{path}.{f['name']}")
            data = b"".join(parts)
            out.append(t.uvarint(tag))
            out.append(t.uvarint(len(data)))
            out.append(data)


def _decode_value(f: Field, r: t.Reader, v: int, flex: bool, path: str) -> Any:
    ftype = f["type"]
    st = t.FIXED.get(ftype)
    if st is not None:
        return r.fixed(st, path)
    nullable = _in(f["nullable"], v)
    if ftype == "bool":
        return r.boolean(path)
    if ftype == "string":
        return r.string(flex, nullable, path)
    if ftype in ("bytes", "records"):
        return r.bytes_(flex, nullable or ftype == "records", path)
    if ftype == "uuid":
        return r.raw(16, path)
    if ftype == "struct":
        return _decode_struct(f["fields"], r, v, flex, path)
    if ftype.startswith("[]"):
        n = r.array_length(flex, nullable, path)
        if n is None:
            return None
        if ftype == "[]":
            return [_decode_struct(f["fields"], r, v, flex, path) for _ in range(n)]
        elem = {"type": ftype[2:], "nullable": None}
        return [_decode_value(elem, r, v, flex, path) for _ in range(n)]
    raise ProtocolError(f"{path}: unknown type {ftype}")


def _decode_struct(fields: list[Field], r: t.Reader, v: int, flex: bool, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    by_tag: dict[int, Field] = {}
    for f in fields:
        if not _in(f["versions"], v):
            continue
        if f["tag"] is not None and flex and _in(f["tagged"], v):
            by_tag[f["tag"]] = f
            out[f["name"]] = f["default"]
            continue
        out[f["name"]] = _decode_value(f, r, v, flex, f"{path}.{f['name']}")
    if flex:
        count = r.uvarint(f"{path} tagged field count")
        if count > r.end - r.pos:
            raise ProtocolError(f"{r.context}: {count} tagged fields claimed with {r.end - r.pos} bytes left")
        for _ in range(count):
            tag = r.uvarint(f"{path} tag")
            size = r.uvarint(f"{path} tag {tag} size")
            r.need(size, f"{path} tag {tag}")
            tf = by_tag.get(tag)
            if tf is None:
                r.pos += size  # unknown tags are skipped: newer brokers may add them
                continue
            sub = t.Reader(r.data[r.pos:r.pos + size], r.context)
            out[tf["name"]] = _decode_value(tf, sub, v, flex, f"{path}.{tf['name']}")
            r.pos += size
    return out


REQUESTS: dict[int, MessageSchema] = {}
RESPONSES: dict[int, MessageSchema] = {}
for _api, _entry in SCHEMAS.items():
    REQUESTS[_api] = MessageSchema(_api, _entry["name"] + " request", "request", _entry["versions"], _entry["request"])
    RESPONSES[_api] = MessageSchema(_api, _entry["name"] + " response", "response", _entry["versions"],
                                    _entry["response"])
