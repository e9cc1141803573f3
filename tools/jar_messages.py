"""Write Kafka-style JSON message definitions from the layouts Kafka's own client jar knows.

    .venv/bin/python tools/jar_messages.py [--libs DIR] [--output DIR] [Message ...]

The vendored definitions (tests/unit/data/kafka-protocol/message*, see SOURCES.md) stop at the versions the
seeds needed. Later versions are read from kafka-clients-<version>.jar (`make kafka` fetches it into
.cache/apache-kafka-<version>): tools/JarSchemas.java prints every version of each named message
(org.apache.kafka.common.message.<Name>Data.SCHEMAS[v]), and this tool folds those per-version layouts back
into one definition per message, in Kafka's own JSON dialect, into `message-<kafka version>-jar/` beside the
vendored folders. tools/gen_protocol.py then reads that folder like the others, and a message found there
supersedes the vendored copy.

A printed layout names each field and its wire type but not its default, so defaults come from the vendored
definition of the same field where there is one (fields new since then get the type's zero, which is what
Kafka's generated code uses when the JSON names no default). Where the vendored definition covers a version,
the jar's layout must agree with it field for field, or the tool stops: the two sources never silently differ.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_protocol  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VENDORED = ROOT / "tests" / "unit" / "data" / "kafka-protocol"
PROGRAM = Path(__file__).resolve().parent / "JarSchemas.java"

# The messages kafkajet reads from the jar: Produce up to v13 (v12 carries transaction version 2's implicit
# partition add, KIP-890), EndTxn up to v5 (it answers the bumped producer id and epoch) and TxnOffsetCommit up
# to v6 (v5 is transaction version 2's: it adds the group to the transaction without AddOffsetsToTxn), and
# Metadata up to v13 (topic ids from v10, which Produce v13 names topics by; KIP-951's leader hints need the
# leader epochs every version from v7 carries), KIP-714's client metrics push (GetTelemetrySubscriptions,
# PushTelemetry), which the seeds' copies lack, and ApiVersions up to v5 (the cluster id and node id a 4.4
# broker checks a connection against, KIP-1242).
DEFAULT_MESSAGES = ("ProduceRequest", "ProduceResponse", "EndTxnRequest", "EndTxnResponse",
                    "TxnOffsetCommitRequest", "TxnOffsetCommitResponse", "MetadataRequest", "MetadataResponse",
                    "GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse",
                    "PushTelemetryRequest", "PushTelemetryResponse", "ApiVersionsRequest", "ApiVersionsResponse")

# Fields Kafka renamed since the vendored definitions, same wire type (CamelCase jar name -> vendored name):
# the jar's name is kept, and the two definitions are compared and defaults carried over under the old one.
_RENAMED: dict[str, dict[str, str]] = {
    "TxnOffsetCommitRequest": {"GenerationIdOrMemberEpoch": "GenerationId"},  # KIP-848's member epoch
}

# Wire type names as Schema.toString() prints them -> (JSON type, nullable).
_TYPES: dict[str, tuple[str, bool]] = {
    "INT8": ("int8", False), "INT16": ("int16", False), "INT32": ("int32", False), "INT64": ("int64", False),
    "UINT16": ("uint16", False), "UNSIGNED_INT32": ("uint32", False), "FLOAT64": ("float64", False),
    "BOOLEAN": ("bool", False), "UUID": ("uuid", False),
    "STRING": ("string", False), "COMPACT_STRING": ("string", False),
    "NULLABLE_STRING": ("string", True), "COMPACT_NULLABLE_STRING": ("string", True),
    "BYTES": ("bytes", False), "COMPACT_BYTES": ("bytes", False),
    "NULLABLE_BYTES": ("bytes", True), "COMPACT_NULLABLE_BYTES": ("bytes", True),
    "RECORDS": ("records", False), "COMPACT_RECORDS": ("records", False),
    "NULLABLE_RECORDS": ("records", True), "COMPACT_NULLABLE_RECORDS": ("records", True),
}

_API_KEYS = {"Produce": 0, "Metadata": 3, "DescribeGroups": 15, "ApiVersions": 18, "EndTxn": 26,
              "TxnOffsetCommit": 28, "DescribeConfigs": 32, "DeleteGroups": 42, "GetTelemetrySubscriptions": 71,
              "PushTelemetry": 72}


def kafka_version(libs: Path) -> str:
    jars = sorted(libs.glob("kafka-clients-*.jar"))
    if not jars:
        raise SystemExit(f"no kafka-clients jar in {libs}: run `make kafka`")
    return jars[0].stem.removeprefix("kafka-clients-")


def print_layouts(libs: Path, messages: tuple[str, ...]) -> dict[str, dict[int, list[dict[str, Any]]]]:
    done = subprocess.run(["java", "-cp", f"{libs}/*", str(PROGRAM), *messages], capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        raise SystemExit(f"JarSchemas failed ({done.returncode}):\n{done.stderr}")
    out: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        out.setdefault(row["message"], {})[int(row["version"])] = row["fields"]
    return out


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _span(versions: list[int], top: int, where: str) -> str:
    lo, hi = min(versions), max(versions)
    if versions != list(range(lo, hi + 1)):
        raise SystemExit(f"{where}: present in versions {versions}, not one run")
    return f"{lo}+" if hi == top else (f"{lo}" if lo == hi else f"{lo}-{hi}")


def fold(per_version: dict[int, list[dict[str, Any]]], top: int, where: str) -> list[dict[str, Any]]:
    """Per-version field lists -> one JSON field list with version ranges (names in Kafka's CamelCase)."""
    order: list[str] = []
    seen: dict[str, dict[int, dict[str, Any]]] = {}
    for v in sorted(per_version):
        plain = [f for f in per_version[v] if f["name"] != "_tagged_fields"]
        tagged = [f for t in per_version[v] if t["name"] == "_tagged_fields" for f in t["fields"]]
        previous: str | None = None
        for f in plain + tagged:
            if f["name"] not in seen:
                # A field new in this version goes right after the field that precedes it here, so every
                # version's fields keep their wire order in the one list.
                order.insert(0 if previous is None else order.index(previous) + 1, f["name"])
            seen.setdefault(f["name"], {})[v] = f
            previous = f["name"]
    fields: list[dict[str, Any]] = []
    for name in order:
        by_v = seen[name]
        here = f"{where}.{name}"
        versions = sorted(by_v)
        shapes = {(_TYPES.get(f["type"], (f["type"], False))[0], f.get("array", False), f.get("tag"))
                  for f in by_v.values()}
        if len(shapes) > 1:
            raise SystemExit(f"{here}: changes shape across versions: {sorted(map(str, shapes))}")
        first = by_v[versions[0]]
        entry: dict[str, Any] = {"name": _camel(name)}
        span = _span(versions, top, here)
        if first["type"] == "STRUCT":
            entry["type"] = ("[]" if first.get("array") else "") + _camel(name)
        else:
            if first["type"] not in _TYPES:
                raise SystemExit(f"{here}: wire type {first['type']} unknown to this tool")
            entry["type"] = ("[]" if first.get("array") else "") + _TYPES[first["type"]][0]
        entry["versions"] = span
        nullable = [v for v, f in by_v.items() if f.get("nullable")]
        if nullable:
            entry["nullableVersions"] = _span(sorted(nullable), top, here)
        if first.get("tag") is not None:
            entry["taggedVersions"] = span
            entry["tag"] = first["tag"]
        if first["type"] == "STRUCT":
            entry["fields"] = fold({v: f["fields"] for v, f in by_v.items()}, top, here)
        fields.append(entry)
    return fields


def _flexible(per_version: dict[int, list[dict[str, Any]]]) -> str:
    flex = [v for v, fields in per_version.items() if any(f["name"] == "_tagged_fields" for f in fields)]
    return "none" if not flex else f"{min(flex)}+"


def _defaults_from(vendored: list[dict[str, Any]], jar: list[dict[str, Any]],
                   renamed: dict[str, str] | None = None) -> None:
    """Defaults, and the struct type names (only ever read by people), from the vendored definition."""
    by_name = {f["name"]: f for f in vendored}
    for f in jar:
        old = by_name.get((renamed or {}).get(f["name"], f["name"]))
        if old is None:
            continue
        if "default" in old:
            f["default"] = old["default"]
        if "fields" in f and "fields" in old:
            f["type"] = old["type"]
        if "fields" in f and "fields" in old:
            _defaults_from(old["fields"], f["fields"], renamed)


def _layout_shape(layout: list[dict[str, Any]]) -> list[Any]:
    """Field names in wire order, nested, as the jar prints one version (tagged fields by tag)."""
    plain = [f for f in layout if f["name"] != "_tagged_fields"]
    tagged = sorted((f for t in layout if t["name"] == "_tagged_fields" for f in t["fields"]), key=lambda f: f["tag"])
    return [(f["name"], _layout_shape(f.get("fields") or [])) for f in plain + tagged]


def _plan(msg: dict[str, Any], v: int, renamed: dict[str, str] | None = None) -> list[Any]:
    """The codec's plan of one version of a definition, as comparable tuples (`renamed` fields, CamelCase, under
    their old names)."""
    sys.path.insert(0, str(ROOT))
    from kafkajet.protocol.schema import FieldPlan, StructPlan, struct_plan

    def describe(plan: StructPlan | None) -> list[Any]:
        def one(f: FieldPlan | None) -> Any:
            if f is None:
                return None
            return (f.name, f.type, f.compact, f.nullable, f.tag, repr(f.default), describe(f.struct), one(f.element))
        return [] if plan is None else [one(f) for f in plan.fields + plan.tagged]

    def rename(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**f, "name": (renamed or {}).get(f["name"], f["name"]),
                 **({"fields": rename(f["fields"])} if "fields" in f else {})} for f in fields]

    fields = gen_protocol.convert_fields(rename(msg["fields"]), gen_protocol.common_structs(msg), msg["name"])
    flexible = gen_protocol.parse_range(msg.get("flexibleVersions"))
    return describe(struct_plan(fields, v, flexible is not None and v >= flexible[0]))


