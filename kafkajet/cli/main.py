"""Command line: `kafkajet` / `python -m kafkajet` with produce, topics, broker, demo, perf and config."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from kafkajet.cli.client_options import CliError
from kafkajet.cli.program import program_name


def _cmd_broker(args: argparse.Namespace) -> int:
    from kafkajet.testing import EmbeddedBroker
    from kafkajet.testing.embedded_broker import BrokerStartError

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        broker = EmbeddedBroker(port=args.port).start()
    except BrokerStartError as e:
        raise CliError(str(e)) from None  # the message is the install hint; a traceback would bury it
    try:
        print(f"Tansu broker listening on {broker.bootstrap_servers} (Ctrl-C to stop)", flush=True)
        try:
            while not stop.wait(0.5) and broker.running:
                pass
        except KeyboardInterrupt:
            pass
    finally:
        broker.stop()
    print("broker stopped", flush=True)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        raise CliError("the demo runs a PySpark job: install it with `pip install 'kafkajet[spark]'`") from None
    from kafkajet.cli.demo import run_demo

    return run_demo(args)


def _cmd_config(args: argparse.Namespace) -> int:
    from kafkajet.config import TABLES, config_markdown

    print(config_markdown(TABLES[args.client]))
    return 0


def _cmd_perf(args: argparse.Namespace) -> int:
    from kafkajet.cli.perf import main as perf_main

    return perf_main(args.perf_args)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from kafkajet import __version__
    from kafkajet.cli import produce, schema_registry, topics

    parser = argparse.ArgumentParser(prog=prog or program_name(), description="kafkajet command line")
    parser.add_argument("--version", action="version", version=f"kafkajet {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    produce.add_parser(sub)
    topics.add_parser(sub)
    schema_registry.add_parser(sub)

    b = sub.add_parser("broker", help="run an embedded Tansu broker in the foreground until Ctrl-C")
    b.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    b.set_defaults(func=_cmd_broker)

    d = sub.add_parser("demo", help="the main job: produce a dataset and check it arrived exactly once")
    d.add_argument("--bootstrap-servers", default=None, help="your cluster (default: start an embedded broker)")
    d.add_argument("--input", default=None, help="CSV, JSON lines or Parquet file to send instead of synthetic events")
    d.add_argument("--records", type=int, default=1_000_000, help="synthetic events to generate")
    d.add_argument("--topic", default=None, help="topic to write (default: a fresh one)")
    d.set_defaults(func=_cmd_demo)

    # The perf tool parses its own (Java-compatible) options: hand it everything after "perf" untouched.
    pf = sub.add_parser("perf", help="producer performance test, like Kafka's kafka-producer-perf-test",
                        add_help=False, prefix_chars="\0")
    pf.add_argument("perf_args", nargs="*", help=argparse.SUPPRESS)
    pf.set_defaults(func=_cmd_perf)

    c = sub.add_parser("config", help="print a client's configuration table (Markdown)")
    c.add_argument("--client", choices=("producer", "admin", "fetch"), default="producer",
                   help="whose table (default producer); admin and fetch take the keys common to all clients")
    c.set_defaults(func=_cmd_config)
    return parser


def _prog_of(args: argparse.Namespace) -> str:
    parser = getattr(args, "parser", None)
    return parser.prog if isinstance(parser, argparse.ArgumentParser) else program_name()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kafkajet.errors import ConfigError, KafkaError

    prog = _prog_of(args)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except CliError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return e.exit_code
    except ConfigError as e:  # a bad setting is a bad invocation, like an unknown option
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KafkaError as e:
        print(f"{prog}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
