"""The Schema Registry client's keys are one table (kafkajet.config.SCHEMA_REGISTRY_CONFIG): the client refuses
a key it does not list, and the Spark source and sink take the registry settings their options carry from it,
so an option Spark accepts is never one the client then refuses."""

from __future__ import annotations

import pytest

from kafkajet.config import SCHEMA_REGISTRY_KEYS, SCHEMA_REGISTRY_OPTIONS
from kafkajet.errors import ConfigError
from kafkajet.schema_registry import SchemaRegistryClient
from kafkajet.spark import registered_columns


def test_every_registry_option_spark_carries_is_a_key_the_client_takes() -> None:
    conf = registered_columns.registry_conf({k: "x" for k in registered_columns.REGISTRY_KEYS})
    assert set(conf) <= SCHEMA_REGISTRY_KEYS
    # The client checks its keys first: any refusal past that one is of a value ("x"), not of a key.
    with pytest.raises(ConfigError) as refused:
        SchemaRegistryClient(conf)
    assert "unknown schema registry setting" not in str(refused.value)


def test_the_spark_options_are_the_tables_option_keys() -> None:
    assert registered_columns.REGISTRY_KEYS == SCHEMA_REGISTRY_OPTIONS
    assert set(SCHEMA_REGISTRY_OPTIONS) <= set(registered_columns.SOURCE_FORMAT_OPTIONS)
    assert set(SCHEMA_REGISTRY_OPTIONS) <= set(registered_columns.SINK_FORMAT_OPTIONS)
    assert "schema.registry.url" in SCHEMA_REGISTRY_OPTIONS
