"""kafkajet's transactional protocol against librdkafka's mock cluster: a second, independent coordinator.

The mock serves FindCoordinator, InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit and EndTxn, and stores the transactional batches; it writes no commit/abort markers and does
not hide aborted records from read_committed readers (seen here: both read back everything), so visibility
is refereed on the MockCluster and Tansu instead. What this tier checks is that every step is accepted by an
implementation we did not write, with the transactional flag and one producer id on every stored batch.
"""

from __future__ import annotations

import pytest

from kafkajet import Producer
from tests.foreign.support import stored_batches
from tests.helpers.rdkafka_mock import RdkafkaMockCluster
from tests.helpers.readback import read_topic_confluent

pytestmark = [pytest.mark.foreign, pytest.mark.timeout(60)]


def test_commit_abort_and_offsets_are_accepted_by_librdkafkas_coordinator(rdmock: RdkafkaMockCluster) -> None:
    rdmock.create_topic("txn", 6, 3)
    with Producer({"bootstrap.servers": rdmock.bootstraps, "transactional.id": "rd-txn",
                   "max.block.ms": 20_000}) as p:
        p.init_transactions()
        p.begin_transaction()
        committed = [p.send("txn", b"c%d" % i, key=b"k%d" % i) for i in range(120)]
        p.send_offsets_to_transaction({("txn", 0): 5}, "rd-group")
        p.commit_transaction()
        assert all(f.exception(timeout=0) is None for f in committed)
        p.begin_transaction()
        aborted = [p.send("txn", b"a%d" % i, key=b"k%d" % i) for i in range(60)]
        p.flush(20)
        p.abort_transaction()
        assert all(f.exception(timeout=0) is None for f in aborted)
        p.begin_transaction()
        p.send("txn", b"after-abort", partition=0)
        p.commit_transaction()
    values = sorted(r.value for r in read_topic_confluent(rdmock.bootstraps, "txn", 6, expected=181) if r.value is not None)
    assert values == sorted([b"c%d" % i for i in range(120)] + [b"a%d" % i for i in range(60)] + [b"after-abort"])
    batches = [b for bs in stored_batches(rdmock, "txn", 6).values() for b in bs]
    assert batches and all(b.is_transactional for b in batches)
    assert len({b.producer_id for b in batches}) == 1
