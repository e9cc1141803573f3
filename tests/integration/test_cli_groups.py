"""`kafkajet groups --describe --all-groups` and `--reset-offsets` (kafka-consumer-groups) as a subprocess against the
real broker: offsets are committed and read back with confluent-kafka, records written with it too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafkajet.admin import Admin
from kafkajet.testing import ApacheKafka, EmbeddedBroker
from tests.helpers.readback import committed_offsets
from tests.helpers.waiting import wait_for
from tests.integration.test_cli import cli

TS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def _commit(broker: EmbeddedBroker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def _committed(broker: EmbeddedBroker, group: str, topic: str) -> list[int]:
    return committed_offsets(broker.bootstrap_servers, group, topic, 2)


def _fill(broker: EmbeddedBroker, topic: str, partitions: int, per_partition: int) -> None:
    """per_partition records in each partition, the i-th at TS + i seconds."""
    from confluent_kafka import Producer

    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics(topic, num_partitions=partitions, timeout_s=30, configs={"retention.ms": "-1"})  # TS is 2023
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, b"%d" % i, partition=part, timestamp=TS + i * 1000)
    assert p.flush(30) == 0


@pytest.fixture
def group(broker: EmbeddedBroker, topic_name: str) -> str:
    """A group without members at offsets 2 and 5 of a topic with 5 records in each of its 2 partitions."""
    _fill(broker, topic_name, 2, 5)
    name = topic_name + "-g"
    _commit(broker, name, {(topic_name, 0): 2, (topic_name, 1): 5})
    return name


def _groups(broker: EmbeddedBroker, *args: str) -> tuple[int, list[list[str]], str]:
    r = cli("groups", "--bootstrap-server", broker.bootstrap_servers, *args)
    return r.returncode, [line.split() for line in r.stdout.splitlines()], r.stderr


def test_describe_all_groups_shows_each_group(broker: EmbeddedBroker, topic_name: str, group: str) -> None:
    other = topic_name + "-other"
    _commit(broker, other, {(topic_name, 1): 1})
    code, rows, err = _groups(broker, "--describe", "--all-groups")
    assert code == 0, err
    idle = ["-", "-", "-"]  # no member holds these partitions
    assert [group, topic_name, "0", "2", "5", "3", *idle] in rows and [group, topic_name, "1", "5", "5", "0", *idle] in rows
    assert [other, topic_name, "1", "1", "5", "4", *idle] in rows
    assert rows.count(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                       "CLIENT-ID"]) >= 2
    assert [] in rows  # a blank line between two groups' tables


def test_reset_offsets_is_a_dry_run_unless_executed(broker: EmbeddedBroker, topic_name: str, group: str) -> None:
    code, rows, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name, "--to-earliest")
    assert code == 0, err
    assert rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, topic_name, "0", "0"],
                    [group, topic_name, "1", "0"]]
    assert "--execute" in err
    assert _committed(broker, group, topic_name) == [2, 5]  # nothing changed

    code, rows, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", f"{topic_name}:1",
                              "--to-earliest", "--execute")
    assert code == 0, err
    assert rows[1:] == [[group, topic_name, "1", "0"]] and "WARN" not in err
    assert _committed(broker, group, topic_name) == [2, 0]  # only the partition named


def test_reset_offsets_to_latest_and_shift_by(broker: EmbeddedBroker, topic_name: str, group: str) -> None:
    code, _, err = _groups(broker, "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-1",
                           "--execute")
    assert code == 0, err
    assert _committed(broker, group, topic_name) == [1, 4]
    code, rows, err = _groups(broker, "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "3",
                              "--execute")
    assert code == 0, err
    assert rows[1:] == [[group, topic_name, "0", "4"], [group, topic_name, "1", "5"]]  # kept within the log
    assert "outside the log" in err
    assert _committed(broker, group, topic_name) == [4, 5]
    code, _, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name, "--to-latest",
                           "--dry-run")
    assert code == 0, err
    code, _, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", f"{topic_name}:0",
                           "--to-offset", "0", "--execute")
    assert code == 0, err
    assert _committed(broker, group, topic_name) == [0, 5]
    code, _, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name, "--to-latest",
                           "--execute")
    assert code == 0, err
    assert _committed(broker, group, topic_name) == [5, 5]


@pytest.mark.broker_kinds("apache", reason="Tansu answers ListOffsets by timestamp with offset 0 whatever the "
                                           "time (the Spark source's test says the same)")
def test_reset_offsets_to_datetime(broker: EmbeddedBroker, topic_name: str, group: str) -> None:
    # 22:13:21.5Z is between the records at TS + 1 s and TS + 2 s: the first at or after it is offset 2.
    code, rows, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name,
                              "--to-datetime", "2023-11-14T22:13:21.500Z", "--execute")
    assert code == 0, err
    assert rows[1:] == [[group, topic_name, "0", "2"], [group, topic_name, "1", "2"]]
    assert _committed(broker, group, topic_name) == [2, 2]
    # TS + 1 s exactly, written with a +02:00 offset: that record itself.
    code, rows, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name,
                              "--to-datetime", "2023-11-15T00:13:21.000+02:00")
    assert code == 0 and rows[1:] == [[group, topic_name, "0", "1"], [group, topic_name, "1", "1"]], err


def test_reset_offsets_to_a_datetime_after_every_record_is_the_end(broker: EmbeddedBroker, topic_name: str,
                                                                   group: str) -> None:
    code, rows, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name,
                              "--to-datetime", "2100-01-01T00:00:00Z")
    assert code == 0 and rows[1:] == [[group, topic_name, "0", "5"], [group, topic_name, "1", "5"]], err
    code, _, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name,
                           "--to-datetime", "yesterday")
    assert code == 2 and "ISO 8601" in err


@contextmanager
def _live_member(broker: EmbeddedBroker, topic: str, group: str, **config: Any) -> Iterator[None]:
    """A consumer holding both partitions of `topic` in `group`, polling (as a live member does) until the block
    ends. librdkafka, not kafka-python: kafka-python 3.0.12 can lose its own assignment when a poll's timeout ends
    while it leads a join (it marks the assignment done before it applies it; seen under load on Apache Kafka,
    where the member then holds nothing). The 6 s session: Tansu assigns a new member only after a session's time."""
    from confluent_kafka import Consumer

    member = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                       "enable.auto.commit": False, "session.timeout.ms": 6000, **config})
    member.subscribe([topic])
    stop = threading.Event()
    poller = threading.Thread(target=lambda: [member.poll(0.1) for _ in iter(stop.is_set, True)], daemon=True)

    def holds_both() -> bool:
        member.poll(0.1)  # the group's protocol runs inside poll(), as in Java's consumer
        return len(member.assignment()) == 2

    try:
        wait_for(holds_both, 60, "the member holding both partitions")
        poller.start()
        yield
    finally:
        stop.set()
        if poller.is_alive():
            poller.join(30)
        member.close()