def _plan_shape(plan: list[Any]) -> list[Any]:
    def sub(f: Any) -> list[Any]:
        struct = f[6] or (f[7][6] if f[7] is not None else [])
        return _plan_shape(struct)
    return [(f[0], sub(f)) for f in plan]


def _check(message: str, definition: dict[str, Any], layouts: dict[int, list[dict[str, Any]]],
           vendored: Path | None) -> None:
    """Every version of the folded definition has the jar's fields in the jar's order, and agrees with the
    vendored definition wherever that defines the version too."""
    for v, layout in layouts.items():
        if _plan_shape(_plan(definition, v)) != _layout_shape(layout):
            raise SystemExit(f"{message} v{v}: folding lost the jar's field order: {_layout_shape(layout)}")
    if vendored is None:
        return
    old = gen_protocol.load(vendored)
    old_range = gen_protocol.parse_range(old["validVersions"])
    assert old_range is not None and old_range[1] is not None
    for v in range(max(old_range[0], min(layouts)), old_range[1] + 1):
        renamed = _RENAMED.get(message)
        if _plan(old, v) != _plan(definition, v, renamed):
            raise SystemExit(f"{message} v{v}: the jar's layout differs from {vendored}:\n"
                             f"  vendored: {_plan(old, v)}\n  jar:      {_plan(definition, v, renamed)}")


