"""read_committed through FetchClient, end to end: kafkajet's transactional producers write, the MockCluster
keeps the log, its aborted-transaction index and last stable offset (the real broker here does not hide
aborted records), and FetchClient reads back. The unit tests of records/isolation.py stand in for this
otherwise; here a wrong rule, a wrong end offset or a wrong Fetch field shows as a wrong record."""

from __future__ import annotations

import pytest

from kafkajet.fetch import FetchClient
from kafkajet.testing import MockCluster
from tests.helpers.transactions import (
    Reads,
    Written,
    interleave_two_transactional_producers,
    send_to_each,
    transactional,
)

pytestmark = [pytest.mark.mock_cluster(brokers=3, topics={"rc": 3, "x1": 3, "x2": 2}), pytest.mark.timeout(120)]


def read(cluster: MockCluster, isolation: str, tps: list[tuple[str, int]]) -> Reads:
    """Each partition from its log start to its end (the last stable offset at read_committed)."""
    out: Reads = {}
    with FetchClient(cluster.bootstrap_servers, isolation_level=isolation) as client:
        for topic, partition in tps:
            start, end = client.offsets(topic, partition)
            out[(topic, partition)] = [r.value or b"" for r in client.fetch_range(topic, partition, start, end)]
    return out


def test_interleaved_committed_and_aborted_transactions_read_back_exactly(cluster: MockCluster) -> None:
    written = interleave_two_transactional_producers(cluster, "rc", 3)
    tps = [("rc", p) for p in range(3)]
    assert len(written.committed) == len(written.aborted) == 36 and len(written.plain) == 12
    for tp in tps:  # every transaction ended: the last stable offset is the end of the log
        assert cluster.last_stable_offset(*tp) == cluster.high_watermark(*tp)
        assert len(cluster.aborted_transactions(*tp)) == 4
    committed = read(cluster, "read_committed", tps)
    assert committed == written.in_log_order(cluster, tps)
    assert set().union(*map(set, committed.values())) == written.committed | written.plain
    # The aborted records are in the log, and a reader that does not hide them returns them: so the above
    # is the reader's doing.
    everything = read(cluster, "read_uncommitted", tps)
    assert everything == written.in_log_order(cluster, tps, aborted_too=True)
    assert written.aborted <= set().union(*map(set, everything.values()))


def test_a_transaction_over_two_topics_is_visible_at_commit_all_at_once_and_never_after_an_abort(
        cluster: MockCluster) -> None:
    tps = [("x1", p) for p in range(3)] + [("x2", p) for p in range(2)]
    written = Written()
    with transactional(cluster, "spanning") as p:
        p.begin_transaction()
        send_to_each(p, tps, "first", 4, written.committed)
        p.flush(30)
        # In the log, on every partition, and still none of it readable at read_committed.
        assert read(cluster, "read_uncommitted", tps) == written.in_log_order(cluster, tps, aborted_too=True)
        assert all(len(v) == 4 for v in read(cluster, "read_uncommitted", tps).values())
        assert read(cluster, "read_committed", tps) == {tp: [] for tp in tps}
        p.commit_transaction(30)
        after_commit = read(cluster, "read_committed", tps)
        assert after_commit == written.in_log_order(cluster, tps) and all(len(v) == 4 for v in after_commit.values())

        p.begin_transaction()
        send_to_each(p, tps, "second", 3, written.aborted)
        p.flush(30)
        assert read(cluster, "read_committed", tps) == after_commit  # open: held back behind the LSO
        p.abort_transaction(30)
    assert read(cluster, "read_committed", tps) == after_commit  # aborted: never
    assert read(cluster, "read_uncommitted", tps) == written.in_log_order(cluster, tps, aborted_too=True)
    assert all(len(v) == 7 for v in read(cluster, "read_uncommitted", tps).values())
