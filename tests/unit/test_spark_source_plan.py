"""The Spark source's options and offset arithmetic, without Spark or a broker (Spark's own rules)."""

from __future__ import annotations

import pytest

from kafkajet.errors import ConfigError
from kafkajet.spark.offsets import OffsetRange, data_loss, from_json, rate_limit, split, to_json
from kafkajet.spark.source_options import parse_source_options

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool = False, **options: str) -> object:
    return parse_source_options({**SERVERS, **{k.lower(): v for k, v in options.items()}}, streaming=streaming)


@pytest.mark.parametrize("options,match", [
    ({}, "exactly one of the options subscribe"),
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "given: subscribe, assign"),
    ({"subscribe": " , "}, "names no topic"),
    ({"subscribePattern": "a["}, "is not a regex"),
    ({"assign": "[0, 1]"}, "expected JSON like"),
    ({"subscribe": "a", "startingOffsets": "{bad"}, "startingOffsets='{bad'"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "not allowed for batch queries"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets=earliest is not allowed"),
    ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "-2 \\(earliest\\) is not allowed"),
    ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, "-1 \\(latest\\) is not allowed"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger=0 must be at least 1"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "ten"}, "option maxOffsetsPerTrigger='ten' must be an integer"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, "above maxOffsetsPerTrigger"),
    ({"subscribe": "a", "failOnDataLoss": "yes"}, "option failOnDataLoss='yes' must be true or false"),
    ({"subscribe": "a", "maxTriggerDelay": "soon"}, "maxTriggerDelay='soon'"),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "maybe"}, "expected error or latest"),
    ({"subscribe": "a", "topics": "a"}, "unknown option 'topics'"),
    # Spark passes names lower-cased; the suggestion is spelled as documented.
    ({"subscribe": "a", "startingOffset": "earliest"}, "unknown option 'startingoffset' for the kafkajet source; "
                                                       "did you mean 'startingOffsets'\\?"),
    ({"subscribe": "a", "failondatalos": "false"}, "did you mean 'failOnDataLoss'\\?"),
    ({"subscribe": "a", "kafka.isolation.levle": "read_committed"}, "did you mean 'kafka.isolation.level'\\?"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "set the source option startingOffsets"),
    ({"subscribe": "a", "kafka.value.deserializer": "x"}, "values are always read as binary"),
    ({"subscribe": "a", "kafka.fetch.min.bytes": "1"}, "unknown option 'kafka.fetch.min.bytes' for the kafkajet source"),
    ({"subscribe": "a", "kafka.isolation.level": "read_most"}, "expected read_uncommitted or read_committed"),
    ({"subscribe": "a", "kafka.security.protocol": "PIGEON"}, "security.protocol"),
])
def test_planning_errors_name_the_option_and_the_fix(options: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse(**options)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers is required"):
        parse_source_options({"subscribe": "a"}, streaming=False)


def test_a_stream_takes_no_ending_offsets() -> None:
    with pytest.raises(ConfigError, match="for batch queries"):
        parse(streaming=True, subscribe="a", endingOffsets="latest")


def test_defaults_are_sparks() -> None:
    batch = parse(subscribe="a, b")
    assert batch.subscription.topics == ("a", "b")  # type: ignore[attr-defined]
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")  # type: ignore[attr-defined]
    assert batch.fail_on_data_loss and not batch.include_headers  # type: ignore[attr-defined]
    assert "headers" not in batch.schema  # type: ignore[attr-defined]
    assert batch.max_trigger_delay_ms == 15 * 60_000  # type: ignore[attr-defined]
    assert batch.fetch_config["isolation.level"] == "read_uncommitted"  # type: ignore[attr-defined]
    stream = parse(streaming=True, subscribePattern="ev-.*", includeHeaders="true", maxTriggerDelay="30s")
    assert stream.starting.kind == "latest" and stream.include_headers  # type: ignore[attr-defined]
    assert stream.schema.endswith("headers array<struct<key: string, value: binary>>")  # type: ignore[attr-defined]
    assert stream.max_trigger_delay_ms == 30_000  # type: ignore[attr-defined]
    sub = stream.subscription  # type: ignore[attr-defined]
    assert sub.matches("ev-1") and not sub.matches("x-ev-1") and not sub.matches("ev")


def test_timestamps_take_precedence_over_offsets_as_in_spark() -> None:
    opts = parse(subscribe="a", startingOffsets="earliest", startingOffsetsByTimestamp='{"a": {"0": 5}}',
                 startingTimestamp="1000")
    assert opts.starting.kind == "timestamp" and opts.starting.timestamp == 1000  # type: ignore[attr-defined]
    opts = parse(subscribe="a", startingOffsets="earliest", startingOffsetsByTimestamp='{"a": {"0": 5}}')
    assert opts.starting.kind == "timestamps" and opts.starting.offsets == {("a", 0): 5}  # type: ignore[attr-defined]


def test_assign_lists_partitions_per_topic() -> None:
    sub = parse(assign='{"b": [2, 0], "a": [1]}').subscription  # type: ignore[attr-defined]
    assert sub.assigned == (("a", 1), ("b", 0), ("b", 2)) and sub.topics == ("a", "b")


def test_offsets_round_trip_through_sparks_json() -> None:
    offsets = {("t", 1): 20, ("t", 0): 5, ("u", 0): 0}
    assert to_json(offsets) == {"t": {"0": 5, "1": 20}, "u": {"0": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_rate_limit_shares_in_proportion_and_never_starves_a_partition() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 900, ("t", 1): 99, ("t", 2): 101}
    out = rate_limit(start, latest, 100)
    # 900, 99 and 1 waiting of 1000: 90, 9.9 -> 9, and 0.1 -> 1 (a small partition still moves).
    assert out == {("t", 0): 90, ("t", 1): 9, ("t", 2): 101}
    assert rate_limit(start, latest, 10_000) == latest
    assert rate_limit(start, {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}, 5) == {("t", 0): 0, ("t", 1): 0,
                                                                               ("t", 2): 100}


def test_split_by_max_records_then_up_to_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 100), OffsetRange("t", 2, 5, 5)]
    assert split(ranges, None, None) == ranges[:2]  # empty ranges are no task
    parts = split(ranges, None, 300)
    assert [(r.partition, r.start, r.end) for r in parts] == [(0, 0, 250), (0, 250, 500), (0, 500, 750),
                                                              (0, 750, 1000), (1, 0, 100)]
    parts = split(ranges, 11, None)
    assert [(r.partition, r.size) for r in parts] == [(0, 100)] * 10 + [(1, 100)]
    assert split(ranges, 2, None) == ranges[:2]  # already enough tasks
    covered = sorted((r.partition, o) for r in split(ranges, 7, 333) for o in range(r.start, r.end))
    assert covered == [(0, o) for o in range(1000)] + [(1, o) for o in range(100)]


def test_data_loss_is_deleted_offsets_or_offsets_past_the_end() -> None:
    assert data_loss(("t", 0), 10, 10, 20) is None and data_loss(("t", 0), 20, 10, 20) is None
    assert "offsets 5 to 9 are no longer in Kafka" in str(data_loss(("t", 0), 5, 10, 20))
    assert "offset 21 is past the end of the log (20)" in str(data_loss(("t", 0), 21, 10, 20))
