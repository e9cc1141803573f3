"""The client-configuration options Kafka's tools share: a Java properties file and repeated key=value."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from pathlib import Path


class CliError(Exception):
    """A failure to report in one line on stderr (no traceback), with the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


_PROPERTY_SEPARATOR = re.compile(r"(?<!\\)[=:]|(?<!\\)\s")
_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape_property(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return _PROPERTY_ESCAPES.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", sub, text)


def parse_properties(text: str) -> dict[str, str]:
    """A Java .properties file: key=value, key: value or key value; # and ! comments; a trailing backslash
    continues the line; backslash escapes (\\t, \\n, \\uXXXX, \\=, \\:)."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()  # leading blanks go, on continuation lines too
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the last one joins the next line
            logical += line[:-1]
            continue
        logical += line
        m = _PROPERTY_SEPARATOR.search(logical)
        if m is None:
            key, value = logical, ""
        else:
            key = logical[:m.start()]
            rest = logical[m.end():].lstrip()
            if m.group().isspace() and rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            value = rest
        props[_unescape_property(key.rstrip())] = _unescape_property(value)
        logical = ""
    if logical:
        raise CliError("the properties file ends inside a continued line (a trailing backslash)", 2)
    return props


def read_properties(path: str) -> dict[str, str]:
    """The Java properties file at `path`; CliError (exit 2) when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read the properties file {path!r}: {e.strerror or e}", 2) from None
    return parse_properties(text)


def parse_assignments(items: Iterable[str] | None, option: str) -> dict[str, str]:
    """Repeated `key=value` options; CliError (exit 2) naming one without '='."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} {item!r}: expected key=value", 2)
        out[key.strip()] = value
    return out


def add_bootstrap_option(parser: argparse.ArgumentParser, help: str = "the cluster (required)", *,
                         broker_list: bool = False) -> None:
    """--bootstrap-server (Kafka's tools' spelling; --bootstrap-servers too), read by client_config().

    broker_list: also --broker-list, the console producer's older name for it, which scripts and tutorials
    written for Kafka's tool still pass."""
    flags = ["--bootstrap-server", "--bootstrap-servers"] + (["--broker-list"] if broker_list else [])
    parser.add_argument(*flags, dest="bootstrap_server", default=None, metavar="HOST:PORT[,...]", help=help)


def add_config_options(parser: argparse.ArgumentParser, *, producer: bool = False, consumer: bool = False) -> None:
    """--command-config FILE and --command-property k=v (and the console producer's or consumer's spellings)."""
    file_flags = ["--command-config"] + (["--producer.config"] if producer else []) + (
        ["--consumer.config"] if consumer else [])
    prop_flags = ["--command-property"] + (["--producer-property"] if producer else []) + (
        ["--consumer-property"] if consumer else [])
    parser.add_argument(*file_flags, dest="config_file", metavar="FILE", default=None,
                        help="Java properties file of client settings (security.protocol, sasl.*, ...)")
    parser.add_argument(*prop_flags, dest="config_props", metavar="KEY=VALUE", action="append", default=[],
                        help="a client setting; repeatable; wins over the file")


def client_config(args: argparse.Namespace) -> dict[str, str]:
    """The settings from --command-config, then --command-property, then --bootstrap-server."""
    config = read_properties(args.config_file) if args.config_file else {}
    config.update(parse_assignments(args.config_props, "--command-property"))
    config["bootstrap.servers"] = args.bootstrap_server
    return config


def require_bootstrap(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.bootstrap_server:
        # Exits 2 with the usage line, as argparse does for any other missing option.
        parser.error(f"--bootstrap-server is required: `{parser.prog}` talks to your cluster and does not start an "
                     "embedded broker (run `kafkajet broker` in another terminal for a local one)")
