"""The JVM pieces the benchmarks (and tests/spark/test_spark_kafka_connector.py) run beside kafkajet: Spark's own
Kafka connector, fetched once from Maven Central, and jvm/ProducerBench.java, Apache Kafka's KafkaProducer as a
client of compare.py. No Makefile step: spark_connector_jars() runs Maven itself the first time.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONNECTOR_POM = REPO / "jvm" / "spark-connector" / "pom.xml"
PRODUCER_BENCH = REPO / "jvm" / "ProducerBench.java"
# What the connector needs beside PySpark's own jars/ (the pom copies only these).
CONNECTOR_ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients",
                       "commons-pool2", "spark-avro_2.13")


def connector_version() -> str:
    """The Spark version jvm/spark-connector/pom.xml names (the nearest Maven Central serves to PySpark's)."""
    match = re.search(r"<spark\.version>([^<]+)</spark\.version>", CONNECTOR_POM.read_text())
    if match is None:
        raise RuntimeError(f"{CONNECTOR_POM} names no <spark.version>")
    return match.group(1)


def spark_connector_jars() -> list[str]:
    """The jars to give Spark (`spark.jars`, comma-joined) for format("kafka") and from_avro: fetched with Maven
    into .cache/spark-connector-<version>/ the first time, then read from there."""
    folder = REPO / ".cache" / f"spark-connector-{connector_version()}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Under a lock: two pytest-xdist workers (or a benchmark beside the suite) may both find the folder missing.
    with open(folder.with_name(folder.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _complete(folder):
            _fetch_into(folder)
    return sorted(str(p) for p in folder.glob("*.jar"))


def _fetch_into(folder: Path) -> None:
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # what an interrupted fetch left
    done = subprocess.run(["mvn", "-q", "-B", "-f", str(CONNECTOR_POM), "dependency:copy-dependencies",
                           f"-DoutputDirectory={partial}"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not _complete(partial):
        raise RuntimeError(f"Maven did not fetch Spark's Kafka connector into {partial} (exit "
                           f"{done.returncode}); Java 17 and Maven 3 must be installed and Maven Central "
                           f"reachable:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    # A folder fetched before CONNECTOR_ARTIFACTS grew (spark-avro) is incomplete: replaced, not merged into.
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)  # whole or absent: an interrupted fetch is retried, not half-used


def _complete(folder: Path) -> bool:
    names = [p.name for p in folder.glob("*.jar")] if folder.is_dir() else []
    return all(any(n.startswith(a + "-") and n[len(a) + 1:len(a) + 2].isdigit() for n in names)
               for a in CONNECTOR_ARTIFACTS)


def producer_bench_command(*args: str) -> list[str]:
    """`java -cp '<Apache Kafka's jars>/*' jvm/ProducerBench.java ARGS`: Java compiles the single file in memory."""
    from kafkajet.testing.apache_kafka import find_java, find_kafka_libs

    return [find_java(), "-XX:+UseParallelGC", "-Xmx1g", "-cp", f"{find_kafka_libs()}/*", str(PRODUCER_BENCH), *args]
