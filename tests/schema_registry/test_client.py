"""The registry client's transport: URLs tried in turn, retries of 5xx / connection errors with backoff,
auth headers under the confluent-kafka names, errors naming subject, URL and what to do. A scripted HTTP
server stands in where the real registry cannot be made to fail on demand."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kafkajet.errors import ConfigError
from kafkajet.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from kafkajet.testing import SchemaRegistry
from tests.helpers.ports import refusing_port

FAST = {"retries.wait.ms": 1, "retries.max.wait.ms": 5, "timeout": 5}


class Scripted:
    """Answers each request with the next (status, body) of a script; records method, path and headers."""

    def __init__(self, script: list[tuple[int, Any]]) -> None:
        self.script = list(script)
        self.seen: list[tuple[str, str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                outer.seen.append((self.command, self.path, self.headers))  # case-insensitive, as HTTP's
                status, body = outer.script.pop(0) if outer.script else (200, {})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted() -> Iterator[Any]:
    made: list[Scripted] = []

    def make(script: list[tuple[int, Any]]) -> Scripted:
        made.append(Scripted(script))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture
def dead_url() -> Iterator[str]:
    with refusing_port() as port:
        yield f"http://127.0.0.1:{port}"


def test_5xx_is_retried_then_succeeds(scripted: Any) -> None:
    server = scripted([(503, {"error_code": 50003, "message": "busy"}), (500, {}), (200, {"id": 42})])
    client = SchemaRegistryClient({"url": server.url, **FAST})
    assert client.register_schema("s", Schema('"string"')) == 42
    assert len(server.seen) == 3


def test_4xx_is_not_retried_and_names_subject_url_and_remedy(scripted: Any) -> None:
    server = scripted([(404, {"error_code": 40401, "message": "Subject 's-value' not found."})])
    client = SchemaRegistryClient({"url": server.url, **FAST})
    with pytest.raises(SchemaRegistryError) as e:
        client.get_latest_version("s-value")
    assert len(server.seen) == 1
    msg = str(e.value)
    assert "subject 's-value'" in msg and server.url in msg and "subject name strategy" in msg
    assert (e.value.http_status_code, e.value.error_code) == (404, 40401)


def test_a_dead_first_url_falls_through_to_the_next(registry: SchemaRegistry, dead_url: str) -> None:
    client = SchemaRegistryClient({"url": f"{dead_url},{registry.url}", **FAST})
    assert client.register_schema("fallthrough-value", Schema('"string"')) > 0


def test_all_urls_down_says_so_after_the_retries(scripted: Any, dead_url: str) -> None:
    client = SchemaRegistryClient({"url": dead_url, "max.retries": 2, **FAST})
    with pytest.raises(SchemaRegistryError, match="cannot reach the schema registry.*after 3 attempts"):
        client.get_subjects()


def test_basic_auth_user_info_and_url_credentials(scripted: Any) -> None:
    server = scripted([(200, []), (200, []), (401, {"error_code": 401, "message": "Unauthorized"})])
    SchemaRegistryClient({"url": server.url, "basic.auth.credentials.source": "USER_INFO",
                          "basic.auth.user.info": "alice:s3cret"}).get_subjects()
    with_creds = server.url.replace("http://", "http://bob:pw%40x@")
    SchemaRegistryClient({"url": with_creds}).get_subjects()
    auths = [h.get("Authorization") for _, _, h in server.seen]
    assert auths == ["Basic " + base64.b64encode(b"alice:s3cret").decode(),
                     "Basic " + base64.b64encode(b"bob:pw@x").decode()]
    with pytest.raises(SchemaRegistryError, match="refused the credentials.*basic.auth.user.info"):
        SchemaRegistryClient({"url": server.url}).get_subjects()


def test_bearer_static_token_and_custom_provider(scripted: Any) -> None:
    server = scripted([(200, []), (200, [])])
    SchemaRegistryClient({"url": server.url, "bearer.auth.credentials.source": "STATIC_TOKEN",
                          "bearer.auth.token": "tok", "bearer.auth.logical.cluster": "lsrc-1",
                          "bearer.auth.identity.pool.id": "pool-1"}).get_subjects()
    SchemaRegistryClient({"url": server.url, "bearer.auth.credentials.source": "CUSTOM",
                          "bearer.auth.custom.provider.function": lambda conf: {"bearer.auth.token": conf["t"]},
                          "bearer.auth.custom.provider.config": {"t": "dyn"}}).get_subjects()
    (_, _, h1), (_, _, h2) = server.seen
    assert (h1.get("Authorization"), h1.get("target-sr-cluster"), h1.get("Confluent-Identity-Pool-Id")) == \
        ("Bearer tok", "lsrc-1", "pool-1")
    assert h2["Authorization"] == "Bearer dyn"


@pytest.mark.parametrize(("conf", "message"), [
    ({}, "needs 'url'"),
    ({"url": "127.0.0.1:8081"}, "must start with http"),
    ({"url": "http://x", "basic.auth.credentials.source": "USER_INFO"}, "basic.auth.user.info"),
    ({"url": "http://x", "bearer.auth.credentials.source": "OAUTHBEARER"}, "not supported"),
    ({"url": "http://x", "schema.registry.urls": "http://x"}, "unknown schema registry setting"),
])
def test_bad_settings(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SchemaRegistryClient(conf)


def test_schema_registry_url_is_accepted_as_url(registry: SchemaRegistry) -> None:
    assert SchemaRegistryClient({"schema.registry.url": registry.url}).get_subjects() is not None


def test_caches_both_ways(registry: SchemaRegistry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    schema = Schema('{"type":"record","name":"Cached","fields":[{"name":"a","type":"int"}]}')
    before = registry.requests
    schema_id = client.register_schema("cached-value", schema)
    assert client.register_schema("cached-value", schema) == schema_id  # schema -> id from the cache
    assert client.get_schema(schema_id) == schema  # and id -> schema, learnt from the registration
    assert client.lookup_schema("cached-value", schema).schema_id == schema_id
    assert registry.requests - before == 1  # the registration answered the version the lookup wants too
    other = SchemaRegistryClient({"url": registry.url})
    assert other.get_schema(schema_id) == schema and other.get_schema(schema_id) == schema
    assert registry.requests - before == 2
    client.get_latest_version("cached-value")
    client.get_latest_version("cached-value")
    assert registry.requests - before == 3


def test_a_schema_not_among_the_subjects_versions_gets_the_lookup_hint() -> None:
    # Once "(another registry, or deleted?)": the subject is right here, but no version of it is this schema.
    with SchemaRegistry() as registry, SchemaRegistryClient({"url": registry.url}) as client:
        client.register_schema("lookup-value", Schema('{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}',
                                                      "AVRO"))
        with pytest.raises(SchemaRegistryError) as e:
            client.lookup_schema("lookup-value", Schema('{"type":"record","name":"R","fields":[]}', "AVRO"))
    assert e.value.error_code == 40403
    assert "looking up a schema under subject 'lookup-value'" in str(e.value)
    assert "none is this schema: with auto.register.schemas=false" in str(e.value)
    assert "another registry" not in str(e.value)
