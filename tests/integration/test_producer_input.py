"""What the producer refuses, and how it names it: partitions, headers, timestamps, send_batch()'s parameter names,
and the futures' reprs. Against the in-process mock cluster: the records that are accepted are read back there."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pyarrow as pa
import pytest

from kafkajet import Producer, SerializationError
from kafkajet.errors import InvalidPartitionError, KafkaError
from kafkajet.testing import MockCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockCluster]:
    with MockCluster(brokers=1) as c:
        c.create_topic("t3", partitions=3)
        c.create_topic("one", partitions=1)
        yield c


@pytest.fixture
def producer(cluster: MockCluster) -> Iterator[Producer]:
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1) as p:
        yield p


# --- partitions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [7, 3, -1])
def test_a_partition_the_topic_lacks_is_refused_by_every_api_naming_it_and_the_count(producer: Producer,
                                                                                     bad: int) -> None:
    calls = {
        "send": lambda: producer.send("t3", b"v", partition=bad),
        "send_batch": lambda: producer.send_batch("t3", [b"a", b"b"], partitions=[0, bad]),
        "send_arrow": lambda: producer.send_arrow("t3", pa.table({"value": [b"a", b"b"],
                                                                  "partition": pa.array([0, bad], pa.int32())})),
    }
    for api, call in calls.items():
        with pytest.raises(InvalidPartitionError) as info:
            call()
        err = info.value
        assert isinstance(err, ValueError) and isinstance(err, KafkaError), api
        assert f"Invalid partition {bad}" in str(err) and "[0...3)" in str(err) and "3 partitions" in str(err), api
        if api != "send":
            assert "record 1" in str(err), api  # which record of the call


# --- headers ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("headers,named", [
    (["ab"], "'ab'"),  # once sent as header 'a' = b"b": a 2-character str unpacks as a pair
    ("abc", "str 'abc'"),  # once reported as a bad header 'a'
    (b"ab", "bytes b'ab'"),
    ([("k", b"v"), ("only-a-key",)], "('only-a-key',)"),
    ([("k", b"v", b"extra")], "('k', b'v', b'extra')"),
])
def test_headers_that_are_not_key_value_pairs_are_refused_naming_what_was_given(
        producer: Producer, headers: object, named: str) -> None:
    with pytest.raises(SerializationError, match="pair") as info:
        producer.send("one", b"v", headers=headers)  # type: ignore[arg-type]
    assert named in str(info.value) and "(str key, bytes | None value)" in str(info.value)
    with pytest.raises(SerializationError) as info:
        producer.send_batch("one", [b"v"], headers=[headers])
    assert named in str(info.value)


def test_well_formed_headers_still_arrive_as_given(producer: Producer, cluster: MockCluster) -> None:
    before = len(cluster.records("one", 0))
    producer.send("one", b"list", headers=[("a", b"1"), ("b", None)]).result(timeout=30)
    producer.send("one", b"dict", headers={"a": b"1", "s": "text"}).result(timeout=30)
    producer.send("one", b"tuple", headers=(["a", b"1"],)).result(timeout=30)
    producer.send_batch("one", [b"batch"], headers=[[("a", b"1")]]).result(timeout=30)
    got = [(r.value, list(r.headers)) for r in cluster.records("one", 0)[before:]]
    assert got == [(b"list", [("a", b"1"), ("b", None)]), (b"dict", [("a", b"1"), ("s", b"text")]),
                   (b"tuple", [("a", b"1")]), (b"batch", [("a", b"1")])]


# --- timestamps ---------------------------------------------------------------------------------------------


def test_a_negative_timestamp_is_refused_naming_the_value(producer: Producer) -> None:
    with pytest.raises(ValueError, match=r"Invalid timestamp: -5\b.*non-negative"):
        producer.send("one", b"v", timestamp_ms=-5)
    with pytest.raises(ValueError, match=r"Invalid timestamp: -7 \(record 1\)"):
        producer.send_batch("one", [b"a", b"b", b"c"], timestamps_ms=[1, -7, None])
    with pytest.raises(ValueError, match=r"Invalid timestamp: -9 \(record 0\)"):
        producer.send_arrow("one", pa.table({"value": [b"a"], "timestamp": pa.array([-9], pa.int64())}))
    # Zero is a timestamp like any other (Java allows it).
    assert producer.send("one", b"v", timestamp_ms=0).result(timeout=30).timestamp == 0


def test_send_batch_takes_timestamps_ms_like_send_and_the_old_name_with_a_warning(producer: Producer) -> None:
    t = 1_700_000_000_123
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name must not warn
        assert [md.timestamp for md in producer.send_batch("one", [b"a"], timestamps_ms=[t]).result(timeout=30)] == [t]
    with pytest.warns(DeprecationWarning, match="timestamps_ms") as caught:
        old = producer.send_batch("one", [b"a"], timestamps=[t + 1])
    assert caught[0].filename == __file__  # points at the caller's line, where the fix goes
    assert [md.timestamp for md in old.result(timeout=30)] == [t + 1]
    with pytest.raises(TypeError, match="both"):
        producer.send_batch("one", [b"a"], timestamps_ms=[t], timestamps=[t])
    with pytest.raises(ValueError, match="timestamps_ms has 2 items but values has 1"):
        producer.send_batch("one", [b"a"], timestamps_ms=[t, t])


# --- reprs --------------------------------------------------------------------------------------------------


def test_batch_and_record_futures_say_their_state_count_and_failures(cluster: MockCluster) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000) as p:
        pending = p.send_batch("t3", [b"a", b"b", b"c"], partitions=[0, 0, 2])
        one = p.send("t3", b"d", partition=1)
        assert repr(pending) == "<BatchFuture records=3 pending failed=0>"
        assert repr(one) == "<RecordFuture t3-1 #0 pending>"
        p.flush(timeout=30)
        assert repr(pending) == "<BatchFuture records=3 done failed=0>"
        assert repr(one) == "<RecordFuture t3-1 #0 done>"
    with MockCluster(brokers=1) as own:  # its own cluster: the injected errors must not reach other tests
        own.create_topic("t", partitions=1)
        own.push_request_errors("Produce", ["INVALID_REQUIRED_ACKS"] * 10)
        with Producer(bootstrap_servers=own.bootstrap_servers, enable_idempotence=False, acks=1) as p:
            failed = p.send_batch("t", [b"a", b"b"])
            failed.errors(timeout=30)
            assert repr(failed) == "<BatchFuture records=2 failed failed=2>"
