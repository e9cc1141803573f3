"""Leader hints (KIP-951) and the leader-epoch guard (KIP-320) on the MockCluster, as Java 4.4's producer has them.

A former leader's NOT_LEADER_OR_FOLLOWER (Produce v10+) names the new leader: the batch goes there next, with
neither a retry backoff nor a Metadata round trip first. A Metadata answer whose leader epoch is older than
the one the producer knows (a lagging broker's) never moves a leader back. The MockCluster is the broker here
because no real broker can be made to answer stale metadata on demand; tests/apache/test_leader_hints.py has
the hint on three Apache Kafka brokers.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.clock import now_ms
from kafkajet.protocol import ApiKey, RequestHeader
from kafkajet.testing import MockCluster
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.mock_cluster(brokers=3, topics={"t": 3}), pytest.mark.timeout(60)]

# Long enough that a retry which waited for its backoff, or for metadata, shows in the request order.
BACKOFF_MS = 300


def _producer(cluster: MockCluster, **config: Any) -> Producer:
    return Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0, acks="all",
                    max_in_flight_requests_per_connection=1, retry_backoff_ms=BACKOFF_MS,
                    retry_backoff_max_ms=BACKOFF_MS, **config)


def _connect_everywhere(cluster: MockCluster, producer: Producer) -> None:
    """One record to each partition: the producer has a connection to every broker (the three lead one each)."""
    assert sorted(cluster.leader("t", p) for p in range(3)) == [1, 2, 3]
    for p in range(3):
        producer.send("t", b"warm-up", partition=p).result(10)


def _sends(caplog: pytest.LogCaptureFixture, start: int) -> list[tuple[str, int]]:
    """(api, node) of the Produce and Metadata requests the client sent since caplog record `start`, in the
    order it sent them (the network client's debug log; a broker's arrival order mixes connections)."""
    return [(r.args[0], r.args[2]) for r in caplog.records[start:]  # type: ignore[index]
            if r.name == "kafkajet.network" and r.msg.startswith("sending ") and r.args[0] in ("PRODUCE", "METADATA")]  # type: ignore[index]


def test_a_refused_batch_goes_to_the_named_leader_without_a_metadata_round_trip(
        cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kafkajet.network")
    with _producer(cluster) as producer:
        _connect_everywhere(cluster, producer)
        old = cluster.leader("t", 0)
        new = old % 3 + 1
        # The refusal asks for metadata too (as Java's): let the last refresh age past the metadata backoff, so
        # a producer that waited for metadata would send it before the retry.
        metadata = producer._metadata
        wait_for(lambda: now_ms() - metadata.last_refresh_ms > BACKOFF_MS, 10, "the metadata backoff to pass")
        start = len(caplog.records)
        cluster.set_leader("t", 0, new)
        producer.send("t", b"moved", partition=0).result(10)
    assert _sends(caplog, start)[:2] == [("PRODUCE", old), ("PRODUCE", new)]
    assert [r.value for r in cluster.records("t", 0)][-1] == b"moved"


def test_a_stale_metadata_answer_never_moves_a_leader_back(cluster: MockCluster) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        topic_id = admin.describe_topics(["t"])["t"].topic_id
    brokers = [{"node_id": b, "host": cluster.address(b).rsplit(":", 1)[0],
                "port": int(cluster.address(b).rsplit(":", 1)[1]), "rack": None} for b in cluster.broker_ids]
    with _producer(cluster, metadata_max_age_ms=100) as producer:
        _connect_everywhere(cluster, producer)
        old = cluster.leader("t", 0)
        new = old % 3 + 1
        cluster.set_leader("t", 0, new)  # epoch 1
        producer.send("t", b"at the new leader", partition=0).result(10)
        metadata = producer._metadata
        wait_for(lambda: metadata.cluster.leader_for("t", 0) == new, 10, "the producer to follow the move")
        stale_answers = []

        def lagging_broker(_header: RequestHeader, _body: dict[str, Any], _broker: int) -> dict[str, Any]:
            # What a broker that has not heard of the election yet answers: the old leader at epoch 0.
            stale_answers.append(1)
            return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": "stale", "controller_id": 1,
                    "topics": [{"error_code": 0, "name": "t", "topic_id": topic_id, "is_internal": False,
                                "partitions": [{"error_code": 0, "partition_index": p, "leader_id": old if p == 0
                                                else cluster.leader("t", p), "leader_epoch": 0,
                                                "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3],
                                                "offline_replicas": []} for p in range(3)]}]}

        cluster.control(ApiKey.METADATA, lagging_broker)
        versions = metadata.version
        wait_for(lambda: metadata.version >= versions + 2, 10, "two stale Metadata answers taken")
        assert metadata.cluster.leader_for("t", 0) == new
        assert metadata.cluster.leader_for("t", 1) == cluster.leader("t", 1)  # the rest of the answer is taken
        start = len(cluster.requests())
        for i in range(5):
            producer.send("t", b"after stale metadata %d" % i, partition=0).result(10)
        produce_to = {r.broker_id for r in cluster.requests()[start:] if r.api == "PRODUCE"}
    assert stale_answers
    assert produce_to == {new}
