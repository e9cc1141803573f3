"""FetchClient follows a partition's leader: an answer that says the leader moved (or is not serving yet, as
Apache Kafka says for a moment after it creates a topic) is retried on fresh metadata within request.timeout.ms;
any other error, and a leader that stays wrong past the timeout, still reach the caller."""

from __future__ import annotations

import pytest

from kafkajet import Producer
from kafkajet.errors import NotLeaderOrFollowerError, TopicAuthorizationFailedError
from kafkajet.fetch import FetchClient
from kafkajet.testing import MockCluster

pytestmark = pytest.mark.mock_cluster(brokers=2, topics={"t": 1})


def _write(cluster: MockCluster, count: int) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
        for i in range(count):
            p.send("t", value=f"v{i}".encode(), partition=0)


def test_a_moved_leader_is_found_again(cluster: MockCluster) -> None:
    _write(cluster, 3)
    with FetchClient(cluster.bootstrap_servers) as reader:
        assert reader.offsets("t", 0) == (0, 3)
        old = cluster.leader("t", 0)
        cluster.set_leader("t", 0, next(b for b in cluster.broker_ids if b != old))
        cluster.push_request_errors("Fetch", ["NOT_LEADER_OR_FOLLOWER"], broker_id=old)
        assert [r.value for r in reader.fetch_range("t", 0, 0, 3)] == [b"v0", b"v1", b"v2"]


def test_an_error_that_is_not_about_leaders_is_not_retried(cluster: MockCluster) -> None:
    _write(cluster, 1)
    cluster.push_request_errors("Fetch", ["TOPIC_AUTHORIZATION_FAILED"])
    with FetchClient(cluster.bootstrap_servers) as reader, pytest.raises(TopicAuthorizationFailedError):
        reader.offsets("t", 0)


def test_a_leader_that_stays_wrong_fails_after_the_request_timeout(cluster: MockCluster) -> None:
    _write(cluster, 1)
    cluster.push_request_errors("Fetch", ["NOT_LEADER_OR_FOLLOWER"] * 100)
    with FetchClient(cluster.bootstrap_servers, request_timeout_ms=1000) as reader, \
            pytest.raises(NotLeaderOrFollowerError):
        reader.offsets("t", 0)
