"""send_batch(): the same records and placement as send() would give, read back by kafka-python."""

from __future__ import annotations

import time

import pytest

import kafkajet.producer.batch
from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.errors import InvalidPartitionError, KafkaError
from kafkajet.producer.partitioner import partition_for_key
from kafkajet.testing import EmbeddedBroker, MockCluster
from tests.helpers.readback import read_topic


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_send_batch_delivers_every_record_in_place_and_order(
    broker: EmbeddedBroker, topic_name: str, compression: str
) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=4)
    n = 60_000
    values = [f"v{i}".encode() * (1 + i % 7) for i in range(n)]
    keys = [f"k{i % 97}".encode() if i % 3 == 0 else None for i in range(n)]
    partitions = [i % 4 if i % 3 == 1 else None for i in range(n)]
    headers = [[("i", str(i).encode())] if i % 5 == 0 else None for i in range(n)]
    timestamps = [1_650_000_000_000 + i if i % 2 else None for i in range(n)]
    with Producer(bootstrap_servers=broker.bootstrap_servers, compression_type=compression) as p:
        result = p.send_batch(topic_name, values, keys=keys, headers=headers, partitions=partitions,
                              timestamps_ms=timestamps)
        mds = result.result(timeout=120)
    assert len(mds) == n and result.errors() == []
    read = {(r.partition, r.offset): r for r in read_topic(broker.bootstrap_servers, topic_name, n)}
    assert len(read) == n
    last_offset: dict[int, int] = {}
    for i, md in enumerate(mds):
        r = read[(md.partition, md.offset)]
        assert (r.key, r.value, r.headers) == (keys[i], values[i], tuple(headers[i] or ()))
        if timestamps[i] is not None:
            assert r.timestamp == timestamps[i]
        if partitions[i] is not None:
            assert md.partition == partitions[i]
        elif keys[i] is not None:
            assert md.partition == partition_for_key(keys[i], 4)  # type: ignore[arg-type]
        assert md.offset > last_offset.get(md.partition, -1)  # input order kept per partition
        last_offset[md.partition] = md.offset


@pytest.mark.parametrize(("shape", "compression"), [("keyless-uniform", "none"), ("keyless-varied", "lz4"),
                                                    ("keyed-uniform", "none"), ("keyed-varied", "none"),
                                                    ("keyed-uniform-same-headers", "none"),
                                                    ("keyless-varied-headers", "none")])
def test_send_batch_by_column_reads_back(broker: EmbeddedBroker, topic_name: str, shape: str, compression: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # The usual shape (one timestamp per call, no headers, no nulls) is encoded column by column: it must
    # write what the record loop writes. Several calls, so later ones append to batches an earlier one opened
    # (a timestamp delta above 0), with a linger long enough that those batches are still open.
    columns_calls = []
    original = kafkajet.producer.batch._append_columns  # the C kernel in the compiled build
    monkeypatch.setattr(kafkajet.producer.batch, "_append_columns",
                        lambda *a: columns_calls.append(1) or original(*a))
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=3)
    calls, per_call = 4, 5_000
    sent: list[tuple[bytes | None, bytes, tuple[tuple[str, bytes | None], ...], int, int]] = []
    with Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=500, batch_size=64 * 1024,
                  compression_type=compression) as p:
        results = []
        for c in range(calls):
            base = c * per_call
            if "uniform" in shape:
                values = [b"%09d" % (base + i) * 11 for i in range(per_call)]
            else:
                values = [b"%d|" % (base + i) * (i % 40) + b"%d" % (base + i) for i in range(per_call)]
            keys = None if shape.startswith("keyless") else (
                [b"key-%06d" % (i % 500) for i in range(per_call)] if "uniform" in shape
                else [b"k" * (i % 30) + b"%d" % (i % 500) for i in range(per_call)])
            headers: list[list[tuple[str, bytes | None]] | None] | None = None
            if shape.endswith("same-headers"):
                headers = [[("source", b"app-1"), ("schema", None)]] * per_call
            elif shape.endswith("headers"):
                headers = [None if i % 3 == 0 else [("i", b"%d" % (base + i))] * (i % 3) for i in range(per_call)]
            before = int(time.time() * 1000)
            results.append(p.send_batch(topic_name, values, keys=keys, headers=headers))
            after = int(time.time() * 1000)
            sent += [(None if keys is None else keys[i], values[i], tuple(headers[i] or ()) if headers else (),
                      before, after) for i in range(per_call)]
            deadline = time.monotonic() + 5
            while int(time.time() * 1000) <= after:  # the next call gets a later timestamp
                assert time.monotonic() < deadline
        mds = [md for r in results for md in r.result(timeout=120)]
    assert columns_calls, "the column path was not taken"
    read = {(r.partition, r.offset): r for r in read_topic(broker.bootstrap_servers, topic_name, len(sent))}
    assert len(read) == len(sent) == len(mds)
    last_offset: dict[int, int] = {}
    for (key, value, headers_sent, before, after), md in zip(sent, mds, strict=True):
        r = read[(md.partition, md.offset)]
        assert (r.key, r.value, r.headers) == (key, value, headers_sent)
        assert before <= r.timestamp <= after and md.timestamp == r.timestamp
        if key is not None:
            assert md.partition == partition_for_key(key, 3)
        assert md.offset > last_offset.get(md.partition, -1)
        last_offset[md.partition] = md.offset


