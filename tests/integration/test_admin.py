"""Admin client and blocking connection against the real broker (Tansu), and their failure messages."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time

import pytest

from kafkajet.admin import Admin, NewTopic
from kafkajet.errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkajet.network import BlockingConnection, bootstrap_metadata
from kafkajet.protocol import ApiKey
from kafkajet.testing import EmbeddedBroker
from kafkajet.testing.ports import free_port


def test_topic_lifecycle(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=6, timeout_s=20)

        topics = admin.list_topics(timeout_s=10)
        assert topic_name in topics
        desc = topics[topic_name]
        assert [p.partition for p in desc.partitions] == list(range(6))
        for p in desc.partitions:
            assert p.leader == broker.node_id
            assert p.replicas == [broker.node_id] and p.isr == [broker.node_id]
        assert admin.describe_topics([topic_name])[topic_name].partitions == desc.partitions

        with pytest.raises(TopicAlreadyExistsError, match=topic_name):
            admin.create_topics([topic_name], num_partitions=6)
        admin.create_topics([NewTopic(topic_name, 6)], if_not_exists=True)

        assert admin.delete_topics([topic_name], timeout_s=20) == [topic_name]
        assert topic_name not in admin.list_topics(timeout_s=10)
        with pytest.raises(UnknownTopicOrPartitionError, match=topic_name):
            admin.delete_topics(topic_name, timeout_s=10)
        assert admin.delete_topics(topic_name, timeout_s=10, if_exists=True) == []  # nothing deleted
        with pytest.raises(UnknownTopicOrPartitionError, match=topic_name):
            admin.describe_topics(topic_name, timeout_s=5)


def test_if_not_exists_leaves_an_existing_topic_at_once_whatever_partitions_were_asked(
        broker: EmbeddedBroker, topic_name: str, caplog: pytest.LogCaptureFixture) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=2)
        with caplog.at_level(logging.WARNING, logger="kafkajet.admin"):
            admin.create_topics(topic_name, num_partitions=2, if_not_exists=True)
            assert caplog.records == []
            started = time.monotonic()  # once, it waited the whole timeout for the 4 partitions, then failed
            admin.create_topics([NewTopic(topic_name, 4), f"{topic_name}-new"], num_partitions=3,
                                if_not_exists=True, timeout_s=20)
            assert time.monotonic() - started < 10
        assert [r.getMessage() for r in caplog.records] == [
            f"topic '{topic_name}' exists already with 2 partitions, not 4: left as it is (if_not_exists)"]
        described = admin.describe_topics([topic_name, f"{topic_name}-new"])
        assert {n: len(d.partitions) for n, d in described.items()} == {topic_name: 2, f"{topic_name}-new": 3}


def test_several_topics_with_own_settings(broker: EmbeddedBroker, topic_name: str) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    with Admin({"bootstrap.servers": broker.bootstrap_servers, "client.id": "cfg-admin"}) as admin:
        assert admin.client_id == "cfg-admin"
        admin.create_topics([NewTopic(a, num_partitions=2), b], num_partitions=3,
                            configs={"cleanup.policy": "delete"})
        topics = admin.list_topics()
        assert len(topics[a].partitions) == 2 and len(topics[b].partitions) == 3
        admin.delete_topics([a, b])


def test_describe_cluster(broker: EmbeddedBroker) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        cluster = admin.describe_cluster(timeout_s=10)
    assert [(b.node_id, b.host, b.port) for b in cluster.brokers] == [
        (broker.node_id, "127.0.0.1", broker.port)]
    assert cluster.cluster_id
    assert cluster.controller_id == broker.node_id


def test_bad_bootstrap_fails_within_timeout_naming_the_address() -> None:
    port = free_port()
    started = time.monotonic()
    with Admin(f"127.0.0.1:{port}") as admin, pytest.raises(KafkaTimeoutError) as info:
        admin.list_topics(timeout_s=1.0)
    assert time.monotonic() - started < 5
    assert f"127.0.0.1:{port}" in str(info.value)
    assert isinstance(info.value.cause, KafkaConnectionError)
    assert "refused" in str(info.value)


def test_blocking_connection_negotiates_and_requests(broker: EmbeddedBroker) -> None:
    with BlockingConnection("127.0.0.1", broker.port, timeout_s=10) as conn:
        # Tansu advertises Metadata up to v12, Apache Kafka 4.4 up to v13.
        assert conn.api_versions[ApiKey.METADATA] == (0, 12 if isinstance(broker, EmbeddedBroker) else 13)
        body = conn.request(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False,
                                              "include_cluster_authorized_operations": False,
                                              "include_topic_authorized_operations": False})
        assert body["brokers"][0]["port"] == broker.port
    assert conn.closed
    # A closed connection says so (what FetchClient and Admin see when they reuse one that failed).
    with pytest.raises(KafkaConnectionError, match=r"connection to 127\.0\.0\.1:\d+ is closed"):
        conn.request(ApiKey.METADATA, {"topics": []})


def test_blocking_connection_errors_name_address_and_step() -> None:
    port = free_port()
    with pytest.raises(KafkaConnectionError, match=rf"connect to 127\.0\.0\.1:{port} refused"):
        BlockingConnection("127.0.0.1", port, timeout_s=2)
    # A listener that accepts but never answers: the ApiVersions step times out.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent_port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError, match=rf"ApiVersions.*127\.0\.0\.1:{silent_port}.*timed out"):
            BlockingConnection("127.0.0.1", silent_port, timeout_s=0.3)
        assert time.monotonic() - started < 3


def test_bootstrap_metadata_skips_dead_servers(broker: EmbeddedBroker) -> None:
    dead = free_port()
    md = bootstrap_metadata(f"127.0.0.1:{dead},{broker.bootstrap_servers}", timeout_s=10)
    assert md["brokers"][0]["node_id"] == broker.node_id
    with pytest.raises(KafkaTimeoutError, match=rf"127\.0\.0\.1:{dead}") as info:
        bootstrap_metadata([("127.0.0.1", dead)], timeout_s=0.5)
    assert isinstance(info.value.cause, KafkaConnectionError)


@pytest.mark.broker_kinds("tansu", reason="the subject is where kafkajet's warning goes, not the broker's answer")
def test_if_not_exists_warns_of_a_partition_difference_without_logging_configured(
        broker: EmbeddedBroker, topic_name: str) -> None:
    # kafkajet's NullHandler kept this warning from Python's last resort: a program that had not configured
    # logging was told nothing, where `kafkajet topics --create --if-not-exists` warns.
    program = ("import sys\nfrom kafkajet import Admin\n"
               "with Admin(sys.argv[1]) as admin:\n"
               "    admin.create_topics(sys.argv[2], num_partitions=2, timeout_s=30)\n"
               "    admin.create_topics(sys.argv[2], num_partitions=4, if_not_exists=True, timeout_s=30)\n")
    r = subprocess.run([sys.executable, "-c", program, broker.bootstrap_servers, topic_name], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(f"topic '{topic_name}' exists already with 2 partitions, not 4: left as it is") == 1, \
        r.stderr


def test_configured_like_the_producer(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(bootstrap_servers=broker.bootstrap_servers, client_id="kw-admin", retry_backoff_ms=10) as admin:
        assert admin.client_id == "kw-admin"
        admin.create_topics(topic_name, timeout_s=20)
        assert topic_name in admin.list_topics()
    with pytest.raises(ConfigError, match="unknown admin setting 'foo'"):
        Admin({"bootstrap.servers": broker.bootstrap_servers, "foo": 1})


def test_repr_shows_the_client_its_servers_and_state_never_secrets() -> None:
    admin = Admin("127.0.0.1:1,localhost:2", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                  sasl_username="alice", sasl_password="s3cret", client_id="etl")
    assert repr(admin) == "<Admin etl open bootstrap='127.0.0.1:1,localhost:2'>"
    admin.close()
    assert repr(admin) == "<Admin etl closed bootstrap='127.0.0.1:1,localhost:2'>"
    assert "s3cret" not in repr(admin) and "alice" not in repr(admin)
