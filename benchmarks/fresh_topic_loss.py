"""Records lost to a topic created a moment before: kafkajet beside Apache Kafka's Java producer (issue 45).

    .venv/bin/python benchmarks/fresh_topic_loss.py            # 5 fresh topics per client
    .venv/bin/python benchmarks/fresh_topic_loss.py --runs 10

One Apache Kafka node (kafkajet.testing.ApacheKafka, the jars `make kafka` fetched). Each run creates a topic of
48 partitions (the admin call returns once metadata names every leader) and sends 3,000 keyed records at once,
idempotence on (the default), linger.ms=20, batch.size=8192, delivery.timeout.ms=30000, request.timeout.ms=10000;
kafkajet and the Java KafkaProducer (jvm/JavaClients.java) take turns, each on a topic of its own. The broker
refuses the first Produce to some partitions NOT_LEADER_OR_FOLLOWER and takes the batches behind it as a new
start; a producer that pipelines behind that first batch then sees it refused as out of order until
delivery.timeout.ms, and its records fail. Prints the records each client lost per run and the time kafkajet
took to have every record acknowledged.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkajet import Producer  # noqa: E402
from kafkajet.admin import Admin  # noqa: E402
from kafkajet.fetch import FetchClient  # noqa: E402
from kafkajet.testing.apache_kafka import TOOL_JVM_OPTIONS, ApacheKafka  # noqa: E402
from tests.helpers.java_clients import PROGRAM  # noqa: E402

PARTITIONS = 48
RECORDS = 3000
SETTINGS = {"linger.ms": 20, "batch.size": 8192, "delivery.timeout.ms": 30_000, "request.timeout.ms": 10_000}


def fresh_topic(kafka: ApacheKafka, name: str) -> str:
    with Admin(kafka.bootstrap_servers) as admin:
        admin.create_topics(name, num_partitions=PARTITIONS)
    return name


def kafkajet_lost(kafka: ApacheKafka, topic: str) -> tuple[int, float]:
    with Producer(SETTINGS, bootstrap_servers=kafka.bootstrap_servers) as p:
        p.partitions_for(topic)
        start = time.monotonic()
        futures = [p.send(topic, key=b"key-%d" % i, value=b"%d" % i) for i in range(RECORDS)]
        p.flush(timeout=120)
        took = time.monotonic() - start
    return sum(1 for f in futures if f.exception() is not None), took


def java_lost(kafka: ApacheKafka, topic: str) -> int:
    """The Java producer's JVM is started and has sent to another topic before `topic` is created, so that its
    sends follow the creation as closely as kafkajet's do (a JVM started afterwards finds the leaders ready)."""
    warm = fresh_topic(kafka, f"{topic}-warm")
    cmd = kafka.java_command(str(PROGRAM), "produce", kafka.bootstrap_servers,
                             *[f"{k}={v}" for k, v in SETTINGS.items()], jvm_options=TOOL_JVM_OPTIONS)
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdin is not None and child.stdout is not None
    warm_up = {"op": "send", "topic": warm, "partition": 0, "key": None, "value": "00"}
    child.stdin.write(json.dumps(warm_up).encode() + b"\n")
    child.stdin.write(b'{"op": "flush"}\n')
    child.stdin.flush()
    with FetchClient(bootstrap_servers=kafka.bootstrap_servers) as reader:
        deadline = time.monotonic() + 120
        while reader.offsets(warm, 0)[1] < 1:
            if time.monotonic() > deadline:
                raise SystemExit("the Java producer did not start within 120 s")
            time.sleep(0.05)
    fresh_topic(kafka, topic)
    for i in range(RECORDS):
        command = {"op": "send", "topic": topic, "key": (b"key-%d" % i).hex(), "value": (b"%d" % i).hex()}
        child.stdin.write(json.dumps(command).encode() + b"\n")
    child.stdin.close()
    out = child.stdout.read().decode()
    child.wait(timeout=180)
    return int(json.loads(out.strip().splitlines()[-1])["failed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with ApacheKafka() as kafka:
        print(f"Apache Kafka at {kafka.bootstrap_servers}; {PARTITIONS} partitions, {RECORDS} keyed records a run")
        print("run  kafkajet lost  kafkajet s  java lost")
        totals = [0, 0]
        for run in range(args.runs):
            lost, took = kafkajet_lost(kafka, fresh_topic(kafka, f"fresh-kafkajet-{run}"))
            java = java_lost(kafka, f"fresh-java-{run}")
            totals[0] += lost
            totals[1] += java
            print(f"{run:>3}  {lost:>13}  {took:>10.2f}  {java:>9}", flush=True)
        print(f"all  {totals[0]:>13}  {'':>10}  {totals[1]:>9}")


if __name__ == "__main__":
    main()
