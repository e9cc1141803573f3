"""Generate kafkajet/protocol/_schemas.py from Kafka's official message definitions (JSON).

    .venv/bin/python tools/gen_protocol.py [MESSAGE_DIR ...] [--output OUTPUT]

MESSAGE_DIRs default to ../shared/kafka-protocol/message and message-next beside the repository (see the
SOURCES.md there; both folders come from the same Kafka sources), OUTPUT to kafkajet/protocol/_schemas.py.
A folder named message-<kafka version>-jar holds definitions tools/jar_messages.py folded from that Kafka
release's client jar (versions newer than the vendored files): a message found there supersedes the same
message in the other folders; any other duplicate is refused. The output is a data table, one entry per API, that kafkajet/protocol/schema.py
interprets at import time: every schema is declared once, by Kafka, and never by hand per version.

What the generator does to the JSON, and nothing more:
* pairs each request with its response by apiKey and keeps the version range BOTH files define;
* inlines nested and common structs (the codec never needs their Java class names);
* turns field names into snake_case and JSON defaults into Python values;
* keeps version strings ("3+", "0-2") verbatim so the table can be read side by side with the JSON;
* drops attributes with no effect on the wire (about, entityType, mapKey, ignorable) and refuses any attribute
  it does not know, so a semantic the interpreter lacks cannot slip through silently.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

_SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "kafka-protocol"
DEFAULT_SOURCES = (_SHARED / "message", _SHARED / "message-next")
DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "kafkajet" / "protocol" / "_schemas.py"

# The saved InitProducerIdResponse.json stops at v2 while the request file goes to v4. The request file's own
# history says v3 only adds request fields (ProducerId, ProducerEpoch) and v4 only a new error code
# (PRODUCER_FENCED), so the response layout is v2's. Some brokers (Tansu) refuse v0-v2 for idempotent
# producers, so the response is allowed up to the request's maximum instead of the intersection.
RESPONSE_VERSION_EXTENSIONS: dict[int, int] = {22: 4}

PRIMITIVES = frozenset(
    {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "string", "bytes", "records", "uuid"})
INTEGERS = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32"})

MESSAGE_KEYS = frozenset({"apiKey", "type", "name", "validVersions", "flexibleVersions", "fields", "commonStructs",
                          "listeners", "latestVersionUnstable", "deprecatedVersions", "headerVersions"})
FIELD_KEYS = frozenset({"name", "type", "versions", "about", "fields", "default", "nullableVersions", "tag",
                        "taggedVersions", "ignorable", "entityType", "mapKey"})


def strip_comments(text: str) -> str:
    """Remove // comments outside string literals (Kafka's JSON files are JSON plus line comments)."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load(path: Path) -> dict[str, Any]:
    data = json.loads(strip_comments(path.read_text()))
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: not a JSON object")
    return data


def snake(name: str) -> str:
    """TransactionalId -> transactional_id, timeoutMs -> timeout_ms, V3AndBelowTransactionalId -> v3_and_below_..."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    s = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", s)
    return s.lower()


def parse_range(spec: str | None) -> tuple[int, int | None] | None:
    """"3+" -> (3, None), "0-2" -> (0, 2), "1" -> (1, 1), None/"none" -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), None)
    lo, _, hi = spec.partition("-")
    return (int(lo), int(hi or lo))


def parse_default(ftype: str, raw: Any, where: str) -> Any:
    if ftype.startswith("[]") or ftype not in PRIMITIVES:
        if raw != "null":
            raise SystemExit(f"{where}: a {ftype} field can only default to null, not {raw!r}")
        return None
    if raw == "null":
        if ftype not in ("string", "bytes", "records"):
            raise SystemExit(f"{where}: a {ftype} field cannot default to null")
        return None
    if ftype in INTEGERS:
        # Kafka writes integer defaults as strings, sometimes hex ("0x7fffffff"), occasionally as bare numbers.
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if ftype == "bool":
        if isinstance(raw, bool):
            return raw
        if raw not in ("true", "false"):
            raise SystemExit(f"{where}: bad bool default {raw!r}")
        return raw == "true"
    if ftype == "float64":
        return float(raw)
    if ftype == "string":
        return str(raw)
    raise SystemExit(f"{where}: cannot interpret default {raw!r} for type {ftype}")


