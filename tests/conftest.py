"""Shared fixtures: the real brokers (Apache Kafka and the embedded Tansu), unique topic names, MockClusters.

Every test that takes `broker` runs once on each kind of broker: Apache Kafka (the reference: one node,
started once per run) and Tansu (what `kafkajet broker` and the demo run). A test that holds for one kind only
says which and why with `@pytest.mark.broker_kinds("tansu", reason=...)`. KAFKAJET_BROKERS=apache (or tansu)
narrows a run by hand; CI runs both. Apache Kafka's jars come from `make kafka`: without them a test that needs
the broker fails with the line that says what to run, it is never skipped.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from kafkajet.testing import EmbeddedBroker, MockCluster
from kafkajet.testing.apache_kafka import C1_ONLY, ApacheKafka
from kafkajet.testing.kdc import LocalKdc, kdc_available
from tests.helpers.apache import running_apache_kafka

_topic_counter = itertools.count()

# Hypothesis' per-example deadline (200 ms) is a timed assertion: on a busy machine (the suite runs its workers
# side by side, CI beside other jobs) a round trip of a few bytes once took 273 ms. The properties are what is
# tested; how fast an example runs is the benchmarks' business.
settings.register_profile("kafkajet", deadline=None)
settings.load_profile("kafkajet")

# The suite keeps both cores busy, and each Spark JVM it starts (sessions, the demo, the README's examples,
# every one a subprocess that inherits this) lives a minute or two: long enough for C2 to spend its CPU
# compiling, too short to repay it. C1 only, as the suite's Kafka tools and brokers run (tests/helpers/apache.py),
# took the demo from 64-78 s of CPU to 50-52 s on this machine. A user's own SPARK_SUBMIT_OPTS wins.
os.environ.setdefault("SPARK_SUBMIT_OPTS", C1_ONLY)

BROKER_KINDS = ("apache", "tansu")


def _chosen_kinds() -> tuple[str, ...]:
    wanted = os.environ.get("KAFKAJET_BROKERS")
    if not wanted:
        return BROKER_KINDS
    kinds = tuple(k.strip() for k in wanted.split(",") if k.strip())
    unknown = [k for k in kinds if k not in BROKER_KINDS]
    if unknown or os.environ.get("CI"):
        raise pytest.UsageError(f"KAFKAJET_BROKERS={wanted!r}: name {' and/or '.join(BROKER_KINDS)}; CI runs both"
                                if unknown else "KAFKAJET_BROKERS narrows a run by hand; CI runs every broker kind")
    return kinds


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "broker_kinds(*kinds, reason): the `broker` kinds a test holds for, and why")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups it adds (loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the `broker` runs a test's broker_kinds marker rules out (with its reason, so it is never silent)."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("broker") if callspec is not None else None
        marker = item.get_closest_marker("broker_kinds")
        if kind is not None and marker is not None:
            if not marker.kwargs.get("reason"):
                raise pytest.UsageError(f"{item.nodeid}: broker_kinds needs reason= (why the test is specific)")
            if kind not in marker.args:
                dropped.append(item)
                continue
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_worker_group(item)))


# The Spark tier's files in two halves of about 400 s each (quiet machine, 2 cores); the rest is the other half.
_SPARK_FIRST_HALF = {"test_spark.py", "test_protobuf_json_schema.py", "test_standalone_cluster.py",
                     "test_group_commit.py", "test_avro_functions.py", "test_opentelemetry.py"}


def _worker_group(item: pytest.Item) -> str:
    """Which tests `make test` runs in one pytest-xdist worker (--dist loadgroup): a file's tests together, so a
    module's fixtures start once, and the Spark tests in two groups, so at most two Spark sessions run at once
    (three beside the brokers on 2 cores risk a Python worker not connecting back within Spark's fixed 10 s;
    one group of them all was the run's longest chain, 27 minutes on a busy machine)."""
    path = item.path.relative_to(item.config.rootpath).as_posix()
    if path.startswith("tests/spark/"):
        return "spark-1" if item.path.name in _SPARK_FIRST_HALF else "spark-2"
    return path


@pytest.fixture(scope="session")
def apache_kafka() -> Iterator[ApacheKafka]:
    """One Apache Kafka node for the run, started the first time a test asks for it."""
    # The coordinator looks for transactions past their timeout every second, not every 10 s (its default),
    # so the test of a transaction the broker times out takes seconds.
    with running_apache_kafka(broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def tansu() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture(scope="session", params=_chosen_kinds())
def broker(request: pytest.FixtureRequest) -> ApacheKafka | EmbeddedBroker:
    """A real broker: Apache Kafka, then Tansu (the test runs once on each)."""
    fixture = "apache_kafka" if request.param == "apache" else "tansu"
    return request.getfixturevalue(fixture)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def kdc() -> Iterator[LocalKdc]:
    """One local Kerberos realm for the session (tests add their own principals); `make test` installs the KDC.
    Without it the Kerberos tests fail, naming what to install: a skip would hide a missing dependency."""
    try:
        import gssapi  # noqa: F401
    except ImportError as e:
        pytest.fail(f"the Kerberos tests need the gssapi package (`pip install 'kafkajet[gssapi]'`): {e}", pytrace=False)
    if not kdc_available():
        pytest.fail("no krb5kdc / kdb5_util / kadmin.local / kinit: install MIT Kerberos' KDC (Debian: `make krb5`, "
                    "or apt-get install krb5-kdc krb5-admin-server krb5-user; Fedora: krb5-server krb5-workstation)",
                    pytrace=False)
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
