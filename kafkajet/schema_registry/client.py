"""A Schema Registry REST client (confluent-kafka's SchemaRegistryClient, same constructor and methods) on the
standard library's urllib: several URLs tried in turn, basic or bearer auth, timeouts, retries of 5xx and
connection errors with backoff, and caches both ways, so a serializer costs one round trip per schema."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkajet.backoff import ExponentialBackoff
from kafkajet.config import SCHEMA_REGISTRY_KEYS
from kafkajet.errors import ConfigError, KafkaError
from kafkajet.schema_registry.formats import DEFAULT_TYPE, schema_type_entry

# 408 and 429 are worth another try (Confluent's client retries them too); any 5xx is the server's trouble.
_RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class SchemaReference:
    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema as the registry stores it: its text, its type (AVRO, JSON, PROTOBUF) and references."""

    schema_str: str
    schema_type: str = DEFAULT_TYPE
    references: tuple[SchemaReference, ...] = field(default_factory=tuple)

    def __init__(self, schema_str: str, schema_type: str = DEFAULT_TYPE,
                 references: list[SchemaReference] | tuple[SchemaReference, ...] | None = None) -> None:
        object.__setattr__(self, "schema_str", schema_str)
        object.__setattr__(self, "schema_type", (schema_type or DEFAULT_TYPE).upper())
        object.__setattr__(self, "references", tuple(references or ()))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": self.schema_str, **schema_type_entry(self.schema_type)}
        if self.references:
            d["references"] = [r.to_dict() for r in self.references]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        refs = [SchemaReference(r["name"], r["subject"], r["version"]) for r in d.get("references") or ()]
        return cls(d["schema"], d.get("schemaType") or DEFAULT_TYPE, refs)


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    schema: Schema
    subject: str | None
    version: int | None
    guid: str | None = None


class SchemaRegistryError(KafkaError):
    """An error answer (or none) from the registry: `http_status_code`, the registry's `error_code` and
    `error_message` (confluent-kafka's attribute names), in a message naming the request, the URL and what to do."""

    UNKNOWN = -1

    def __init__(self, http_status_code: int, error_code: int, error_message: str, *, context: str = "",
                 url: str = "", hint: str = "") -> None:
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message
        self.url = url
        parts = [f"{context}: " if context else "", error_message,
                 f" (HTTP {http_status_code}, error code {error_code})" if http_status_code > 0 else "",
                 f" at {url}" if url else "", f"; {hint}" if hint else ""]
        super().__init__("".join(parts))


LOOKUP_MISS_HINT = ("the subject has versions, but none is this schema: with auto.register.schemas=false the "
                    "schema written (derived from the data, or given) must equal a registered version field for "
                    "field; register it, or give the registered schema")


def _hint(status: int, code: int) -> str:
    if status == 401:
        return ("the registry refused the credentials: check basic.auth.user.info (user:password) with "
                "basic.auth.credentials.source=USER_INFO, or bearer.auth.token")
    if status == 403:
        return "the credentials lack permission for this subject"
    if code == 40401:
        return ("no schema is registered under this subject: register one (auto.register.schemas=true), or "
                "check the subject name strategy (topic, record, topic_record) and the topic name")
    if code in (40402, 40403):
        return "the schema or version does not exist in this registry (another registry, or deleted?)"
    if status == 409:
        return ("the new schema is not compatible with the registered versions under the subject's "
                "compatibility level: make the change compatible (new fields need defaults under BACKWARD) "
                "or change the level with set_compatibility()")
    if code == 42201 or status == 422:
        return "the registry could not parse the schema: check its syntax and schema type"
    return ""


def _urls(conf: Mapping[str, Any]) -> list[str]:
    raw = conf.get("url", conf.get("schema.registry.url"))
    if not raw:
        raise ConfigError("SchemaRegistryClient needs 'url' (or 'schema.registry.url'): the registry's "
                          "http(s)://host:port, several separated by commas")
    urls = [u.strip().rstrip("/") for u in (raw.split(",") if isinstance(raw, str) else raw) if u.strip()]
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise ConfigError(f"schema registry url {u!r} must start with http:// or https://")
    return urls


