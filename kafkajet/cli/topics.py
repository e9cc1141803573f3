"""`kafkajet topics`: create, list, describe and delete topics, like Kafka's kafka-topics."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from kafkajet.cli.client_options import (
    CliError,
    add_bootstrap_option,
    add_config_options,
    client_config,
    require_bootstrap,
)
from kafkajet.cluster import format_uuid


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "topics", help="create, list, describe or delete topics (like kafka-topics)",
        description="Topic administration; exits 1 on a broker error (topic exists, unknown topic, ...).")
    add_bootstrap_option(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create --topic")
    action.add_argument("--list", action="store_true", help="print the topic names, one a line")
    action.add_argument("--describe", action="store_true", help="partitions, leaders, replicas (all or --topic)")
    action.add_argument("--delete", action="store_true", help="delete --topic")
    action.add_argument("--alter", action="store_true",
                        help="add --partitions or change --config of --topic: not supported yet (exits 1)")
    p.add_argument("--topic", default=None, help="the topic to create, describe or delete")
    p.add_argument("--partitions", type=int, default=None, help="partitions of a new topic (default 1)")
    p.add_argument("--replication-factor", type=int, default=1, help="replicas of a new topic (default 1)")
    p.add_argument("--config", dest="topic_configs", metavar="KEY=VALUE", action="append", default=[],
                   help="a topic setting for --create (or --alter), e.g. cleanup.policy=compact; repeatable")
    p.add_argument("--if-not-exists", action="store_true",
                   help="--create: nothing to do if the topic exists (a warning if its --partitions differ)")
    p.add_argument("--if-exists", action="store_true", help="--delete/--describe: no error if it does not exist")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="bound of each operation (default: default.api.timeout.ms, 60 s)")
    add_config_options(p)
    p.set_defaults(func=run, parser=p)
    return p


# Java's org.apache.kafka.common.internals.Topic: the names a broker accepts, checked before asking one.
MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse `name` as a topic name (Java's Topic.validate), or None if it is legal."""
    if not name:
        return "a topic name can't be empty"
    if name in (".", ".."):
        return 'a topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return f"a topic name can't be longer than {MAX_NAME_LENGTH} characters ({len(name)} given)"
    if not _LEGAL_NAME.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL_NAME.fullmatch(c)})
        return (f"topic name {name!r} is illegal: it contains {', '.join(map(repr, bad))}; use only ASCII "
                "letters and digits, '.', '_' and '-'")
    return None


def run(args: argparse.Namespace) -> int:
    from kafkajet.admin import Admin
    from kafkajet.cli.client_options import parse_assignments
    from kafkajet.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

    parser: argparse.ArgumentParser = args.parser
    require_bootstrap(parser, args)
    if (args.create or args.delete or args.alter) and not args.topic:
        parser.error(f"--{'create' if args.create else 'delete' if args.delete else 'alter'} needs --topic NAME")
    if (args.partitions is not None and args.partitions < 1) or args.replication_factor < 1:
        parser.error("--partitions and --replication-factor must be at least 1")
    topic_configs = parse_assignments(args.topic_configs, "--config")
    if args.alter:
        if args.partitions is None and not topic_configs:
            parser.error("--alter needs --partitions N or --config KEY=VALUE")
        # Checked before connecting: the protocol module has no schema for either request, so no broker could
        # be asked. Said plainly rather than failing later with an unsupported-version error.
        missing = ([("--partitions", "CreatePartitions")] if args.partitions is not None else []) + (
            [("--config", "IncrementalAlterConfigs")] if topic_configs else [])
        raise CliError("--alter is not supported: kafkajet does not implement "
                       + " or ".join(f"{api} (for {flag})" for flag, api in missing)
                       + "; use Kafka's kafka-topics.sh --alter or kafka-configs.sh --alter for now")
    if args.create:
        problem = topic_name_problem(args.topic)
        if problem is not None:
            raise CliError(problem, 2)
        if "." in args.topic or "_" in args.topic:  # Java's kafka-topics warns the same way
            print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                  "could collide. To avoid issues it is best to use either, but not both.", file=sys.stderr)
    with Admin(client_config(args)) as admin:
        if args.create:
            try:
                admin.create_topics(args.topic, args.partitions or 1, args.replication_factor,
                                    configs=topic_configs, timeout_s=args.timeout)
            except TopicAlreadyExistsError:
                if not args.if_not_exists:
                    raise
                # As Kafka's tool: nothing to say, exit 0; but a partition count asked for and not there is
                # told at once (the topic is left as it is).
                if args.partitions is not None:
                    has = len(admin.describe_topics(args.topic, args.timeout)[args.topic].partitions)
                    if has != args.partitions:
                        print(f"WARNING: topic {args.topic} exists already with {has} partitions, not "
                              f"{args.partitions}: left as it is", file=sys.stderr)
                return 0
            print(f"Created topic {args.topic}.")
        elif args.delete:
            # As Kafka's tool: with --if-exists, a topic that was not there is a no-op that says nothing.
            if admin.delete_topics(args.topic, args.timeout, if_exists=args.if_exists):
                print(f"Deleted topic {args.topic}.")
        elif args.list:
            for name in sorted(admin.list_topics(args.timeout)):
                print(name)
        else:
            try:
                topics = (admin.describe_topics(args.topic, args.timeout) if args.topic
                          else admin.list_topics(args.timeout))
            except UnknownTopicOrPartitionError:
                if args.if_exists:
                    return 0
                raise CliError(f"topic {args.topic!r} does not exist") from None
            configs = admin.describe_topic_configs(sorted(topics), args.timeout) if topics else {}
            for name in sorted(topics):
                desc = topics[name]
                replication = max((len(p.replicas) for p in desc.partitions), default=0)
                # A broker that keeps no topic ids (Tansu) gives none: leave the field out rather than print None.
                topic_id = f"TopicId: {format_uuid(desc.topic_id)}\t" if desc.topic_id else ""
                # As Kafka's tool: every setting not at Kafka's default, the topic's own and the broker's.
                overridden = ",".join(f"{c.name}={c.value}" for c in configs.get(name, {}).values() if not c.is_default)
                print(f"Topic: {name}\t{topic_id}PartitionCount: {len(desc.partitions)}\t"
                      f"ReplicationFactor: {replication}\tConfigs: {overridden}")
                for part in desc.partitions:
                    print(f"\tTopic: {name}\tPartition: {part.partition}\tLeader: {part.leader}\t"
                          f"Replicas: {','.join(map(str, part.replicas))}\tIsr: {','.join(map(str, part.isr))}")
    return 0