def definition(message: str, per_version: dict[int, list[dict[str, Any]]], version: str) -> dict[str, Any]:
    lo, top = min(per_version), max(per_version)
    kind = "request" if message.endswith("Request") else "response"
    api = message.removesuffix("Request").removesuffix("Response")
    out: dict[str, Any] = {
        "apiKey": _API_KEYS[api], "type": kind, "name": message,
        "validVersions": f"{lo}-{top}", "flexibleVersions": _flexible(per_version),
        "fields": fold(per_version, top, message),
    }
    vendored = [p for p in (VENDORED / "message" / f"{message}.json", VENDORED / "message-next" / f"{message}.json")
                if p.exists()]
    if vendored:
        _defaults_from(gen_protocol.load(vendored[0])["fields"], out["fields"], _RENAMED.get(message))
    _check(message, out, per_version, vendored[0] if vendored else None)
    return out


def main(argv: list[str]) -> None:
    libs = ROOT / ".cache" / "apache-kafka-4.4.0"
    output: Path | None = None
    if "--libs" in argv:
        i = argv.index("--libs")
        libs, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    if "--output" in argv:
        i = argv.index("--output")
        output, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    version = kafka_version(libs)
    target = output or VENDORED / f"message-{version}-jar"
    target.mkdir(parents=True, exist_ok=True)
    messages = tuple(argv) or DEFAULT_MESSAGES
    for message, per_version in print_layouts(libs, messages).items():
        lo, top = min(per_version), max(per_version)
        header = (f"// GENERATED by tools/jar_messages.py from kafka-clients-{version}.jar: "
                  f"org.apache.kafka.common.message.{message}Data.SCHEMAS[{lo}..{top}]\n"
                  "// as tools/JarSchemas.java prints them; defaults from the vendored definition. Do not edit.\n")
        text = json.dumps(definition(message, per_version, version), indent=2)
        (target / f"{message}.json").write_text(header + text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
