"""The sink's options, checked without Spark or a broker: one mechanism with the source's (option_names.py)."""

from __future__ import annotations

import sys

import pytest

from kafkajet.errors import ConfigError
from kafkajet.spark.sink_options import producer_config

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def sink(**options: str) -> dict[str, str]:
    # As Spark hands them over: lower-cased keys.
    return producer_config({**SERVERS, **{k.lower(): v for k, v in options.items()}})


@pytest.mark.parametrize("options,match", [
    # The harm: a misspelt exactlyOnce wrote at-least-once without a word.
    ({"exactlyOnse": "true"}, "unknown option 'exactlyonse' for the kafkajet sink; did you mean 'exactlyOnce'\\?"),
    ({"topics": "t"}, "did you mean 'topic'\\?"),
    ({"transactionalIdPrefx": "p"}, "did you mean 'transactionalIdPrefix'\\?"),
    ({"kafka.linger.msec": "5"}, "unknown option 'kafka.linger.msec' for the kafkajet sink; did you mean "
                                 "'kafka.linger.ms'\\?"),
    ({"checkpoint": "x"}, "did you mean 'checkpointLocation'\\?"),
    ({"zzz": "x"}, "unknown option 'zzz' for the kafkajet sink\\. It takes topic, exactlyOnce"),
    ({"kafka.value.serializer": "x"}, "kafka.value.serializer is not supported"),
])
def test_an_unknown_sink_option_is_refused_with_the_closest_name(options: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        sink(**options)


def test_a_typo_arrives_lower_cased_and_the_message_says_why_it_is_not_as_typed() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'exactlyOnce'\? \(Spark passes option names lower-cased\.\) "
                                          r"It takes"):
        sink(exactlyOnse="true")
    with pytest.raises(ConfigError, match=r"did you mean 'topic'\? It takes"):  # the same in any case: no note
        sink(topics="t")


def test_the_sinks_own_options_and_those_spark_adds_pass() -> None:
    # Spark adds path (save(path)), and for a stream queryName and checkpointLocation.
    cfg = sink(topic="t", exactlyOnce="true", transactionalIdPrefix="p", path="/x", queryName="q",
               checkpointLocation="/ck", **{"kafka.linger.ms": "5", "kafka.acks": "1"})
    assert cfg == {"bootstrap.servers": "127.0.0.1:9092", "linger.ms": "5", "acks": "1"}


def test_tracing_without_the_extra_fails_at_planning_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sink(**{"kafka.opentelemetry.enable": "true"})["opentelemetry.enable"] == "true"
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if opentelemetry-api were not installed
    monkeypatch.delitem(sys.modules, "kafkajet.spark.trace_context", raising=False)
    with pytest.raises(ConfigError, match=r"pip install 'kafkajet\[otel\]'"):
        sink(**{"kafka.opentelemetry.enable": "true"})
    sink(**{"kafka.opentelemetry.enable": "false"})
