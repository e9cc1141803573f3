"""The producer configuration table: Java defaults, names, coercion, ranges and the idempotence rules."""

from __future__ import annotations

import logging
import re

import pytest

from kafkajet.config import PRODUCER_CONFIG, config_markdown, parse_producer_config
from kafkajet.errors import ConfigError

B = {"bootstrap.servers": "127.0.0.1:9092"}

JAVA_DEFAULTS = {
    "acks": -1, "enable.idempotence": True, "linger.ms": 5, "batch.size": 16384, "buffer.memory": 33554432,
    "max.block.ms": 60000, "max.request.size": 1048576, "request.timeout.ms": 30000,
    "delivery.timeout.ms": 120000, "retries": 2147483647, "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
    "max.in.flight.requests.per.connection": 5, "metadata.max.age.ms": 300000, "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000, "connections.max.idle.ms": 540000, "compression.type": "none",
}


def test_defaults_are_the_java_4x_defaults() -> None:
    cfg = parse_producer_config(B)
    for key, value in JAVA_DEFAULTS.items():
        assert cfg[key] == value, key
    assert cfg["client.id"].startswith("producer-")
    assert cfg["bootstrap.servers"] == [("127.0.0.1", 9092)]


def test_snake_case_kwargs_mean_the_java_keys() -> None:
    a = parse_producer_config(B, linger_ms=7, batch_size=100)
    b = parse_producer_config({**B, "linger.ms": 7, "batch.size": 100})
    assert a["linger.ms"] == b["linger.ms"] == a.linger_ms == 7
    assert a.batch_size == 100


@pytest.mark.parametrize("key,hint", [("linger.msec", "linger.ms"), ("bootstrap.server", "bootstrap.servers"),
                                      ("batchsize", "batch.size")])