def test_reset_offsets_refuses_a_group_with_active_members(broker: EmbeddedBroker, topic_name: str,
                                                           group: str) -> None:
    with _live_member(broker, topic_name, group):
        code, rows, err = _groups(broker, "--reset-offsets", "--group", group, "--topic", topic_name,
                                  "--to-earliest", "--execute")
    assert code == 1, (rows, err)
    assert "active members" in err and "Traceback" not in err
    assert _committed(broker, group, topic_name) == [2, 5]


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's own option parsing and wording, refused before a broker is asked"))
def test_reset_offsets_usage_mistakes_exit_2(broker: EmbeddedBroker) -> None:
    for args, says in ((("--reset-offsets", "--group", "g", "--to-earliest"), "--topic TOPIC or --all-topics"),
                       (("--reset-offsets", "--group", "g", "--topic", "t"), "needs one of --to-earliest"),
                       (("--reset-offsets", "--topic", "t", "--to-earliest"), "--group NAME or --all-groups"),
                       (("--describe", "--group", "g", "--to-earliest"), "goes with --reset-offsets"),
                       (("--reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--dry-run",
                         "--execute"), "not allowed with")):
        code, _, err = _groups(broker, *args)
        assert code == 2, (args, err)
        assert says in err and "Traceback" not in err, err


def test_delete_removes_groups_with_kafkas_words_and_names_each_refusal(broker: EmbeddedBroker, topic_name: str,
                                                                         group: str) -> None:
    other = topic_name + "-other"
    _commit(broker, other, {(topic_name, 0): 1})
    r = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--delete", "--group", group, "--group", other)
    assert (r.returncode, r.stdout) == (0, f"Deletion of requested consumer groups ('{group}', '{other}') was "
                                           "successful.\n"), r.stderr
    with Admin(broker.bootstrap_servers) as admin:
        listed = {g.group_id for g in admin.list_consumer_groups(30)}
        assert group not in listed and other not in listed
        assert admin.list_consumer_group_offsets(group, [(topic_name, 0), (topic_name, 1)], timeout_s=30) == {}
    if not isinstance(broker, ApacheKafka):
        return  # Tansu answers deleting a group it does not know as done: nothing is refused there
    # Deleted already: the broker's answer (GROUP_ID_NOT_FOUND) is named per group, and the run fails.
    r = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--delete", "--group", group)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Deletion of some consumer groups failed:" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout.startswith(f"* Group '{group}' could not be deleted due to: GroupIdNotFoundError"), r.stdout


@pytest.mark.broker_kinds("apache", reason=(
    "Tansu's DescribeGroups names a member but not its client id, host or assignment (all empty), so no "
    "partition can be matched to it there; Kafka's own tool is the reference on Apache Kafka"))
def test_describe_names_the_live_member_holding_each_partition_as_kafkas_tool(broker: EmbeddedBroker,
                                                                               topic_name: str, group: str) -> None:
    with _live_member(broker, topic_name, group, **{"client.id": "cli-member"}):
        code, rows, err = _groups(broker, "--describe", "--group", group)
        m_code, m_rows, m_err = _groups(broker, "--describe", "--group", group, "--members")
        assert isinstance(broker, ApacheKafka)
        java = broker.run_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                               broker.bootstrap_servers, "--describe", "--group", group)
    assert code == 0 and m_code == 0, (err, m_err)
    assert rows[0][6:] == ["CONSUMER-ID", "HOST", "CLIENT-ID"]
    (member_id,) = {row[6] for row in rows[1:]}
    assert member_id.startswith("cli-member-"), rows
    for partition, offsets in (("0", ["2", "5", "3"]), ("1", ["5", "5", "0"])):
        row = [group, topic_name, partition, *offsets, member_id]
        assert [r[:7] for r in rows[1:]].count(row) == 1, rows
    assert {(r[7], r[8]) for r in rows[1:]} == {(rows[1][7], "cli-member")} and rows[1][7].startswith("/")
    assert m_rows == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                      [group, member_id, rows[1][7], "cli-member", "2"]]
    # The reference: the same rows, word for word, as Kafka's own tool prints.
    assert java.returncode == 0, java.stderr.decode()
    java_rows = [line.split() for line in java.stdout.decode().splitlines() if line.strip()]
    assert sorted(java_rows[1:]) == sorted(rows[1:]) and java_rows[0] == rows[0], (java_rows, rows)
