"""The error table is complete and faithful to Kafka's, and the hierarchy is usable."""

from __future__ import annotations

import csv
import importlib.util
import pickle
from pathlib import Path

import pytest

from kafkajet import errors
from kafkajet.errors import (
    BrokerError,
    KafkaError,
    UnknownBrokerErrorCode,
    error_for_code,
    error_for_name,
    make_error,
)

# A verbatim copy of Kafka's error table (shared/kafka-protocol/errors.tsv), kept with the tests so the
# check does not depend on where the checkout lives; the generated module must agree with it.
TABLE = Path(__file__).resolve().parent / "data" / "errors.tsv"
ROWS = list(csv.DictReader(TABLE.open(encoding="utf-8"), delimiter="\t"))


def test_the_table_is_available() -> None:
    assert len(ROWS) == 129, f"expected Kafka's 129 error rows in {TABLE}"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_code_resolves_with_its_name_and_retriable_flag(row: dict[str, str]) -> None:
    code = int(row["code"])
    cls = error_for_code(code)
    if code == 0:
        assert cls is None
        return
    assert cls is not None and issubclass(cls, BrokerError) and issubclass(cls, KafkaError)
    assert cls.code == code
    assert cls.name == row["name"]
    assert cls.retriable is (row["retriable"] == "true")
    assert error_for_name(row["name"]) is cls


def test_invalid_metadata_flags_follow_javas_hierarchy() -> None:
    assert errors.NotLeaderOrFollowerError.invalid_metadata
    assert errors.UnknownTopicOrPartitionError.invalid_metadata
    assert errors.LeaderNotAvailableError.invalid_metadata
    assert not errors.RequestTimedOutError.invalid_metadata
    assert not errors.MessageTooLargeError.invalid_metadata


def test_unknown_code_keeps_its_number_and_says_so() -> None:
    err = make_error(9999)
    assert isinstance(err, UnknownBrokerErrorCode)
    assert err.code == 9999
    assert "unknown broker error code 9999" in str(err)
    assert error_for_code(9999) is UnknownBrokerErrorCode
    assert make_error(0) is None


def test_broker_errors_pickle_with_their_message() -> None:
    # Spark ships task failures between processes by pickling them.
    err = make_error(6, "t-0")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err) and back.code == 6


def test_timeouts_carry_their_cause() -> None:
    cause = make_error(6, "t-0")
    err = errors.DeliveryTimeoutError("expired", cause)
    assert err.cause is cause and err.__cause__ is cause
    assert "NOT_LEADER_OR_FOLLOWER" in str(err)
    assert isinstance(err, TimeoutError) and isinstance(err, errors.KafkaTimeoutError)


def test_the_generated_module_is_what_the_generator_makes_of_the_table(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_errors", root / "tools" / "gen_errors.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.main(TABLE, tmp_path / "broker.py")
    assert (tmp_path / "broker.py").read_text() == (root / "kafkajet" / "errors" / "broker.py").read_text()


def test_error_classes_name_the_public_module() -> None:
    # Tracebacks show "kafkajet.errors.InvalidTopicError", the place users import it from, not a private file.
    assert errors.InvalidTopicError.__module__ == "kafkajet.errors"
    assert errors.ConfigError.__module__ == "kafkajet.errors"
    assert errors.InvalidTopicError is pickle.loads(pickle.dumps(errors.InvalidTopicError))


def test_every_error_the_readme_names_is_importable_from_kafkajet() -> None:
    # A user reading the README or the docs' user guide writes `from kafkajet import <what it named>`.
    import re

    import kafkajet

    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *(root / "docs").glob("*.md")]  # docs/api/ names the whole hierarchy
    text = "".join(page.read_text(encoding="utf-8") for page in pages)
    named = set(re.findall(r"`([A-Z][A-Za-z]*Error)`", text))
    assert {"IllegalStateError", "ProducerFencedError"} <= named, named
    missing = sorted(n for n in named if n not in kafkajet.__all__ or getattr(kafkajet, n) is not getattr(errors, n))
    assert not missing, f"named in README.md or docs/ but not importable from kafkajet: {missing}"


# --- Java's error categories (KIP-1050), placed as the Java 4.4 client places them ----------------------

JAVA_ERRORS = Path(__file__).resolve().parents[2] / "tools" / "java-errors-4.4.0.tsv"


def _java_rows() -> list[dict[str, str]]:
    lines = JAVA_ERRORS.read_text(encoding="utf-8").splitlines()
    return list(csv.DictReader((line for line in lines if not line.startswith("#")), delimiter="\t"))


JAVA_ROWS = _java_rows()