class _Auth:
    """The Authorization (and Confluent Cloud) headers from the confluent-kafka settings."""

    def __init__(self, conf: Mapping[str, Any], urls: list[str]) -> None:
        self.static: dict[str, str] = {}
        self.provider: Callable[[], Mapping[str, Any]] | None = None
        basic_source = str(conf.get("basic.auth.credentials.source", "URL")).upper()
        bearer_source = conf.get("bearer.auth.credentials.source")
        user_info: str | None = None
        if basic_source == "USER_INFO":
            user_info = conf.get("basic.auth.user.info")
            if not user_info or ":" not in user_info:
                raise ConfigError("basic.auth.credentials.source=USER_INFO needs basic.auth.user.info as "
                                  "'user:password'")
        elif basic_source == "SASL_INHERIT":
            if not conf.get("sasl.username"):
                raise ConfigError("basic.auth.credentials.source=SASL_INHERIT needs sasl.username/sasl.password")
            user_info = f"{conf['sasl.username']}:{conf.get('sasl.password', '')}"
        elif basic_source == "URL":
            parsed = urllib.parse.urlsplit(urls[0])
            if parsed.username is not None:
                user_info = f"{urllib.parse.unquote(parsed.username)}:{urllib.parse.unquote(parsed.password or '')}"
        else:
            raise ConfigError(f"basic.auth.credentials.source={basic_source!r}: expected URL, USER_INFO or "
                              f"SASL_INHERIT")
        if user_info is not None and bearer_source:
            raise ConfigError("basic.auth.* and bearer.auth.* are both set: choose one")
        if user_info is not None:
            self.static["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
        if bearer_source:
            source = str(bearer_source).upper()
            if source == "STATIC_TOKEN":
                token = conf.get("bearer.auth.token")
                if not token:
                    raise ConfigError("bearer.auth.credentials.source=STATIC_TOKEN needs bearer.auth.token")
                self.static.update(self._bearer_headers(token, conf))
            elif source == "CUSTOM":
                fn = conf.get("bearer.auth.custom.provider.function")
                if not callable(fn):
                    raise ConfigError("bearer.auth.credentials.source=CUSTOM needs "
                                      "bearer.auth.custom.provider.function, a callable returning a dict with "
                                      "bearer.auth.token (and .logical.cluster / .identity.pool.id)")
                cfg = conf.get("bearer.auth.custom.provider.config", {})
                self.provider = lambda: fn(cfg)
            else:
                raise ConfigError(f"bearer.auth.credentials.source={bearer_source!r} is not supported: use "
                                  f"STATIC_TOKEN or CUSTOM (OAUTHBEARER's client-credentials flow is not built "
                                  f"in; fetch the token in a CUSTOM provider function)")

    @staticmethod
    def _bearer_headers(token: str, conf: Mapping[str, Any]) -> dict[str, str]:
        h = {"Authorization": f"Bearer {token}"}
        if conf.get("bearer.auth.logical.cluster"):
            h["target-sr-cluster"] = str(conf["bearer.auth.logical.cluster"])
        if conf.get("bearer.auth.identity.pool.id"):
            h["Confluent-Identity-Pool-Id"] = str(conf["bearer.auth.identity.pool.id"])
        return h

    def headers(self) -> dict[str, str]:
        if self.provider is None:
            return self.static
        return {**self.static, **self._bearer_headers(str(self.provider().get("bearer.auth.token", "")),
                                                       self.provider())}


def _strip_userinfo(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    if p.username is None:
        return url
    netloc = p.hostname or ""
    if p.port is not None:
        netloc += f":{p.port}"
    return urllib.parse.urlunsplit((p.scheme, netloc, p.path, p.query, p.fragment))


class _Rest:
    """JSON over HTTP to the first URL that answers, with retries and backoff."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        urls = _urls(conf)
        self.auth = _Auth(conf, urls)
        self.urls = [_strip_userinfo(u) for u in urls]
        self.timeout_s = float(conf.get("timeout", 30))
        self.max_retries = int(conf.get("max.retries", 3))
        self.wait_ms = float(conf.get("retries.wait.ms", 1000))
        self.max_wait_ms = float(conf.get("retries.max.wait.ms", 20000))
        # Confluent's clients: up to max.retries more attempts, the wait doubling from retries.wait.ms to
        # retries.max.wait.ms, jittered so that clients failing together spread out.
        self.backoff = ExponentialBackoff(self.wait_ms, 2, self.max_wait_ms, 0.25)
        self.ssl_context = None
        if any(conf.get(k) for k in ("ssl.ca.location", "ssl.certificate.location")):
            from kafkajet.tls_context import client_context

            ca = conf.get("ssl.ca.location")
            ctx = client_context(system_cas=not ca)  # a CA file given replaces the system's, as Confluent's do
            if ca:
                ctx.load_verify_locations(cafile=ca)
            if conf.get("ssl.certificate.location"):
                ctx.load_cert_chain(conf["ssl.certificate.location"], conf.get("ssl.key.location"),
                                    conf.get("ssl.key.password"))
            self.ssl_context = ctx

    def request(self, method: str, path: str, body: Any = None, *, context: str = "") -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json",
                   "Content-Type": "application/vnd.schemaregistry.v1+json", **self.auth.headers()}
        last: SchemaRegistryError | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff.backoff(attempt - 1) / 1000)
            for base in self.urls:
                url = f"{base}/{path}"
                try:
                    req = urllib.request.Request(url, data=data, method=method, headers=headers)
                    with urllib.request.urlopen(req, timeout=self.timeout_s, context=self.ssl_context) as resp:
                        raw = resp.read()
                        return json.loads(raw) if raw else None
                except urllib.error.HTTPError as e:
                    err = self._error(e, url, context)
                    if e.code not in _RETRIABLE_STATUS:
                        raise err from None
                    last = err
                except (urllib.error.URLError, OSError, TimeoutError) as e:
                    reason = getattr(e, "reason", e)
                    last = SchemaRegistryError(
                        -1, -1, f"cannot reach the schema registry: {reason}", context=context, url=url,
                        hint="check schema.registry.url and that the registry is running")
        assert last is not None
        raise SchemaRegistryError(last.http_status_code, last.error_code,
                                  f"{last.error_message} (after {self.max_retries + 1} attempts on "
                                  f"{', '.join(self.urls)})", context=context, url=last.url,
                                  hint=_hint(last.http_status_code, last.error_code)
                                  or "check schema.registry.url and that the registry is running") from None

    @staticmethod
    def _error(e: urllib.error.HTTPError, url: str, context: str) -> SchemaRegistryError:
        try:
            body = json.loads(e.read() or b"{}")
            code = int(body.get("error_code", e.code))
            message = str(body.get("message", e.reason))
        except (ValueError, AttributeError):
            code, message = e.code, str(e.reason)
        return SchemaRegistryError(e.code, code, message, context=context, url=url, hint=_hint(e.code, code))


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


class SchemaRegistryClient:
    """confluent-kafka's SchemaRegistryClient: `SchemaRegistryClient({"url": "http://127.0.0.1:8081"})`.

    Keys: url (several, comma-separated, tried in turn), basic.auth.credentials.source (URL, USER_INFO,
    SASL_INHERIT), basic.auth.user.info, bearer.auth.credentials.source (STATIC_TOKEN, CUSTOM),
    bearer.auth.token / .logical.cluster / .identity.pool.id, timeout (s, default 30), max.retries (3),
    retries.wait.ms (1000), retries.max.wait.ms (20000), cache.latest.ttl.sec, ssl.ca.location,
    ssl.certificate.location, ssl.key.location. Thread-safe.
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        unknown = set(conf) - SCHEMA_REGISTRY_KEYS
        if unknown:
            raise ConfigError(f"unknown schema registry setting(s): {', '.join(sorted(unknown))}; known: "
                              f"{', '.join(sorted(SCHEMA_REGISTRY_KEYS))}")
        self._rest = _Rest(conf)
        self._latest_ttl_s = conf.get("cache.latest.ttl.sec")
        self._lock = threading.Lock()
        self._registered: dict[tuple[str, Schema, bool], RegisteredSchema] = {}
        self._schema_by_id: dict[int, Schema] = {}
        self._schema_by_guid: dict[str, tuple[int | None, Schema]] = {}
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self._versions: dict[tuple[str, int], RegisteredSchema] = {}

    @property
    def urls(self) -> list[str]:
        return list(self._rest.urls)

    def __repr__(self) -> str:
        return f"SchemaRegistryClient({','.join(self._rest.urls)!r})"

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    # --- writes and lookups of one schema ----------------------------------------------------------------

    def register_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> int:
        """The schema's id, registering it under the subject if needed (cached: one round trip per schema)."""
        return self.register_schema_full_response(subject_name, schema, normalize_schemas).schema_id

    def register_schema_full_response(self, subject_name: str, schema: Schema,
                                      normalize_schemas: bool = False) -> RegisteredSchema:
        key = (subject_name, schema, normalize_schemas)
        with self._lock:
            hit = self._registered.get(key)
        if hit is not None:
            return hit
        r = self._rest.request("POST", f"subjects/{_q(subject_name)}/versions?normalize={_bool(normalize_schemas)}",
                               schema.to_dict(), context=f"registering a schema under subject '{subject_name}'")
        return self._remember(key, r)

    def lookup_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False,
                      deleted: bool = False) -> RegisteredSchema:
        """The registration of this schema under the subject; SchemaRegistryError 40401/40403 if none."""
        key = (subject_name, schema, normalize_schemas)
        with self._lock:
            hit = self._registered.get(key)
        if hit is not None and hit.version is not None:
            return hit
        try:
            r = self._rest.request(
                "POST", f"subjects/{_q(subject_name)}?normalize={_bool(normalize_schemas)}&deleted={_bool(deleted)}",
                schema.to_dict(), context=f"looking up a schema under subject '{subject_name}'")
        except SchemaRegistryError as e:
            if e.error_code != 40403:
                raise
            # The subject exists, but none of its versions is this schema: not "another registry".
            raise SchemaRegistryError(e.http_status_code, e.error_code, e.error_message,
                                      context=f"looking up a schema under subject '{subject_name}'", url=e.url,
                                      hint=LOOKUP_MISS_HINT) from None
        return self._remember(key, r)

    def _remember(self, key: tuple[str, Schema, bool], r: dict[str, Any]) -> RegisteredSchema:
        """Cache the registry's answer to a register or lookup of key's schema under key's subject."""
        subject_name, schema, _ = key
        reg = RegisteredSchema(int(r["id"]), schema, r.get("subject", subject_name), r.get("version"), r.get("guid"))
        with self._lock:
            self._registered[key] = reg
            self._schema_by_id.setdefault(reg.schema_id, schema)
        return reg

    def get_schema(self, schema_id: int, subject_name: str | None = None, fmt: str | None = None) -> Schema:
        """The schema with this id (cached: ids never change meaning)."""
        with self._lock:
            hit = self._schema_by_id.get(schema_id)
        if hit is not None:
            return hit
        query = "" if subject_name is None else f"?subject={_q(subject_name)}"
        r = self._rest.request("GET", f"schemas/ids/{int(schema_id)}{query}",
                               context=f"fetching schema id {schema_id}")
        schema = Schema.from_dict(r)
        with self._lock:
            self._schema_by_id[schema_id] = schema
        return schema

    def get_schema_by_guid(self, guid: str, fmt: str | None = None) -> Schema:
        with self._lock:
            hit = self._schema_by_guid.get(guid)
        if hit is not None:
            return hit[1]
        r = self._rest.request("GET", f"schemas/guids/{_q(guid)}", context=f"fetching schema guid {guid}")
        schema = Schema.from_dict(r)
        with self._lock:
            self._schema_by_guid[guid] = (r.get("id"), schema)
        return schema

    # --- subjects and versions ------------------------------------------------------------------------

    def get_subjects(self) -> list[str]:
        return list(self._rest.request("GET", "subjects", context="listing subjects"))

    def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        """The subject's latest version (cached for cache.latest.ttl.sec if set, else until cleared)."""
        now = time.monotonic()
        with self._lock:
            hit = self._latest.get(subject_name)
        if hit is not None and (self._latest_ttl_s is None or now - hit[0] < float(self._latest_ttl_s)):
            return hit[1]
        reg = self._version(subject_name, "latest")
        with self._lock:
            self._latest[subject_name] = (now, reg)
        return reg

    def get_version(self, subject_name: str, version: int | str, deleted: bool = False) -> RegisteredSchema:
        if version == "latest" or version == -1:
            return self.get_latest_version(subject_name)
        key = (subject_name, int(version))
        with self._lock:
            hit = self._versions.get(key)
        if hit is not None:
            return hit
        reg = self._version(subject_name, int(version), deleted)
        with self._lock:
            self._versions[key] = reg
        return reg

    def _version(self, subject_name: str, version: int | str, deleted: bool = False) -> RegisteredSchema:
        query = "?deleted=true" if deleted else ""
        r = self._rest.request("GET", f"subjects/{_q(subject_name)}/versions/{version}{query}",
                               context=f"fetching version {version} of subject '{subject_name}'")
        schema = Schema.from_dict(r)
        with self._lock:
            self._schema_by_id.setdefault(int(r["id"]), schema)
        return RegisteredSchema(int(r["id"]), schema, r.get("subject", subject_name), r.get("version"), r.get("guid"))

    def get_versions(self, subject_name: str) -> list[int]:
        return list(self._rest.request("GET", f"subjects/{_q(subject_name)}/versions",
                                       context=f"listing versions of subject '{subject_name}'"))

    def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        q = "?permanent=true" if permanent else ""
        out = self._rest.request("DELETE", f"subjects/{_q(subject_name)}{q}",
                                 context=f"deleting subject '{subject_name}'")
        self._forget(subject_name)
        return list(out)

    def delete_version(self, subject_name: str, version: int, permanent: bool = False) -> int:
        q = "?permanent=true" if permanent else ""
        out = self._rest.request("DELETE", f"subjects/{_q(subject_name)}/versions/{version}{q}",
                                 context=f"deleting version {version} of subject '{subject_name}'")
        self._forget(subject_name)
        return int(out)

    def _forget(self, subject_name: str) -> None:
        with self._lock:
            self._latest.pop(subject_name, None)
            for k in [k for k in self._registered if k[0] == subject_name]:
                del self._registered[k]
            for v in [v for v in self._versions if v[0] == subject_name]:
                del self._versions[v]

    # --- compatibility ---------------------------------------------------------------------------------

    def set_compatibility(self, subject_name: str | None = None, level: str | None = None) -> str:
        if level is None:
            raise ValueError("level must be set: NONE, BACKWARD, FORWARD, FULL or a *_TRANSITIVE one")
        path = "config" if subject_name is None else f"config/{_q(subject_name)}"
        r = self._rest.request("PUT", path, {"compatibility": level.upper()},
                               context=f"setting compatibility of {subject_name or 'the registry'}")
        return str(r["compatibility"])

    def get_compatibility(self, subject_name: str | None = None) -> str:
        path = "config" if subject_name is None else f"config/{_q(subject_name)}?defaultToGlobal=true"
        r = self._rest.request("GET", path, context=f"reading compatibility of {subject_name or 'the registry'}")
        return str(r.get("compatibilityLevel") or r.get("compatibility"))

    def test_compatibility(self, subject_name: str, schema: Schema, version: int | str = "latest") -> bool:
        r = self._rest.request("POST", f"compatibility/subjects/{_q(subject_name)}/versions/{version}",
                               schema.to_dict(), context=f"testing compatibility with subject '{subject_name}'")
        return bool(r["is_compatible"])

    def clear_latest_caches(self) -> None:
        with self._lock:
            self._latest.clear()

    def clear_caches(self) -> None:
        with self._lock:
            for d in (self._registered, self._schema_by_id, self._schema_by_guid, self._latest,
                      self._versions):
                d.clear()  # type: ignore[attr-defined]


def _bool(b: bool) -> str:
    return "true" if b else "false"
