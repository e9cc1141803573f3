"""Consumer groups through the Admin client and `kafkajet groups`: offsets another client committed, read back
with each partition's end offset and lag (issue 31)."""

from __future__ import annotations

import logging

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin, PartitionLag
from kafkajet.errors import UnsupportedVersionError
from kafkajet.protocol import ApiKey
from kafkajet.testing import EmbeddedBroker, MockCluster
from tests.integration.test_cli import cli


def _commit_with_confluent(broker: EmbeddedBroker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture
def group_with_lag(broker: EmbeddedBroker, topic_name: str) -> str:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=2)
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0) as p:
        for i in range(10):
            p.send(topic_name, b"%d" % i, partition=i % 2)
        p.flush(timeout=30)
    group = topic_name + "-g"
    _commit_with_confluent(broker, group, {(topic_name, 0): 2, (topic_name, 1): 5})
    return group


def test_admin_lists_the_group_and_describes_its_lag(broker: EmbeddedBroker, topic_name: str,
                                                     group_with_lag: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        assert group_with_lag in [g.group_id for g in admin.list_consumer_groups()]
        assert admin.list_consumer_group_offsets(group_with_lag) == {(topic_name, 0): 2, (topic_name, 1): 5}
        described = admin.describe_consumer_group(group_with_lag)
        assert described.partitions == [PartitionLag(topic_name, 0, 2, 5), PartitionLag(topic_name, 1, 5, 5)]
        assert [p.lag for p in described.partitions] == [3, 0] and described.lag == 3
        # Committed by this client, read back by the same path: a simple group, no member.
        admin.commit_consumer_group_offsets(group_with_lag, {(topic_name, 0): 5})
        assert admin.describe_consumer_group(group_with_lag).lag == 0


def test_describing_a_group_warns_only_about_settings_the_user_gave(
        broker: EmbeddedBroker, group_with_lag: str, caplog: pytest.LogCaptureFixture) -> None:
    # The internal fetch client once got every resolved setting, and warned about some 55 ssl.* / sasl.* keys.
    with Admin(broker.bootstrap_servers) as admin, caplog.at_level(logging.WARNING):
        assert admin.describe_consumer_group(group_with_lag).lag == 3
    assert caplog.records == []
    with Admin({"bootstrap.servers": broker.bootstrap_servers, "ssl.ca.location": "ca.pem"}) as admin:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            admin.describe_consumer_group(group_with_lag)
    assert caplog.records == []  # said once, when the Admin was built: not again at every call


def test_groups_command_lists_and_describes(broker: EmbeddedBroker, topic_name: str, group_with_lag: str) -> None:
    bs = ("--bootstrap-server", broker.bootstrap_servers)
    r = cli("groups", *bs, "--list")
    assert r.returncode == 0, r.stderr
    assert group_with_lag in r.stdout.splitlines()
    r = cli("groups", *bs, "--describe", "--group", group_with_lag)
    assert r.returncode == 0, r.stderr
    # No warning about settings the user never gave; Kafka's tool's note where the broker says "Empty".
    assert r.stderr in ("", f"\nConsumer group '{group_with_lag}' has no active members.\n"), r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert rows == [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                     "HOST", "CLIENT-ID"],
                    [group_with_lag, topic_name, "0", "2", "5", "3", "-", "-", "-"],
                    [group_with_lag, topic_name, "1", "5", "5", "0", "-", "-", "-"]]
    r = cli("groups", *bs, "--describe", "--group", topic_name + "-nobody")
    assert r.returncode == 1 and "has no committed offsets" in r.stderr and "Traceback" not in r.stderr
    r = cli("groups", *bs, "--describe")
    assert r.returncode == 2 and "--describe needs --group" in r.stderr


@pytest.mark.mock_cluster(brokers=3, topics={"t": 2})
def test_groups_are_listed_from_every_broker_that_coordinates_some(cluster: MockCluster) -> None:
    # Each broker lists only the groups it coordinates: asking one would miss the others'.
    groups = [f"g{i}" for i in range(12)]
    with Admin(cluster.bootstrap_servers) as admin:
        for g in groups:
            admin.commit_consumer_group_offsets(g, {("t", 0): 1})
        assert len({cluster.coordinator("group", g) for g in groups}) > 1, "the groups must be spread"
        assert [g.group_id for g in admin.list_consumer_groups()] == sorted(groups)
    assert cluster.committed_offsets("g0") == {("t", 0): 1}


def test_groups_are_listed_at_v5_with_their_state_and_type(broker: EmbeddedBroker, group_with_lag: str) -> None:
    # Tansu answers ListGroups v3-v5 with the released layout: the listing carries what v4 and v5 add.
    with Admin(broker.bootstrap_servers) as admin:
        (listing,) = [g for g in admin.list_consumer_groups() if g.group_id == group_with_lag]
        assert listing.type == "classic" and listing.state is not None, listing
        # Filters a Kafka broker would let this simple group (Empty, classic) through; Tansu takes them.
        filtered = admin.list_consumer_groups(states=["Empty"], types=["classic"])
        assert group_with_lag in [g.group_id for g in filtered]


@pytest.mark.mock_cluster(brokers=3, topics={"t": 2})
def test_state_and_type_filters_reach_the_brokers(cluster: MockCluster) -> None:
    # The MockCluster's groups have no members: each is an Empty classic group, and its brokers filter as
    # Kafka's do (Tansu takes the filters but ignores them).
    groups = [f"g{i}" for i in range(6)]
    with Admin(cluster.bootstrap_servers) as admin:
        for g in groups:
            admin.commit_consumer_group_offsets(g, {("t", 0): 1})
        assert admin.list_consumer_groups(states=["Stable", "PreparingRebalance"]) == []
        assert admin.list_consumer_groups(types=["consumer"]) == []
        listed = admin.list_consumer_groups(states=["EMPTY"], types=["Classic"])
        assert [(g.group_id, g.state, g.type) for g in listed] == [(g, "Empty", "classic") for g in groups]
    assert {r.version for r in cluster.requests("ListGroups")} == {5}


@pytest.mark.mock_cluster(brokers=1, topics={"t": 1})
def test_a_broker_too_old_for_a_filter_fails_the_listing(cluster: MockCluster,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Listing every group instead would hand back groups the caller filtered out (Java refuses too).
    from kafkajet.testing.mock import handlers

    monkeypatch.setitem(handlers._VERSIONS, ApiKey.LIST_GROUPS, (0, 3))
    with Admin(cluster.bootstrap_servers) as admin:
        admin.commit_consumer_group_offsets("old", {("t", 0): 1})
        with pytest.raises(UnsupportedVersionError, match=r"by state \(\['Empty'\]\) needs v4"):
            admin.list_consumer_groups(states=["Empty"], timeout_s=10)
        with pytest.raises(UnsupportedVersionError, match=r"by type \(\['classic'\]\) needs v5"):
            admin.list_consumer_groups(types=["classic"], timeout_s=10)
        assert [(g.group_id, g.state, g.type) for g in admin.list_consumer_groups()] == [("old", None, None)]
