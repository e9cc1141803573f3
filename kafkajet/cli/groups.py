"""`kafkajet groups`: list consumer groups, describe their lag and reset their offsets, like Kafka's
kafka-consumer-groups."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from kafkajet.cli.client_options import (
    CliError,
    add_bootstrap_option,
    add_config_options,
    client_config,
    require_bootstrap,
)

COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
           "CLIENT-ID")
MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
# The states in which Kafka's tool lets a group's offsets be reset: no consumer is in it. "Unknown" (Tansu's
# answer for every group) says nothing either way: the commit is then left to the broker to refuse.
INACTIVE_STATES = ("Empty", "Dead")
UNKNOWN_STATES = (None, "Unknown")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "groups", help="list consumer groups, show their lag or reset their offsets (like kafka-consumer-groups)",
        description="Consumer group offsets and lag: --list names every group; --describe --group G (or "
                    "--all-groups) shows, per partition, the committed offset, the log end offset and the lag; "
                    "--reset-offsets --group G --topic T --to-earliest (or --to-latest, --to-datetime, --to-offset, "
                    "--shift-by) prints the new offsets and, with --execute, commits them (only while no consumer "
                    "is in the group). Exits 1 on a broker error or a group without committed offsets.")
    add_bootstrap_option(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="print the group ids, one a line")
    action.add_argument("--describe", action="store_true", help="committed offsets and lag of --group")
    action.add_argument("--reset-offsets", action="store_true",
                        help="plan (--dry-run, the default) or commit (--execute) new offsets for --group")
    p.add_argument("--members", action="store_true",
                   help="--describe: the group's live members (consumer id, host, client id, partitions held) "
                        "instead of its offsets")
    action.add_argument("--delete", action="store_true",
                        help="delete --group (repeatable) or --all-groups with their committed offsets; only "
                             "groups no consumer is in")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--group", dest="groups", action="append", default=[],
                       help="the group to describe, reset or delete (--delete takes it repeated)")
    which.add_argument("--all-groups", action="store_true", help="every group the cluster lists")
    topics = p.add_mutually_exclusive_group()
    topics.add_argument("--topic", dest="topics", action="append", default=[], metavar="TOPIC[:P,P...]",
                        help="--reset-offsets: the topic (all its partitions, or those listed); repeatable")
    topics.add_argument("--all-topics", action="store_true",
                        help="--reset-offsets: every topic the group has committed offsets for")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to each partition's log start")
    to.add_argument("--to-latest", action="store_true", help="reset to each partition's log end")
    to.add_argument("--to-datetime", metavar="ISO-8601",
                    help="reset to the first record at or after this time, e.g. 2024-01-31T12:00:00.000 (local "
                         "time unless it has an offset such as Z or +02:00); the log end if none is that recent")
    to.add_argument("--to-offset", type=int, metavar="OFFSET", help="reset to this offset")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="move each committed offset by N (negative: back), kept within the log")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="print the new offsets only (the default)")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="bound of each operation (default: default.api.timeout.ms, 60 s)")
    add_config_options(p)
    p.set_defaults(func=run, parser=p)
    return p


def group_state(admin: Any, group: str, timeout_s: float | None = None) -> str | None:
    """The group's state as ListGroups gives it; "Dead" for a group the cluster does not know (as Kafka's
    describe says), None when the broker does not tell states (ListGroups before v4), "Unknown" from Tansu."""
    for listing in admin.list_consumer_groups(timeout_s):
        if listing.group_id == group:
            return listing.state  # type: ignore[no-any-return]
    return "Dead"


def refuse_active_group(admin: Any, group: str, what: str, timeout_s: float | None = None) -> None:
    """CliError when consumers are in the group: its offsets are theirs, and Kafka refuses a simple commit."""
    state = group_state(admin, group, timeout_s)
    if state not in UNKNOWN_STATES and state not in INACTIVE_STATES:
        raise CliError(f"consumer group {group!r} has active members (state {state}): cannot {what} while "
                       "consumers are in it; stop them first")


def commit_offsets(admin: Any, group: str, offsets: dict[tuple[str, int], int], timeout_s: float | None = None) -> None:
    """Commit as a simple group; a group whose consumers joined it since refuse_active_group() (or on a broker
    that does not tell group states) refuses: said as such, not as the bare error code."""
    from kafkajet.errors import IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError

    try:
        admin.commit_consumer_group_offsets(group, offsets, timeout_s=timeout_s)
    except (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError) as e:
        raise CliError(f"consumer group {group!r} has active members: the broker refused the commit "
                       f"({type(e).__name__}); stop its consumers first") from None


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def run(args: argparse.Namespace) -> int:
    from kafkajet.admin import Admin

    parser: argparse.ArgumentParser = args.parser
    require_bootstrap(parser, args)
    if len(args.groups) > 1 and not args.delete:
        parser.error("--group is given once, except with --delete")
    args.group = args.groups[0] if args.groups else None
    if (args.describe or args.reset_offsets or args.delete) and not (args.group or args.all_groups):
        action = "describe" if args.describe else "reset-offsets" if args.reset_offsets else "delete"
        parser.error(f"--{action} needs --group NAME or --all-groups")
    reset_only = ("topics", "all_topics", "to_earliest", "to_latest", "to_datetime", "to_offset", "shift_by",
                  "dry_run", "execute")
    if not args.reset_offsets:
        given = [name for name in reset_only if getattr(args, name) not in (None, False, [])]
        if given:
            parser.error(f"--{given[0].replace('_', '-')} goes with --reset-offsets")
    if args.members and not args.describe:
        parser.error("--members goes with --describe")
    if args.list and args.all_groups:
        parser.error("--all-groups goes with --describe or --reset-offsets")
    with Admin(client_config(args)) as admin:
        if args.list:
            for listing in admin.list_consumer_groups(args.timeout):
                print(listing.group_id)
            return 0
        if args.reset_offsets:
            return _reset(parser, admin, args)
        if args.delete:
            return _delete(admin, args)
        if args.all_groups:
            return _describe_all(admin, args)
        if args.members:
            return _describe_members(admin, args.group, args.timeout)
        described = admin.describe_consumer_group(args.group, args.timeout)
        members = admin.describe_consumer_group_members(args.group, args.timeout)
    rows = _lag_rows(described, members)
    if not rows:
        raise CliError(f"consumer group {args.group!r} has no committed offsets (no such group, or it has "
                       "committed nothing yet)")
    _no_active_members(members)
    _table([COLUMNS] + rows)
    return 0


def _no_active_members(members: Any) -> None:
    if not members.members and members.state not in UNKNOWN_STATES:  # as Kafka's tool, on stderr
        print(f"\nConsumer group '{members.group_id}' has no active members.", file=sys.stderr)


def _lag_rows(described: Any, members: Any) -> list[tuple[str, ...]]:
    """Kafka's tool's rows: each committed partition, with the member that holds it (or "-"), and each held
    partition without a commit yet (no offset, no lag)."""
    holder = {tp: m for m in members.members for tp in m.assignment}
    rows: dict[tuple[str, int], tuple[str, ...]] = {}
    for p in described.partitions:
        m = holder.get((p.topic, p.partition))
        rows[(p.topic, p.partition)] = (
            described.group_id, p.topic, str(p.partition), str(p.committed_offset), str(p.log_end_offset),
            str(p.lag), *((m.member_id, m.host, m.client_id) if m else ("-", "-", "-")))
    for tp, m in holder.items():
        if tp not in rows:
            rows[tp] = (described.group_id, tp[0], str(tp[1]), "-", "-", "-", m.member_id, m.host, m.client_id)
    return [rows[k] for k in sorted(rows)]


def _describe_members(admin: Any, group: str, timeout_s: float | None) -> int:
    members = admin.describe_consumer_group_members(group, timeout_s)
    if members.state == "Dead":
        raise CliError(f"consumer group {group!r} does not exist")
    _no_active_members(members)
    # A broker that does not say (Tansu gives no host, client id or assignment) gets "-", not a blank column.
    _table([MEMBER_COLUMNS] + [(group, m.member_id, m.host or "-", m.client_id or "-", str(len(m.assignment)))
                               for m in sorted(members.members, key=lambda m: m.member_id)])
    return 0


def _describe_all(admin: Any, args: argparse.Namespace) -> int:
    """Each group's table, a blank line between them, as Kafka's tool prints --describe --all-groups."""
    first = True
    for listing in admin.list_consumer_groups(args.timeout):
        if not first:
            print()
        first = False
        if args.members:
            _describe_members(admin, listing.group_id, args.timeout)
            continue
        described = admin.describe_consumer_group(listing.group_id, args.timeout)
        rows = _lag_rows(described, admin.describe_consumer_group_members(listing.group_id, args.timeout))
        if rows:
            _table([COLUMNS] + rows)
        else:
            print(f"Consumer group '{listing.group_id}' has no committed offsets.")
    return 0


def _delete(admin: Any, args: argparse.Namespace) -> int:
    """Kafka's tool's words: one line when every group went, else each refusal (exit 1)."""
    groups = ([g.group_id for g in admin.list_consumer_groups(args.timeout)] if args.all_groups
              else list(dict.fromkeys(args.groups)))
    if not groups:
        print("No consumer groups to delete.", file=sys.stderr)
        return 0
    outcome = admin.delete_consumer_groups(groups, args.timeout)
    deleted = [g for g, e in outcome.items() if e is None]
    failed = {g: e for g, e in outcome.items() if e is not None}
    if not failed:
        print("Deletion of requested consumer groups ('" + "', '".join(deleted) + "') was successful.")
        return 0
    print("\nError: Deletion of some consumer groups failed:", file=sys.stderr)
    for group, error in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {type(error).__name__}: {error}")
    if deleted:
        print("\nThese consumer groups were deleted successfully: '" + "', '".join(deleted) + "'")
    return 1


def parse_datetime_ms(text: str) -> int:
    """An ISO 8601 time as epoch milliseconds: local time unless it names its offset (Z, +02:00), as Kafka's
    tool reads --to-datetime."""
    try:
        when = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise CliError(f"--to-datetime {text!r}: expected ISO 8601, e.g. 2024-01-31T12:00:00.000 or "
                       "2024-01-31T12:00:00Z", 2) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Java's tool takes a time without an offset
    return int(when.timestamp() * 1000)


def _reset(parser: argparse.ArgumentParser, admin: Any, args: argparse.Namespace) -> int:
    from kafkajet.config import ignored_security_keys
    from kafkajet.fetch import FetchClient

    if not (args.topics or args.all_topics):
        parser.error("--reset-offsets needs --topic TOPIC or --all-topics")
    if not (args.to_earliest or args.to_latest or args.to_datetime or args.to_offset is not None
            or args.shift_by is not None):
        parser.error("--reset-offsets needs one of --to-earliest, --to-latest, --to-datetime, --to-offset, "
                     "--shift-by")
    if args.to_offset is not None and args.to_offset < 0:
        parser.error("--to-offset must not be negative")
    timestamp_ms = parse_datetime_ms(args.to_datetime) if args.to_datetime else None
    if not (args.dry_run or args.execute):
        print("WARN: No action will be performed as the --execute option is missing. Add --execute to commit "
              "the offsets, or --dry-run to say that only the plan is wanted.", file=sys.stderr)
    groups = ([g.group_id for g in admin.list_consumer_groups(args.timeout)] if args.all_groups
              else [args.group])
    # Every group is checked before any is reset: all or nothing, as Kafka's tool.
    for group in groups:
        refuse_active_group(admin, group, "reset its offsets", args.timeout)
    config = client_config(args)
    ignored = ignored_security_keys(admin.config["security.protocol"], admin.config.explicit)
    fetch_config = {k: v for k, v in config.items() if k not in ignored}
    plans: dict[str, dict[tuple[str, int], int]] = {}
    with FetchClient(fetch_config) as fetch:
        for group in groups:
            committed = admin.list_consumer_group_offsets(group, timeout_s=args.timeout)
            partitions = _reset_partitions(fetch, args, committed)
            plan: dict[tuple[str, int], int] = {}
            for topic, partition in partitions:
                start, end = fetch.offsets(topic, partition)
                if args.to_earliest:
                    new = start
                elif args.to_latest:
                    new = end
                elif timestamp_ms is not None:
                    found = fetch.offset_for_time(topic, partition, timestamp_ms)
                    new = end if found is None else found
                elif args.to_offset is not None:
                    new = args.to_offset
                else:
                    current = committed.get((topic, partition))
                    if current is None:
                        raise CliError(f"cannot shift the offset of {topic}-{partition} for group {group!r}: it has "
                                       "no committed offset")
                    new = current + args.shift_by
                # As Kafka's tool: an offset outside the log is moved to its nearest end (with a warning).
                if new < start or new > end:
                    print(f"WARN: new offset {new} of {topic}-{partition} is outside the log ({start}..{end}): "
                          f"using {start if new < start else end}", file=sys.stderr)
                    new = min(max(new, start), end)
                plan[(topic, partition)] = new
            plans[group] = plan
    rows: list[tuple[str, ...]] = [RESET_COLUMNS]
    for group, plan in plans.items():
        rows += [(group, t, str(p), str(o)) for (t, p), o in sorted(plan.items())]
    if len(rows) == 1:
        raise CliError("no partitions to reset: the group has no committed offsets for --all-topics")
    if args.execute:
        for group, plan in plans.items():
            if plan:
                commit_offsets(admin, group, plan, args.timeout)
    _table(rows)
    return 0


def _reset_partitions(fetch: Any, args: argparse.Namespace,
                      committed: dict[tuple[str, int], int]) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed)
    out: list[tuple[str, int]] = []
    for spec in args.topics:
        topic, sep, listed = spec.partition(":")
        existing = fetch.partitions(topic)
        if not sep:
            out += [(topic, p) for p in existing]
            continue
        try:
            wanted = [int(x) for x in listed.split(",")]
        except ValueError:
            raise CliError(f"--topic {spec!r}: expected TOPIC or TOPIC:PARTITION[,PARTITION...]", 2) from None
        missing = [p for p in wanted if p not in existing]
        if missing:
            raise CliError(f"topic {topic!r} has no partition {missing[0]} (it has {len(existing)})")
        out += [(topic, p) for p in wanted]
    return out
