"""The Spark source at kafka.isolation.level=read_committed, end to end on the MockCluster (Tansu does not hide
aborted records): kafkajet's transactional producers write, the driver plans up to the last stable offset
and the tasks drop aborted transactions' batches. The same scenarios as tests/mock/test_read_committed_e2e.py,
read through Spark's planning, tasks and columnar decoding."""

from __future__ import annotations

from typing import Any

import pytest

from kafkajet.testing import MockCluster
from tests.helpers.transactions import (
    Reads,
    Written,
    interleave_two_transactional_producers,
    send_to_each,
    transactional,
)

pytestmark = pytest.mark.timeout(300)


def read(spark: Any, cluster: MockCluster, isolation: str, tps: list[tuple[str, int]]) -> Reads:
    """Every partition of the topics in `tps`, values by partition in offset order."""
    topics = sorted({t for t, _ in tps})
    df = (spark.read.format("kafkajet").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
          .option("subscribe", ",".join(topics)).option("kafka.isolation.level", isolation).load())
    out: Reads = {tp: [] for tp in tps}
    for row in sorted(df.select("topic", "partition", "offset", "value").collect(),
                      key=lambda r: (r.topic, r.partition, r.offset)):
        out[(row.topic, row.partition)].append(bytes(row.value))
    return out


def test_interleaved_committed_and_aborted_transactions_read_back_exactly(spark: Any) -> None:
    with MockCluster(brokers=3) as cluster:
        cluster.create_topic("rc", partitions=3)
        written = interleave_two_transactional_producers(cluster, "rc", 3)
        tps = [("rc", p) for p in range(3)]
        assert read(spark, cluster, "read_committed", tps) == written.in_log_order(cluster, tps)
        # A reader that does not hide aborted records returns them: the above is the source's doing.
        everything = read(spark, cluster, "read_uncommitted", tps)
        assert everything == written.in_log_order(cluster, tps, aborted_too=True)
        assert written.aborted <= set().union(*map(set, everything.values()))


def test_a_transaction_over_two_topics_is_visible_at_commit_all_at_once_and_never_after_an_abort(
        spark: Any) -> None:
    with MockCluster(brokers=2) as cluster:
        cluster.create_topic("x1", partitions=3)
        cluster.create_topic("x2", partitions=2)
        tps = [("x1", p) for p in range(3)] + [("x2", p) for p in range(2)]
        written = Written()
        with transactional(cluster, "spanning") as p:
            p.begin_transaction()
            send_to_each(p, tps, "first", 4, written.committed)
            p.flush(30)
            assert all(len(v) == 4 for v in read(spark, cluster, "read_uncommitted", tps).values())
            assert read(spark, cluster, "read_committed", tps) == {tp: [] for tp in tps}  # open: none yet
            p.commit_transaction(30)
            after_commit = read(spark, cluster, "read_committed", tps)
            assert after_commit == written.in_log_order(cluster, tps)
            assert all(len(v) == 4 for v in after_commit.values())

            p.begin_transaction()
            send_to_each(p, tps, "second", 1, written.aborted)
            p.flush(30)
            p.abort_transaction(30)
        assert read(spark, cluster, "read_committed", tps) == after_commit  # aborted: never
        assert read(spark, cluster, "read_uncommitted", tps) == written.in_log_order(cluster, tps, aborted_too=True)
