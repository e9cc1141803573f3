"""What the command line does with arguments its command does not take: the command's usage and name, not the
top-level `kafkajet` usage (which lists the commands and says nothing of the options the user was typing)."""

from __future__ import annotations

import pytest

from kafkajet.cli.main import build_parser, main


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_a_second_value_after_command_property_gets_the_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    # Kafka's tools take one KEY=VALUE per --command-property; the second one is left over, before connecting.
    err = _usage_error(capsys, "topics", "--bootstrap-server", "127.0.0.1:1", "--list",
                       "--command-property", "client.id=a", "request.timeout.ms=1000")
    assert err.startswith("usage: ") and " topics [-h]" in err.splitlines()[0], err
    assert "--command-property KEY=VALUE" in err
    assert "kafkajet topics: error: unrecognized arguments: request.timeout.ms=1000" in err
    assert "repeat the option for each" in err
    assert "{produce,consume" not in err  # the top-level usage's list of commands


def test_an_unknown_option_of_a_command_names_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(capsys, "groups", "--bootstrap-server", "127.0.0.1:1", "--list", "--members-only")
    assert "kafkajet groups: error: unrecognized arguments: --members-only" in err and " groups [-h]" in err
    assert "repeat the option" not in err


def test_broker_list_is_the_console_producers_bootstrap_server() -> None:
    args = build_parser().parse_args(["produce", "--broker-list", "h1:9092,h2:9092", "--topic", "t"])
    assert args.bootstrap_server == "h1:9092,h2:9092"
    with pytest.raises(SystemExit):  # only the console producer took it in Kafka
        build_parser().parse_args(["topics", "--broker-list", "h1:9092", "--list"])
