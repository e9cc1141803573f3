"""`python -m kafkajet perf`: Kafka's kafka-producer-perf-test, driving a kafkajet Producer.

Same options and the same output lines as Apache Kafka's ProducerPerformance (tools/), so scripts that parse
the Java tool's output parse this one; without a bootstrap server it starts an embedded broker, so one command
measures the producer on a fresh machine. Only the standard library is imported here at module level: the
producer and the broker are imported when a run starts.
"""

from __future__ import annotations

import argparse
import array
import logging
import os
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from kafkajet.cli.client_options import CliError, parse_assignments, read_properties
from kafkajet.cli.program import program_name

if TYPE_CHECKING:
    from kafkajet.producer.producer import Producer

log = logging.getLogger("kafkajet.cli.perf")

REPORT_INTERVAL_S = 5.0  # Java's reportingInterval
MAX_LATENCY_SAMPLES = 500_000  # Java keeps at most this many latencies for the percentiles
DEFAULT_CLIENT_ID = "perf-producer-client"  # what the Java tool sets when client.id is not given
EMBEDDED_PARTITIONS = 6
_CHUNK = 10_000  # payloads are made this many at a time: cheap per record, little memory
_MB = 1024.0 * 1024.0

# The format strings of ProducerPerformance.Stats (printWindow / printTotal), including their %f vs %.1f.
WINDOW_FORMAT = "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency."
TOTAL_FORMAT = ("%d%s records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "
                "%d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.")


class UsageError(Exception):
    """A bad option or option combination, reported as argparse reports its own errors (exit code 2)."""


# --- statistics -------------------------------------------------------------------------------------------


