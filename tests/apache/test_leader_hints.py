"""Leader hints (KIP-951) on three Apache Kafka 4.4 brokers: a controlled shutdown of a partition's leader.

While records stream to the partition, its leader is stopped with a controlled shutdown: its leadership moves
first, and Produce requests reaching it meanwhile are refused with NOT_LEADER_OR_FOLLOWER naming the new leader
(Produce v10+). The refused batch must go to that leader next, with no Metadata request sent between the
refusal and the retry, as Java 4.4's producer does. The order is the client's own: the network client logs each
request it sends (debug), and the sender logs the hints it takes, both on the sender thread.

The MockCluster has the same hint deterministically, and the stale-metadata guard (tests/mock/test_leader_hints.py).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.testing.apache_kafka import ApacheKafka
from tests.helpers.apache import running_apache_kafka
from tests.helpers.waiting import wait_for

# A controlled shutdown may close the connection before a request reaches the broker in its last moments as
# leader: another leader is stopped (after the first comes back) until one refusal carries a hint.
ATTEMPTS = 3


@pytest.fixture
def three() -> Iterator[ApacheKafka]:
    with running_apache_kafka(brokers=3) as kafka:
        yield kafka


def _hint_and_what_followed(records: list[logging.LogRecord], topic: str) -> tuple[int, list[tuple[str, int]]] | None:
    """The node the first hint for partition 0 named, and the (api, node) requests sent after it."""
    sends: list[tuple[str, int]] = []
    hinted: int | None = None
    for r in records:
        message = r.getMessage()
        if hinted is None:
            found = re.search(rf"leader hints moved .*\b{re.escape(topic)}-0 to node (\d+)", message)
            if found:
                hinted = int(found.group(1))
            continue
        if r.name == "kafkajet.network" and message.startswith("sending "):
            api, _version, node, _correlation_id = r.args  # type: ignore[misc]
            sends.append((api, node))
    return None if hinted is None else (hinted, sends)


def test_a_controlled_shutdown_moves_batches_to_the_named_leader_without_metadata(
        three: ApacheKafka, topic_name: str, caplog: pytest.LogCaptureFixture) -> None:
    with Admin(three.bootstrap_servers) as admin:
        admin.create_topics(topic_name, num_partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
    caplog.set_level(logging.DEBUG, logger="kafkajet.network")
    caplog.set_level(logging.DEBUG, logger="kafkajet.producer.sender")
    acked = [0]
    failures: list[BaseException] = []
    stop = threading.Event()

    def delivered(_md: object, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)
        acked[0] += 1

    def stream(p: Producer) -> None:
        sent = 0
        while not stop.is_set():
            if sent % 50 == 0:
                wait_for(lambda s=sent: acked[0] >= s - 200, 120, f"acks to catch up with record {sent}", 0.005)
            p.send(topic_name, value=str(sent).encode(), partition=0, callback=delivered)
            sent += 1

    outcome = None
    with Producer(bootstrap_servers=three.bootstrap_servers, acks="all", linger_ms=0,
                  max_in_flight_requests_per_connection=1, delivery_timeout_ms=120_000) as p:
        # A connection to every broker first: a retry to a leader the producer must still connect to would wait
        # for the connection (and a Metadata request may leave meanwhile, as in Java).
        for partition in range(3):
            p.send(topic_name, b"warm-up", partition=partition).result(60)
        assert len({three.leader_of(topic_name, q) for q in range(3)}) == 3, "leaders not spread over the brokers"
        writer = threading.Thread(target=stream, args=(p,), daemon=True)
        writer.start()
        stopped: list[int] = []
        for _ in range(ATTEMPTS):
            leader = three.leader_of(topic_name, 0)
            start = len(caplog.records)
            mark = acked[0] + 500
            wait_for(lambda m=mark: acked[0] >= m, 120, "the stream to be under way")
            three.stop_node(leader)
            stopped.append(leader)
            mark = acked[0] + 500
            wait_for(lambda m=mark: acked[0] >= m, 120, "the stream to go on at the new leader")
            outcome = _hint_and_what_followed(caplog.records[start:], topic_name)
            if outcome is not None:
                break
            three.restart(leader)
        stop.set()
        writer.join(timeout=120)
        p.flush(timeout=120)
    assert outcome is not None, f"no leader hint for {topic_name}-0 after stopping nodes {stopped}"
    hinted, sends = outcome
    # The retry is the next request the producer sends: to the named leader, with no Metadata request first.
    assert sends[:1] == [("PRODUCE", hinted)], sends[:5]
    assert failures == []
