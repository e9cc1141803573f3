"""TRANSACTION_ABORTABLE (code 120) answering a transaction's Produce, which only an injected error brings about
on demand: as Java's TransactionManager, the transaction goes to its abortable state, the producer lives,
abort_transaction() works and the next transaction commits. What the user meets is of KIP-1050's categories:
the record fails with TransactionAbortableError, and so do send() and commit_transaction() until the abort."""

from __future__ import annotations

import pytest

from kafkajet import Producer
from kafkajet.errors import ApplicationRecoverableError, IllegalStateError, TransactionAbortableError
from kafkajet.testing import MockCluster
from tests.helpers.readback import read_topic_confluent
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.mock_cluster(brokers=3, topics={"payments": 3}), pytest.mark.timeout(120)]


def test_produce_answered_transaction_abortable_is_aborted_and_the_next_transaction_commits(
        cluster: MockCluster) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "kj-txn-abortable",
                   "max.block.ms": 30_000}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("payments", b"kept-out", partition=1).result(timeout=30)
        cluster.push_request_errors("Produce", ["TRANSACTION_ABORTABLE"])
        refused = p.send("payments", b"refused", partition=1)
        assert isinstance(refused.exception(timeout=30), TransactionAbortableError)
        wait_for(lambda: p._txn is not None and p._txn.has_abortable_error, 10, "the abortable state")
        with pytest.raises(TransactionAbortableError) as send_refused:
            p.send("payments", b"after")
        assert isinstance(send_refused.value, IllegalStateError)  # what send() raised before the categories
        with pytest.raises(TransactionAbortableError, match="abort_transaction") as commit_refused:
            p.commit_transaction()
        assert not isinstance(commit_refused.value, ApplicationRecoverableError)
        assert isinstance(commit_refused.value.__cause__, TransactionAbortableError)
        p.abort_transaction()
        p.begin_transaction()
        p.send("payments", b"committed", partition=1)
        p.commit_transaction()
    assert cluster.pending_faults("Produce") == 0
    history = cluster.transaction_history("kj-txn-abortable")
    assert history.count("CompleteAbort") == 1 and history.count("CompleteCommit") == 1, history
    got = read_topic_confluent(cluster.bootstrap_servers, "payments", 3, expected=1, isolation_level="read_committed")
    assert [r.value for r in got] == [b"committed"]
