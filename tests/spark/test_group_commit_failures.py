"""The source's group commits when the broker will not take them: best effort, never the query's problem.

The stream reader is driven here as PySpark's runner drives it (initialOffset, then latestOffset at every
trigger with the end of the last completed batch, commit before a further batch), against the MockCluster,
which refuses or stalls commits on demand, and the real broker for a group with live members.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from kafkajet import Producer
from kafkajet.protocol import ApiKey
from kafkajet.spark.reader import KafkaStreamReader
from kafkajet.spark.source_options import parse_source_options
from kafkajet.testing import EmbeddedBroker, MockCluster
from tests.helpers.waiting import wait_for
from tests.spark.conftest import live_member, make_topic

GROUP = "lag-group"


def stream_reader(servers: str, topic: str, **options: str) -> KafkaStreamReader:
    return KafkaStreamReader(parse_source_options({
        "kafka.bootstrap.servers": servers, "subscribe": topic, "startingOffsets": "earliest",
        "kafkajet.timeout.ms": "20000", **options}, streaming=True))


@pytest.fixture
def mock() -> Iterator[MockCluster]:
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as p:
            for i in range(10):
                p.send("t", b"%d" % i, partition=i % 2)
            p.flush(timeout=30)
        yield cluster


def commit_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kafkajet.spark" and r.levelno >= logging.WARNING]


def test_a_refused_commit_is_logged_with_its_cause_and_tried_again_at_the_next_trigger(
    mock: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    reader = stream_reader(mock.bootstrap_servers, "t", **{"kafka.group.id": GROUP})
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())  # batch 0 planned: start..end
        assert end == {"t": {"0": 5, "1": 5}}
        # The first trigger submitted its start (nothing done yet): let that commit go before the refusal is
        # armed, or it meets the refusal instead of batch 0's end (the commits run on their own thread).
        assert reader.committer is not None and reader.committer.flush(30)
        assert mock.committed_offsets(GROUP) == {("t", 0): 0, ("t", 1): 0}
        mock.push_request_errors(ApiKey.OFFSET_COMMIT, ["GROUP_AUTHORIZATION_FAILED"])
        # Batch 0 completed; the next trigger passes its end as start, and the source commits it.
        assert reader.latestOffset(end, ReadAllAvailable()) == end
        wait_for(lambda: any("GROUP_AUTHORIZATION_FAILED" in m for m in commit_warnings(caplog)), 30,
                 "the refusal logged with its cause")
        (warning,) = commit_warnings(caplog)
        assert GROUP in warning
        assert mock.committed_offsets(GROUP) == {("t", 0): 0, ("t", 1): 0}  # batch 0's end was refused
        # Nothing new: the trigger after that brings the same start, and the commit is tried again.
        assert reader.latestOffset(end, ReadAllAvailable()) == end
        wait_for(lambda: mock.committed_offsets(GROUP) == {("t", 0): 5, ("t", 1): 5}, 30, "the retried commit")
    finally:
        reader.stop()


def test_a_commit_the_coordinator_stalls_never_holds_up_a_trigger(mock: MockCluster) -> None:
    reader = stream_reader(mock.bootstrap_servers, "t", **{"kafka.group.id": GROUP})
    # Every commit answered "coordinator not available": the admin client retries for 20 s each time.
    handle = mock.control(ApiKey.OFFSET_COMMIT, lambda header, body, broker: "COORDINATOR_NOT_AVAILABLE")
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        for _ in range(3):
            began = time.monotonic()
            reader.commit(end)
            assert reader.latestOffset(end, ReadAllAvailable()) == end
            assert time.monotonic() - began < 5, "a trigger waited for the group coordinator"
        wait_for(lambda: len(mock.requests(ApiKey.OFFSET_COMMIT)) >= 2, 30, "the commit being retried")
        mock.remove_control(handle)
        wait_for(lambda: mock.committed_offsets(GROUP) == {("t", 0): 5, ("t", 1): 5}, 30,
                 "the commit once the coordinator answers")
    finally:
        mock.remove_control(handle)
        reader.stop()


def test_without_a_group_nothing_is_committed(mock: MockCluster) -> None:
    reader = stream_reader(mock.bootstrap_servers, "t")
    try:
        end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        reader.commit(end)
        reader.latestOffset(end, ReadAllAvailable())
    finally:
        reader.stop()
    assert mock.requests(ApiKey.OFFSET_COMMIT) == [] and mock.requests(ApiKey.FIND_COORDINATOR) == []


def test_group_options_name_the_group_as_spark_does() -> None:
    def group(**options: str) -> str | None:
        return parse_source_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "a,b", **options},
                                    streaming=True).group_id

    assert group() is None
    assert group(**{"kafka.group.id": "mine"}) == "mine"
    assert group(**{"kafka.group.id": "mine", "groupIdPrefix": "p"}) == "mine"  # Spark: kafka.group.id wins
    prefixed = group(groupIdPrefix="p")
    assert prefixed is not None and prefixed.startswith("p-") and len(prefixed) == len("p-") + 16
    assert group(groupIdPrefix="p") == prefixed, "a restarted query must commit to the same group"
    assert group(groupIdPrefix="p", subscribe="c") != prefixed
    batch = parse_source_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "a",
                                  "kafka.group.id": "mine"}, streaming=False)
    assert batch.group_id is None, "batch queries commit nothing, as Spark's"


def test_a_group_with_live_members_is_warned_about_once_and_the_reader_goes_on(
    broker: EmbeddedBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    make_topic(broker, topic_name, 2)
    group = topic_name + "-live"
    member = live_member(broker, topic_name, group)
    reader = stream_reader(broker.bootstrap_servers, topic_name, **{"kafka.group.id": group})
    try:
        start = reader.initialOffset()
        assert reader.committer is not None
        for i in range(3):
            end = {topic_name: {"0": i, "1": i}}
            reader.latestOffset(end, ReadAllAvailable())
            assert reader.committer.flush(30)
        warnings = commit_warnings(caplog)
        assert len(warnings) == 1, warnings
        assert group in warnings[0] and "live members" in warnings[0] and "UNKNOWN_MEMBER_ID" in warnings[0]
        assert reader.committer.committed is None
        assert start == {topic_name: {"0": 0, "1": 0}}
    finally:
        reader.stop()
        member.close()

