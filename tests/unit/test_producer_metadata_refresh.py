"""When the producer's metadata asks for its next refresh: an update asked for while a Metadata request is out is
still owed once that request's answer arrives (Java's Metadata.requestVersion), since the answer may predate the
change the ask was for (a leader moved after the request left)."""

from __future__ import annotations

from kafkajet.cluster import Cluster, Node, PartitionInfo
from kafkajet.producer.metadata import Metadata

MAX_AGE = 300_000
BACKOFF = 100


def view(leader: int) -> Cluster:
    nodes = {n: Node(n, f"b{n}", 9092) for n in (1, 2)}
    return Cluster(nodes, {"t": (PartitionInfo("t", 0, leader, 0, (1, 2), (1, 2)),)})


def metadata() -> Metadata:
    md = Metadata(max_age_ms=MAX_AGE, max_idle_ms=MAX_AGE, retry_backoff_ms=BACKOFF, retry_backoff_max_ms=1000)
    md.add_topic("t", 0)
    return md


def test_an_answer_to_the_request_that_was_asked_for_clears_the_ask() -> None:
    md = metadata()
    md.request_update()
    md.attempt_started(1_000)
    md.update(view(1), 1_010)
    assert md.time_to_next_update(1_010) == MAX_AGE


def test_an_update_asked_for_while_a_request_is_out_is_sent_after_its_answer() -> None:
    md = metadata()
    md.attempt_started(1_000)
    md.request_update()  # the leader moved after the request left: its answer may name the old one
    md.update(view(1), 1_010)
    assert md.time_to_next_update(1_010) == BACKOFF, "the ask was dropped: the next refresh waits for max age"
    md.attempt_started(1_110)
    md.update(view(2), 1_120)
    assert md.time_to_next_update(1_120) == MAX_AGE


def test_a_topic_added_while_a_request_is_out_is_asked_for_again() -> None:
    md = metadata()
    md.attempt_started(1_000)
    md.add_topic("u", 1_005)
    md.update(Cluster({}, {"t": view(1).partitions["t"], "u": view(1).partitions["t"]}), 1_010)
    assert md.time_to_next_update(1_010) == BACKOFF
