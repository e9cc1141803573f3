"""`kafkajet produce`: lines from stdin or a file into a topic, like Kafka's kafka-console-producer."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from kafkajet.cli.client_options import (
    CliError,
    add_bootstrap_option,
    add_config_options,
    client_config,
    require_bootstrap,
)

# Kafka's LineMessageReader properties and defaults (kafka.tools.ConsoleProducer).
READER_DEFAULTS: dict[str, str] = {
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "null.marker": "",
    "ignore.error": "false",
}
CLOSE_TIMEOUT_S = 120.0  # bounds the final flush: records still unsent then count as failed


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "produce", help="send lines from stdin or a file to a topic (like kafka-console-producer)",
        description="Send each input line as one record. Prints the counts of delivered and failed records "
                    "to stderr at the end; exits 1 if any failed.")
    add_bootstrap_option(p, "the cluster (required; --broker-list is the console producer's older name)",
                         broker_list=True)
    p.add_argument("--topic", required=True, help="topic to send to")
    p.add_argument("--file", default=None, help="read lines from this file instead of stdin")
    p.add_argument("--property", dest="reader_props", metavar="KEY=VALUE", action="append", default=[],
                   help="line parsing: " + ", ".join(f"{k} (default {v!r})" for k, v in READER_DEFAULTS.items()))
    add_config_options(p, producer=True)
    p.add_argument("--request-required-acks", default=None, metavar="ACKS", help="acks: all, -1, 0 or 1")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default=None, metavar="CODEC",
                   help="none, gzip (if given without a value), snappy, lz4 or zstd")
    p.set_defaults(func=run, parser=p)
    return p


@dataclass(frozen=True)
class LineFormat:
    parse_key: bool
    key_separator: bytes
    parse_headers: bool
    headers_delimiter: bytes
    headers_separator: bytes
    headers_key_separator: bytes
    null_marker: bytes | None
    ignore_error: bool

    @classmethod
    def from_properties(cls, given: dict[str, str]) -> LineFormat:
        unknown = sorted(set(given) - set(READER_DEFAULTS))
        if unknown:
            raise CliError(f"--property {unknown[0]!r} is not a line-reader property; known: "
                           f"{', '.join(READER_DEFAULTS)} (client settings go in --producer-property)", 2)
        props = {**READER_DEFAULTS, **given}
        for name in ("parse.key", "parse.headers", "ignore.error"):
            if props[name].strip().lower() not in ("true", "false"):
                raise CliError(f"--property {name}={props[name]!r}: expected true or false", 2)
        for sep in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
            if not props[sep]:
                raise CliError(f"--property {sep} must not be empty", 2)

        def flag(name: str) -> bool:
            return props[name].strip().lower() == "true"

        return cls(flag("parse.key"), props["key.separator"].encode(), flag("parse.headers"),
                   props["headers.delimiter"].encode(), props["headers.separator"].encode(),
                   props["headers.key.separator"].encode(), props["null.marker"].encode() or None,
                   flag("ignore.error"))

    def _null(self, b: bytes) -> bytes | None:
        return None if self.null_marker is not None and b == self.null_marker else b

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """(key, value, headers) of one line, as Kafka's console producer splits it."""
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            head, sep, after = rest.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise CliError(f"line {number}: no headers delimiter {self.headers_delimiter!r} found "
                                   "(parse.headers=true; set ignore.error=true to send such lines whole)")
            else:
                rest = after
                for item in head.split(self.headers_separator):
                    hkey, hsep, hvalue = item.partition(self.headers_key_separator)
                    if self.null_marker is not None and hkey == self.null_marker:
                        raise CliError(f"line {number}: a header key must not be the null marker")
                    headers.append((hkey.decode("utf-8", "replace"), self._null(hvalue) if hsep else None))
        key: bytes | None = None
        value = rest
        if self.parse_key:
            k, sep, v = rest.partition(self.key_separator)
            if sep:
                key, value = self._null(k), v
            elif not self.ignore_error:
                raise CliError(f"line {number}: no key separator {self.key_separator!r} found (parse.key=true; "
                               "set ignore.error=true to send such lines without a key)")
        return key, self._null(value), headers


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for raw in stream:
        yield raw.rstrip(b"\n").removesuffix(b"\r")


def run(args: argparse.Namespace) -> int:
    from kafkajet.cli.client_options import parse_assignments
    from kafkajet.errors import KafkaError
    from kafkajet.producer.producer import Producer

    require_bootstrap(args.parser, args)
    fmt = LineFormat.from_properties(parse_assignments(args.reader_props, "--property"))
    config: dict[str, Any] = client_config(args)
    if args.request_required_acks is not None:
        config["acks"] = args.request_required_acks
    if args.compression_codec is not None:
        config["compression.type"] = args.compression_codec
    lock = threading.Lock()
    counts = {"delivered": 0, "failed": 0, "refused": 0}
    errors: list[str] = []

    def done(future: Any) -> None:
        exc = future.exception(0)
        with lock:
            if exc is None:
                counts["delivered"] += 1
            else:
                counts["failed"] += 1
                if len(errors) < 5:
                    errors.append(f"{type(exc).__name__}: {exc}")

    stream: IO[bytes]
    try:
        stream = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    except OSError as e:
        raise CliError(f"cannot read --file {args.file!r}: {e.strerror or e}", 2) from None
    producer = Producer(config)
    sent = 0
    failure: CliError | None = None
    try:
        for number, line in enumerate(_lines(stream), 1):
            key, value, headers = fmt.parse(line, number)
            try:
                future = producer.send(args.topic, value, key=key, headers=headers or None)
            except KafkaError as e:  # refused before it was queued (too large, ...): one failed record
                with lock:
                    counts["refused"] += 1
                    if len(errors) < 5:
                        errors.append(f"line {number}: {type(e).__name__}: {e}")
                continue
            future.add_done_callback(done)
            sent += 1
    except CliError as e:
        failure = e  # what was sent before the bad line is still flushed and counted
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
        producer.close(CLOSE_TIMEOUT_S)
    with lock:
        unresolved = sent - counts["delivered"] - counts["failed"]  # still unsent when close() gave up
        failed = counts["failed"] + counts["refused"] + unresolved
        for message in errors:  # prefixed as every other error line of the command
            print(f"{args.parser.prog}: error: {message}", file=sys.stderr)
        delivered = counts["delivered"]
        print(f"{delivered} record{'' if delivered == 1 else 's'} delivered, {failed} failed", file=sys.stderr)
    if failure is not None:
        raise failure
    return 1 if failed else 0
