"""`kafkajet consume`: print a topic's records, like Kafka's kafka-console-consumer.

Built on the fetch client (kafkajet.fetch), which is not a group member: with --group the tool reads from the
group's committed offsets and commits what it printed as a "simple" group (the Admin's OffsetCommit at
generation -1), which Kafka accepts only while no consumer is in the group.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from kafkajet.cli.client_options import (
    CliError,
    add_bootstrap_option,
    add_config_options,
    client_config,
    parse_assignments,
    require_bootstrap,
)
from kafkajet.cli.signals import SignalFlag, signal_handlers

# Kafka's DefaultMessageFormatter properties and defaults (kafka.tools.DefaultMessageFormatter).
FORMATTER_DEFAULTS: dict[str, str] = {
    "print.timestamp": "false",
    "print.partition": "false",
    "print.offset": "false",
    "print.headers": "false",
    "print.key": "false",
    "print.value": "true",
    "key.separator": "\t",
    "line.separator": "\n",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "null.literal": "null",
}
_FLAGS = ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key", "print.value")
# Consumer settings Kafka users put in --consumer.config: the ones this tool acts on, and the ones that have no
# meaning for it (the fetch client takes only the settings every client shares, and isolation.level).
_CONSUMER_KEYS = ("group.id", "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms")
_IGNORED_CONSUMER_KEYS = ("key.deserializer", "value.deserializer", "partition.assignment.strategy",
                          "session.timeout.ms", "heartbeat.interval.ms", "max.poll.records",
                          "max.poll.interval.ms", "fetch.min.bytes", "fetch.max.wait.ms", "group.instance.id")
AUTO_COMMIT_INTERVAL_MS = 5000  # Java's auto.commit.interval.ms default
IDLE_WAIT_S = 0.1  # between two rounds that found nothing new (each round asks every partition's leader)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "consume", help="print a topic's records (like kafka-console-consumer)",
        description="Print each record of --topic as one line (values as UTF-8 text, undecodable bytes replaced), "
                    "from the end of the log by default (only records that arrive from now on), from the start "
                    "with --from-beginning, or from --offset N of one --partition. It runs until "
                    "--max-messages are printed, --timeout-ms passes without a record, or Ctrl-C (exit 130); "
                    "then 'Processed a total of N messages' goes to stderr.")
    add_bootstrap_option(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--partition", type=int, default=None, help="read only this partition (default: all)")
    p.add_argument("--offset", default=None, metavar="OFFSET",
                   help="with --partition: start at this offset, or 'earliest' or 'latest' (default latest)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest record (with --group: where the group has no committed offset)")
    p.add_argument("--group", default=None, metavar="GROUP",
                   help="start from this group's committed offsets and commit the offsets printed (every "
                        f"{AUTO_COMMIT_INTERVAL_MS // 1000} s and at the end). The tool does not join the group: it "
                        "commits as a simple group, which Kafka refuses while consumers are in it, and it reads "
                        "every partition itself. Default: no group, nothing committed")
    p.add_argument("--max-messages", type=int, default=None, metavar="N", help="exit after printing N records")
    p.add_argument("--timeout-ms", type=int, default=None, metavar="MS",
                   help="exit (status 0) when no record has arrived for this long")
    p.add_argument("--property", dest="formatter_props", metavar="KEY=VALUE", action="append", default=[],
                   help="output format: " + ", ".join(f"{k} (default {v!r})" for k, v in FORMATTER_DEFAULTS.items()))
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"), default=None,
                   help="read_committed leaves out aborted transactions and waits for open ones "
                        "(default read_uncommitted)")
    add_config_options(p, consumer=True)
    p.set_defaults(func=run, parser=p)
    return p


@dataclass(frozen=True)
class MessageFormat:
    print_timestamp: bool
    print_partition: bool
    print_offset: bool
    print_headers: bool
    print_key: bool
    print_value: bool
    key_separator: str
    line_separator: str
    headers_separator: str
    headers_key_separator: str
    null_literal: str

    @classmethod
    def from_properties(cls, given: dict[str, str]) -> MessageFormat:
        unknown = sorted(set(given) - set(FORMATTER_DEFAULTS))
        if unknown:
            raise CliError(f"--property {unknown[0]!r} is not a formatter property; known: "
                           f"{', '.join(FORMATTER_DEFAULTS)} (client settings go in --consumer-property)", 2)
        props = {**FORMATTER_DEFAULTS, **given}
        for name in _FLAGS:
            if props[name].strip().lower() not in ("true", "false"):
                raise CliError(f"--property {name}={props[name]!r}: expected true or false", 2)
        def flag(name: str) -> bool:
            return props[name].strip().lower() == "true"

        return cls(flag("print.timestamp"), flag("print.partition"), flag("print.offset"), flag("print.headers"),
                   flag("print.key"), flag("print.value"), props["key.separator"], props["line.separator"],
                   props["headers.separator"], props["headers.key.separator"], props["null.literal"])

    def _text(self, b: bytes | None) -> str:
        return self.null_literal if b is None else b.decode("utf-8", "replace")

    def format(self, partition: int, offset: int, timestamp_type: str | None, timestamp: int, key: bytes | None,
               value: bytes | None, headers: list[tuple[str, bytes | None]]) -> str:
        """One record as Kafka's DefaultMessageFormatter writes it: the columns asked for, in its order,
        joined by key.separator, then line.separator."""
        columns: list[str] = []
        if self.print_timestamp:
            columns.append("NO_TIMESTAMP" if timestamp_type is None or timestamp < 0
                           else f"{timestamp_type}:{timestamp}")
        if self.print_partition:
            columns.append(f"Partition:{partition}")
        if self.print_offset:
            columns.append(f"Offset:{offset}")
        if self.print_headers:
            columns.append(self.headers_separator.join(f"{k}{self.headers_key_separator}{self._text(v)}"
                                                       for k, v in headers) if headers else "NO_HEADERS")
        if self.print_key:
            columns.append(self._text(key))
        if self.print_value:
            columns.append(self._text(value))
        return self.key_separator.join(columns) + self.line_separator


def _flag(value: str, name: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise CliError(f"{name}={value!r}: expected true or false", 2)
    return value.strip().lower() == "true"


@dataclass
class _Plan:
    """What the options ask for, checked before anything connects."""

    fmt: MessageFormat
    group: str | None
    from_beginning: bool
    commit: bool
    commit_interval_s: float
    fetch_config: dict[str, Any]
    admin_config: dict[str, Any]


def _plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> _Plan:
    require_bootstrap(parser, args)
    if args.offset is not None and args.partition is None:
        parser.error("--offset needs --partition: an offset is a position in one partition")
    if args.offset is not None and args.from_beginning:
        parser.error("--from-beginning and --offset cannot be given together")
    if args.partition is not None and args.group:
        parser.error("--group and --partition cannot be given together: with a group the tool reads every "
                     "partition of the topic")
    if args.partition is not None and args.partition < 0:
        parser.error("--partition must not be negative")
    if args.max_messages is not None and args.max_messages < 1:
        parser.error("--max-messages must be at least 1")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        parser.error("--timeout-ms must not be negative")
    if args.offset is not None and args.offset not in ("earliest", "latest"):
        try:
            if int(args.offset) < 0:
                raise ValueError
        except ValueError:
            parser.error(f"--offset {args.offset!r}: expected a non-negative offset, 'earliest' or 'latest'")
    fmt = MessageFormat.from_properties(parse_assignments(args.formatter_props, "--property"))
    config: dict[str, Any] = client_config(args)
    consumer = {k: config.pop(k) for k in _CONSUMER_KEYS if k in config}
    for key in _IGNORED_CONSUMER_KEYS:
        config.pop(key, None)
    group = args.group
    config_group = consumer.get("group.id")
    if config_group and group and config_group != group:
        raise CliError(f"--group {group!r} and group.id={config_group!r} in the client settings differ", 2)
    group = group or config_group or None
    if group and args.partition is not None:
        parser.error("a group (group.id) and --partition cannot be given together")
    from_beginning = args.from_beginning
    reset = consumer.get("auto.offset.reset")
    if reset is not None:
        if reset not in ("earliest", "latest"):
            raise CliError(f"auto.offset.reset={reset!r}: expected earliest or latest", 2)
        if args.from_beginning and reset == "latest":
            raise CliError("--from-beginning and auto.offset.reset=latest contradict each other", 2)
        from_beginning = reset == "earliest"
    commit = _flag(consumer.get("enable.auto.commit", "true"), "enable.auto.commit") and bool(group)
    try:
        interval_ms = int(consumer.get("auto.commit.interval.ms", AUTO_COMMIT_INTERVAL_MS))
    except ValueError:
        raise CliError(f"auto.commit.interval.ms={consumer['auto.commit.interval.ms']!r}: expected a number "
                       "of milliseconds", 2) from None
    if args.isolation_level is not None:
        config["isolation.level"] = args.isolation_level
    admin_config = {k: v for k, v in config.items() if k != "isolation.level"}
    return _Plan(fmt, group, from_beginning, commit, max(0, interval_ms) / 1000, config, admin_config)


def run(args: argparse.Namespace) -> int:
    from kafkajet.admin import Admin
    from kafkajet.cli.groups import commit_offsets, refuse_active_group
    from kafkajet.fetch import FetchClient

    parser: argparse.ArgumentParser = args.parser
    plan = _plan(parser, args)
    out: IO[bytes] = sys.stdout.buffer
    counter = [0]  # records printed: read after _consume ends however it ends (Ctrl-C, SIGTERM, an error)
    with FetchClient(plan.fetch_config) as fetch, Admin(plan.admin_config) as admin:
        partitions = fetch.partitions(args.topic)
        if args.partition is not None:
            if args.partition not in partitions:
                raise CliError(f"topic {args.topic!r} has no partition {args.partition} (it has "
                               f"{len(partitions)})")
            partitions = [args.partition]
        if plan.group:
            refuse_active_group(admin, plan.group, "read with it and commit its offsets")
        positions = _start_positions(fetch, admin, args, plan, partitions)
        committed = dict(positions)

        def commit() -> None:
            if plan.commit and plan.group and positions != committed:
                changed = {(args.topic, p): o for p, o in positions.items() if committed.get(p) != o}
                commit_offsets(admin, plan.group, changed)
                committed.update(positions)

        # Ctrl-C asks the loop to stop after the record it is printing, so that what was printed is what is
        # counted and committed; a second Ctrl-C interrupts at once (a call that hangs).
        stop = SignalFlag()

        def on_interrupt(signum: int, frame: Any) -> None:
            if stop.is_set():
                raise KeyboardInterrupt
            stop.set()

        handlers: dict[signal.Signals, Callable[[int, Any], object]] = (
            {signal.SIGINT: on_interrupt} if threading.current_thread() is threading.main_thread() else {})
        try:
            with signal_handlers(handlers):
                _consume(fetch, args, plan, positions, lambda text: out.write(text.encode("utf-8")), out.flush,
                         commit, counter, stop)
        except KeyboardInterrupt:
            stop.set()
        except BrokenPipeError:  # the reader went away (| head): stop, as Kafka's tool does
            _silence_stdout()
            print("Unable to write to standard out, closing consumer.", file=sys.stderr)
        finally:
            try:
                commit()  # what was printed, also after Ctrl-C or SIGTERM
            finally:
                print(f"Processed a total of {counter[0]} messages", file=sys.stderr, flush=True)
        interrupted = stop.is_set()
    return 130 if interrupted else 0


def _silence_stdout() -> None:
    import os

    # Python flushes stdout again at exit: point it at /dev/null so that flush does not fail a second time.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _start_positions(fetch: Any, admin: Any, args: argparse.Namespace, plan: _Plan,
                     partitions: list[int]) -> dict[int, int]:
    committed: dict[tuple[str, int], int] = {}
    if plan.group:
        committed = admin.list_consumer_group_offsets(plan.group, [(args.topic, p) for p in partitions])
    positions: dict[int, int] = {}
    for p in partitions:
        start, end = fetch.offsets(args.topic, p)
        if (args.topic, p) in committed:
            positions[p] = committed[(args.topic, p)]
        elif args.offset is not None:
            positions[p] = (start if args.offset == "earliest" else end if args.offset == "latest"
                            else int(args.offset))
        else:
            positions[p] = start if plan.from_beginning else end
    return positions


def _consume(fetch: Any, args: argparse.Namespace, plan: _Plan, positions: dict[int, int],
             write: Callable[[str], object], flush: Callable[[], None], commit: Callable[[], None],
             counter: list[int], stop: SignalFlag) -> None:
    """Print records until --max-messages, --timeout-ms or an exception; positions[p] is always the next offset
    to print of partition p (what a commit stores)."""
    fmt = plan.fmt
    topic = args.topic
    last_record = last_commit = time.monotonic()
    while True:
        found = False
        for p in sorted(positions):
            start, end = fetch.offsets(topic, p)
            if positions[p] < start:
                positions[p] = start  # the records were deleted (retention): go on from the oldest left
            if positions[p] > end:
                positions[p] = end  # past the end (--offset too large): from the end, as Kafka's reset to latest
            if positions[p] >= end:
                continue
            for batches in fetch.fetch_batches(topic, p, positions[p], end):
                for batch in batches:
                    # Java's consumer: a LogAppendTime batch's records all carry the broker's time, its max.
                    log_append = batch.timestamp_type == 1
                    kind = "LogAppendTime" if log_append else "CreateTime"
                    for rec in batch.records:
                        if rec.offset < positions[p] or rec.offset >= end:
                            continue
                        write(fmt.format(p, rec.offset, kind, batch.max_timestamp if log_append else rec.timestamp,
                                         rec.key, rec.value, rec.headers))
                        positions[p] = rec.offset + 1
                        counter[0] += 1
                        found = True
                        if stop.is_set() or (args.max_messages is not None and counter[0] >= args.max_messages):
                            flush()
                            return
            positions[p] = end  # control batches and aborted records up to the end are passed over too
            flush()
        now = time.monotonic()
        if found:
            last_record = now
        elif args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
            return
        if now - last_commit >= plan.commit_interval_s:
            commit()
            last_commit = now
        if stop.is_set() or (not found and stop.wait(IDLE_WAIT_S)):
            return
