"""compression.gzip.level, compression.lz4.level and compression.zstd.level reach the codec: the same records
at two levels are stored as batches of different sizes, and independent readers (kafka-python, librdkafka)
read both back exactly. Through the Producer and through `kafkajet produce`."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from kafkajet import Producer
from kafkajet.admin import Admin
from kafkajet.records import Compression
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic, read_topic_confluent, stored_batches

ROOT = Path(__file__).resolve().parents[2]


def _text_values(n: int) -> list[bytes]:
    """Word salad: compressible, but with enough variety that a codec's effort shows in the size."""
    rng = random.Random(27)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 8))) for _ in range(300)]
    return [" ".join(rng.choice(words) for _ in range(40)).encode() for _ in range(n)]


def _stored_size(broker: EmbeddedBroker, topic: str, codec: Compression) -> int:
    batches = stored_batches(broker.bootstrap_servers, topic, 0)
    assert batches and all(b.compression == codec for b in batches), [b.compression for b in batches]
    return sum(b.batch_length for b in batches)


# (codec, a low level, a high level): lz4's 9 is Java's default, its fast compressor; 17 its HC one.
LEVELS = [("gzip", 1, 9), ("lz4", 9, 17), ("zstd", 1, 19)]


@pytest.mark.parametrize(("codec", "low", "high"), LEVELS, ids=[c for c, _, _ in LEVELS])
def test_the_level_changes_the_stored_batch_and_other_clients_read_it(
    broker: EmbeddedBroker, topic_name: str, codec: str, low: int, high: int
) -> None:
    values = _text_values(2000)  # ~500 KB: one batch per level, several lz4 blocks
    sizes = {}
    for level in (low, high):
        topic = f"{topic_name}-{level}"
        with Admin(broker.bootstrap_servers) as admin:
            admin.create_topics(topic, num_partitions=1)
        with Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec,
                       f"compression.{codec}.level": level, "batch.size": 4 << 20,
                       "max.request.size": 4 << 20, "linger.ms": 60_000}) as p:
            sent = p.send_batch(topic, values, partitions=[0] * len(values))
            p.flush()  # linger.ms holds everything for one batch until here
            sent.result(timeout=60)
        sizes[level] = _stored_size(broker, topic, Compression.from_name(codec))
        by_python = sorted(read_topic(broker.bootstrap_servers, topic, len(values)), key=lambda r: r.offset)
        assert [r.value for r in by_python] == values
        by_librdkafka = read_topic_confluent(broker.bootstrap_servers, topic, 1, expected=len(values))
        assert [r.value for r in sorted(by_librdkafka, key=lambda r: r.offset)] == values
    assert sizes[low] > 1.05 * sizes[high], sizes  # a margin: batching may vary a little between runs


def _cli_produce(broker: EmbeddedBroker, topic: str, lines: bytes, *props: str) -> None:
    args = [sys.executable, "-m", "kafkajet", "produce", "--bootstrap-server", broker.bootstrap_servers,
            "--topic", topic, "--compression-codec", "gzip", "--producer-property", "batch.size=4194304",
            "--producer-property", "max.request.size=4194304", "--producer-property", "linger.ms=60000"]
    for prop in props:
        args += ["--producer-property", prop]
    r = subprocess.run(args, cwd=ROOT, input=lines, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()


def test_kafkajet_produce_passes_the_level_to_the_codec(broker: EmbeddedBroker, topic_name: str) -> None:
    lines = b"\n".join(_text_values(2000)) + b"\n"
    sizes = {}
    for level in (1, 9):
        topic = f"{topic_name}-{level}"
        with Admin(broker.bootstrap_servers) as admin:
            admin.create_topics(topic, num_partitions=1)
        _cli_produce(broker, topic, lines, f"compression.gzip.level={level}")
        sizes[level] = _stored_size(broker, topic, Compression.GZIP)
    assert sizes[1] > 1.05 * sizes[9], sizes  # a margin: the CLI's batching may vary between runs
