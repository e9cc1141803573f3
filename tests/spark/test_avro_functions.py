"""kafkajet.spark.from_avro / to_avro on ordinary DataFrames: in the classic session, and on Spark Connect
(where py4j is not available), against kafkajet's registry, with confluent-kafka's deserializer as referee."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkajet.schema_registry import SchemaRegistryClient
from kafkajet.spark import from_avro, to_avro
from kafkajet.testing import SchemaRegistry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r


def test_to_avro_registers_and_from_avro_reads_back_and_confluent_agrees(spark: Any,
                                                                         registry: SchemaRegistry) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    df = spark.range(30, numPartitions=3).selectExpr(
        "named_struct('id', id, 'name', concat('n', cast(id as string)), "
        "'score', if(id % 3 = 0, null, cast(id as double)), 'at', timestamp_millis(1700000000000 + id)) as s")
    encoded = df.select(to_avro("s", "fn-orders-value", schema_registry_url=registry.url).alias("b")).collect()
    registered = SchemaRegistryClient({"url": registry.url}).get_latest_version("fn-orders-value")
    assert json.loads(registered.schema.schema_str)["name"] == "topLevelRecord"
    assert {int.from_bytes(bytes(r.b)[1:5], "big") for r in encoded} == {registered.schema_id}

    deserializer = ConfluentDeserializer(ConfluentClient({"url": registry.url}))
    theirs = sorted((deserializer(bytes(r.b), SerializationContext("fn-orders", MessageField.VALUE))
                     for r in encoded), key=lambda o: o["id"])
    assert [(o["id"], o["name"], o["score"]) for o in theirs] == [
        (i, f"n{i}", None if i % 3 == 0 else float(i)) for i in range(30)]
    assert theirs[7]["at"] == dt.datetime.fromtimestamp(1700000000.007, dt.UTC)

    garbage = spark.createDataFrame([(bytes(encoded[0].b),), (b"not avro",), (None,)], "b binary")
    back = garbage.select(from_avro("b", "fn-orders-value", schema_registry_url=registry.url,
                                    mode="PERMISSIVE").alias("s")).collect()
    assert [r.s is None for r in back] == [False, True, True]
    with pytest.raises(Exception, match=r"from_avro row \d+ of a batch: .*unknown magic byte"):
        garbage.select(from_avro("b", "fn-orders-value", schema_registry_url=registry.url).alias("s")).collect()


CONNECT_SCRIPT = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
from kafkajet.spark import from_avro, to_avro

url = sys.argv[1]
spark = SparkSession.builder.remote("local[2]").getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
df = spark.range(6).selectExpr("named_struct('id', id, 'tag', if(id % 2 = 0, null, 'odd')) as s")
encoded = df.select(to_avro("s", "connect-value", schema_registry_url=url).alias("b"))
encoded.collect()  # registers the schema from the workers (count() would prune the UDF)
rows = encoded.select(from_avro("b", "connect-value", schema_registry_url=url).alias("s")).select("s.*")
print(sorted((r.id, r.tag) for r in rows.collect()))
spark.stop()
"""


def test_from_avro_and_to_avro_work_on_spark_connect(tmp_path: Path, registry: SchemaRegistry) -> None:
    import grpc  # noqa: F401 - Spark Connect's client (pyspark[connect], a test dependency): absent, this fails

    script = tmp_path / "connect_avro.py"
    script.write_text(textwrap.dedent(CONNECT_SCRIPT))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    r = subprocess.run([sys.executable, str(script), registry.url], capture_output=True, text=True, timeout=600,
                       cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == str([(i, None if i % 2 == 0 else "odd") for i in range(6)])