class Stats:
    """Counts, bytes and latencies of acknowledged records, as the Java tool keeps them.

    Fed from the producer's callbacks, which all run on its one sender thread, so no lock is needed; the
    progress bar only reads the counters. Latencies are whole milliseconds (Java's); every `sampling`-th
    one is kept in an int array for the percentiles, so memory stays bounded for any record count.
    """

    def __init__(self, num_records: int, out: Output, *, steady_state: bool = False,
                 interval_s: float = REPORT_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.start = self.window_start = clock()
        self._clock = clock
        self.interval_s = interval_s
        self._out = out
        self.steady_state = steady_state
        self.suppress_print = False
        self.sampling = num_records // min(num_records, MAX_LATENCY_SAMPLES)
        self.latencies = array.array("i", bytes(4 * (num_records // self.sampling + 1)))
        self.index = 0
        self.iteration = 0
        self.count = 0
        self.bytes = 0
        self.total_latency = 0
        self.max_latency = 0
        self.window_count = 0
        self.window_bytes = 0
        self.window_total_latency = 0
        self.window_max_latency = 0

    def record(self, latency: int, nbytes: int, now: float) -> None:
        self.record_many([latency], nbytes, now)

    def record_many(self, latencies: list[int], nbytes: int, now: float) -> None:
        """Records acknowledged together (a batch's, at `now`): their latencies and their bytes in total.
        Summed per call rather than per record: the per-record version cost a quarter of the tool's speed."""
        n = len(latencies)
        if not n:
            return
        total, top = sum(latencies), max(latencies)
        self.count += n
        self.bytes += nbytes
        self.total_latency += total
        if top > self.max_latency:
            self.max_latency = top
        self.window_count += n
        self.window_bytes += nbytes
        self.window_total_latency += total
        if top > self.window_max_latency:
            self.window_max_latency = top
        # Every sampling-th record by arrival, as one record at a time would have picked them.
        picked = latencies[(-self.iteration) % self.sampling::self.sampling]
        room = len(self.latencies) - self.index
        if picked and room > 0:
            picked = picked[:room]
            self.latencies[self.index:self.index + len(picked)] = array.array("i", picked)
            self.index += len(picked)
        self.iteration += n
        if now - self.window_start >= self.interval_s:
            if self.steady_state and self.count == self.window_count:
                self._out.line("In steady state.")
            if not self.suppress_print:
                self._out.line(self.window_line(now))
            self.window_start = now
            self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0

    def window_line(self, now: float) -> str:
        elapsed = max(now - self.window_start, 1e-9)
        n = self.window_count
        return WINDOW_FORMAT % (n, n / elapsed, self.window_bytes / elapsed / _MB,
                                self.window_total_latency / n if n else 0.0, float(self.window_max_latency))

    def percentiles(self, *ps: float) -> list[int]:
        size = min(self.index, len(self.latencies))
        if size == 0:
            return [0] * len(ps)
        ordered = sorted(self.latencies[:size])
        return [ordered[int(p * size)] for p in ps]

    def total_line(self, now: float | None = None) -> str:
        elapsed = max((self._clock() if now is None else now) - self.start, 1e-9)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        return TOTAL_FORMAT % (self.count, " steady state" if self.steady_state else "", self.count / elapsed,
                               self.bytes / elapsed / _MB, self.total_latency / self.count if self.count else 0.0,
                               float(self.max_latency), p50, p95, p99, p999)


class Output:
    """Result lines on stdout; on a terminal also a progress bar on stderr, redrawn around those lines."""

    BAR_WIDTH = 30

    def __init__(self, stdout: TextIO, stderr: TextIO, progress: bool) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.progress = progress
        self._lock = threading.Lock()  # lines come from the sender thread, the bar from the ticker
        self._bar_shown = False

    def line(self, text: str) -> None:
        with self._lock:
            self._clear_bar()
            print(text, file=self.stdout, flush=True)

    def error(self, text: str) -> None:
        with self._lock:
            self._clear_bar()
            print(text, file=self.stderr, flush=True)

    def bar(self, done: int, total: int, failed: int, rate: float, avg_latency: float) -> None:
        with self._lock:
            filled = self.BAR_WIDTH * done // max(total, 1)
            text = (f"\r[{'#' * filled}{'.' * (self.BAR_WIDTH - filled)}] {100 * done // max(total, 1):3d}% "
                    f"{done:,}/{total:,} acked, {rate:,.0f} records/sec, {avg_latency:.1f} ms avg latency")
            if failed:
                text += f", {failed:,} FAILED"
            self.stderr.write(text + "\x1b[K")
            self.stderr.flush()
            self._bar_shown = True

    def clear(self) -> None:
        with self._lock:
            self._clear_bar()

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self.stderr.write("\r\x1b[K")
            self.stderr.flush()
            self._bar_shown = False


# --- throttling -----------------------------------------------------------------------------------------


class Throttler:
    """Java's ThroughputThrottler: hold the sender to about `target` records/s on average.

    The caller asks should_throttle() after each record; every time it is ahead of the target rate one record's
    interval is added to a sleep deficit, and the deficit is slept off once it reaches MIN_SLEEP_S: sleeping
    in steps of at least 2 ms keeps timer granularity from skewing the rate, while the deficit accounting keeps
    the long-run average on target. A negative target disables throttling.
    """

    MIN_SLEEP_S = 0.002

    def __init__(self, target_per_s: float, start: float, clock: Callable[[], float] = time.monotonic) -> None:
        if target_per_s == 0:
            raise ValueError("a throughput of 0 would never send; use -1 for no limit")
        self.target = target_per_s
        self.start = start
        self.interval_s = 1.0 / target_per_s if target_per_s > 0 else 0.0
        self.deficit_s = 0.0
        self._clock = clock

    @property
    def enabled(self) -> bool:
        return self.target > 0

    def should_throttle(self, sent_so_far: int, now: float) -> bool:
        if self.target < 0:
            return False
        elapsed = now - self.start
        return elapsed > 0 and sent_so_far / elapsed > self.target

    def take_pause(self) -> float:
        """Seconds to pause now (0 while the deficit is below MIN_SLEEP_S); for callers with their own sleep."""
        self.deficit_s += self.interval_s
        if self.deficit_s < self.MIN_SLEEP_S:
            return 0.0
        pause, self.deficit_s = self.deficit_s, 0.0
        return pause

    def throttle(self, sleep: Callable[[float], object] = time.sleep) -> None:
        """Pause if due; `sleep` may return early (a client's poll(timeout) does), the pause is still kept."""
        pause = self.take_pause()
        if pause <= 0:
            return
        end = self._clock() + pause
        while (remaining := end - self._clock()) > 0:
            sleep(remaining)


# --- payloads -------------------------------------------------------------------------------------------

_UPPER = bytes(65 + b % 26 for b in range(256))  # maps random bytes onto A-Z, the letters Java's payloads use


def payload_chunks(num_records: int, *, record_size: int | None = None, payloads: Sequence[bytes] | None = None,
                   monotonic: bool = False, seed: int = 0) -> Iterator[list[bytes]]:
    """Record values, `_CHUNK` at a time.

    --record-size: random A-Z values like Java's (which refills its payload per record); slices of one random
    buffer at random offsets give varied content, so compression sees realistic data, at the cost of a slice.
    --payload-file: a random choice among the file's payloads per record (Java's rule, seeded).
    --payload-monotonic: the record's number in ASCII.
    """
    rng = random.Random(seed)
    done = 0
    if record_size is not None:
        spread = 65536
        pool = rng.randbytes(record_size + spread).translate(_UPPER)
        while done < num_records:
            m = min(_CHUNK, num_records - done)
            yield [pool[o:o + record_size] for o in [rng.randrange(spread) for _ in range(m)]]
            done += m
    elif payloads is not None:
        while done < num_records:
            m = min(_CHUNK, num_records - done)
            yield rng.choices(payloads, k=m)
            done += m
    elif monotonic:
        while done < num_records:
            m = min(_CHUNK, num_records - done)
            yield [str(i).encode() for i in range(done, done + m)]
            done += m
    else:
        raise UsageError("one of --record-size, --payload-file or --payload-monotonic is required")


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


def unescape_delimiter(text: str) -> str:
    r"""'\n' typed on a command line arrives as backslash + n; Java's tool treats it as a newline, so do we."""
    return re.sub(r"\\([ntr0\\])", lambda m: _ESCAPES[m.group(1)], text)


def read_payload_file(path: str, delimiter: str) -> list[bytes]:
    """The file's payloads (UTF-8 text split on the delimiter, empty pieces dropped, as Java's Scanner does)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"--payload-file {path}: {e.strerror or e}") from None
    if not data:
        raise UsageError(f"--payload-file {path} is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"--payload-file {path} is not UTF-8 text ({e})") from None
    if not delimiter:
        raise UsageError("--payload-delimiter must not be empty")
    payloads = [piece.encode("utf-8") for piece in text.split(delimiter) if piece]
    if not payloads:
        raise UsageError(f"--payload-file {path} holds only delimiters, no payloads")
    return payloads


# --- configuration --------------------------------------------------------------------------------------

def producer_properties(args: argparse.Namespace) -> dict[str, str]:
    """--command-config / --producer.config, overridden by --command-property / --producer-props, then by
    --bootstrap-server: Java's precedence. Parsed as every other command parses them (cli/client_options.py)."""
    props: dict[str, str] = {}
    try:
        if args.config_file:
            props.update(read_properties(args.config_file))
        props.update(parse_assignments(args.props, "--command-property"))
    except CliError as e:
        raise UsageError(str(e)) from None
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    # Java's tool forces byte-array serializers whatever the file says; here values are bytes already.
    for key in ("key.serializer", "value.serializer"):
        props.pop(key, None)
    props.setdefault("client.id", DEFAULT_CLIENT_ID)
    txn = transactions_of(args)
    if txn is not None:
        props["transactional.id"] = txn[0]
    return props


# --- command line ---------------------------------------------------------------------------------------


# Kafka's ProducerPerformance: either option turns transactions on; the other takes these defaults.
DEFAULT_TRANSACTION_DURATION_MS = 3000
DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"


def transactions_of(args: argparse.Namespace) -> tuple[str, int] | None:
    """(transactional.id, duration ms) when the run produces in transactions."""
    if args.transactional_id is None and args.transaction_duration_ms is None:
        return None
    return (args.transactional_id or DEFAULT_TRANSACTIONAL_ID,
            args.transaction_duration_ms or DEFAULT_TRANSACTION_DURATION_MS)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{program_name()} perf", allow_abbrev=False,
        description="Measure the kafkajet producer the way Kafka's kafka-producer-perf-test measures the Java "
                    "one: same options, same output. Without a bootstrap server an embedded broker is started "
                    f"and the topic is created with {EMBEDDED_PARTITIONS} partitions.")
    p.add_argument("--topic", required=True, metavar="TOPIC", help="produce messages to this topic")
    p.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS",
                   help="number of messages to produce")
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="RECORD-SIZE",
                         help="message size in bytes (random A-Z payloads)")
    payload.add_argument("--payload-file", metavar="PAYLOAD-FILE",
                         help="UTF-8 text file of payloads; each record takes one at random")
    payload.add_argument("--payload-monotonic", action="store_true",
                         help="payload is a monotonically increasing integer (0, 1, 2, ... in ASCII)")
    p.add_argument("--payload-delimiter", default="\\n", metavar="PAYLOAD-DELIMITER",
                   help="separates the payloads of --payload-file (default: \\n, a newline)")
    p.add_argument("--throughput", type=float, default=-1.0, metavar="THROUGHPUT",
                   help="throttle to about THROUGHPUT records/sec; -1 (the default) for no limit")
    p.add_argument("--command-property", "--producer-props", dest="props", nargs="+", action="extend",
                   metavar="PROP-NAME=PROP-VALUE",
                   help="producer configuration (Java key names), e.g. acks=1 linger.ms=0; these take "
                        "precedence over --command-config")
    p.add_argument("--command-config", "--producer.config", dest="config_file", metavar="CONFIG-FILE",
                   help="producer configuration properties file")
    p.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                   help="the cluster (overrides bootstrap.servers); default: an embedded broker")
    p.add_argument("--print-metrics", action="store_true", help="print the producer's metrics at the end")
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    p.add_argument("--reporting-interval", type=int, default=int(REPORT_INTERVAL_S * 1000), metavar="MS",
                   help="print a window line this often (default 5000, as the Java tool)")
    p.add_argument("--warmup-records", type=int, default=0, metavar="WARMUP-RECORDS",
                   help="records treated as warmup: an extra steady-state summary line leaves them out")
    p.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID",
                   help="produce in transactions with this transactional.id (each lasting "
                        f"--transaction-duration-ms, default {DEFAULT_TRANSACTION_DURATION_MS})")
    p.add_argument("--transaction-duration-ms", type=int, metavar="TRANSACTION-DURATION",
                   help="commit a transaction after this many ms; alone, it enables transactions with the "
                        f"transactional.id {DEFAULT_TRANSACTIONAL_ID!r}")
    return p


