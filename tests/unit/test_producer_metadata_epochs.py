"""The producer's cluster view against leader epochs: Java's Metadata.updateLatestMetadata (KIP-320) for
Metadata answers and Metadata.updatePartitionLeadership (KIP-951) for a Produce answer's leader hints.

The end-to-end behaviour is tested on the MockCluster and Apache Kafka (tests/mock/test_leader_hints.py,
tests/apache/test_leader_hints.py); these are the rules one by one.
"""

from __future__ import annotations

from kafkajet.cluster import Cluster, Node, PartitionInfo
from kafkajet.producer.metadata import Metadata

NODES = {n: Node(n, f"b{n}", 9092) for n in (1, 2, 3)}
TOPIC_ID = bytes(range(16))


def view(leader: int, epoch: int, *, topic_id: bytes | None = TOPIC_ID, other: tuple[int, int] = (3, 0),
         nodes: dict[int, Node] | None = None) -> Cluster:
    parts = (PartitionInfo("t", 0, leader, epoch, (1, 2, 3), (1, 2, 3)),
             PartitionInfo("t", 1, other[0], other[1], (1, 2, 3), (1, 2, 3)))
    return Cluster(NODES if nodes is None else nodes, {"t": parts}, topic_ids={"t": topic_id})


def metadata() -> Metadata:
    return Metadata(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100, retry_backoff_max_ms=1000)


def test_an_older_epoch_keeps_the_leader_and_a_newer_or_equal_one_moves_it() -> None:
    md = metadata()
    md.update(view(1, 5), 1)
    md.update(view(2, 4, other=(2, 1)), 2)  # partition 0 is stale, partition 1 newer
    assert (md.cluster.leader_for("t", 0), md.cluster.leader_epoch_for("t", 0)) == (1, 5)
    assert md.cluster.leader_for("t", 1) == 2
    md.update(view(3, 5), 3)
    assert md.cluster.leader_for("t", 0) == 3  # the same epoch is taken, as Java's >=
    md.update(view(2, 6), 4)
    assert md.cluster.leader_for("t", 0) == 2


def test_a_kept_leader_the_answer_lists_no_more_leaves_its_partition_waiting() -> None:
    md = metadata()
    md.update(view(1, 5), 1)
    md.update(view(2, 4, nodes={2: NODES[2], 3: NODES[3]}), 2)  # node 1 shut down; a lagging broker answers
    # Neither back to the older leader nor to a broker that is gone: no leader, as in Java's MetadataCache.
    assert md.cluster.leader_for("t", 0) is None and md.cluster.partition_count("t") == 2
    md.update(view(3, 6, nodes={2: NODES[2], 3: NODES[3]}), 3)
    assert md.cluster.leader_for("t", 0) == 3


def test_answers_without_reliable_epochs_are_taken_whole_and_forget_the_epochs() -> None:
    md = metadata()
    md.update(view(1, 5), 1)
    md.update(view(2, 4), 2, reliable_epochs=False)  # Metadata below v9
    assert md.cluster.leader_for("t", 0) == 2
    md.update(view(3, 0), 3)  # nothing to compare against any more
    assert md.cluster.leader_for("t", 0) == 3


def test_a_recreated_topic_starts_its_epochs_again() -> None:
    md = metadata()
    md.update(view(1, 5), 1)
    md.update(view(2, 0, topic_id=bytes(range(1, 17))), 2)
    assert (md.cluster.leader_for("t", 0), md.cluster.leader_epoch_for("t", 0)) == (2, 0)


def test_a_hint_with_a_newer_epoch_moves_the_leader_and_adds_its_address() -> None:
    md = metadata()
    md.update(view(1, 5, nodes={1: NODES[1], 3: NODES[3]}), 1)
    version = md.version
    new_node = Node(2, "b2", 9093)
    assert md.update_leaders({("t", 0): (2, 6)}, [new_node]) == {("t", 0)}
    assert (md.cluster.leader_for("t", 0), md.cluster.leader_epoch_for("t", 0)) == (2, 6)
    assert md.cluster.nodes[2] == new_node and md.cluster.leader_for("t", 1) == 3
    assert md.cluster.partition_info("t", 0).replicas == (1, 2, 3)  # type: ignore[union-attr]
    assert md.version == version  # not a Metadata answer: waiters for one keep waiting
    md.update(view(1, 5), 2)  # and metadata older than the hint does not undo it
    assert md.cluster.leader_for("t", 0) == 2


def test_hints_java_ignores_are_ignored() -> None:
    md = metadata()
    md.update(view(1, 5, nodes={1: NODES[1], 3: NODES[3]}), 1)
    assert md.update_leaders({("t", 0): (3, 5)}, []) == set()  # not newer
    assert md.update_leaders({("t", 0): (2, 6)}, []) == set()  # no address for node 2
    assert md.update_leaders({("u", 0): (3, 1)}, []) == set()  # a partition not in the view
    assert md.update_leaders({("t", 0): (-1, -1)}, []) == set()  # the broker knows no leader either
    assert md.cluster.leader_for("t", 0) == 1
