"""Shared fixtures: one real embedded broker (Tansu) for the session, unique topic names, MockClusters."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from kafkajet.testing import EmbeddedBroker, MockCluster
from kafkajet.testing.kdc import LocalKdc, kdc_available

_topic_counter = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="session")
def kdc() -> Iterator[LocalKdc]:
    """One local Kerberos realm for the session (tests add their own principals); `make` installs the KDC."""
    pytest.importorskip("gssapi")
    if not kdc_available():
        pytest.skip("no krb5kdc / kdb5_util / kadmin.local: `make` installs Debian's krb5-kdc, krb5-admin-server")
    with LocalKdc() as k:
        yield k


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses, so tests sharing the broker never see each other's records."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"{base}-{os.getpid()}-{next(_topic_counter)}"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[MockCluster]:
    """A MockCluster shaped by the test's `mock_cluster` marker, stopped when the test ends.

    `pytest.mark.mock_cluster(brokers=3, topics={"t": 6}, **MockCluster options)` on a module (pytestmark),
    class or test says what it needs; the nearest marker wins.
    """
    marker = request.node.get_closest_marker("mock_cluster")
    options = dict(marker.kwargs) if marker is not None else {}
    topics = options.pop("topics", {})
    with MockCluster(**options) as c:
        for name, partitions in topics.items():
            c.create_topic(name, partitions=partitions)
        yield c