def validate(args: argparse.Namespace) -> None:
    if args.num_records <= 0:
        raise UsageError("--num-records should be greater than zero")
    if args.record_size is not None and args.record_size <= 0:
        raise UsageError("--record-size should be greater than zero")
    if args.warmup_records < 0:
        raise UsageError("--warmup-records must not be negative")
    if args.warmup_records >= args.num_records:
        raise UsageError("The value for --warmup-records must be strictly fewer than the number of records in "
                         "the test, --num-records.")
    if args.reporting_interval <= 0:
        raise UsageError("--reporting-interval must be a positive number of milliseconds")
    if args.throughput == 0:
        raise UsageError("--throughput 0 would never send a record; give records/sec, or -1 for no limit")
    if args.transaction_duration_ms is not None and args.transaction_duration_ms <= 0:
        raise UsageError("--transaction-duration-ms should be greater than zero")


# --- the run --------------------------------------------------------------------------------------------


class _Segment:
    """The records of one batch, sent one after another from the sending thread: their send times and sizes,
    how many are counted, and the batch's outcome once known."""

    __slots__ = ("starts", "sizes", "counted", "closed", "error", "steady")

    def __init__(self, steady: bool) -> None:
        self.starts: list[float] = []
        self.sizes: list[int] = []
        self.counted = 0
        self.closed = False
        self.error: BaseException | None = None
        self.steady = steady


