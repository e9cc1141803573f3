"""Shared fixtures: one real embedded broker (Tansu) for the session, and unique topic names."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from kafkajet.testing import EmbeddedBroker

_topic_counter = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses, so tests sharing the broker never see each other's records."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"{base}-{os.getpid()}-{next(_topic_counter)}"
