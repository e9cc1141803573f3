"""Command line: `python -m kafkajet broker | demo | config`."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence


def _cmd_broker(args: argparse.Namespace) -> int:
    from kafkajet.testing import EmbeddedBroker

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with EmbeddedBroker(port=args.port) as broker:
        print(f"Tansu broker listening on {broker.bootstrap_servers} (Ctrl-C to stop)", flush=True)
        try:
            while not stop.wait(0.5) and broker.running:
                pass
        except KeyboardInterrupt:
            pass
    print("broker stopped", flush=True)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from kafkajet.cli.demo import run_demo

    return run_demo(args)


def _cmd_config(args: argparse.Namespace) -> int:
    from kafkajet.config import config_markdown

    print(config_markdown())
    return 0


def _cmd_perf(args: argparse.Namespace) -> int:
    from kafkajet.cli.perf import main as perf_main

    return perf_main(args.perf_args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kafkajet", description="kafkajet command line")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

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

    c = sub.add_parser("config", help="print the producer configuration table (Markdown)")
    c.set_defaults(func=_cmd_config)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
