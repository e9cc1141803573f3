"""`kafkajet schema-registry`: run kafkajet's Schema Registry in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import Any

from kafkajet.cli.signals import SignalFlag, signal_handlers


def _run(args: argparse.Namespace) -> int:
    stop = SignalFlag()
    with signal_handlers({signal.SIGTERM: lambda *_: stop.set()}):
        return _serve(args, stop)


def _serve(args: argparse.Namespace, stop: SignalFlag) -> int:
    from kafkajet.cli.client_options import CliError
    from kafkajet.errors import KafkaError
    from kafkajet.testing.schema_registry import SchemaRegistry

    registry = SchemaRegistry(args.port, host=args.host, bootstrap_servers=args.bootstrap_server, topic=args.topic)
    # Where the schemas live is said in the listening line: not a second time as a WARNING.
    logger = logging.getLogger("kafkajet.testing.schema_registry")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        registry.start()
    except OSError as e:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    except KafkaError as e:
        raise CliError(f"cannot use the broker {args.bootstrap_server} for the {args.topic} topic: {e}") from None
    finally:
        logger.setLevel(level)
    interrupted = False
    try:
        try:
            # Inside the handler: a Ctrl-C right after the line is flushed (a caller reacting to it) lands here too.
            print(f"Schema Registry listening on {registry.url}; schemas kept in {registry.storage()} (Ctrl-C to "
                  "stop)", flush=True)
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            interrupted = True
    finally:
        registry.stop()
    print("schema registry stopped", flush=True)
    return 130 if interrupted else 0  # 130 after Ctrl-C, as every command; SIGTERM is the normal stop: 0


def add_parser(sub: Any) -> None:
    from kafkajet.cli.client_options import add_bootstrap_option

    p = sub.add_parser(
        "schema-registry", help="run a Schema Registry (Confluent REST API subset) until Ctrl-C",
        description="Serve kafkajet's Schema Registry (the Confluent REST API subset serializers use: subjects, "
                    "versions, ids, compatibility) on --host:--port until Ctrl-C (exit 130) or SIGTERM (exit 0). "
                    "Schemas are kept in memory, or with --bootstrap-server in a compacted topic that a restart "
                    "reads back, so ids stay the same. Exits 1 if the port is taken or the broker unusable.")
    p.add_argument("--port", type=int, default=8081, help="port (default 8081; 0 for a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    add_bootstrap_option(p, help="keep schemas in a topic on this cluster, so a restart keeps their ids "
                                 "(default: memory)")
    p.add_argument("--topic", default="_schemas", help="the schemas topic (default _schemas)")
    p.set_defaults(func=_run)
