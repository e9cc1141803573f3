"""The Java producer's key list kafkajet is checked against (tests/unit/data/java-producer-keys-4.4.0.tsv,
tests/unit/test_java_producer_keys.py) is what the kafka-clients jar of the suite's Apache Kafka defines:
tools/JavaConfigKeys.java prints it again and the two must agree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kafkajet.testing.apache_kafka import ApacheKafkaUnavailable, find_java, find_kafka_libs

ROOT = Path(__file__).resolve().parents[2]


def test_the_key_list_is_the_jars() -> None:
    try:
        libs, java = find_kafka_libs(), find_java()
    except ApacheKafkaUnavailable as e:
        pytest.fail(str(e), pytrace=False)
    printed = subprocess.run([java, "-cp", f"{libs}/*", str(ROOT / "tools" / "JavaConfigKeys.java"), "producer"],
                             capture_output=True, text=True, timeout=120, check=True).stdout
    stored = (ROOT / "tests" / "unit" / "data" / "java-producer-keys-4.4.0.tsv").read_text()
    assert printed == stored, ("regenerate it: java -cp '<kafka libs>/*' tools/JavaConfigKeys.java producer "
                               "> tests/unit/data/java-producer-keys-4.4.0.tsv")