class PerfRun:
    """One perf test: sends, counts every record's outcome, prints Java's lines."""

    def __init__(self, producer: Producer, args: argparse.Namespace, out: Output) -> None:
        self.producer = producer
        self.args = args
        self.out = out
        self.num_records: int = args.num_records
        self.warmup: int = args.warmup_records
        self.interval_s = args.reporting_interval / 1000.0
        self.stats = Stats(self.num_records, out, interval_s=self.interval_s)
        self.steady: Stats | None = None
        self.sent = 0
        self.failed = 0
        self.first_error: BaseException | None = None
        self.send_error: BaseException | None = None
        self.interrupted = False
        self._finished = threading.Event()
        self._lock = threading.Lock()  # the sender thread counts segments; the caller, rarely, a late record
        self._counted = threading.Condition(self._lock)
        txn = transactions_of(args)
        self.transaction_s = None if txn is None else txn[1] / 1000.0
        self.in_transaction = False
        self.transactions_committed = 0

    # Called on the producer's sender thread when the batch of a segment completes (or at once, on the
    # caller's thread, if it already had).
    def _on_segment(self, seg: _Segment, fut: Any) -> None:
        now = time.monotonic()
        err = fut.exception()
        with self._lock:
            seg.error = err
            self._account(seg, now)
            seg.closed = True
            self._counted.notify_all()

    def _account(self, seg: _Segment, now: float) -> None:
        """Count seg's records not yet counted (under self._lock): acknowledged at `now`, or failed."""
        starts, sizes, lo = seg.starts, seg.sizes, seg.counted
        seg.counted = hi = len(starts)
        if seg.error is not None:
            for _ in range(lo, hi):
                self._failed(seg.error)
            return
        latencies = [int((now - start) * 1000) for start in starts[lo:hi]]
        nbytes = sum(sizes[lo:hi])
        self.stats.record_many(latencies, nbytes, now)
        if seg.steady and self.steady is not None:
            self.steady.record_many(latencies, nbytes, now)

    def _failed(self, err: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = err
            self.out.error(f"error: a record failed: {type(err).__name__}: {err} (counting further failures)")

    def send_all(self, chunks: Iterator[list[bytes]]) -> None:
        # Every record's latency is counted, as in Java, but with one callback per batch rather than per
        # record: a batch's records are acknowledged together, and consecutive sends from this one thread
        # share a batch until it is full, so they form a segment. A callback per record cost more than the
        # producer itself (100k records/s against 400k without).
        send = self.producer.send
        topic: str = self.args.topic
        clock = time.monotonic
        throttler = Throttler(self.args.throughput, self.stats.start)
        throttled = throttler.enabled
        warmup = self.warmup
        on_segment = self._on_segment
        steady = False
        seg = _Segment(steady)
        seg_batch: object = None
        i = 0
        transaction_s = self.transaction_s
        txn_start = 0.0
        try:
            if transaction_s is not None:
                self.producer.init_transactions()
                # As Kafka's tool, the run's clock and its throttle start after initTransactions(): timed from
                # before, the wait for the coordinator would be made up by a burst of records at the start.
                self.stats.start = self.stats.window_start = clock()
                throttler = Throttler(self.args.throughput, self.stats.start)
            for chunk in chunks:
                for value in chunk:
                    start = clock()
                    if transaction_s is not None and not self.in_transaction:
                        # As Kafka's tool: a transaction opens with its first record and commits once its
                        # duration has passed, timed by the records' send times.
                        self.producer.begin_transaction()
                        self.in_transaction, txn_start = True, start
                    if i == warmup and warmup:
                        # Java's switch: from here on records count towards the steady-state summary too.
                        self.steady = Stats(self.num_records - warmup, self.out, steady_state=True,
                                            interval_s=self.interval_s)
                        self.stats.suppress_print = True
                        steady, seg_batch = True, None
                    fut = send(topic, value)
                    if fut._batch is not seg_batch:
                        seg_batch, seg = fut._batch, _Segment(steady)
                        fut.add_done_callback(partial(on_segment, seg))
                    seg.sizes.append(len(value))
                    seg.starts.append(start)  # last: the callback counts len(starts) records
                    if seg.closed:  # the batch completed before this record was noted: count it now
                        with self._lock:
                            self._account(seg, clock())
                    i += 1
                    if transaction_s is not None and start - txn_start >= transaction_s:
                        self._commit()
                    if throttled and throttler.should_throttle(i, start):
                        throttler.throttle()
        except KeyboardInterrupt:
            self.interrupted = True
        except Exception as e:
            # send() itself gave up (metadata or buffer memory not available within max.block.ms, the
            # producer closed...): the same would happen to every following record, so stop here.
            self.send_error = e
            self.failed += 1
            if self.first_error is None:
                self.first_error = e
        finally:
            self.sent = i

    def _commit(self) -> None:
        self.producer.commit_transaction()
        self.in_transaction = False
        self.transactions_committed += 1

    def progress_loop(self) -> None:
        while not self._finished.wait(0.25):
            self._draw_bar()

    def _draw_bar(self) -> None:
        s = self.stats
        elapsed = max(time.monotonic() - s.start, 1e-9)
        self.out.bar(s.count, self.num_records, self.failed, s.count / elapsed,
                     s.total_latency / s.count if s.count else 0.0)

    def run(self, chunks: Iterator[list[bytes]]) -> int:
        ticker = None
        if self.out.progress:
            ticker = threading.Thread(target=self.progress_loop, name="kafkajet-perf-progress", daemon=True)
            ticker.start()
        try:
            self.send_all(chunks)
            try:
                if self.interrupted:
                    self.out.error(f"interrupted after {self.sent:,} records; waiting up to 10 s for those "
                                   "in flight (Ctrl-C again to quit at once)")
                    self.producer.close(10)
                elif self.in_transaction:
                    self._commit()  # flushes first, as commit does
                else:
                    self.producer.flush()
            except KeyboardInterrupt:
                self.interrupted = True
                self.producer.close(0)
        finally:
            self._finished.set()
            if ticker is not None:
                ticker.join()
                self.out.clear()
        self.out.line(self.stats.total_line())
        if self.steady is not None:
            self.out.line(self.steady.total_line())
        if self.args.print_metrics:
            self.out.line(format_metrics(self.producer.metrics(), self.producer.client_id))
        return self.report_outcome()

    def report_outcome(self) -> int:
        # Records whose send() raised are in `failed` but not in `sent`.
        attempted = self.sent + (1 if self.send_error is not None else 0)
        if not self.interrupted:
            # flush() returns once every batch is done; the futures' listeners, which count here, run on the
            # sender thread just after. Under load a run was reported before them (805 records "without an
            # outcome"): wait for them, bounded, so a real loss is still reported.
            with self._counted:
                self._counted.wait_for(lambda: attempted - self.stats.count - self.failed <= 0, timeout=10)
        acked = self.stats.count
        unaccounted = attempted - acked - self.failed
        if self.interrupted:
            self.out.error(f"interrupted: {acked:,} records acknowledged, {self.failed:,} failed, "
                           f"{self.num_records - self.sent:,} never sent")
            return 130
        ok = True
        if self.failed:
            ok = False
            self.out.error(f"error: {self.failed:,} of {attempted:,} records failed; first error: "
                           f"{type(self.first_error).__name__}: {self.first_error}")
        if self.send_error is not None:
            ok = False
            self.out.error(f"error: sending stopped after {self.sent:,} records because send() raised; "
                           f"{self.num_records - attempted:,} records were never sent")
        if unaccounted:
            ok = False
            self.out.error(f"error: {unaccounted:,} records have no outcome after flush() (a producer bug)")
        return 0 if ok else 1


def format_metrics(metrics: Mapping[str, float], client_id: str) -> str:
    """Java's ToolsUtils.printMetrics layout: `group:name:{tags}` left-aligned, then ` : value` to 3 decimals."""
    from kafkajet.producer.metrics import java_metric_name

    rows = []
    for flat, value in metrics.items():
        group, name, tags = java_metric_name(flat)
        tag_text = ", ".join(f"{k}={v}" for k, v in {"client-id": client_id, **tags}.items())
        rows.append((f"{group}:{name}:{{{tag_text}}}", value))
    rows.sort()
    width = max((len(name) for name, _ in rows), default=0)
    lines = [f"\n{'Metric Name':<{width}}   Value"]
    lines += [f"{name:<{width}} : {value:.3f}" for name, value in rows]
    return "\n".join(lines)


class _DropWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING


def _embedded_broker_note(bootstrap: str, topic: str) -> str:
    return (f"No bootstrap server given: started an embedded broker at {bootstrap} and created topic '{topic}' "
            f"with {EMBEDDED_PARTITIONS} partitions (use --bootstrap-server to measure your cluster)")


def run(args: argparse.Namespace, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    from kafkajet.config import parse_producer_config
    from kafkajet.errors import ConfigError, KafkaError

    validate(args)
    props = producer_properties(args)
    payloads = None
    if args.payload_file is not None:
        path = os.path.abspath(args.payload_file)
        print(f"Reading payloads from: {path}", file=stdout)
        payloads = read_payload_file(path, unescape_delimiter(args.payload_delimiter))
        print(f"Number of messages read: {len(payloads)}", file=stdout, flush=True)
    embedded = "bootstrap.servers" not in props
    # Check the settings before starting a broker: a typo should cost nothing. Its warnings (idempotence
    # given way to acks=0) are held back: the producer built below gives the same ones, and twice reads as two.
    config_log = logging.getLogger("kafkajet.config")
    quiet = _DropWarnings()
    config_log.addFilter(quiet)
    try:
        parse_producer_config({**props, "bootstrap.servers": props.get("bootstrap.servers", "127.0.0.1:9092")})
    except ConfigError as e:  # a bad setting is a bad invocation: exit 2, as `produce` and argparse do
        print(f"error: {e}", file=stderr)
        return 2
    finally:
        config_log.removeFilter(quiet)
    if args.warmup_records > 0:
        print(f"Warmup first {args.warmup_records} records. Steady state results will print after the complete "
              "test summary.", file=stdout, flush=True)
    chunks = payload_chunks(args.num_records, record_size=args.record_size, payloads=payloads,
                            monotonic=args.payload_monotonic)
    out = Output(stdout, stderr, progress=stderr.isatty())
    try:
        if embedded:
            from kafkajet.admin import Admin
            from kafkajet.testing import EmbeddedBroker

            with EmbeddedBroker() as broker:
                props["bootstrap.servers"] = broker.bootstrap_servers
                with Admin(broker.bootstrap_servers) as admin:
                    admin.create_topics([args.topic], num_partitions=EMBEDDED_PARTITIONS)
                print(_embedded_broker_note(broker.bootstrap_servers, args.topic), file=stderr, flush=True)
                return _produce(props, args, out, chunks)
        return _produce(props, args, out, chunks)
    except KafkaError as e:
        print(f"error: {type(e).__name__}: {e}", file=stderr)
        return 1


def _produce(props: dict[str, str], args: argparse.Namespace, out: Output, chunks: Iterator[list[bytes]]) -> int:
    from kafkajet.producer.producer import Producer

    producer = Producer(props)
    log.info("perf producer configuration: %r", producer.config)
    try:
        return PerfRun(producer, args, out).run(chunks)
    finally:
        producer.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        import logging

        logging.getLogger().setLevel(logging.INFO)  # the handler is set up by `kafkajet`'s main at WARNING
    try:
        return run(args)
    except UsageError as e:
        parser.error(str(e))  # exits with status 2 and the usage line, like argparse's own errors
    except KeyboardInterrupt:
        return 130
    return 1  # unreachable: parser.error() exits


if __name__ == "__main__":
    sys.exit(main())
