"""Command line: `kafkajet` / `python -m kafkajet` with produce, consume, topics, groups, schema-registry, broker, demo,
perf and config."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from kafkajet.cli.client_options import CliError
from kafkajet.cli.program import program_name
from kafkajet.cli.signals import SignalFlag, signal_handlers


def _cmd_broker(args: argparse.Namespace) -> int:
    stop = SignalFlag()
    with signal_handlers({signal.SIGTERM: lambda *_: stop.set()}):
        return _run_broker(args, stop)


def _run_broker(args: argparse.Namespace, stop: SignalFlag) -> int:
    from kafkajet.testing import EmbeddedBroker
    from kafkajet.testing.embedded_broker import BrokerStartError

    if args.port is not None:
        _check_port_free(args.port)
    try:
        broker = EmbeddedBroker(port=args.port).start()
    except BrokerStartError as e:
        raise CliError(str(e)) from None  # the message is the install hint; a traceback would bury it
    died: str | None = None
    interrupted = False
    try:
        try:  # Ctrl-C may come as soon as the line is out
            print(f"Tansu broker listening on {broker.bootstrap_servers} (pid {broker.pid}; Ctrl-C to stop)",
                  flush=True)
            while not stop.wait(0.5) and broker.running:
                pass
        except KeyboardInterrupt:
            interrupted = True
        if broker.exit_status is not None:  # it ended on its own: the clients using it just lost it
            died = f"the broker exited by itself ({broker.exit_status}); its last log lines:\n{broker.log_tail()}"
    finally:
        broker.stop()
    if died is not None:
        raise CliError(died)
    print("broker stopped", flush=True)
    return 130 if interrupted else 0  # 130 after Ctrl-C, as every command; SIGTERM is the normal stop: 0


def _check_port_free(port: int) -> None:
    """CliError unless 127.0.0.1:port can be listened on: otherwise the readiness check would reach the
    process that holds it, and Tansu end in a panic after the tool said it was listening."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Tansu: a closed socket's TIME_WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
            s.listen(1)
        except OSError as e:
            raise CliError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from None


def _cmd_config(args: argparse.Namespace) -> int:
    from kafkajet.config import TABLES, config_markdown

    print(config_markdown(TABLES[args.client]))
    return 0


def _cmd_perf(args: argparse.Namespace) -> int:
    from kafkajet.cli.perf import main as perf_main

    return perf_main(args.perf_args)


class _VersionAction(argparse.Action):
    """`--version`: the version and which build runs (compiled or pure Python), worked out only when asked:
    it imports the send path."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from kafkajet import __version__
        from kafkajet._build import describe

        print(f"kafkajet {__version__} ({describe()})")  # on stdout, as argparse's own version action
        parser.exit()


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from kafkajet.cli import consume, groups, produce, schema_registry, topics

    parser = argparse.ArgumentParser(prog=prog or program_name(), description="kafkajet command line")
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="print the version and build, then exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    produce.add_parser(sub)
    consume.add_parser(sub)
    topics.add_parser(sub)
    groups.add_parser(sub)
    schema_registry.add_parser(sub)

    b = sub.add_parser("broker", help="run an embedded Tansu broker in the foreground until Ctrl-C",
                       description="Start the Tansu broker (pip install 'kafkajet[broker]') on 127.0.0.1 with "
                                   "in-memory storage, for trying kafkajet and the other commands locally. It "
                                   "runs until Ctrl-C; exits 1 if the broker ends by itself.")
    b.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    b.set_defaults(func=_cmd_broker)

    from kafkajet.cli import demo

    demo.add_parser(sub)

    # The perf tool parses its own (Java-compatible) options: hand it everything after "perf" untouched.
    pf = sub.add_parser("perf", help="producer performance test, like Kafka's kafka-producer-perf-test",
                        add_help=False, prefix_chars="\0")
    pf.add_argument("perf_args", nargs="*", help=argparse.SUPPRESS)
    pf.set_defaults(func=_cmd_perf)

    c = sub.add_parser("config", help="print a client's configuration table (Markdown)",
                       description="Print every setting a client takes (Java key names, types, defaults, "
                                   "what they do) as a Markdown table.")
    c.add_argument("--client", choices=("producer", "admin", "fetch"), default="producer",
                   help="whose table (default producer); admin and fetch take the keys common to all clients")
    c.set_defaults(func=_cmd_config)
    # -v after the command too (`kafkajet topics --list -v`); SUPPRESS keeps a -v given before it. perf parses
    # its own options and takes -v itself. Every command's errors name it ("kafkajet broker: error: ..."), not
    # only those whose module keeps its parser.
    for name, command in sub.choices.items():
        command.set_defaults(parser=command)
        if name != "perf":
            command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                 help="log at INFO level")
    return parser


def _prog_parser(args: argparse.Namespace) -> argparse.ArgumentParser:
    parser = getattr(args, "parser", None)
    return parser if isinstance(parser, argparse.ArgumentParser) else build_parser()


def _prog_of(args: argparse.Namespace) -> str:
    parser = getattr(args, "parser", None)
    return parser.prog if isinstance(parser, argparse.ArgumentParser) else program_name()


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: an embedded broker (in its own session) is stopped on the way


def main(argv: Sequence[str] | None = None) -> int:
    args, extra = build_parser().parse_known_args(argv)
    if extra:
        # The top-level parser would print its own usage for what the command's parser left over (the second
        # value of `--command-property a=1 b=2`): the command's usage is the one that helps.
        hint = ("; an option takes one KEY=VALUE: repeat the option for each" if any(
            "=" in e and not e.startswith("-") for e in extra) else "")
        _prog_parser(args).error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    # A closed terminal hangs up its process group, which no longer holds the embedded broker, and `kill`
    # reaches only the tool: without this the tool would die at once and leave the broker running.
    with signal_handlers({signal.SIGHUP: _exit_on_signal, signal.SIGTERM: _exit_on_signal}):
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
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
