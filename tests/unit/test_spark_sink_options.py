"""The sink's options parsed once into a frozen SinkOptions, the failure options refused by the "kafkajet" format
and taken only by the exactly-once tests' "kafkajet-test-hooks" one (kafkajet.testing.spark_failures), and the data source that every Spark application with
kafkajet installed imports (pyspark_kafkajet) importing nothing heavy. No Spark session, no broker."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.requires import require

require("pyspark")

from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType  # noqa: E402

from kafkajet.errors import ConfigError  # noqa: E402
from kafkajet.spark.data_source import KafkaDataSource  # noqa: E402
from kafkajet.spark.sink_options import parse_sink_options  # noqa: E402
from kafkajet.testing.spark_failures import InjectedFailures, KafkaDataSourceWithTestHooks  # noqa: E402

SERVERS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
VALUE = StructType([StructField("value", BinaryType())])
HOOKS = {"kafkajet.test.fail.after.rows": "5", "kafkajet.test.fail.marker": "/tmp/m",
         "kafkajet.test.fail.after.commit.marker": "/tmp/c"}


def lower(**options: str) -> dict[str, str]:
    return {k.lower(): v for k, v in {**SERVERS, **options}.items()}  # as Spark hands them over


def test_the_sinks_options_parsed_once_into_a_frozen_value() -> None:
    opts = parse_sink_options(lower(topic="t", exactlyOnce="true", transactionalIdPrefix="p",
                                    **{"kafka.linger.ms": "5"}), VALUE)
    assert (opts.producer, opts.topic, opts.exactly_once, opts.formats) == (
        {"bootstrap.servers": "127.0.0.1:9092", "linger.ms": "5"}, "t", True, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.topic = "u"  # type: ignore[misc]
    assert opts.transactional_ids(streaming=True) == "p"


def test_transactional_ids_follow_the_checkpoint_of_a_stream_and_are_fresh_for_a_batch_write() -> None:
    opts = parse_sink_options(lower(topic="t", exactlyOnce="true", checkpointLocation="/ck"), VALUE)
    assert opts.transactional_ids(streaming=True) == opts.transactional_ids(streaming=True)
    assert opts.transactional_ids(streaming=True).startswith("kafkajet-spark-")
    assert opts.transactional_ids(streaming=False) != opts.transactional_ids(streaming=False)


@pytest.mark.parametrize(("options", "match"), [
    ({"exactlyOnce": "yes"}, "option exactlyOnce='yes' must be true or false"),
    ({"kafka.transactional.id": "x"}, "kafka.transactional.id is not supported by the sink"),
    ({"topic": None}, "no topic"),
])
def test_a_bad_sink_option_fails_at_planning(options: dict[str, str | None], match: str) -> None:
    given = {"topic": "t", **options}
    with pytest.raises(ConfigError, match=match):
        parse_sink_options(lower(**{k: v for k, v in given.items() if v is not None}), VALUE)


def test_a_column_of_the_wrong_type_is_refused_naming_it() -> None:
    schema = StructType([StructField("value", BinaryType()), StructField("partition", StringType())])
    with pytest.raises(ConfigError, match="column 'partition' is string; it must be integer or long"):
        parse_sink_options(lower(topic="t"), schema)
    parse_sink_options(lower(topic="t"), StructType([*VALUE.fields, StructField("partition", LongType())]))


def _source(cls: type[KafkaDataSource], options: dict[str, str]) -> KafkaDataSource:
    return cls(options)


def test_the_kafkajet_format_refuses_the_test_hooks_as_unknown_options() -> None:
    with pytest.raises(ConfigError, match="unknown option 'kafkajet.test.fail.after.rows' for the kafkajet sink"):
        _source(KafkaDataSource, lower(topic="t", **HOOKS)).sink_options(VALUE)


def test_the_test_only_format_takes_them_as_its_one_write_hook() -> None:
    source = _source(KafkaDataSourceWithTestHooks, lower(topic="t", **HOOKS))
    assert KafkaDataSourceWithTestHooks.name() == "kafkajet-test-hooks" and KafkaDataSource.name() == "kafkajet"
    assert source.write_hook() == InjectedFailures(5, "/tmp/m", "/tmp/c")
    assert source.sink_options(VALUE).producer == {"bootstrap.servers": "127.0.0.1:9092"}
    assert _source(KafkaDataSource, lower(topic="t")).write_hook() is None


def test_the_failure_hook_fails_a_task_once_per_marker_after_flushing(tmp_path: Path) -> None:
    flushed = []

    class Producer:
        def flush(self) -> None:
            flushed.append(True)

    hook = InjectedFailures(5, str(tmp_path / "m"), str(tmp_path / "c"))
    hook.sent(4, Producer())
    assert flushed == []
    with pytest.raises(RuntimeError, match="injected failure after 5 rows"):
        hook.sent(5, Producer())
    assert flushed == [True]
    hook.sent(6, Producer())  # the retried attempt: the marker is there
    with pytest.raises(RuntimeError, match="after the Kafka commit of micro-batch 3"):
        hook.committed(3)
    hook.committed(4)


def test_every_spark_application_imports_the_format_without_anything_heavy() -> None:
    # Spark imports pyspark_kafkajet in each application where kafkajet is installed, to learn its name.
    code = ("import sys, pyspark.sql.datasource; before = set(sys.modules); import pyspark_kafkajet; "
            "assert pyspark_kafkajet.DefaultSource.name() == 'kafkajet'; "
            "print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('pyarrow', 'numpy', 'fastavro', 'jsonschema', 'google') or m.startswith('kafkajet.spark.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "['kafkajet.spark.data_source']"


def test_the_functions_are_still_where_users_import_them() -> None:
    import kafkajet.spark
    from kafkajet.spark import from_avro, to_avro

    assert from_avro.__module__ == to_avro.__module__ == "kafkajet.spark.functions"
    assert kafkajet.spark.KafkaDataSource is KafkaDataSource
    with pytest.raises(AttributeError):
        kafkajet.spark.nothing  # noqa: B018


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_avro_and_the_record_by_record_columns_do_not_import_each_other() -> None:
    spark = Path(KafkaDataSource.__module__.replace(".", "/")).parent
    root = Path(__file__).resolve().parents[2]
    assert "kafkajet.spark.formats.message_columns" not in _imported_modules(root / spark / "formats" / "avro_columns.py")
    assert "kafkajet.spark.formats.avro_columns" not in _imported_modules(root / spark / "formats" / "message_columns.py")
