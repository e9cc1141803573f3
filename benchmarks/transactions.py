"""Transactional throughput: 1,000-record transactions, kafkajet beside confluent-kafka's transactional
producer, each at its defaults, on one MockCluster (3 brokers, 6 partitions) and on the embedded broker (Tansu).

    .venv/bin/python benchmarks/transactions.py [--transactions 50] [--per-transaction 1000] [--size 100]

Reports records/s and transactions/s per client and kafkajet's ratio; nothing is asserted. A transaction is
begin, N sends, commit (which flushes); the commit's round trips (AddPartitionsToTxn, EndTxn) are part of
what is measured, as they are of a real pipeline's cost.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkajet import Producer  # noqa: E402
from kafkajet.admin import Admin  # noqa: E402
from kafkajet.testing import EmbeddedBroker, MockCluster  # noqa: E402


def run_kafkajet(servers: str, topic: str, txns: int, per: int, value: bytes) -> float:
    with Producer({"bootstrap.servers": servers, "transactional.id": f"bench-kj-{topic}"}) as p:
        p.init_transactions()
        start = time.perf_counter()
        for _ in range(txns):
            p.begin_transaction()
            send = p.send
            for _ in range(per):
                send(topic, value)
            p.commit_transaction()
        return time.perf_counter() - start


def run_confluent(servers: str, topic: str, txns: int, per: int, value: bytes) -> float:
    from confluent_kafka import Producer as CkProducer

    p = CkProducer({"bootstrap.servers": servers, "transactional.id": f"bench-ck-{topic}", "log_level": 3})
    p.init_transactions(60)
    start = time.perf_counter()
    for _ in range(txns):
        p.begin_transaction()
        produce, poll = p.produce, p.poll
        for _ in range(per):
            try:
                produce(topic, value)
            except BufferError:
                poll(0.01)
                produce(topic, value)
        p.commit_transaction(60)
    return time.perf_counter() - start


CLIENTS: dict[str, Callable[[str, str, int, int, bytes], float]] = {
    "kafkajet": run_kafkajet, "confluent-kafka": run_confluent}


def measure(where: str, servers: str, make_topic: Callable[[str], None], args: argparse.Namespace) -> None:
    value = b"x" * args.size
    results = {}
    for name, fn in CLIENTS.items():
        topic = f"txn-bench-{name}"
        make_topic(topic)
        elapsed = fn(servers, topic, args.transactions, args.per_transaction, value)
        records = args.transactions * args.per_transaction
        results[name] = records / elapsed
        print(f"{where:<12} {name:<16} {records / elapsed:>12,.0f} records/s {args.transactions / elapsed:>9.1f} "
              f"transactions/s", flush=True)
    print(f"{where:<12} kafkajet / confluent-kafka: {results['kafkajet'] / results['confluent-kafka']:.2f}x",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=50)
    ap.add_argument("--per-transaction", type=int, default=1000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    print(f"{args.transactions} transactions of {args.per_transaction} records of {args.size} B, each client at "
          "its defaults", flush=True)
    with MockCluster(brokers=3) as cluster:
        measure("MockCluster", cluster.bootstrap_servers, lambda t: cluster.create_topic(t, partitions=6), args)
    with EmbeddedBroker() as broker, Admin(broker.bootstrap_servers) as admin:
        measure("Tansu", broker.bootstrap_servers, lambda t: admin.create_topics([t], num_partitions=6), args)


if __name__ == "__main__":
    main()
