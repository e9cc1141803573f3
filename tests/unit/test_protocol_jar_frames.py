"""Produce and Metadata at Kafka 4.4's versions, byte for byte as the kafka-clients 4.4.0 jar writes them.

The layouts were folded from the jar (tools/jar_messages.py); this checks the codec built from them against the
jar's own generated classes: each body below is written by the jar (tools/JarFrames.java, one JVM for all) and
by kafkajet, the bytes must be equal, and kafkajet reads the jar's bytes back to the same body. Leader hints
(KIP-951: current_leader, node_endpoints, both tagged), topic ids (Metadata v10+, Produce v13) and Metadata
v13's top-level error code are in them.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kafkajet.cluster import format_uuid
from kafkajet.protocol import ApiKey, decode_request, decode_response, encode_request, encode_response
from kafkajet.protocol.schema import message_plan
from kafkajet.testing.apache_kafka import ApacheKafkaUnavailable, find_kafka_libs

ROOT = Path(__file__).resolve().parents[2]
TOPIC_ID = bytes(range(1, 17))
RECORDS = b"\x00" * 61 + b"\x02" + b"\x00" * 10  # opaque to both codecs: only its length prefix matters


def _hint_answer(v: int) -> dict[str, Any]:
    topic = {"topic_id": TOPIC_ID} if v >= 13 else {"name": "t"}
    return {"throttle_time_ms": 7, "responses": [{**topic, "partition_responses": [
        {"index": 0, "error_code": 6, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
         "record_errors": [], "error_message": "not the leader",
         "current_leader": {"leader_id": 2, "leader_epoch": 5}},
        {"index": 1, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None, "current_leader": {"leader_id": -1, "leader_epoch": -1}},
    ]}], "node_endpoints": [{"node_id": 2, "host": "broker-2", "port": 9092, "rack": "r2"}]}


def _produce_request(v: int) -> dict[str, Any]:
    topic = {"topic_id": TOPIC_ID} if v >= 13 else {"name": "t"}
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{**topic, "partition_data": [{"index": 0, "records": RECORDS}]}]}


def _metadata_request(v: int) -> dict[str, Any]:
    topics = [{"name": "t", "topic_id": None}]
    if v >= 12:
        topics.append({"name": None, "topic_id": TOPIC_ID})  # by id alone
    return {"topics": topics, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


def _metadata_answer(v: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "throttle_time_ms": 0, "cluster_id": "c1", "controller_id": 1,
        "brokers": [{"node_id": n, "host": f"broker-{n}", "port": 9092, "rack": None} for n in (1, 2, 3)],
        "topics": [{"error_code": 0, "name": "t", "topic_id": TOPIC_ID, "is_internal": False,
                    "topic_authorized_operations": -2147483648,
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 2, "leader_epoch": 5,
                                    "replica_nodes": [1, 2, 3], "isr_nodes": [2, 3], "offline_replicas": [1]}]}],
    }
    if v <= 10:
        body["cluster_authorized_operations"] = -2147483648
    if v >= 13:
        body["error_code"] = 0
    return body


CASES = ([("ProduceResponse", v, _hint_answer(v)) for v in range(10, 14)]
         + [("ProduceRequest", v, _produce_request(v)) for v in (12, 13)]
         + [("MetadataRequest", v, _metadata_request(v)) for v in range(10, 14)]
         + [("MetadataResponse", v, _metadata_answer(v)) for v in range(9, 14)])


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(p[:1].upper() + p[1:] for p in rest)


def _to_java(value: Any, key: str = "") -> Any:
    """A kafkajet body as Kafka's <Name>DataJsonConverter reads it: camelCase names, uuids in Uuid.toString
    form, records and bytes in base64."""
    if isinstance(value, dict):
        return {_camel(k): _to_java(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_java(v) for v in value]
    if isinstance(value, bytes):
        return format_uuid(value) if key.endswith("_id") else base64.b64encode(value).decode("ascii")
    if value is None and key == "topic_id":
        return format_uuid(bytes(16))
    return value


def _kafkajet_body_bytes(message: str, version: int, body: dict[str, Any]) -> bytes:
    api = ApiKey.PRODUCE if message.startswith("Produce") else ApiKey.METADATA
    flexible = message_plan(api, "request" if message.endswith("Request") else "response", version).flexible
    if message.endswith("Request"):
        frame = encode_request(api, version, 1, None, body)
        return frame[4 + 2 + 2 + 4 + 2 + (1 if flexible else 0):]  # size, api, version, id, null client id, tags
    return encode_response(api, version, 1, body)[4 + 4 + (1 if flexible else 0):]


@pytest.fixture(scope="module")
def jar_bytes() -> dict[tuple[str, int], bytes]:
    try:
        libs = find_kafka_libs()
    except ApacheKafkaUnavailable as e:
        pytest.fail(str(e), pytrace=False)  # never a skip: a missing jar must not hide these tests
    if shutil.which("java") is None:
        pytest.fail("no java: the jar's encoding is read by a small Java program (Java 17 is a requirement)",
                    pytrace=False)
    lines = "".join(json.dumps({"message": m, "version": v, "json": _to_java(b)}) + "\n" for m, v, b in CASES)
    done = subprocess.run(["java", "-cp", f"{libs}/*", str(ROOT / "tools" / "JarFrames.java")], input=lines,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    out = [bytes.fromhex(json.loads(line)["hex"]) for line in done.stdout.splitlines()]
    return {(m, v): raw for (m, v, _), raw in zip(CASES, out, strict=True)}


@pytest.mark.parametrize("message,version,body", CASES, ids=[f"{m}-v{v}" for m, v, _ in CASES])
def test_the_jar_and_kafkajet_write_the_same_bytes(jar_bytes: dict[tuple[str, int], bytes], message: str,
                                                   version: int, body: dict[str, Any]) -> None:
    assert _kafkajet_body_bytes(message, version, body).hex() == jar_bytes[(message, version)].hex()


def _read(message: str, version: int, raw: bytes) -> dict[str, Any]:
    api = ApiKey.PRODUCE if message.startswith("Produce") else ApiKey.METADATA
    if message.endswith("Request"):
        flexible = message_plan(api, "request", version).flexible
        header = encode_request(api, version, 1, None, {})[4:4 + 2 + 2 + 4 + 2 + (1 if flexible else 0)]
        return decode_request(header + raw)[1]
    flexible = message_plan(api, "response", version).flexible
    return decode_response(api, version, b"\x00\x00\x00\x01" + (b"\x00" if flexible else b"") + raw)[1]


@pytest.mark.parametrize("message,version,body", CASES, ids=[f"{m}-v{v}" for m, v, _ in CASES])
def test_kafkajet_reads_the_jars_bytes_back(jar_bytes: dict[tuple[str, int], bytes], message: str, version: int,
                                            body: dict[str, Any]) -> None:
    got = _read(message, version, jar_bytes[(message, version)])
    assert got == _read(message, version, _kafkajet_body_bytes(message, version, body))
    if message == "ProduceResponse":
        hinted, plain = got["responses"][0]["partition_responses"]
        assert (hinted["current_leader"], plain["current_leader"]) == (
            {"leader_id": 2, "leader_epoch": 5}, {"leader_id": -1, "leader_epoch": -1})
        assert got["node_endpoints"] == [{"node_id": 2, "host": "broker-2", "port": 9092, "rack": "r2"}]
        assert ("topic_id" in got["responses"][0]) == (version >= 13)
    if message == "MetadataResponse":
        assert got["topics"][0]["partitions"][0]["leader_epoch"] == 5
        assert got["topics"][0].get("topic_id") == (TOPIC_ID if version >= 10 else None)
