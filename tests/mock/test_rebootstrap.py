"""Rebootstrap (KIP-899, KIP-1102): every broker of the last metadata gone silent while the bootstrap address
answers for a new cluster. The old broker accepts connections and never answers (so no connection fails and
nothing backs off before request.timeout.ms, a minute here): only metadata.recovery.rebootstrap.trigger.ms
brings the producer back to bootstrap.servers, and with metadata.recovery.strategy=none nothing does."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kafkajet import KafkaTimeoutError, Producer
from kafkajet.testing.mock.cluster import MockCluster
from tests.helpers.forwarder import Forwarder

TRIGGER_MS = 3000
SILENT = {
    # The old broker's silence must not end in a failure (and so a backoff, which rebootstraps at once).
    "request.timeout.ms": 60000, "socket.connection.setup.timeout.ms": 60000,
    "socket.connection.setup.timeout.max.ms": 60000, "delivery.timeout.ms": 120000,
    # Metadata is wanted all the time, as a producer with records for a lost leader wants it.
    "metadata.max.age.ms": 500, "linger.ms": 0,
}


@pytest.fixture
def clusters() -> Iterator[tuple[MockCluster, MockCluster, Forwarder]]:
    with MockCluster(brokers=1) as old, MockCluster(brokers=1) as new:
        with Forwarder(("127.0.0.1", int(old.address(1).rsplit(":", 1)[1]))) as bootstrap:
            yield old, new, bootstrap


def _switch(old: MockCluster, new: MockCluster, bootstrap: Forwarder, *, silent: bool = True) -> None:
    """The bootstrap address now answers for `new`; the old broker takes connections and never answers
    (silent), or refuses them."""
    bootstrap.backend = ("127.0.0.1", int(new.address(1).rsplit(":", 1)[1]))
    old.set_rtt(1, 10_000_000)
    old.broker_down(1)  # closes the producer's connection; broker_up listens again on the same port
    if silent:
        old.broker_up(1)


def test_the_producer_rebootstraps_within_the_trigger(clusters: tuple[MockCluster, MockCluster, Forwarder],
                                                      topic_name: str) -> None:
    old, new, bootstrap = clusters
    with Producer({"bootstrap.servers": bootstrap.address, "metadata.recovery.rebootstrap.trigger.ms": TRIGGER_MS,
                   **SILENT}) as p:
        p.send(topic_name, value=b"before").result(timeout=30)
        assert old.record_count(topic_name) == 1
        _switch(old, new, bootstrap)
        came = bootstrap.connections
        switched = time.monotonic()
        p.send(topic_name, value=b"after").result(timeout=30)
        took_ms = (time.monotonic() - switched) * 1000
    assert new.record_count(topic_name) == 1
    assert bootstrap.connections > came
    # The trigger, then a metadata round (metadata.max.age.ms) and a connection: well under request.timeout.ms.
    assert TRIGGER_MS <= took_ms < TRIGGER_MS + 5000, took_ms


def test_a_refused_broker_rebootstraps_at_once(clusters: tuple[MockCluster, MockCluster, Forwarder],
                                               topic_name: str) -> None:
    """Every known broker refusing connections (all backing off): back to bootstrap.servers without waiting
    for the trigger, as Java when no node is available."""
    old, new, bootstrap = clusters
    with Producer({"bootstrap.servers": bootstrap.address, **SILENT}) as p:
        p.send(topic_name, value=b"before").result(timeout=30)
        _switch(old, new, bootstrap, silent=False)
        p.send(topic_name, value=b"after").result(timeout=10)
    assert new.record_count(topic_name) == 1


@pytest.mark.parametrize("silent", [True, False], ids=["silent", "refused"])
def test_strategy_none_keeps_to_the_known_brokers(clusters: tuple[MockCluster, MockCluster, Forwarder],
                                                  topic_name: str, silent: bool) -> None:
    old, new, bootstrap = clusters
    with Producer({"bootstrap.servers": bootstrap.address, "metadata.recovery.rebootstrap.trigger.ms": TRIGGER_MS,
                   "metadata.recovery.strategy": "none", **SILENT}) as p:
        p.send(topic_name, value=b"before").result(timeout=30)
        _switch(old, new, bootstrap, silent=silent)
        came = bootstrap.connections
        after = p.send(topic_name, value=b"after")
        # Three triggers' time: a rebootstrapping producer would long have delivered (the test above).
        with pytest.raises(KafkaTimeoutError):
            after.result(timeout=3 * TRIGGER_MS / 1000)
        assert bootstrap.connections == came
        assert new.record_count(topic_name) == 0
        p.close(timeout=0)
