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

from kafkajet.admin import Admin
from kafkajet.fetch import FetchClient
from kafkajet.network import NotKafkaError


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
