"""Generate kafkajet/protocol/_schemas.py from Kafka's official message definitions (JSON).

    .venv/bin/python tools/gen_protocol.py ../shared/kafka-protocol/message

Each API is cut to the versions that BOTH its request and response files define (SOURCES.md), nested and
common structs are inlined, names become snake_case and defaults become Python values. The output is a
data table that kafkajet/protocol/codec.py interprets: every schema is declared once, by Kafka.
"""

from __future__ import annotations

import json
import pprint
import re
import sys
from pathlib import Path
from typing import Any

# InitProducerIdResponse.json here stops at v2, but Kafka's newer definition says "Version 3 is the same as
# version 2. Version 4 adds the support for new error code PRODUCER_FENCED." (no layout change). Tansu
# answers v0-v2 with UNKNOWN_SERVER_ERROR, so the idempotent producer needs v3+: extend the response.
RESPONSE_VERSION_EXTENSIONS = {22: 4}

PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes", "records", "uuid"}


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    s = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", s)
    return s.lower()


def load(path: Path) -> dict[str, Any]:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("//"))
    return json.loads(text)  # type: ignore[no-any-return]


def parse_range(spec: str | None, top: int) -> tuple[int, int] | None:
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), top)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def default_value(ftype: str, raw: Any, nullable: bool) -> Any:
    if ftype.startswith("[]") or ftype not in PRIMITIVES:
        return None if raw == "null" else []
    if raw is None:
        if ftype in ("string",):
            return ""
        if ftype in ("bytes", "records"):
            return None if ftype == "records" else b""
        if ftype == "bool":
            return False
        if ftype == "uuid":
            return bytes(16)
        if ftype == "float64":
            return 0.0
        return 0
    if raw == "null":
        return None
    if ftype == "bool":
        return raw in (True, "true")
    if ftype in ("int8", "int16", "int32", "int64", "uint16"):
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if ftype == "float64":
        return float(raw)
    return raw


def convert_fields(fields: list[dict[str, Any]], structs: dict[str, dict[str, Any]], top: int) -> list[dict[str, Any]]:
    out = []
    for f in fields:
        ftype: str = f["type"]
        versions = parse_range(f.get("versions"), top)
        if versions is None:
            continue
        # Fields of newer versions stay in the table (never encoded at our versions) so the encoder can
        # tell a field name Kafka knows from a misspelling.
        nested = f.get("fields")
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        kind = ftype
        sub = None
        if elem not in PRIMITIVES:
            sub = nested if nested is not None else structs[elem]["fields"]
            kind = "[]" if ftype.startswith("[]") else "struct"
        nullable = parse_range(f.get("nullableVersions"), top)
        entry: dict[str, Any] = {
            "name": snake(f["name"]),
            "type": kind,
            "versions": (versions[0], max(versions[0], min(versions[1], top))),
            "nullable": nullable,
            "tag": f.get("tag"),
            "tagged": parse_range(f.get("taggedVersions"), top),
            "default": default_value(ftype, f.get("default"), nullable is not None),
            "fields": convert_fields(sub, structs, top) if sub is not None else None,
        }
        out.append(entry)
    return out


def collect_structs(msg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    structs = {s["name"]: s for s in msg.get("commonStructs", [])}

    def walk(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            if f.get("fields") is not None:
                name = f["type"][2:] if f["type"].startswith("[]") else f["type"]
                structs.setdefault(name, f)
                walk(f["fields"])

    walk(msg["fields"])
    return structs


def main(src: str, out: str = "kafkajet/protocol/_schemas.py") -> None:
    files = {p.name: load(p) for p in sorted(Path(src).glob("*.json"))}
    by_api: dict[int, dict[str, dict[str, Any]]] = {}
    for data in files.values():
        if data["type"] in ("request", "response"):
            by_api.setdefault(data["apiKey"], {})[data["type"]] = data
    table: dict[int, dict[str, Any]] = {}
    for api, pair in sorted(by_api.items()):
        req, resp = pair["request"], pair["response"]
        rq, rs = parse_range(req["validVersions"], 99), parse_range(resp["validVersions"], 99)
        assert rq and rs
        rs = (rs[0], max(rs[1], RESPONSE_VERSION_EXTENSIONS.get(api, rs[1])))
        lo, hi = max(rq[0], rs[0]), min(rq[1], rs[1])
        entry: dict[str, Any] = {"name": req["name"].removesuffix("Request"), "versions": (lo, hi)}
        for kind, msg in (("request", req), ("response", resp)):
            flex = parse_range(msg.get("flexibleVersions"), hi)
            entry[kind] = {
                "flexible_from": flex[0] if flex else None,
                "fields": convert_fields(msg["fields"], collect_structs(msg), hi),
            }
        table[api] = entry
    header = (
        '"""Kafka message schemas. GENERATED by tools/gen_protocol.py from Kafka\'s JSON definitions; do not edit."""\n\n'
        "from typing import Any\n\n"
        "SCHEMAS: dict[int, dict[str, Any]] = "
    )
    Path(out).write_text(header + pprint.pformat(table, width=110, sort_dicts=False) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
