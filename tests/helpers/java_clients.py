"""Apache Kafka's own Java clients as referees (jvm/JavaClients.java, run with the broker's jars)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kafkajet.testing.apache_kafka import TOOL_JVM_OPTIONS, ApacheKafka

PROGRAM = Path(__file__).resolve().parents[2] / "jvm" / "JavaClients.java"


def _settings(settings: Mapping[str, object]) -> list[str]:
    return [f"{k}={v}" for k, v in settings.items()]


def java_consume(kafka: ApacheKafka, topic: str, count: int, *, timeout_s: float = 60,
                 bootstrap: str | None = None, **settings: object) -> list[dict[str, Any]]:
    """Every record of `topic` as the Java KafkaConsumer reads it (at least `count`, read from the beginning):
    partition, offset, timestamp, timestamp_type, key and value as bytes (None for null), headers as pairs."""
    cmd = kafka.java_command(str(PROGRAM), "consume", bootstrap or kafka.bootstrap_servers, topic, str(count),
                             str(int(timeout_s * 1000)), *_settings(settings), jvm_options=TOOL_JVM_OPTIONS)
    done = subprocess.run(cmd, capture_output=True, timeout=timeout_s + 60, check=False)
    records = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    if done.returncode != 0:
        raise AssertionError(f"the Java consumer read {len(records)} of {count} records of {topic} "
                             f"(exit {done.returncode}):\n{done.stderr.decode(errors='replace')[-3000:]}")
    for r in records:
        r["key"] = None if r["key"] is None else bytes.fromhex(r["key"])
        r["value"] = None if r["value"] is None else bytes.fromhex(r["value"])
        r["headers"] = [(k, None if v is None else bytes.fromhex(v)) for k, v in r["headers"]]
    return records


def java_produce(kafka: ApacheKafka, commands: Iterable[Mapping[str, Any]], *, timeout_s: float = 120,
                 **settings: object) -> dict[str, Any]:
    """Run producer commands through the Java KafkaProducer: {"op": "send", "topic", "partition", "key",
    "value", "timestamp", "headers"} (bytes values), or "init" / "begin" / "commit" / "abort" / "flush", or
    "metrics": the result's "metrics" is then the producer's metrics() once every earlier send had its
    outcome, a list of {"group", "name", "tags", "value"} (value None where Java's is NaN)."""
    def encode(c: Mapping[str, Any]) -> str:
        out = dict(c)
        for field in ("key", "value"):
            if isinstance(out.get(field), bytes):
                out[field] = out[field].hex()
        if "headers" in out:
            out["headers"] = [[k, None if v is None else v.hex()] for k, v in out["headers"]]
        return json.dumps(out)

    stdin = "\n".join(encode(c) for c in commands).encode()
    cmd = kafka.java_command(str(PROGRAM), "produce", kafka.bootstrap_servers, *_settings(settings), jvm_options=TOOL_JVM_OPTIONS)
    done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise AssertionError(f"the Java producer failed (exit {done.returncode}):\n"
                             f"{done.stderr.decode(errors='replace')[-3000:]}")
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    result: dict[str, Any] = dict(lines[-1])
    for line in lines:
        if "metrics" in line:
            result["metrics"] = line["metrics"]
    return result
