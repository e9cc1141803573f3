"""jvm/TelemetryRecorder.java, the brokers' client telemetry exporter for the KIP-714 tests: compiled against
the release's jars, put on the brokers' class path, and its file read back."""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kafkajet.testing.apache_kafka import find_kafka_libs

SOURCE = Path(__file__).resolve().parents[2] / "jvm" / "TelemetryRecorder.java"
CLASS = "TelemetryRecorder"
FILE_CONFIG = "kafkajet.telemetry.file"


def compiled_recorder(cache: Path) -> Path:
    """The class folder holding TelemetryRecorder.class, compiled once per source text."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = cache / f"telemetry-recorder-{digest}"
    if not (out / f"{CLASS}.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        libs = find_kafka_libs()
        done = subprocess.run(["javac", "-d", str(out), "-cp", str(libs / "*"), str(SOURCE)], capture_output=True,
                              text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr
    return out


def broker_config(file: Path) -> dict[str, str]:
    return {"metric.reporters": CLASS, FILE_CONFIG: str(file)}


@dataclass
class Push:
    instance_id: str
    terminating: bool
    content_type: str
    client_id: str
    metrics: dict[str, tuple[str, float, str]] = field(default_factory=dict)  # name+attrs -> (kind, value, attrs)


def read_pushes(file: Path) -> list[Push]:
    pushes: list[Push] = []
    if not file.exists():
        return pushes
    for line in file.read_text().splitlines():
        parts = line.split("\t")
        if parts[0] == "push":
            pushes.append(Push(parts[1], parts[2] == "true", parts[3], parts[5]))
        elif parts[0] == "metric":
            _, _, name, kind, value, attrs = parts
            pushes[-1].metrics[f"{name}{{{attrs}}}" if attrs else name] = (kind, float(value), attrs)
        else:
            raise AssertionError(f"the recorder could not read a push: {line}")
    return pushes
