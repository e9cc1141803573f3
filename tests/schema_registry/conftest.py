"""A registry per test module (in memory); tests that need persistence start their own on the broker.

`ours` and `theirs` are kafkajet's and confluent-kafka's clients of that registry, for the serializer
tests that check the two produce and read the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

from kafkajet.schema_registry import SchemaRegistryClient
from kafkajet.testing import SchemaRegistry


@pytest.fixture(scope="module")
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r


@pytest.fixture
def ours(registry: SchemaRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


@pytest.fixture
def theirs(registry: SchemaRegistry) -> ConfluentClient:
    return ConfluentClient({"url": registry.url})
