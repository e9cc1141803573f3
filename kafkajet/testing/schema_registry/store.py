"""The registry's state: schemas by id, subjects' versions, compatibility levels; every change a record in
the `_schemas` log (the format Confluent's registry writes: JSON keys with a keytype, JSON values, a null
value deleting permanently), replayed at start so ids survive a restart. No I/O here: the log is a callable."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkajet.schema_registry import compatibility, formats
from kafkajet.schema_registry.schema_format import InvalidSchemaError, SchemaFormat

SCHEMA_TYPES = formats.REGISTRY_NAMES
_GUID_NAMESPACE = uuid.UUID("6f1d9b5e-3a4c-4c7e-9f1b-2b8f3e2c9a10")


class RegistryError(Exception):
    """An answer the REST layer turns into {"error_code", "message"} with this HTTP status."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


@dataclass
class StoredSchema:
    id: int
    schema_type: str
    schema: str
    references: list[dict[str, Any]]
    guid: str


@dataclass
class Version:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class Subject:
    versions: list[Version] = field(default_factory=list)

    def live(self) -> list[Version]:
        return [v for v in self.versions if not v.deleted]


def canonical(schema_type: str, schema: str, normalize: bool) -> str:
    """The text two registrations are compared by, as the schema's format says (for JSON texts: without
    layout, so the same schema differently spaced gets the same id); an unknown type's text, stripped."""
    fmt = formats.by_registry_name(schema_type)
    return schema.strip() if fmt is None else fmt.canonical(schema, normalize)


def references_key(references: list[dict[str, Any]]) -> str:
    """What two registrations' references are compared by: the same text with other references is another
    schema."""
    return json.dumps([{"name": r.get("name"), "subject": r.get("subject"), "version": int(r.get("version", 0))}
                       for r in references], separators=(",", ":")) if references else ""


def schema_format(schema_type: str) -> SchemaFormat:
    """The format of a schemaType; RegistryError 42201 if the registry does not know it."""
    fmt = formats.by_registry_name(schema_type)
    if fmt is None:
        raise RegistryError(422, 42201, f"Invalid schema type {schema_type!r}: expected one of {SCHEMA_TYPES}")
    return fmt


def validate(schema_type: str, schema: str, referenced: list[str] | tuple[str, ...] = ()) -> Any:
    """The schema parsed by its format for compatibility checks, with the schemas its references name
    (`referenced`, their texts); RegistryError 42201 if it is not valid."""
    try:
        return schema_format(schema_type).parse(schema, referenced)
    except InvalidSchemaError as e:
        raise RegistryError(422, 42201, f"Invalid schema: {e}") from None