# Written down from the kafka-clients 4.4.0 jar (org.apache.kafka.common.errors.*, each code's exception class
# and its superclasses): every code under each category. Pinned here as well as in the data file, so that a
# data file dumped wrongly fails too.
JAVA_4_4_APPLICATION_RECOVERABLE = {
    "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "INVALID_PRODUCER_EPOCH", "INVALID_PRODUCER_ID_MAPPING",
    "FENCED_INSTANCE_ID", "PRODUCER_FENCED"}
JAVA_4_4_REFRESH_RETRIABLE = {
    "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "REPLICA_NOT_AVAILABLE",
    "NETWORK_EXCEPTION", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "KAFKA_STORAGE_ERROR",
    "LISTENER_NOT_FOUND", "FENCED_LEADER_EPOCH", "PREFERRED_LEADER_NOT_AVAILABLE", "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    "ELECTION_NOT_NEEDED", "UNKNOWN_TOPIC_ID", "INCONSISTENT_TOPIC_ID"}
JAVA_4_4_TRANSACTION_ABORTABLE = {"TRANSACTION_ABORTABLE"}


def test_the_java_hierarchy_is_written_down_from_kafka_4_4_0() -> None:
    assert JAVA_ERRORS.read_text(encoding="utf-8").startswith("# from kafka-clients-4.4.0.jar\n")
    assert [int(r["code"]) for r in JAVA_ROWS] == [-1, *range(1, 137)]  # NONE left out


def test_the_pinned_categories_are_the_data_files() -> None:
    def under(java_class: str) -> set[str]:
        return {r["name"] for r in JAVA_ROWS if java_class in (r["java_class"], *r["java_superclasses"].split())}

    assert under("ApplicationRecoverableException") == JAVA_4_4_APPLICATION_RECOVERABLE
    assert under("RefreshRetriableException") == JAVA_4_4_REFRESH_RETRIABLE
    assert under("TransactionAbortableException") == JAVA_4_4_TRANSACTION_ABORTABLE


@pytest.mark.parametrize("row", JAVA_ROWS, ids=lambda r: r["name"])
def test_every_code_is_placed_where_java_4_4_places_it(row: dict[str, str]) -> None:
    cls = error_for_code(int(row["code"]))
    assert cls is not None and cls is not UnknownBrokerErrorCode and cls.name == row["name"]
    name = row["name"]
    assert issubclass(cls, errors.ApplicationRecoverableError) is (name in JAVA_4_4_APPLICATION_RECOVERABLE)
    assert issubclass(cls, errors.RefreshRetriableError) is (name in JAVA_4_4_REFRESH_RETRIABLE)
    assert issubclass(cls, errors.TransactionAbortableError) is (name in JAVA_4_4_TRANSACTION_ABORTABLE)
    supers = row["java_superclasses"].split()
    assert cls.retriable is ("RetriableException" in supers)
    assert cls.invalid_metadata is ("InvalidMetadataException" in supers)
    assert issubclass(cls, BrokerError)


def test_the_categories_are_bases_existing_except_clauses_still_catch() -> None:
    import kafkajet

    fenced = make_error(errors.ProducerFencedError.code, "fenced")
    assert isinstance(fenced, errors.ProducerFencedError) and isinstance(fenced, errors.ApplicationRecoverableError)
    assert isinstance(fenced, BrokerError) and fenced.code == 90
    moved = make_error(errors.NotCoordinatorError.code)
    assert isinstance(moved, errors.RefreshRetriableError) and moved.retriable
    assert errors.RefreshRetriableError.retriable and not errors.ApplicationRecoverableError.retriable
    assert errors.TransactionAbortableError.code == 120
    for name in ("ApplicationRecoverableError", "RefreshRetriableError", "TransactionAbortableError"):
        assert getattr(kafkajet, name) is getattr(errors, name) and name in kafkajet.__all__


def test_the_data_file_is_what_the_kafka_clients_jar_says(tmp_path: Path) -> None:
    """Dumps the hierarchy from the jar `make kafka` fetched again (javac and one JVM: about 2 s)."""
    import shutil

    from kafkajet.testing.apache_kafka import ApacheKafkaUnavailable, find_kafka_libs

    try:
        libs = find_kafka_libs()
    except ApacheKafkaUnavailable as e:
        pytest.skip(str(e))
    if shutil.which("javac") is None:
        pytest.skip("no javac: the jar's hierarchy is compared by a small Java program")
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_errors", root / "tools" / "gen_errors.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.dump_java(libs, tmp_path / "java-errors.tsv")
    assert (tmp_path / "java-errors.tsv").read_text(encoding="utf-8") == JAVA_ERRORS.read_text(encoding="utf-8")
