"""main() run in-process (tests, programs embedding the CLI) leaves the SIGTERM and SIGHUP handlers it found.

The CLI turns SIGTERM and SIGHUP into SystemExit (and the long-running commands turn SIGTERM into "stop"); left
installed after main() returned, a later SIGTERM to the test run failed whichever test was running with
SystemExit: 143 instead of stopping the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkajet.cli import main
from kafkajet.cli.main import _exit_on_signal
from kafkajet.cli.signals import SignalFlag
from tests.helpers.waiting import read_line, wait_for

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _ours_term(signum: int, frame: object) -> None:
    raise AssertionError("the test's own SIGTERM handler ran: nothing here should reach it")


def _ours_hup(signum: int, frame: object) -> None:
    raise AssertionError("the test's own SIGHUP handler ran: nothing here should reach it")


@pytest.fixture
def own_handlers() -> Iterator[dict[signal.Signals, object]]:
    """Handlers of the test's own in place of the defaults, so that "left as found" cannot pass by accident."""
    before = {s: signal.getsignal(s) for s in SIGNALS}
    mine = {signal.SIGTERM: _ours_term, signal.SIGHUP: _ours_hup}
    for s, handler in mine.items():
        signal.signal(s, handler)
    try:
        yield dict(mine)
    finally:
        for s, found in before.items():
            signal.signal(s, found)


def _handlers() -> dict[signal.Signals, object]:
    return {s: signal.getsignal(s) for s in SIGNALS}


def test_a_command_that_returns_leaves_the_handlers_it_found(own_handlers: dict[signal.Signals, object],
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import kafkajet.config

    seen: list[object] = []
    real = kafkajet.config.config_markdown

    def spy(*a: Any, **k: Any) -> str:
        seen.append(signal.getsignal(signal.SIGTERM))  # the CLI's handler is in place while the command runs
        return real(*a, **k)

    monkeypatch.setattr(kafkajet.config, "config_markdown", spy)
    assert main(["config"]) == 0
    assert seen == [_exit_on_signal]
    assert "bootstrap.servers" in capsys.readouterr().out
    assert _handlers() == own_handlers


def test_a_command_that_raises_leaves_the_handlers_it_found(own_handlers: dict[signal.Signals, object],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkajet.cli.perf

    seen: list[object] = []

    def failing(argv: object) -> int:
        seen.append(signal.getsignal(signal.SIGHUP))
        raise RuntimeError("the command failed")

    monkeypatch.setattr(kafkajet.cli.perf, "main", failing)
    with pytest.raises(RuntimeError, match="the command failed"):
        main(["perf"])
    assert seen == [_exit_on_signal]
    assert _handlers() == own_handlers


def test_schema_registry_stops_on_sigterm_and_leaves_the_handlers_it_found(
        own_handlers: dict[signal.Signals, object], capsys: pytest.CaptureFixture[str]) -> None:
    # SIGTERM only once the command's own handler (which stops the registry) is in: before, main()'s would
    # raise SystemExit, and the test's own would fail the test.
    def registry_handler_in() -> bool:
        h = signal.getsignal(signal.SIGTERM)
        return h not in (own_handlers[signal.SIGTERM], _exit_on_signal)

    failed: list[BaseException] = []

    def terminate() -> None:
        try:
            wait_for(registry_handler_in, 30, "the schema-registry command's SIGTERM handler")
            os.kill(os.getpid(), signal.SIGTERM)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failed.append(e)
            signal.raise_signal(signal.SIGINT)  # the command then stops as on Ctrl-C, instead of running on

    killer = threading.Thread(target=terminate, name="sigterm-sender", daemon=True)
    killer.start()
    assert main(["schema-registry", "--port", "0"]) == 0
    killer.join(30)
    assert not failed, failed
    assert "schema registry stopped" in capsys.readouterr().out
    assert _handlers() == own_handlers


CHILD_TESTS = '''
import contextlib, io, threading

from kafkajet.cli import main


def test_runs_the_cli_in_process():
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["config"]) == 0


def test_innocent():
    print("READY", flush=True)
    threading.Event().wait(120)  # until the SIGTERM ends the run
'''


def test_sigterm_to_a_test_run_that_called_main_ends_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_child.py").write_text(CHILD_TESTS)
    child = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_child.py"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while not lines or "READY" not in lines[-1]:
            line = read_line(child.stdout, max(0.1, deadline - time.monotonic()), "the child test run's READY")
            assert line, "the child test run ended before its second test:\n" + "".join(lines)
            lines.append(line)
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the child test run was still going 30 s after SIGTERM")
        out = "".join(lines) + child.stdout.read()
        # Killed by the signal, as pytest is when nothing of its own handles SIGTERM; with the CLI's handler
        # left behind, test_innocent failed with SystemExit: 143 and the run went on to exit 1.
        assert child.returncode == -signal.SIGTERM, out
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


HAMMER = '''
import signal, sys, time
from kafkajet.cli.signals import SignalFlag

flags = [SignalFlag()]
signal.signal(signal.SIGALRM, lambda *_: flags[-1].set())
signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
rounds = 0
end = time.monotonic() + 2
while time.monotonic() < end:
    flags.append(SignalFlag())
    while not flags[-1].wait(0):
        pass
    rounds += 1
signal.setitimer(signal.ITIMER_REAL, 0)
print(rounds)
'''


def test_a_handler_setting_the_flag_while_the_main_thread_waits_on_it_does_not_hang() -> None:
    # With threading.Event in its place this child hangs within a few hundred signals (the handler waits for
    # the lock that the interrupted Event.wait() holds): `consume` once ignored a Ctrl-C this way on CI.
    child = subprocess.run([sys.executable, "-c", HAMMER], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert int(child.stdout) > 100  # rounds in which a signal's handler set the flag the loop waited on


def test_the_flag_ends_a_wait_soon_after_a_signal_sets_it() -> None:
    flag = SignalFlag()
    previous = signal.signal(signal.SIGALRM, lambda *_: flag.set())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        started = time.monotonic()
        assert flag.wait(30) is True
        assert time.monotonic() - started < 15  # half the wait it guards: not the whole 30 s
        assert SignalFlag().wait(0.01) is False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