class RegistryState:
    """Thread-safe registry state. `log(key, value)` persists a change before it is applied (None: memory)."""

    def __init__(self, log: Callable[[dict[str, Any], dict[str, Any] | None], None] | None = None) -> None:
        self._log = log
        self._lock = threading.RLock()
        self.schemas: dict[int, StoredSchema] = {}
        self._by_text: dict[tuple[str, str, str], int] = {}
        self.subjects: dict[str, Subject] = {}
        self.global_level = "BACKWARD"
        self.levels: dict[str, str] = {}

    # --- the log: every change goes through apply(), at run time and at replay ------------------------

    def _write(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        if self._log is not None:
            self._log(key, value)
        self.apply(key, value)

    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        with self._lock:
            kind = key.get("keytype")
            if kind == "SCHEMA":
                subject, number = key["subject"], int(key["version"])
                subj = self.subjects.setdefault(subject, Subject())
                subj.versions = [v for v in subj.versions if v.version != number]
                if value is not None:
                    sid = int(value["id"])
                    if sid not in self.schemas:
                        stype = value.get("schemaType") or formats.DEFAULT_TYPE
                        self.schemas[sid] = StoredSchema(sid, stype, value["schema"], value.get("references") or [],
                                                         value.get("guid") or self._guid(stype, value["schema"]))
                        self._by_text[(stype, canonical(stype, value["schema"], False),
                                       references_key(value.get("references") or []))] = sid
                    subj.versions.append(Version(number, sid, bool(value.get("deleted"))))
                    subj.versions.sort(key=lambda v: v.version)
                if not subj.versions:
                    del self.subjects[subject]
            elif kind == "CONFIG":
                level = None if value is None else value.get("compatibilityLevel")
                if key.get("subject") is None:
                    self.global_level = level or "BACKWARD"
                elif level is None:
                    self.levels.pop(key["subject"], None)
                else:
                    self.levels[key["subject"]] = level

    @staticmethod
    def _guid(schema_type: str, schema: str) -> str:
        return str(uuid.uuid5(_GUID_NAMESPACE, f"{schema_type}\0{canonical(schema_type, schema, False)}"))

    # --- reads ---------------------------------------------------------------------------------------

    def subject(self, name: str, deleted: bool = False) -> Subject:
        subj = self.subjects.get(name)
        if subj is None or not (subj.versions if deleted else subj.live()):
            raise subject_not_found(name)
        return subj

    def version(self, name: str, version: str, deleted: bool = False) -> Version:
        subj = self.subject(name, deleted)
        pool = subj.versions if deleted else subj.live()
        if version in ("latest", "-1"):
            return pool[-1]
        try:
            n = int(version)
        except ValueError:
            raise RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. "
                                f"Allowed values are between [1, 2^31-1] and the string \"latest\"") from None
        for v in pool:
            if v.version == n:
                return v
        raise RegistryError(404, 40402, f"Version {n} not found.")

    def schema(self, schema_id: int) -> StoredSchema:
        s = self.schemas.get(schema_id)
        if s is None:
            raise RegistryError(404, 40403, f"Schema {schema_id} not found")
        return s

    def schema_by_guid(self, guid: str) -> StoredSchema:
        for s in self.schemas.values():
            if s.guid == guid:
                return s
        raise RegistryError(404, 40403, f"Schema {guid} not found")

    def level(self, subject: str | None) -> str:
        return self.levels.get(subject, self.global_level) if subject is not None else self.global_level

    def find(self, subject: str, schema_type: str, schema: str, normalize: bool, deleted: bool = False,
             references: list[dict[str, Any]] | None = None) -> Version | None:
        subj = self.subjects.get(subject)
        if subj is None:
            return None
        text = canonical(schema_type, schema, normalize)
        refs = references_key(references or [])
        for v in reversed(subj.versions if deleted else subj.live()):
            s = self.schemas[v.schema_id]
            if (s.schema_type == schema_type and canonical(s.schema_type, s.schema, normalize) == text
                    and references_key(s.references) == refs):
                return v
        return None

    def referenced_by(self, schema_type: str, references: list[dict[str, Any]]) -> list[str]:
        """What the format of `schema_type` parses a schema with: the texts its references name when the format
        resolves references (referenced()), else none."""
        fmt = formats.by_registry_name(schema_type)
        return self.referenced(references) if fmt is not None and fmt.resolves_references else []

    def referenced(self, references: list[dict[str, Any]]) -> list[str]:
        """The texts of the schemas `references` name, and of theirs, dependencies first, each once;
        RegistryError 42201 naming a reference whose subject or version is not here."""
        out: list[str] = []
        seen: set[int] = set()

        def visit(refs: list[dict[str, Any]], chain: tuple[int, ...]) -> None:
            for r in refs:
                try:
                    v = self.version(str(r.get("subject")), str(r.get("version", "latest")))
                except RegistryError:
                    raise RegistryError(422, 42201, f"Invalid schema: reference {r.get('name')!r} names subject "
                                        f"{r.get('subject')!r} version {r.get('version')}, which is not "
                                        f"registered") from None
                if v.schema_id in seen or v.schema_id in chain:
                    continue
                s = self.schemas[v.schema_id]
                visit(s.references, (*chain, v.schema_id))
                seen.add(v.schema_id)
                out.append(s.schema)

        visit(references, ())
        return out

    # --- writes --------------------------------------------------------------------------------------

    def incompatibilities(self, subject: str, schema_type: str, schema: str, against: list[Version] | None = None,
                          level: str | None = None, references: list[dict[str, Any]] | None = None) -> list[str]:
        parsed = validate(schema_type, schema, self.referenced_by(schema_type, references or []))
        level = level or self.level(subject)
        subj = self.subjects.get(subject)
        previous = against if against is not None else ([] if subj is None else subj.live())
        if level == "NONE" or not previous:
            return []
        fmt = schema_format(schema_type)
        olds = [s for s in (self.schemas[v.schema_id] for v in previous) if s.schema_type == schema_type]
        return compatibility.check(level, parsed,
                                   [fmt.parse(s.schema, self.referenced_by(schema_type, s.references)) for s in olds],
                                   fmt.incompatibilities)

    def register(self, subject: str, schema_type: str, schema: str, references: list[dict[str, Any]],
                 normalize: bool) -> tuple[int, int, str]:
        """(id, version, guid): the existing registration if the subject has this schema, else a new version."""
        with self._lock:
            existing = self.find(subject, schema_type, schema, normalize, references=references)
            if existing is not None:
                return existing.schema_id, existing.version, self.schemas[existing.schema_id].guid
            problems = self.incompatibilities(subject, schema_type, schema, references=references)
            if problems:
                raise RegistryError(
                    409, 409, f"Schema being registered is incompatible with an earlier schema for subject "
                    f"\"{subject}\", details: [{'; '.join(problems)}] (compatibility level "
                    f"{self.level(subject)})")
            text = canonical(schema_type, schema, normalize)
            sid = self._by_text.get((schema_type, text, references_key(references)))
            if sid is None:
                sid = max(self.schemas, default=0) + 1
                stored = schema if not normalize else text
            else:
                stored = self.schemas[sid].schema
            subj = self.subjects.get(subject)
            number = 1 if subj is None or not subj.versions else subj.versions[-1].version + 1
            value: dict[str, Any] = {"subject": subject, "version": number, "id": sid, "schema": stored,
                                     "deleted": False}
            value.update(formats.schema_type_entry(schema_type))
            if references:
                value["references"] = references
            self._write({"keytype": "SCHEMA", "subject": subject, "version": number, "magic": 1}, value)
            return sid, number, self.schemas[sid].guid

    def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        with self._lock:
            v = self.version(subject, version, deleted=permanent)
            if permanent and not v.deleted:
                raise RegistryError(404, 40407, f"Subject '{subject}' Version {v.version} was not deleted first "
                                    f"before being permanently deleted")
            self._record(subject, v, None if permanent else True)
            return v.version

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        with self._lock:
            subj = self.subject(subject, deleted=permanent)
            if permanent and subj.live():
                raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                    f"permanently deleted")
            numbers = [v.version for v in (subj.versions if permanent else subj.live())]
            for v in list(subj.versions if permanent else subj.live()):
                self._record(subject, v, None if permanent else True)
            return numbers

    def _record(self, subject: str, v: Version, deleted: bool | None) -> None:
        key = {"keytype": "SCHEMA", "subject": subject, "version": v.version, "magic": 1}
        if deleted is None:
            self._write(key, None)
            return
        s = self.schemas[v.schema_id]
        value: dict[str, Any] = {"subject": subject, "version": v.version, "id": s.id, "schema": s.schema,
                                 "deleted": True}
        value.update(formats.schema_type_entry(s.schema_type))
        self._write(key, value)

    def set_level(self, subject: str | None, level: str | None) -> None:
        if level is not None and level.upper() not in compatibility.LEVELS:
            raise RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, "
                                "forward, full, backward_transitive, forward_transitive, and full_transitive")
        self._write({"keytype": "CONFIG", "subject": subject, "magic": 0},
                    None if level is None else {"compatibilityLevel": level.upper()})
