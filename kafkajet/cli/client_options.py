"""The client-configuration options Kafka's tools share: a Java properties file and repeated key=value."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path


class CliError(Exception):
    """A failure to report in one line on stderr (no traceback), with the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file: key=value or key: value lines; # and ! start comments; \\ continues a line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read the properties file {path!r}: {e.strerror or e}", 2) from None
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            key, value = line, ""
        else:
            key, value = line[:cut], line[cut + 1:]
        out[key.strip()] = value.strip()
    return out


def parse_assignments(items: Iterable[str] | None, option: str) -> dict[str, str]:
    """Repeated `key=value` options; CliError (exit 2) naming one without '='."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} {item!r}: expected key=value", 2)
        out[key.strip()] = value
    return out


def add_config_options(parser: argparse.ArgumentParser, *, producer: bool = False) -> None:
    """--command-config FILE and --command-property k=v (and the producer tool's spellings of them)."""
    file_flags = ["--command-config"] + (["--producer.config"] if producer else [])
    prop_flags = ["--command-property"] + (["--producer-property"] if producer else [])
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
