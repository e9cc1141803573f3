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