def test_unknown_key_names_the_nearest_valid_one(key: str, hint: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown producer setting '{key}'.*did you mean '{hint}'"):
        parse_producer_config({**B, key: 1})


@pytest.mark.parametrize("key,java", [("queue.buffering.max.ms", "linger.ms"), ("batch.num.messages", "batch.size"),
                                      ("message.max.bytes", "max.request.size"),
                                      ("queue.buffering.max.kbytes", "buffer.memory")])
def test_librdkafkas_names_are_mapped_to_javas(key: str, java: str) -> None:
    # difflib finds nothing near these (or something wrong: receive.buffer.bytes for the kbytes one).
    with pytest.raises(ConfigError, match=f"unknown producer setting '{re.escape(key)}'; that is librdkafka's name: "
                                          f"kafkajet takes Java's, '{re.escape(java)}' \\("):
        parse_producer_config({**B, key: 1})
    snake_key, snake_java = key.replace(".", "_"), java.replace(".", "_")
    with pytest.raises(ConfigError, match=f"'{snake_key}'; that is librdkafka's name: kafkajet takes Java's, "
                                          f"'{snake_java}'"):
        parse_producer_config(B, **{snake_key: 1})


def test_unknown_kwarg_suggests_the_snake_case_spelling() -> None:
    with pytest.raises(ConfigError, match="did you mean 'linger_ms'"):
        parse_producer_config(B, linger_msec=5)


def test_strings_from_properties_files_are_converted() -> None:
    cfg = parse_producer_config({**B, "linger.ms": "20", "enable.idempotence": "false", "acks": "1"})
    assert cfg["linger.ms"] == 20 and cfg["enable.idempotence"] is False and cfg["acks"] == 1


@pytest.mark.parametrize("key,value,match", [
    ("linger.ms", -1, r"linger.ms=-1: must be in \[0, "),
    ("batch.size", "lots", "expected an integer"),
    ("acks", "2", "must be one of all, -1, 0, 1"),
    ("compression.type", "brotli", "must be one of none, gzip, snappy, lz4, zstd"),
    ("enable.idempotence", "yes", "expected true or false"),
    ("max.in.flight.requests.per.connection", 0, "must be in"),
    ("bootstrap.servers", "nohostport", "has no port"),
    ("bootstrap.servers", "", "is empty"),
    ("security.protocol", "SASL_SSL", "needs sasl.mechanism"),
    ("security.protocol", "TLS", "must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
])
def test_bad_values_name_the_key_and_the_rule(key: str, value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_producer_config({**B, key: value})


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(ConfigError, match="'bootstrap.servers' is required"):
        parse_producer_config({})


def test_delivery_timeout_must_cover_linger_plus_request_timeout() -> None:
    with pytest.raises(ConfigError, match="delivery.timeout.ms"):
        parse_producer_config({**B, "delivery.timeout.ms": 1000, "request.timeout.ms": 30000})


@pytest.mark.parametrize("extra", [{"acks": "1"}, {"retries": 0}, {"max.in.flight.requests.per.connection": 6}])
def test_explicit_idempotence_conflicts_are_errors(extra: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="enable.idempotence=true conflicts with"):
        parse_producer_config({**B, "enable.idempotence": True, **extra})


def test_implicit_idempotence_gives_way_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkajet.config"):
        cfg = parse_producer_config({**B, "acks": "1"})
    assert cfg["enable.idempotence"] is False
    assert "idempotence disabled because of acks=1" in caplog.text


def test_the_same_key_twice_with_different_values_is_an_error() -> None:
    with pytest.raises(ConfigError, match="set twice"):
        parse_producer_config({**B, "linger.ms": 1}, linger_ms=2)


def test_docs_table_lists_every_key() -> None:
    doc = config_markdown()
    for k in PRODUCER_CONFIG:
        assert f"`{k.name}`" in doc


def test_admin_and_fetch_share_the_common_table_and_refuse_unknown_keys() -> None:
    from kafkajet.admin import Admin
    from kafkajet.config import ADMIN_CONFIG, COMMON_CONFIG, FETCH_CONFIG
    from kafkajet.fetch import FetchClient

    common = {k.name for k in COMMON_CONFIG}
    assert common <= {k.name for k in PRODUCER_CONFIG}
    assert {k.name for k in ADMIN_CONFIG} == common == {k.name for k in FETCH_CONFIG} - {"isolation.level"}
    assert "linger.ms" not in common and "security.protocol" in common and "client.id" in common
    for client in (Admin, FetchClient):
        with pytest.raises(ConfigError, match="unknown .* setting 'foo'"):
            client({"bootstrap.servers": "h:1", "foo": 1})
        with pytest.raises(ConfigError, match="did you mean 'request.timeout.ms'"):
            client({"bootstrap.servers": "h:1", "request.timeout.msec": 1})
        with pytest.raises(ConfigError, match="did you mean 'request_timeout_ms'"):
            client(bootstrap_servers="h:1", request_timeout_msec=1)
        with pytest.raises(ConfigError, match="request.timeout.ms"):
            client({"bootstrap.servers": "h:1"}, request_timeout_ms=-5)
        with pytest.raises(ConfigError, match="linger.ms"):  # producer-only keys are not the admin's
            client({"bootstrap.servers": "h:1", "linger.ms": 5})
        with pytest.raises(ConfigError, match="bootstrap.servers"):
            client({})
    admin = Admin("127.0.0.1:9092", client_id="x", request_timeout_ms="2500")
    assert (admin.client_id, admin.request_timeout_ms) == ("x", 2500.0)
    assert Admin({"bootstrap.servers": "localhost:1"}).client_id.startswith("adminclient-")
    fetch = FetchClient({"bootstrap.servers": "[::1]:9092,h:2", "request.timeout.ms": 1500})
    assert (fetch.servers, fetch.timeout_s) == ([("::1", 9092), ("h", 2)], 1.5)


def test_bootstrap_servers_parsed_by_the_one_address_parser() -> None:
    from kafkajet.addresses import parse_servers

    for text in ("a:1,b:2", "[::1]:9", ["x:3", ("y", 4)]):
        assert parse_producer_config({"bootstrap.servers": text})["bootstrap.servers"] == parse_servers(text)
    with pytest.raises(ConfigError, match="no port"):
        parse_producer_config({"bootstrap.servers": "hostonly"})
