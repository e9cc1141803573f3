"""`python -m kafkajet perf` run as users run it: a subprocess, against the real embedded broker.

Output is checked against the Java tool's printf formats, counts against what was asked for, payloads against
what kafka-python reads back. No assertion depends on how fast this machine is: the throttle check is an
upper bound a working throttle always meets and an unthrottled run misses by far.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kafkajet.admin import Admin
from kafkajet.testing import EmbeddedBroker
from tests.helpers.readback import read_topic
from tests.helpers.waiting import read_line

ROOT = Path(__file__).resolve().parents[2]

# The Java tool's formats (ProducerPerformance.Stats.printWindow / printTotal) as regular expressions.
WINDOW_RE = re.compile(r"^(\d+) records sent, (\d+\.\d) records/sec \((\d+\.\d\d) MB/sec\), "
                       r"(\d+\.\d) ms avg latency, (\d+\.\d) ms max latency\.$")
TOTAL_RE = re.compile(r"^(\d+)( steady state)? records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), "
                      r"(\d+\.\d\d) ms avg latency, (\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, "
                      r"(\d+) ms 99th, (\d+) ms 99\.9th\.$")
FAILED_RE = re.compile(r"error: ([\d,]+) of ([\d,]+) records failed; first error: (\w+): ")
NEVER_SENT_RE = re.compile(r"([\d,]+) records were never sent")


def perf(*args: str, verbose: bool = False, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "kafkajet", *(["-v"] if verbose else []), "perf", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def totals(stdout: str) -> list[re.Match[str]]:
    return [m for line in stdout.splitlines() if (m := TOTAL_RE.match(line))]


def windows(stdout: str) -> list[re.Match[str]]:
    return [m for line in stdout.splitlines() if (m := WINDOW_RE.match(line))]


def make_topic(broker: EmbeddedBroker, topic: str, partitions: int = 3) -> None:
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([topic], num_partitions=partitions)


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's own output format, which no broker changes"))
def test_output_parses_with_java_formats_and_counts_match(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    r = perf("--topic", topic_name, "--num-records", "3000", "--record-size", "100", "--throughput", "3000",
             "--reporting-interval", "100", "--bootstrap-server", broker.bootstrap_servers)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line]
    assert TOTAL_RE.match(lines[-1]), lines[-1]
    assert all(WINDOW_RE.match(line) for line in lines[:-1]), lines
    (total,) = totals(r.stdout)
    assert int(total[1]) == 3000
    p50, p95, p99, p999 = (int(total[i]) for i in range(7, 11))
    assert p50 <= p95 <= p99 <= p999 <= float(total[6])  # percentiles are ordered and within the max
    # A one-second run with 100 ms windows prints window lines; they never count more than was sent.
    assert windows(r.stdout) and sum(int(w[1]) for w in windows(r.stdout)) <= 3000
    assert len(read_topic(broker.bootstrap_servers, topic_name, 3000)) == 3000


def test_throughput_limits_the_rate(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    target = 2000
    r = perf("--topic", topic_name, "--num-records", "3000", "--record-size", "50", "--throughput", str(target),
             "--bootstrap-server", broker.bootstrap_servers)
    assert r.returncode == 0, r.stderr
    (total,) = totals(r.stdout)
    assert int(total[1]) == 3000
    # Unthrottled, 3000 small records take a fraction of a second (tens of thousands per second).
    assert float(total[3]) <= 1.5 * target


def test_payload_monotonic_is_what_a_consumer_reads(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    n = 2500
    r = perf("--topic", topic_name, "--num-records", str(n), "--payload-monotonic",
             "--bootstrap-server", broker.bootstrap_servers)
    assert r.returncode == 0, r.stderr
    assert int(totals(r.stdout)[0][1]) == n
    values = sorted(int(rec.value or b"") for rec in read_topic(broker.bootstrap_servers, topic_name, n))
    assert values == list(range(n))


def test_payload_file_payloads_are_what_a_consumer_reads(
    broker: EmbeddedBroker, topic_name: str, tmp_path: Path
) -> None:
    make_topic(broker, topic_name)
    payloads = ["alpha", "beta gamma", "δέλτα", "{\"json\": 1}"]
    path = tmp_path / "payloads.txt"
    path.write_text("|".join(payloads) + "|", encoding="utf-8")
    n = 2000
    r = perf("--topic", topic_name, "--num-records", str(n), "--payload-file", str(path),
             "--payload-delimiter", "|", "--bootstrap-server", broker.bootstrap_servers)
    assert r.returncode == 0, r.stderr
    assert f"Reading payloads from: {path}" in r.stdout
    assert "Number of messages read: 4" in r.stdout
    assert int(totals(r.stdout)[0][1]) == n
    read = Counter(rec.value for rec in read_topic(broker.bootstrap_servers, topic_name, n))
    assert sum(read.values()) == n
    assert set(read) == {p.encode() for p in payloads}  # each chosen at random; 2000 draws hit all four


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is how kafkajet's perf tool reads settings into the producer"))
def test_producer_props_and_config_file_reach_the_producer(
    broker: EmbeddedBroker, topic_name: str, tmp_path: Path
) -> None:
    make_topic(broker, topic_name)
    config = tmp_path / "producer.properties"
    config.write_text("# a Java properties file\nacks = 0\nlinger.ms: 7\nclient.id perf-test-\\\n  client\n"
                      "key.serializer=org.apache.kafka.common.serialization.ByteArraySerializer\n")
    r = perf("--topic", topic_name, "--num-records", "1000", "--record-size", "10", "--print-metrics",
             "--command-config", str(config), "--producer-props", "acks=1", "--command-property",
             "batch.size=4096", "--bootstrap-server", broker.bootstrap_servers, verbose=True)
    assert r.returncode == 0, r.stderr
    (config_line,) = [line for line in r.stderr.splitlines() if "perf producer configuration" in line]
    # acks from --producer-props wins over the file; the file's other keys arrive, continuation included.
    for expected in ("'acks': 1", "'linger.ms': 7", "'batch.size': 4096", "'client.id': 'perf-test-client'"):
        assert expected in config_line
    # The producer's own reaction to acks=1, once: the settings check before it keeps its warnings to itself.
    assert r.stderr.count("idempotence disabled because of acks=1") == 1, r.stderr
    sent = re.search(r"^producer-metrics:record-send-total:\{client-id=perf-test-client\}\s+: (\d+\.\d{3})$",
                     r.stdout, re.M)
    assert sent and float(sent[1]) == 1000.0
    # Per-topic metrics under Java's group, with the topic as a tag as ToolsUtils prints it.
    per_topic = re.search(rf"^producer-topic-metrics:record-send-total:\{{client-id=perf-test-client, "
                          rf"topic={re.escape(topic_name)}\}}\s+: (\d+\.\d{{3}})$", r.stdout, re.M)
    assert per_topic and float(per_topic[1]) == 1000.0
    assert "Metric Name" in r.stdout


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is how kafkajet's perf tool reads a setting"))
def test_producer_props_accept_linger_zero(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    r = perf("--topic", topic_name, "--num-records", "500", "--record-size", "10",
             "--producer-props", "acks=1", "linger.ms=0", "--bootstrap-server", broker.bootstrap_servers,
             verbose=True)
    assert r.returncode == 0, r.stderr
    assert "'acks': 1" in r.stderr and "'linger.ms': 0" in r.stderr
    assert int(totals(r.stdout)[0][1]) == 500


def test_unknown_producer_setting_names_the_nearest_key() -> None:
    r = perf("--topic", "t", "--num-records", "10", "--record-size", "10", "--producer-props", "linger.mss=0",
             "--bootstrap-server", "127.0.0.1:1")
    assert r.returncode == 2  # a bad setting is a bad invocation, as in `produce` (the README's exit codes)
    assert "unknown producer setting 'linger.mss'; did you mean 'linger.ms'?" in r.stderr
    assert "records sent" not in r.stdout  # rejected before anything was produced


@pytest.mark.parametrize(("args", "message"), [
    (["--record-size", "10", "--payload-monotonic"], "argument --payload-monotonic: not allowed with argument "
                                                      "--record-size"),
    ([], "one of the arguments --record-size --payload-file --payload-monotonic is required"),
    (["--record-size", "0"], "--record-size should be greater than zero"),
    (["--record-size", "10", "--warmup-records", "10"], "--warmup-records must be strictly fewer"),
    (["--record-size", "10", "--throughput", "0"], "--throughput 0 would never send"),
    (["--record-size", "10", "--transaction-duration-ms", "0"], "--transaction-duration-ms should be greater"),
    (["--record-size", "10", "--producer-props", "acks"], "--command-property 'acks': expected key=value"),
    (["--payload-file", "/nonexistent/payloads.txt"], "--payload-file /nonexistent/payloads.txt: No such file"),
])
def test_bad_options_give_a_clear_error(args: Sequence[str], message: str) -> None:
    r = perf("--topic", "t", "--num-records", "10", *args, "--bootstrap-server", "127.0.0.1:1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert "usage: python -m kafkajet perf" in r.stderr


def test_transactions_commit_every_duration_as_in_kafkas_tool(broker: EmbeddedBroker, topic_name: str) -> None:
    from kafkajet.records import CONTROL_COMMIT, control_record_type
    from tests.helpers.readback import stored_batches

    make_topic(broker, topic_name, partitions=1)
    r = perf("--topic", topic_name, "--num-records", "3000", "--record-size", "50", "--throughput", "2000",
             "--transactional-id", f"perf-{topic_name}", "--transaction-duration-ms", "300",
             "--bootstrap-server", broker.bootstrap_servers)
    assert r.returncode == 0, r.stderr
    assert int(totals(r.stdout)[0][1]) == 3000
    batches = stored_batches(broker.bootstrap_servers, topic_name, 0)
    markers = [control_record_type(b.records[0].key) for b in batches if b.is_control]
    # About 1.5 s of sending in 300 ms transactions: several commits, the last one for the tail.
    assert len(markers) >= 3 and set(markers) == {CONTROL_COMMIT}
    assert batches[-1].is_control, "the records after the last full duration are committed too"
    assert sum(b.records_count for b in batches if not b.is_control) == 3000
    assert all(b.is_transactional for b in batches)


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's own output format, which no broker changes"))
def test_warmup_records_get_a_steady_state_summary(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    r = perf("--topic", topic_name, "--num-records", "3000", "--warmup-records", "1000", "--record-size", "20",
             "--bootstrap-server", broker.bootstrap_servers)
    assert r.returncode == 0, r.stderr
    assert "Warmup first 1000 records. Steady state results will print after the complete test summary." \
        in r.stdout
    overall, steady = totals(r.stdout)
    assert (int(overall[1]), overall[2]) == (3000, None)
    assert (int(steady[1]), steady[2]) == (2000, " steady state")


def test_without_bootstrap_it_starts_an_embedded_broker() -> None:
    r = perf("--topic", "perf-embedded", "--num-records", "2000", "--record-size", "100")
    assert r.returncode == 0, r.stderr
    assert "started an embedded broker" in r.stderr and "with 6 partitions" in r.stderr
    assert int(totals(r.stdout)[0][1]) == 2000


def test_failed_records_are_counted_and_fail_the_exit_code(tmp_path: Path) -> None:
    n = 4000
    with EmbeddedBroker() as broker:
        make_topic(broker, "perf-failing")
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkajet", "perf", "--topic", "perf-failing", "--num-records", str(n),
             "--record-size", "20", "--throughput", "1000", "--reporting-interval", "100",
             "--bootstrap-server", broker.bootstrap_servers, "--producer-props", "linger.ms=0",
             "request.timeout.ms=800", "delivery.timeout.ms=1000", "max.block.ms=1500"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        try:
            first = read_line(proc.stdout, 60, "the perf tool's first window line")  # records are being acknowledged
            assert WINDOW_RE.match(first.strip()), first
        finally:
            broker.stop()  # everything not yet acknowledged must now fail, and be counted
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    (total,) = totals(first + stdout)
    acked = int(total[1])
    failed = FAILED_RE.search(stderr)
    assert failed, stderr
    never_sent = NEVER_SENT_RE.search(stderr)
    unsent = int(never_sent[1].replace(",", "")) if never_sent else 0
    assert 0 < acked < n
    assert acked + int(failed[1].replace(",", "")) + unsent == n


@pytest.mark.broker_kinds("tansu", reason=(
    "its subject is kafkajet's own output format, which no broker changes"))
def test_progress_bar_on_a_terminal_and_plain_lines_on_a_pipe(broker: EmbeddedBroker, topic_name: str) -> None:
    make_topic(broker, topic_name)
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkajet", "perf", "--topic", topic_name, "--num-records", "1500",
             "--record-size", "20", "--throughput", "1500", "--bootstrap-server", broker.bootstrap_servers],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        chunks = []
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "the perf tool kept its terminal open for 60 s"
            if not select.select([master], [], [], 1.0)[0]:
                continue
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        os.close(master)
    terminal = b"".join(chunks).decode()
    assert proc.returncode == 0, terminal
    assert re.search(r"\r\[[#.]{30}\]\s+\d+% [\d,]+/1,500 acked", terminal), terminal
    assert "\r" not in stdout and "acked" not in stdout  # the pipe gets only the Java lines
    assert int(totals(stdout)[0][1]) == 1500


class _DoneBatch:
    """A record future whose batch is already acknowledged when send() returns: the perf tool's callback then
    runs before the record is noted in its segment, the race the segment bookkeeping must get right."""

    def __init__(self, batch: object) -> None:
        self._batch = batch

    def add_done_callback(self, fn: object) -> None:
        fn(self)  # type: ignore[operator]

    def exception(self) -> None:
        return None


def test_every_record_is_counted_once_even_when_its_batch_completed_first() -> None:
    import io

    from kafkajet.cli.perf import Output, PerfRun, build_parser

    batches = [object() for _ in range(7)]
    sent = []

    class Producer:
        def send(self, topic: str, value: bytes) -> _DoneBatch:
            sent.append(value)
            return _DoneBatch(batches[len(sent) // 15 % len(batches)])  # 15 records a batch

    args = build_parser().parse_args(["--topic", "t", "--num-records", "1000", "--record-size", "10",
                                      "--throughput", "-1", "--warmup-records", "100"])
    run = PerfRun(Producer(), args, Output(io.StringIO(), io.StringIO(), progress=False))  # type: ignore[arg-type]
    run.send_all(iter([[b"x" * 10] * 1000]))
    assert len(sent) == 1000 and run.failed == 0
    assert run.stats.count == 1000 and run.stats.bytes == 10_000
    assert run.steady is not None and run.steady.count == 900


def test_records_whose_listeners_run_just_after_flush_returns_are_not_reported_lost() -> None:
    # flush() returns once every batch is done; the futures' listeners, which perf counts with, run on the
    # sender thread just after. A loaded run once reported "805 records have no outcome after flush()".
    import io

    from kafkajet.cli.perf import Output, PerfRun, build_parser

    listeners: list[tuple[Any, Any]] = []

    class _LateFuture:
        def __init__(self, batch: object) -> None:
            self._batch = batch

        def add_done_callback(self, fn: Any) -> None:
            listeners.append((fn, self))

        def exception(self) -> None:
            return None

    class Producer:
        sent = 0

        def send(self, topic: str, value: bytes) -> _LateFuture:
            Producer.sent += 1
            return _LateFuture(Producer.sent // 15)  # 15 records a batch

        def flush(self) -> None:
            threading.Timer(0.3, lambda: [fn(fut) for fn, fut in list(listeners)]).start()

    args = build_parser().parse_args(["--topic", "t", "--num-records", "300", "--record-size", "10",
                                      "--throughput", "-1"])
    err = io.StringIO()
    run = PerfRun(Producer(), args, Output(io.StringIO(), err, progress=False))  # type: ignore[arg-type]
    assert run.run(iter([[b"x" * 10] * 300])) == 0, err.getvalue()
    assert run.stats.count == 300 and "no outcome" not in err.getvalue()
