"""A registry per test module (in memory); tests that need persistence start their own on the broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkajet.testing import SchemaRegistry


@pytest.fixture(scope="module")
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r
