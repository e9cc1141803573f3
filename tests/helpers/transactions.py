"""Transactions written on a MockCluster for the read_committed readers' end-to-end tests (FetchClient and the
Spark source): the real broker here (Tansu) does not hide aborted records, the MockCluster does.

What is written is known from the sending side (which value went in which transaction, and how it ended), and
the expected reads come from that plus the log order the MockCluster stored, so a reader that drops a committed
record, shows an aborted one or reorders a partition fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kafkajet import Producer
from kafkajet.testing import MockCluster

Reads = dict[tuple[str, int], list[bytes]]  # per partition, in log order


@dataclass
class Written:
    """Every value sent, by how its transaction ended (`plain`: a non-transactional producer's)."""
    committed: set[bytes] = field(default_factory=set)
    aborted: set[bytes] = field(default_factory=set)
    plain: set[bytes] = field(default_factory=set)

    def in_log_order(self, cluster: MockCluster, tps: list[tuple[str, int]], *, aborted_too: bool = False) -> Reads:
        """What a reader must return per partition: the data records in the order the cluster stored them,
        aborted ones only for read_uncommitted."""
        keep = self.committed | self.plain | (self.aborted if aborted_too else set())
        out: Reads = {}
        for tp in tps:
            stored = [r.value or b"" for r in cluster.records(*tp)]
            assert set(stored) <= self.committed | self.aborted | self.plain, f"{tp}: a value nobody sent"
            out[tp] = [v for v in stored if v in keep]
        return out


@contextmanager
def transactional(cluster: MockCluster, transactional_id: str) -> Iterator[Producer]:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id,
                   "linger.ms": 0}) as p:
        p.init_transactions(30)
        yield p


def send_to_each(p: Producer, tps: list[tuple[str, int]], label: str, count: int, into: set[bytes]) -> None:
    """Send `count` distinct values to each partition in `tps` (`label`-i-topic-partition), noting each in `into`."""
    for topic, partition in tps:
        for i in range(count):
            value = b"%s-%d-%s-%d" % (label.encode(), i, topic.encode(), partition)
            p.send(topic, value, partition=partition)
            into.add(value)


def interleave_two_transactional_producers(cluster: MockCluster, topic: str, partitions: int,
                                           rounds: int = 4, steps: int = 3) -> Written:
    """Producers A and B each run `rounds` transactions over every partition of `topic` at the same time,
    one ending in commit and the other in abort (which one alternates), flushing after every step so that
    their batches alternate in each partition's log; a non-transactional producer writes between the steps,
    and the transactions end in alternating order. A reader at read_committed must then skip B's aborted
    batches while A's transaction is still open around them, and the other way round."""
    written = Written()
    with transactional(cluster, "rc-a") as a, transactional(cluster, "rc-b") as b, \
            Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as plain:
        producers = {"a": a, "b": b}
        for r in range(rounds):
            commits = {"a": r % 2 == 0, "b": r % 2 == 1}
            for p in producers.values():
                p.begin_transaction()
            for step in range(steps):
                for name, p in producers.items():
                    sent = written.committed if commits[name] else written.aborted
                    for partition in range(partitions):
                        value = f"{name}-r{r}-s{step}-p{partition}".encode()
                        p.send(topic, value, partition=partition)
                        sent.add(value)
                    p.flush(30)  # in the log before the other producer's step
                value = f"plain-r{r}-s{step}".encode()
                plain.send(topic, value, partition=step % partitions).result(30)
                written.plain.add(value)
            order = ["a", "b"] if r % 2 == 0 else ["b", "a"]
            for name in order:
                if commits[name]:
                    producers[name].commit_transaction(30)
                else:
                    producers[name].abort_transaction(30)
    return written
