"""A Schema Registry you can run (`kafkajet schema-registry`, `kafkajet.testing.SchemaRegistry`): the REST
subset clients use, in-process on 127.0.0.1, its state in a `_schemas` topic on a given broker (or in memory)."""

from __future__ import annotations

import json
import logging
import re
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from kafkajet.schema_registry import formats
from kafkajet.testing.schema_registry.store import (
    SCHEMA_TYPES,
    RegistryError,
    RegistryState,
    StoredSchema,
    validate,
)

log = logging.getLogger("kafkajet.testing.schema_registry")

SCHEMAS_TOPIC = "_schemas"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _schema_body(s: StoredSchema) -> dict[str, Any]:
    d: dict[str, Any] = {"schema": s.schema, **formats.schema_type_entry(s.schema_type)}
    if s.references:
        d["references"] = s.references
    return d


def _flag(query: dict[str, list[str]], name: str) -> bool:
    return query.get(name, ["false"])[-1].lower() == "true"


Route = tuple[str, "re.Pattern[str]", Callable[..., Any]]


class _Api:
    """The REST endpoints over a RegistryState: each returns the JSON body or raises RegistryError."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.requests = 0  # served, for tests that count a client's round trips
        S = r"(?P<subject>[^/]+)"
        V = r"(?P<version>[^/]+)"
        table: list[tuple[str, str, Callable[..., Any]]] = [
            ("GET", "/", lambda q, b: {}),
            ("GET", "/schemas/types", lambda q, b: list(SCHEMA_TYPES)),
            ("GET", r"/schemas/ids/(?P<id>\d+)", self.schema_by_id),
            ("GET", r"/schemas/ids/(?P<id>\d+)/schema", self.raw_schema_by_id),
            ("GET", r"/schemas/ids/(?P<id>\d+)/subjects", self.subjects_of_id),
            ("GET", r"/schemas/ids/(?P<id>\d+)/versions", self.versions_of_id),
            ("GET", r"/schemas/guids/(?P<guid>[^/]+)", self.schema_by_guid),
            ("GET", "/subjects", self.subjects),
            ("GET", f"/subjects/{S}/versions", self.versions),
            ("POST", f"/subjects/{S}/versions", self.register),
            ("GET", f"/subjects/{S}/versions/{V}", self.version),
            ("GET", f"/subjects/{S}/versions/{V}/schema", self.raw_version),
            ("DELETE", f"/subjects/{S}/versions/{V}", self.delete_version),
            ("POST", f"/subjects/{S}", self.lookup),
            ("DELETE", f"/subjects/{S}", self.delete_subject),
            ("GET", "/config", lambda q, b: {"compatibilityLevel": self.state.level(None)}),
            ("PUT", "/config", lambda q, b: self.set_config(q, b, None)),
            ("GET", f"/config/{S}", self.get_config),
            ("PUT", f"/config/{S}", lambda q, b, subject: self.set_config(q, b, subject)),
            ("DELETE", f"/config/{S}", self.delete_config),
            ("POST", f"/compatibility/subjects/{S}/versions/{V}", self.compatibility),
            ("POST", f"/compatibility/subjects/{S}/versions", self.compatibility),
            ("GET", "/mode", lambda q, b: {"mode": "READWRITE"}),
            ("GET", f"/mode/{S}", lambda q, b, subject: {"mode": "READWRITE"}),
        ]
        self.routes: list[Route] = [(m, re.compile(f"^{p}$"), f) for m, p, f in table]

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Any:
        self.requests += 1
        path = path.rstrip("/") or "/"
        matched_path = False
        for m, pattern, fn in self.routes:
            match = pattern.match(path)
            if match is None:
                continue
            matched_path = True
            if m == method:
                args = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
                return fn(query, body, **args)
        if matched_path:
            raise RegistryError(405, 405, f"HTTP {method} is not supported on {path}")
        raise RegistryError(404, 404, f"HTTP 404 Not Found: {path} is not an endpoint of this registry")

    @staticmethod
    def _schema_in(body: Any) -> tuple[str, str, list[dict[str, Any]]]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(422, 42201, "Invalid schema: the request body needs a \"schema\" string")
        return (str(body.get("schemaType") or formats.DEFAULT_TYPE).upper(), body["schema"],
                body.get("references") or [])

    # --- schemas ----------------------------------------------------------------------------------

    def schema_by_id(self, q: Any, b: Any, id: str) -> Any:
        s = self.state.schema(int(id))
        return {**_schema_body(s), "guid": s.guid}

    def raw_schema_by_id(self, q: Any, b: Any, id: str) -> Any:
        return json.loads(self.state.schema(int(id)).schema)

    def schema_by_guid(self, q: Any, b: Any, guid: str) -> Any:
        s = self.state.schema_by_guid(guid)
        return {**_schema_body(s), "id": s.id, "guid": s.guid}

    def subjects_of_id(self, q: Any, b: Any, id: str) -> Any:
        self.state.schema(int(id))
        return sorted(n for n, s in self.state.subjects.items() if any(v.schema_id == int(id) for v in s.live()))

    def versions_of_id(self, q: Any, b: Any, id: str) -> Any:
        self.state.schema(int(id))
        return [{"subject": n, "version": v.version} for n, s in sorted(self.state.subjects.items())
                for v in s.live() if v.schema_id == int(id)]

    # --- subjects ---------------------------------------------------------------------------------

    def subjects(self, q: dict[str, list[str]], b: Any) -> Any:
        deleted = _flag(q, "deleted")
        return sorted(n for n, s in self.state.subjects.items() if (s.versions if deleted else s.live()))

    def versions(self, q: dict[str, list[str]], b: Any, subject: str) -> Any:
        deleted = _flag(q, "deleted")
        subj = self.state.subject(subject, deleted)
        return [v.version for v in (subj.versions if deleted else subj.live())]

    def _version_body(self, subject: str, v: Any) -> dict[str, Any]:
        s = self.state.schema(v.schema_id)
        return {"subject": subject, "version": v.version, "id": s.id, "guid": s.guid, **_schema_body(s)}

    def version(self, q: dict[str, list[str]], b: Any, subject: str, version: str) -> Any:
        return self._version_body(subject, self.state.version(subject, version, _flag(q, "deleted")))

    def raw_version(self, q: dict[str, list[str]], b: Any, subject: str, version: str) -> Any:
        return json.loads(self.state.schema(self.state.version(subject, version).schema_id).schema)

    def register(self, q: dict[str, list[str]], b: Any, subject: str) -> Any:
        stype, schema, refs = self._schema_in(b)
        sid, number, guid = self.state.register(subject, stype, schema, refs, _flag(q, "normalize"))
        return {"id": sid, "version": number, "subject": subject, "guid": guid}

    def lookup(self, q: dict[str, list[str]], b: Any, subject: str) -> Any:
        stype, schema, refs = self._schema_in(b)
        deleted = _flag(q, "deleted")
        self.state.subject(subject, deleted)
        validate(stype, schema, self.state.referenced_by(stype, refs))
        v = self.state.find(subject, stype, schema, _flag(q, "normalize"), deleted, refs)
        if v is None:
            raise RegistryError(404, 40403, "Schema not found")
        return self._version_body(subject, v)

    def delete_version(self, q: dict[str, list[str]], b: Any, subject: str, version: str) -> Any:
        return self.state.delete_version(subject, version, _flag(q, "permanent"))

    def delete_subject(self, q: dict[str, list[str]], b: Any, subject: str) -> Any:
        return self.state.delete_subject(subject, _flag(q, "permanent"))

    # --- compatibility ----------------------------------------------------------------------------

    def get_config(self, q: dict[str, list[str]], b: Any, subject: str) -> Any:
        level = self.state.levels.get(subject)
        if level is None:
            if not _flag(q, "defaultToGlobal"):
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility "
                                    f"configured")
            level = self.state.global_level
        return {"compatibilityLevel": level}

    def set_config(self, q: Any, b: Any, subject: str | None) -> Any:
        level = b.get("compatibility") if isinstance(b, dict) else None
        if not isinstance(level, str):
            raise RegistryError(422, 42203, "Invalid compatibility level: the body needs \"compatibility\"")
        self.state.set_level(subject, level)
        return {"compatibility": level.upper()}

    def delete_config(self, q: Any, b: Any, subject: str) -> Any:
        old = self.get_config({"defaultToGlobal": ["true"]}, None, subject)
        self.state.set_level(subject, None)
        return old

    def compatibility(self, q: dict[str, list[str]], b: Any, subject: str, version: str | None = None) -> Any:
        stype, schema, refs = self._schema_in(b)
        if version is None:
            against = self.state.subjects[subject].live() if subject in self.state.subjects else []
            level = None
        else:
            if subject not in self.state.subjects or not self.state.subjects[subject].live():
                raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
            against = [self.state.version(subject, version)]
            # Against one version the check is that version's, not the level's transitive history.
            level = self.state.level(subject).removesuffix("_TRANSITIVE")
        problems = self.state.incompatibilities(subject, stype, schema, against, level, refs)
        out: dict[str, Any] = {"is_compatible": not problems}
        if _flag(q, "verbose"):
            out["messages"] = problems
        return out


class _Handler(BaseHTTPRequestHandler):
    api: _Api  # set on the subclass each server makes
    protocol_version = "HTTP/1.1"

    def _serve(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                raise RegistryError(422, 42201, "Invalid schema: the request body is not JSON") from None
            status, out = 200, self.api.handle(method, url.path, query, body)
        except RegistryError as e:
            status, out = e.http_status, {"error_code": e.error_code, "message": e.message}
        except Exception as e:  # a bug or a broker failure: the client sees a 500 and retries
            log.exception("schema registry: %s %s failed", method, self.path)
            status, out = 500, {"error_code": 50001, "message": f"Error in the backend data store: {e}"}
        data = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", _CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class _TopicLog:
    """The `_schemas` topic: each change produced (and acknowledged) before it is applied; read at start."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        from kafkajet import Producer

        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self._ensure_topic()
        # acks=all and idempotence: a change the registry answered for is in the log once.
        self.producer = Producer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=0)

    def _ensure_topic(self) -> None:
        from kafkajet.admin import Admin

        with Admin(bootstrap_servers=self.bootstrap_servers) as admin:
            # One partition, compacted: the order of changes is the registry's history.
            admin.create_topics([self.topic], num_partitions=1, configs={"cleanup.policy": "compact"},
                                if_not_exists=True)

    def replay(self, state: RegistryState) -> int:
        from kafkajet.fetch import FetchClient

        n = 0
        with FetchClient(bootstrap_servers=self.bootstrap_servers) as fetch:
            fetch.partitions(self.topic)
            start, end = fetch.offsets(self.topic, 0)
            for rec in fetch.fetch_range(self.topic, 0, start, end):
                if rec.key is None:
                    continue
                key = json.loads(rec.key)
                if key.get("keytype") == "NOOP":
                    continue
                state.apply(key, None if rec.value is None else json.loads(rec.value))
                n += 1
        return n

    def __call__(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        self.producer.send(self.topic, key=json.dumps(key, sort_keys=True).encode(),
                           value=None if value is None else json.dumps(value).encode()).result(timeout=30)

    def close(self) -> None:
        self.producer.close()


class SchemaRegistry:
    """A Schema Registry on 127.0.0.1 (a free port unless given) for tests, demos and local work.

    ```python
    with SchemaRegistry() as registry:            # schemas in memory, gone when it stops
        client = SchemaRegistryClient({"url": registry.url})
    SchemaRegistry(bootstrap_servers=broker.bootstrap_servers)  # kept in the broker's _schemas topic
    ```

    Compatibility levels NONE, BACKWARD (the default), FORWARD, FULL and the *_TRANSITIVE ones are checked
    by each format's rules (kafkajet.schema_registry.formats): Avro's resolution rules, Confluent's for JSON
    Schema and for Protobuf descriptors.
    """

    def __init__(self, port: int = 0, *, host: str = "127.0.0.1", bootstrap_servers: str | None = None,
                 topic: str = SCHEMAS_TOPIC) -> None:
        self.host = host
        self.requested_port = port
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.state: RegistryState | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._log: _TopicLog | None = None
        self._api: _Api | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the schema registry is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> int:
        """REST requests served so far (a test's measure of a client's round trips)."""
        return 0 if self._api is None else self._api.requests

    @property
    def persistent(self) -> bool:
        return self._log is not None

    def start(self) -> SchemaRegistry:
        if self._server is not None:
            return self
        if self.bootstrap_servers:
            self._log = _TopicLog(self.bootstrap_servers, self.topic)
            self.state = RegistryState(self._log)
            n = self._log.replay(self.state)
            log.info("schema registry: %d change(s) read back from topic %s on %s", n, self.topic,
                     self.bootstrap_servers)
        else:
            self.state = RegistryState()
            log.warning("schema registry: no broker given, schemas are kept in memory only and are lost when it "
                        "stops (give bootstrap_servers to keep them in a %s topic)", self.topic)
        self._api = _Api(self.state)
        handler = type("Handler", (_Handler,), {"api": self._api})
        self._server = ThreadingHTTPServer((self.host, self.requested_port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"schema-registry-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def storage(self) -> str:
        return (f"topic {self.topic} on {self.bootstrap_servers}" if self.persistent
                else "memory only (lost when it stops; give --bootstrap-servers to keep schemas in a topic)")

    def __enter__(self) -> SchemaRegistry:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"{self.url}, {self.storage()}" if self._server is not None else "stopped"
        return f"SchemaRegistry({state})"
