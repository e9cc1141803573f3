"""`kafkajet groups`: list consumer groups and describe their lag, like Kafka's kafka-consumer-groups."""

from __future__ import annotations

import argparse
from typing import Any

from kafkajet.cli.client_options import (
    CliError,
    add_bootstrap_option,
    add_config_options,
    client_config,
    require_bootstrap,
)

COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "groups", help="list consumer groups or show a group's lag (like kafka-consumer-groups)",
        description="Consumer group offsets and lag: --list names every group; --describe --group G shows, per "
                    "partition, the committed offset, the log end offset and the lag. Exits 1 on a broker "
                    "error or a group without committed offsets.")
    add_bootstrap_option(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="print the group ids, one a line")
    action.add_argument("--describe", action="store_true", help="committed offsets and lag of --group")
    p.add_argument("--group", default=None, help="the group to describe")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="bound of each operation (default: default.api.timeout.ms, 60 s)")
    add_config_options(p)
    p.set_defaults(func=run, parser=p)
    return p


def run(args: argparse.Namespace) -> int:
    from kafkajet.admin import Admin

    parser: argparse.ArgumentParser = args.parser
    require_bootstrap(parser, args)
    if args.describe and not args.group:
        parser.error("--describe needs --group NAME")
    with Admin(client_config(args)) as admin:
        if args.list:
            for listing in admin.list_consumer_groups(args.timeout):
                print(listing.group_id)
            return 0
        described = admin.describe_consumer_group(args.group, args.timeout)
    if not described.partitions:
        raise CliError(f"consumer group {args.group!r} has no committed offsets (no such group, or it has "
                       "committed nothing yet)")
    rows = [COLUMNS] + [(args.group, p.topic, str(p.partition), str(p.committed_offset), str(p.log_end_offset),
                         str(p.lag)) for p in described.partitions]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    for row in rows:
        print(" ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0
