"""tests/helpers/readback.read_topic_confluent against Tansu, whose high watermark (1 after many batches) is no
end to read to: the reader must go on to the count the caller expects, and say what is missing when it can't."""

from __future__ import annotations

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic_confluent

PARTITIONS = 3
PER_PARTITION = 600


def _write(broker: EmbeddedBroker, topic: str) -> list[bytes]:
    """Many small batches per partition: the write after which Tansu's watermark says 1."""
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic, num_partitions=PARTITIONS)
    values = [b"v%05d" % i + b"." * 150 for i in range(PARTITIONS * PER_PARTITION)]
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "batch.size": 16384, "linger.ms": 5}) as p:
        p.send_batch(topic, values, partitions=[i % PARTITIONS for i in range(len(values))]).result(timeout=60)
    return values


def test_reads_every_record_past_a_watermark_that_stops_short(broker: EmbeddedBroker, topic_name: str) -> None:
    values = _write(broker, topic_name)
    got = read_topic_confluent(broker.bootstrap_servers, topic_name, PARTITIONS, expected=len(values))
    assert sorted(r.value for r in got if r.value is not None) == values  # each once, none lost
    for p in range(PARTITIONS):
        assert [r.offset for r in got if r.partition == p] == list(range(PER_PARTITION))


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is the test helper's message at its deadline (it waits the deadline out on each broker "
    "alike)"))
def test_names_what_is_missing_at_the_deadline(broker: EmbeddedBroker, topic_name: str) -> None:
    values = _write(broker, topic_name)
    with pytest.raises(AssertionError, match=rf"read {len(values)} of at least {len(values) + 1} records") as e:
        read_topic_confluent(broker.bootstrap_servers, topic_name, PARTITIONS, timeout_s=8,
                             expected=len(values) + 1)
    assert f"records read per partition {dict.fromkeys(range(PARTITIONS), PER_PARTITION)}" in str(e.value)
