"""partitioner.rack.aware with client.rack on a real three-node Apache Kafka whose nodes sit in racks r1, r2, r3
(broker.rack, as Metadata reports it): keyless records go only to partitions led in r2 (KIP-1123), and to every
partition once r2's node is shut down and leads nothing.

The cluster is this module's own: stopping a node must not leak into other tests.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future

from kafkajet import Producer
from kafkajet.admin import Admin
from tests.helpers.apache import running_apache_kafka
from tests.helpers.waiting import wait_for

PARTITIONS = 6


def sent_partitions(p: Producer, topic: str, count: int) -> Counter[int]:
    futures: list[Future] = [p.send(topic, b"." * 100) for _ in range(count)]
    return Counter(f.result(timeout=60).partition for f in futures)


def test_keyless_records_stay_in_the_clients_rack_until_it_leads_nothing(topic_name: str) -> None:
    with running_apache_kafka(brokers=3, racks=["r1", "r2", "r3"]) as kafka:
        with Admin(kafka.bootstrap_servers) as admin:
            admin.create_topics(topic_name, num_partitions=PARTITIONS, replication_factor=3,
                                configs={"min.insync.replicas": "2"})
        # A short metadata age: after the shutdown the producer learns the new leaders without waiting 5 min.
        with Producer(bootstrap_servers=kafka.bootstrap_servers, batch_size=1024, client_rack="r2",
                      partitioner_rack_aware=True, metadata_max_age_ms=500) as p:
            assert {n.rack for n in p._metadata.cluster.nodes.values()} <= {"r1", "r2", "r3"}
            in_r2 = {info.partition for info in p.partitions_for(topic_name, timeout=30) if info.leader == 2}
            assert in_r2, "Kafka spreads the leaders over the three nodes"
            got = sent_partitions(p, topic_name, 3000)  # about 300 sticky switches
            assert set(got) == in_r2, f"keyless records went to {dict(got)}; partitions led in r2: {in_r2}"

            kafka.stop_node(2)  # a controlled shutdown: its leaderships move to r1 and r3 first
            wait_for(lambda: all(p._metadata.cluster.leader_for(topic_name, q) not in (None, 2)
                                 for q in range(PARTITIONS)), 60, "the producer learns that r2 leads nothing")
            got = sent_partitions(p, topic_name, 3000)
            assert set(got) == set(range(PARTITIONS)), f"with r2 down keyless records went only to {dict(got)}"
