"""A bootstrap.servers in which no host resolves is a ConfigError when the client is built (Java's
"No resolvable bootstrap urls given in bootstrap.servers"), not max.block.ms of silence."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest

from kafkajet import Admin, ConfigError, Producer
from kafkajet.aio import AIOProducer
from kafkajet.fetch import FetchClient
from kafkajet.testing.ports import free_port

NOWHERE = "nosuch-broker.invalid:9092"  # .invalid never resolves (RFC 2606)


@pytest.mark.parametrize("client", [Producer, Admin, FetchClient])
def test_no_resolvable_host_is_a_config_error_when_the_client_is_built(client: type) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"No resolvable bootstrap urls given in bootstrap.servers: "
                                          r"nosuch-broker.invalid:9092 \(.+\), nosuch-2.invalid:1 \(.+\)"):
        client({"bootstrap.servers": f"{NOWHERE},nosuch-2.invalid:1", "max.block.ms": 60_000}
               if client is Producer else {"bootstrap.servers": f"{NOWHERE},nosuch-2.invalid:1"})
    assert time.monotonic() - started < 30  # at once, not after max.block.ms


def test_the_asyncio_producer_refuses_it_when_started() -> None:
    async def main() -> None:
        async with AIOProducer(bootstrap_servers=NOWHERE):
            pass

    with pytest.raises(ConfigError, match="No resolvable bootstrap urls"):
        asyncio.run(main())


def test_one_resolvable_host_is_enough_and_the_others_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kafkajet.addresses")
    admin = Admin(f"{NOWHERE},127.0.0.1:{free_port()}")
    admin.close()
    assert "Couldn't resolve server nosuch-broker.invalid:9092 from bootstrap.servers" in caplog.text


def test_resolve_canonical_bootstrap_servers_only_puts_the_canonical_name_in_place_of_the_address() -> None:
    """Java's client.dns.lookup=resolve_canonical_bootstrap_servers_only: each bootstrap address becomes the
    canonical name of what it resolves to (here the hosts file's name of 127.0.0.1), for Kerberos principals
    that name hosts; the default keeps what was given."""
    canonical = socket.gethostbyaddr("127.0.0.1")[0]
    assert canonical != "127.0.0.1", "this test needs a name for 127.0.0.1 (the hosts file's localhost)"
    port = free_port()
    with Producer({"bootstrap.servers": f"127.0.0.1:{port}", "max.block.ms": 1000,
                   "client.dns.lookup": "resolve_canonical_bootstrap_servers_only"}) as p:
        assert set(p._client.nodes().values()) == {(canonical, port)}
    with Producer({"bootstrap.servers": f"127.0.0.1:{port}", "max.block.ms": 1000}) as p:
        assert set(p._client.nodes().values()) == {("127.0.0.1", port)}
    with Admin({"bootstrap.servers": f"127.0.0.1:{port}",
                "client.dns.lookup": "resolve_canonical_bootstrap_servers_only"}) as admin:
        assert admin._bootstrap == [(canonical, port)]
