"""Bootstrap address parsing and the reconnect backoff curve."""

from __future__ import annotations

import random

import pytest

from kafkajet.addresses import parse_servers
from kafkajet.backoff import ExponentialBackoff
from kafkajet.errors import ConfigError


def test_parse_servers_accepts_strings_lists_and_pairs() -> None:
    assert parse_servers("a:1, b:2,") == [("a", 1), ("b", 2)]
    assert parse_servers(["a:1", ("b", 2)]) == [("a", 1), ("b", 2)]
    assert parse_servers("[::1]:9092") == [("::1", 9092)]
    assert parse_servers([("::1", 9092)]) == [("::1", 9092)]


@pytest.mark.parametrize("bad", ["", "host", "host:", ":9092", "host:x", "host:70000", "[::1]9092", [1]])
def test_parse_servers_rejects_bad_entries_naming_them(bad: object) -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        parse_servers(bad)


def test_parse_servers_takes_a_listener_scheme_as_librdkafka_does() -> None:
    # Copied from a broker's listeners= line; once the scheme stayed in the host name and failed to resolve.
    assert parse_servers("PLAINTEXT://a:1,ssl://b:2, SASL_SSL://[::1]:3,SASL_PLAINTEXT://c:4") == [
        ("a", 1), ("b", 2), ("::1", 3), ("c", 4)]
    with pytest.raises(ConfigError, match=r"'http://a:1': http:// is not a Kafka listener scheme; give host:port"):
        parse_servers("http://a:1")
    with pytest.raises(ConfigError, match="'PLAINTEXT://a' has no port"):
        parse_servers("PLAINTEXT://a")


def test_backoff_doubles_with_jitter_and_caps() -> None:
    backoff = ExponentialBackoff(50, 2, 1000, 0.2, rng=random.Random(1))
    for attempt, base in enumerate([50, 100, 200, 400, 800]):
        values = [backoff.backoff(attempt) for _ in range(200)]
        assert base * 0.8 <= min(values) < base * 0.9 and base * 1.1 < max(values) <= base * 1.2
    capped = [backoff.backoff(50) for _ in range(200)]
    assert max(capped) == 1000 and min(capped) >= 800
    assert ExponentialBackoff(100, 2, 100, 0.2).backoff(7) == 100  # no room to grow: no jitter either
