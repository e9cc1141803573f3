"""A wrong address in bootstrap.servers: another service's port is named as such, and given up on at once."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.errors import KafkaTimeoutError
from kafkajet.fetch import FetchClient
from kafkajet.network import NotKafkaError
from kafkajet.testing.schema_registry import SchemaRegistry
from tests.helpers.ports import refusing_port


@pytest.fixture
def http_port() -> Iterator[int]:
    """A server that answers any bytes as a web server does (a status line), then closes: the wrong port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    if conn.recv(4096):
                        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, name="http-port", daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join(5)
    server.close()


def test_an_http_port_is_named_not_a_kafka_broker_at_once(http_port: int) -> None:
    said = f"127.0.0.1:{http_port} is not a Kafka broker (an HTTP server): it answered with text, 'HTTP/1.1 400"
    started = time.monotonic()
    with Admin(f"127.0.0.1:{http_port}") as admin, pytest.raises(NotKafkaError, match=re.escape(said)):
        admin.list_topics(timeout_s=30)
    with FetchClient(f"127.0.0.1:{http_port}") as fetch, pytest.raises(NotKafkaError, match=re.escape(said)):
        fetch.partitions("t")
    assert time.monotonic() - started < 10  # not the 30 s of the call's timeout, retrying


def test_topics_on_an_http_port_exits_1_at_once_in_one_line(http_port: int) -> None:
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "kafkajet", "topics", "--bootstrap-server", f"127.0.0.1:{http_port}",
                        "--list"], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 20
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(
        f"python -m kafkajet topics: error: NotKafkaError: 127.0.0.1:{http_port} is not a Kafka broker (an HTTP server)")


@pytest.fixture
def registry_address() -> Iterator[str]:
    """kafkajet's Schema Registry: an HTTP server that reads a request line before it answers anything."""
    with SchemaRegistry(0) as registry:
        yield f"127.0.0.1:{registry.port}"


# A client id whose length is not 10: the request then held no newline and the registry waited with us.
@pytest.mark.parametrize("client_id", ["adminclient-1", "x"])
def test_a_registry_port_is_named_by_every_client_at_once(registry_address: str, client_id: str) -> None:
    said = f"{registry_address} is not a Kafka broker (an HTTP server): it answered with text"
    config = {"bootstrap.servers": registry_address, "client.id": client_id}
    started = time.monotonic()
    with Admin(config) as admin, pytest.raises(NotKafkaError, match=re.escape(said)):
        admin.list_topics(timeout_s=30)
    with FetchClient(config) as fetch, pytest.raises(NotKafkaError, match=re.escape(said)):
        fetch.partitions("t")
    assert time.monotonic() - started < 10  # not the 30 s request timeout
    with Producer(config, max_block_ms=5000) as p, pytest.raises(KafkaTimeoutError) as failed:
        p.send("t", b"v")
    # The producer keeps Java's wait (max.block.ms), but names the cause.
    assert f"({registry_address}) is not a Kafka broker (an HTTP server)" in str(failed.value)


@pytest.mark.parametrize("command", [["topics", "--list"], ["consume", "--topic", "t"]])
def test_topics_and_consume_on_the_registry_port_exit_1_at_once(registry_address: str, command: list[str]) -> None:
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "kafkajet", command[0], "--bootstrap-server", registry_address,
                        *command[1:]], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert time.monotonic() - started < 20  # once 64 s, ending in REQUEST_TIMED_OUT
    assert r.returncode == 1, r.stderr
    assert (f"python -m kafkajet {command[0]}: error: NotKafkaError: {registry_address} is not a Kafka broker "
            "(an HTTP server)") in r.stderr


def test_every_client_waits_for_a_wrong_address_as_long_by_default() -> None:
    # Once 60 s for the producer, `produce` and the Spark sink, but 30 s for topics, groups and the Spark source.
    from kafkajet.config import ADMIN, FETCH, PRODUCER

    waits = {t.client: t.by_name["max.block.ms" if t is PRODUCER else "default.api.timeout.ms"].default
             for t in (PRODUCER, ADMIN, FETCH)}
    assert waits == {"producer": 60000, "admin": 60000, "fetch": 60000}


def test_admin_and_fetch_wait_default_api_timeout_ms_for_a_refused_address() -> None:
    with refusing_port() as port:
        config = {"bootstrap.servers": f"127.0.0.1:{port}", "default.api.timeout.ms": 1500}
        for call in (lambda: Admin(config).list_topics(), lambda: FetchClient(config).partitions("t")):
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match=r"within 1\.5 s"):
                call()
            assert 1.4 < time.monotonic() - started < 10


def test_the_topics_command_waits_the_admin_clients_default() -> None:
    from kafkajet.admin import Admin as AdminClient

    assert AdminClient("127.0.0.1:9092")._timeout(None) == 60.0  # no --timeout: the table's default, not 30 s
    with refusing_port() as port:
        r = subprocess.run([sys.executable, "-m", "kafkajet", "topics", "--bootstrap-server", f"127.0.0.1:{port}",
                            "--list", "--command-property", "default.api.timeout.ms=1000"],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "listing topics did not complete within 1.0 s" in r.stderr, r.stderr
