"""TLS against a listener that does not speak TLS names the likely cause, whatever max.block.ms is (issue 28).

A plaintext Kafka listener reads the ClientHello as a request size of about 369 MB: Apache Kafka closes the
connection, the embedded Tansu broker waits for the rest. Both are here: the real broker, and a listener that
closes as Kafka does."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from kafkajet import KafkaError, Producer
from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker

HINT = "the listener may not speak TLS"


@pytest.fixture
def closing_listener() -> Iterator[str]:
    """Reads the first bytes of each connection and closes it, as Kafka does with a request too large."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(10)
    server.close()


@pytest.mark.parametrize("max_block_ms", [1500, 12_000])  # shorter and longer than the 10 s setup timeout
def test_producer_against_a_silent_plaintext_broker(broker: EmbeddedBroker, max_block_ms: int) -> None:
    with Producer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SSL",
                  max_block_ms=max_block_ms) as p:
        with pytest.raises(KafkaError, match=HINT):
            p.send("t", b"x")


def test_producer_against_a_plaintext_listener_that_closes(closing_listener: str) -> None:
    with Producer(bootstrap_servers=closing_listener, security_protocol="SSL", max_block_ms=1500) as p:
        with pytest.raises(KafkaError, match=HINT):
            p.send("t", b"x")


def test_admin_against_both(broker: EmbeddedBroker, closing_listener: str) -> None:
    for servers in (broker.bootstrap_servers, closing_listener):
        with Admin(bootstrap_servers=servers, security_protocol="SSL") as admin:
            with pytest.raises(KafkaError, match=HINT):
                admin.list_topics(3)