def convert_fields(fields: list[dict[str, Any]], structs: dict[str, list[dict[str, Any]]],
                   where: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in fields:
        here = f"{where}.{f.get('name')}"
        unknown = set(f) - FIELD_KEYS
        if unknown:
            raise SystemExit(f"{here}: attributes the codec does not implement: {sorted(unknown)}")
        ftype: str = f["type"]
        parse_range(f["versions"])  # validates the syntax early, with the field's name in the traceback
        entry: dict[str, Any] = {"name": snake(f["name"]), "type": ftype, "versions": f["versions"]}
        if "nullableVersions" in f:
            entry["nullable"] = f["nullableVersions"]
        if "tag" in f:
            if "taggedVersions" not in f:
                raise SystemExit(f"{here}: tag without taggedVersions")
            entry["tag"] = int(f["tag"])
            entry["tagged"] = f["taggedVersions"]
        if "default" in f:
            entry["default"] = parse_default(ftype, f["default"], here)
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        if elem == ftype and elem not in PRIMITIVES and "nullableVersions" in f:
            # Kafka writes a nullable struct behind an int8 presence marker; the codec has no use for it yet.
            raise SystemExit(f"{here}: nullable struct fields are not implemented")
        if elem not in PRIMITIVES:
            sub = f.get("fields")
            if sub is None:
                if elem not in structs:
                    raise SystemExit(f"{here}: unknown struct type {elem}")
                sub = structs[elem]
            entry["fields"] = convert_fields(sub, structs, here)
        out.append(entry)
    return out


def common_structs(msg: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {s["name"]: s["fields"] for s in msg.get("commonStructs", [])}


def check_header_versions(msg: dict[str, Any]) -> None:
    """Where a file states its header versions, they must agree with the flexible-version rule the codec uses."""
    declared = msg.get("headerVersions")
    if declared is None:
        return
    flex = parse_range(msg.get("flexibleVersions"))
    flexible_header = "2" if msg["type"] == "request" else "1"
    for spec, header in declared.items():
        rng = parse_range(spec)
        assert rng is not None
        is_flex = flex is not None and rng[0] >= flex[0]
        if (header == flexible_header) != is_flex:
            raise SystemExit(f"{msg['name']}: headerVersions {spec}->{header} contradicts flexibleVersions")


def _from_jar(folder: Path) -> bool:
    return folder.name.startswith("message-") and folder.name.endswith("-jar")


def build_table(*sources: Path) -> dict[int, dict[str, Any]]:
    by_api: dict[int, dict[str, dict[str, Any]]] = {}
    paths = sorted((p for src in sources for p in src.glob("*.json")), key=lambda p: p.name)
    superseding = {p.name for p in paths if _from_jar(p.parent)}
    paths = [p for p in paths if _from_jar(p.parent) or p.name not in superseding]
    names = [p.name for p in paths]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise SystemExit(f"message definitions given twice: {duplicated}")
    for path in paths:
        msg = load(path)
        if msg["type"] == "header":
            continue  # request/response headers are framing, written by kafkajet/protocol/api.py
        unknown = set(msg) - MESSAGE_KEYS
        if unknown:
            raise SystemExit(f"{path.name}: message attributes the codec does not implement: {sorted(unknown)}")
        check_header_versions(msg)
        by_api.setdefault(int(msg["apiKey"]), {})[msg["type"]] = msg
    table: dict[int, dict[str, Any]] = {}
    for api, pair in sorted(by_api.items()):
        req, resp = pair["request"], pair["response"]
        rq, rs = parse_range(req["validVersions"]), parse_range(resp["validVersions"])
        assert rq is not None and rs is not None and rq[1] is not None and rs[1] is not None
        rs_hi = max(rs[1], RESPONSE_VERSION_EXTENSIONS.get(api, rs[1]))
        lo, hi = max(rq[0], rs[0]), min(rq[1], rs_hi)
        if lo > hi:
            raise SystemExit(f"{req['name']}: request and response files share no version")
        name = req["name"].removesuffix("Request")
        entry: dict[str, Any] = {"name": name, "versions": (lo, hi)}
        for kind, msg in (("request", req), ("response", resp)):
            entry[kind] = {
                "flexible": msg.get("flexibleVersions", "none"),
                "fields": convert_fields(msg["fields"], common_structs(msg), msg["name"]),
            }
        table[api] = entry
    return table


def render_fields(fields: list[dict[str, Any]], indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    for f in fields:
        head = ", ".join(f"{k!r}: {v!r}" for k, v in f.items() if k != "fields")
        if "fields" in f:
            lines.append(f"{pad}{{{head}, 'fields': [")
            lines.extend(render_fields(f["fields"], indent + 4))
            lines.append(f"{pad}]}},")
        else:
            lines.append(f"{pad}{{{head}}},")
    return lines


def render(table: dict[int, dict[str, Any]], *sources: Path) -> str:
    folders = " and ".join(f"{src.name}/" for src in sources)
    lines = [
        '"""Kafka message schemas, one entry per API.',
        "",
        "GENERATED by tools/gen_protocol.py from Kafka's JSON message definitions; do not edit.",
        f"Source: {folders} (see SOURCES.md next to them). Interpreted by kafkajet/protocol/schema.py.",
        '"""',
        "",
        "from typing import Any",
        "",
        "SCHEMAS: dict[int, dict[str, Any]] = {",
    ]
    for api, entry in table.items():
        lines.append(f"    {api}: {{'name': {entry['name']!r}, 'versions': {entry['versions']!r},")
        for kind in ("request", "response"):
            msg = entry[kind]
            lines.append(f"        {kind!r}: {{'flexible': {msg['flexible']!r}, 'fields': [")
            lines.extend(render_fields(msg["fields"], 12))
            lines.append("        ]},")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    out = DEFAULT_OUTPUT
    if "--output" in argv:
        i = argv.index("--output")
        out = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    sources = tuple(Path(a) for a in argv) or DEFAULT_SOURCES
    out.write_text(render(build_table(*sources), *sources))


if __name__ == "__main__":
    main(sys.argv[1:])
