"""Records lost at interpreter exit reach stderr whether or not the program configured logging."""

from __future__ import annotations

import subprocess
import sys
import textwrap

LOSE_AT_EXIT = """
    {setup}
    from kafkajet import Producer
    from kafkajet.testing import MockCluster
    cluster = MockCluster(brokers=1).start()
    cluster.create_topic("t", 1)
    producers = [Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0, client_id=f"lossy-{{i}}")
                 for i in range(2)]
    for p in producers:
        p.send("t", b"first").result(timeout=15)
    cluster.stop()
    for n, p in enumerate(producers, 1):
        for i in range(100 * n):
            p.send("t", b"%d" % i)
        p._exit_close_timeout_s = 1.0  # the bounded wait at exit; its length is not what this test is about
    print("exiting without close()")
"""


def _run(setup: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(LOSE_AT_EXIT.format(setup=setup))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)


def _loss_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "not delivered" in line]


def test_records_lost_at_exit_reach_stderr_once_per_producer_without_logging_configured() -> None:
    out = _run("")
    assert "exiting without close()" in out.stdout, out.stderr
    lines = _loss_lines(out.stderr)
    assert len(lines) == 2, out.stderr
    assert any("producer lossy-0: 100 record(s) not delivered" in line for line in lines), lines
    assert any("producer lossy-1: 200 record(s) not delivered" in line for line in lines), lines
    assert all("without close()" in line and "last cause" in line for line in lines)


def test_with_logging_to_stderr_configured_the_loss_is_said_once_not_twice() -> None:
    out = _run("import logging; logging.basicConfig(level=logging.WARNING)")
    lines = _loss_lines(out.stderr)
    assert len(lines) == 2 and all(line.startswith("ERROR:kafkajet.producer:") for line in lines), out.stderr


def test_with_logging_to_a_file_the_loss_still_reaches_stderr() -> None:
    out = _run("import logging, os, tempfile; "
               "logging.basicConfig(filename=os.path.join(tempfile.mkdtemp(), 'app.log'), level=logging.INFO)")
    assert len(_loss_lines(out.stderr)) == 2, out.stderr
