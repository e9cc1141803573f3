"""The idempotent producer's rule for sequence errors (Java's): fatal for the batch that was next, else retried."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kafkajet import Producer
from kafkajet.errors import OutOfOrderSequenceNumberError
from kafkajet.testing import MockCluster


@contextmanager
def producing_after_one_record() -> Iterator[tuple[MockCluster, Producer]]:
    """A one-partition cluster and an idempotent producer whose first record (sequence 0) is acknowledged."""
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as p:
            p.send("t", b"first").result(timeout=30)
            yield cluster, p


def test_out_of_order_on_the_next_sequence_fails_that_batch_and_the_producer_goes_on() -> None:
    # With nothing else in flight, an OUT_OF_ORDER_SEQUENCE_NUMBER answer to the partition's next sequence means
    # the broker lost track of what was written: the batch fails with that cause (it is not retried, which
    # could duplicate or reorder), the epoch is bumped, and later records are delivered.
    with producing_after_one_record() as (cluster, p):
        cluster.push_request_errors("Produce", ["OUT_OF_ORDER_SEQUENCE_NUMBER"])
        refused = p.send("t", b"refused")
        with pytest.raises(OutOfOrderSequenceNumberError, match="OUT_OF_ORDER_SEQUENCE_NUMBER: t-0"):
            refused.result(timeout=30)
        p.send("t", b"after").result(timeout=30)
        assert cluster.pending_faults("Produce") == 0
        assert [r.value for r in cluster.records("t", 0)] == [b"first", b"after"]


def test_unknown_producer_id_is_retried_under_a_new_epoch() -> None:
    with producing_after_one_record() as (cluster, p):
        cluster.push_request_errors("Produce", ["UNKNOWN_PRODUCER_ID"])
        p.send("t", b"retried").result(timeout=30)
        assert [r.value for r in cluster.records("t", 0)] == [b"first", b"retried"]
        first, retried = cluster.batches("t", 0)
        assert retried.producer_id == first.producer_id
        assert retried.producer_epoch == first.producer_epoch + 1 and retried.base_sequence == 0
