"""KIP-1242 against Apache Kafka 4.4: a connection to a known node's address that now reaches a broker of
another cluster is refused by that broker (ApiVersions v5 names the cluster id and node id the producer
expects; the answer is REBOOTSTRAP_REQUIRED), and the producer rebootstraps from bootstrap.servers instead of
sending there. The first cluster is a MockCluster, which (like Tansu) refuses ApiVersions v5: the producer
falls back to v4 with it quietly."""

from __future__ import annotations

import logging

import pytest

from kafkajet import Producer
from kafkajet.network import ConnectionState
from kafkajet.testing.mock.cluster import MockCluster
from tests.helpers.apache import running_apache_kafka
from tests.helpers.forwarder import Forwarder
from tests.helpers.readback import read_topic
from tests.helpers.waiting import wait_for


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_a_misrouted_connection_is_refused_and_the_producer_rebootstraps(topic_name: str,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkajet.network")
    with running_apache_kafka() as kafka, MockCluster(brokers=1) as mock:
        old_port = _port(mock.address(1))
        with Forwarder(("127.0.0.1", old_port)) as bootstrap:
            # Connections idle out quickly, so the move below finds none open: the next one is a new connection
            # to the known node's address, which is what the broker checks.
            with Producer({"bootstrap.servers": bootstrap.address, "connections.max.idle.ms": 1000,
                           "max.block.ms": 60000}) as p:
                p.send(topic_name, value=b"to the mock").result(timeout=30)
                assert mock.record_count(topic_name) == 1
                client = p._client  # the sender's NetworkClient: only its connection states are read here
                wait_for(lambda: all(client.state(n) is ConnectionState.DISCONNECTED for n in client.nodes()), 30,
                         "the producer's connections idle out")
                # The bootstrap address and the known node's address now both reach the Apache cluster.
                bootstrap.backend = ("127.0.0.1", _port(kafka.bootstrap_servers))
                mock.stop()
                with Forwarder(("127.0.0.1", _port(kafka.bootstrap_servers)), port=old_port):
                    p.send(topic_name, value=b"to apache").result(timeout=60)
        got = read_topic(kafka.internal_bootstrap, topic_name, 1, timeout_s=60)
    assert [r.value for r in got] == [b"to apache"]
    mismatch = [r.getMessage() for r in caplog.records if "cluster metadata mismatch" in r.getMessage()]
    assert mismatch and "node 1 " in mismatch[0], [r.getMessage() for r in caplog.records][-20:]