@pytest.mark.broker_kinds("tansu", reason=(
    "input is refused by kafkajet before a record is queued, whatever the broker"))
def test_send_batch_rejects_mismatched_lengths_and_bad_partitions(broker: EmbeddedBroker, topic_name: str) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic_name], num_partitions=2)
    with Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        with pytest.raises(ValueError, match="keys has 1 items but values has 2"):
            p.send_batch(topic_name, [b"a", b"b"], keys=[b"k"])
        with pytest.raises(InvalidPartitionError, match="Invalid partition 5 for record 1"):
            p.send_batch(topic_name, [b"a", b"b"], partitions=[0, 5])


def test_send_batch_follows_records_through_a_split_batch() -> None:
    # The batch path keeps no future per record; when the broker refuses a batch as too large and it is split,
    # result() must still report each record where it really landed.
    n = 4000
    values = [f"value-{i:05d}".encode() * 4 for i in range(n)]
    keys = [b"same-key" if i % 2 else None for i in range(n)]
    with MockCluster(brokers=1, max_message_bytes=3000) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=64 * 1024, linger_ms=50) as p:
            result = p.send_batch("t", values, keys=keys)
            mds = result.result(timeout=60)
        assert cluster.stats().get("MESSAGE_TOO_LARGE", 0) > 0
        stored = cluster.records("t", 0)
    assert result.errors() == []
    assert [md.offset for md in mds] == list(range(n))  # in input order, each at its own offset
    assert [(r.key, r.value) for r in stored] == list(zip(keys, values, strict=True))
    assert all(md.serialized_value_size == len(values[i]) for i, md in enumerate(mds))


def test_send_batch_reports_every_failed_record() -> None:
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        cluster.push_request_errors("Produce", ["INVALID_REQUIRED_ACKS"] * 10)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50, enable_idempotence=False,
                      acks=1) as p:
            result = p.send_batch("t", [b"v%d" % i for i in range(500)], partitions=[i % 2 for i in range(500)])
            errors = result.errors(timeout=30)
            with pytest.raises(KafkaError, match="INVALID_REQUIRED_ACKS|acks"):
                result.result(timeout=30)
    assert [i for i, _ in errors] == list(range(500))


def test_a_completed_batch_keeps_no_copy_of_its_records() -> None:
    # A caller holding BatchFutures (or a flush() waiting for the rest) holds their batches: once a batch is
    # done, neither its sent bytes nor its buffer may stay with it, or every record sent stays in memory.
    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, batch_max_size=16384) as p:
            results = [p.send_batch("t", [b"%06d" % i * 16 for i in range(2000)]) for _ in range(5)]
            p.flush(timeout=30)
            assert all(r.errors(timeout=30) == [] for r in results)
            batches = {id(b): b for r in results for b, _, _ in r._segments}.values()
            assert len(batches) > 10
            assert all(b.completed and b.wire is None and len(b.buf) == 0 for b in batches)


def test_send_batch_refuses_a_record_too_large_before_queueing_any() -> None:
    # The size check runs over every record first (nulls among them): a record that is too large only with
    # its headers counted must be refused too, and nothing of the call may be half sent.
    from kafkajet import RecordTooLargeError

    with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        with Producer(bootstrap_servers=cluster.bootstrap_servers, max_request_size=10_000) as p:
            values = [b"small", None, b"v" * 9_000, b"small"]
            keys = [b"k", b"k", None, None]
            with pytest.raises(RecordTooLargeError, match="larger than max.request.size"):
                p.send_batch("t", [b"ok"] * 3 + [b"x" * 20_000])
            with pytest.raises(RecordTooLargeError, match="larger than max.request.size"):
                p.send_batch("t", values, keys=keys, headers=[None, None, [("h", b"y" * 1_000)], None])
            p.send_batch("t", values, keys=keys).result(timeout=30)  # without the header it fits
        assert [r.value for r in cluster.records("t", 0)] == values
