"""The protocol and record layers alone against a real broker: a plain blocking socket, no producer."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from kafkajet.network.versions import api_versions_request_body, negotiate
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey, decode_response, encode_request
from kafkajet.records import Compression, encode_batch
from kafkajet.testing import EmbeddedBroker
from tests.helpers.waiting import wait_for


class RawConnection:
    """Just enough of a client to exchange frames: size prefix, correlation id, the codec."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}

    def _read_exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "broker closed the connection"
            data += chunk
        return data

    def request(self, api: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        self.sock.sendall(encode_request(api, version, self.correlation_id, "kafkajet-test", body))
        (size,) = struct.unpack(">i", self._read_exact(4))
        correlation_id, response = decode_response(api, version, self._read_exact(size))
        assert correlation_id == self.correlation_id
        return response

    def negotiate(self, api: int) -> int:
        return negotiate(self.versions, api)  # within the clients' caps

    def close(self) -> None:
        self.sock.close()


def test_api_versions_metadata_create_produce_and_read_back(broker: EmbeddedBroker, topic_name: str) -> None:
    conn = RawConnection(broker.bootstrap_servers)
    try:
        av_version = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]
        # The clients' own body: from v5 it carries "no cluster check" (no cluster id, node -1), which a 4.4
        # broker needs spelled out (a node id of 0 with no cluster id is an invalid request).
        av = conn.request(ApiKey.API_VERSIONS, av_version, api_versions_request_body())
        assert av["error_code"] == 0
        conn.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in av["api_keys"]}
        assert ApiKey.PRODUCE in conn.versions and ApiKey.METADATA in conn.versions

        md_v = conn.negotiate(ApiKey.METADATA)
        md = conn.request(ApiKey.METADATA, md_v, {"topics": [], "allow_auto_topic_creation": False})
        assert [b["node_id"] for b in md["brokers"]] == [broker.node_id]
        assert md["brokers"][0]["port"] == broker.port

        ct_v = conn.negotiate(ApiKey.CREATE_TOPICS)
        ct = conn.request(ApiKey.CREATE_TOPICS, ct_v, {
            "topics": [{"name": topic_name, "num_partitions": 6, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 10000,
        })
        assert [(t["name"], t["error_code"]) for t in ct["topics"]] == [(topic_name, 0)]

        # Apache Kafka answers CreateTopics before its own metadata has the partitions' leaders (a produce
        # then gets NOT_LEADER_OR_FOLLOWER); Tansu has them at once. Wait until this broker lists them.
        def described() -> dict[str, Any] | None:
            md = conn.request(ApiKey.METADATA, md_v, {"topics": [{"name": topic_name}],
                                                      "allow_auto_topic_creation": False})
            (topic,) = md["topics"]
            led = topic["error_code"] == 0 and all(p["leader_id"] == broker.node_id for p in topic["partitions"])
            return topic if led and len(topic["partitions"]) == 6 else None

        wait_for(described, 30, f"{topic_name}'s partitions to have their leader")
        topic = described()
        assert topic is not None
        assert sorted(p["partition_index"] for p in topic["partitions"]) == list(range(6))

        # One batch per codec, each to its own partition, with headers and a null key.
        sent: dict[int, list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]] = {}
        pr_v = conn.negotiate(ApiKey.PRODUCE)
        for partition, codec in enumerate(Compression):
            records = [
                (None if i % 3 == 0 else f"k{i}".encode(), f"{codec.name}-value-{i}".encode() * 5,
                 [("codec", codec.name.encode()), ("i", str(i).encode())])
                for i in range(20)
            ]
            sent[partition] = records
            batch = encode_batch([(1_700_000_000_000 + i, k, v, h) for i, (k, v, h) in enumerate(records)],
                                 compression=codec)
            answers: list[dict[str, Any]] = []

            def produced(partition: int = partition, batch: bytes = batch, answers: list[dict[str, Any]] = answers
                         ) -> bool:
                resp = conn.request(ApiKey.PRODUCE, pr_v, {
                    "transactional_id": None, "acks": -1, "timeout_ms": 10000,
                    # By name up to v12, by the id metadata gave from v13 (KIP-516): each version encodes its own.
                    "topic_data": [{"name": topic_name, "topic_id": topic.get("topic_id"),
                                    "partition_data": [{"index": partition, "records": batch}]}],
                })
                answers[:] = resp["responses"][0]["partition_responses"]
                return bool(answers[0]["error_code"] != 6)  # NOT_LEADER_OR_FOLLOWER: Apache Kafka still electing

            wait_for(produced, 30, f"partition {partition} to take a batch", interval=0.1)
            (pres,) = answers
            assert pres["error_code"] == 0, (codec, pres)
            assert pres["base_offset"] == 0
    finally:
        conn.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, check_crcs=True,
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tps = [TopicPartition(topic_name, p) for p in sent]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[int, list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]] = {p: [] for p in sent}
        want = sum(len(v) for v in sent.values())
        total = 0
        while total < want:
            polled = consumer.poll(timeout_ms=5000)
            assert polled, f"read only {total} of {want} records"
            for tp, msgs in polled.items():
                for m in msgs:
                    got[tp.partition].append((m.key, m.value, list(m.headers)))
                    total += 1
        assert got == sent
    finally:
        consumer.close()
