"""`make demo` end to end: load, a streaming query through the source and sink, and the verdict."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kafkajet.testing import EmbeddedBroker
from kafkajet.testing.ports import free_port
from tests.helpers.terminal import default_ctrl_c
from tests.helpers.tls_proxy import CertificateAuthority, TlsProxy
from tests.helpers.waiting import read_line, wait_for

ROOT = Path(__file__).resolve().parents[2]


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-m", "kafkajet", "demo", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env)


def test_the_demo_pipeline_verifies_its_per_user_totals() -> None:
    r = demo("--records", "20000")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert any(line.startswith("load:   20,000 events") for line in lines)
    assert any(line.startswith("read:   20,000 events (20,000 Avro values decoded)") for line in lines)  # all, once
    assert sum(line.startswith("stream: micro-batch") for line in lines) >= 4  # progress while it runs
    assert lines[-1].startswith("verdict: OK - 10,000 users"), lines[-3:]


SLOW_SOURCE_RUNNER = """#!/bin/sh
# Spark's Python, held 12 s the first time it starts the streaming source's runner: longer than the 10 s
# Spark waits for it to connect back, as a busy machine can hold it.
case "$*" in
  *python_streaming_source_runner*) if mkdir "$KAFKAJET_TEST_SLOW_MARK" 2>/dev/null; then sleep 12; fi;;
esac
exec {python} "$@"
"""


def test_the_demo_takes_an_input_file_and_restarts_a_stream_whose_worker_connected_back_late(
        tmp_path: Path) -> None:
    data = tmp_path / "orders.csv"
    data.write_text("customer,amount\n" + "".join(f"c{i % 7},{i}\n" for i in range(700)))
    python = tmp_path / "slow-python"
    python.write_text(SLOW_SOURCE_RUNNER.format(python=sys.executable))
    python.chmod(0o755)
    mark = tmp_path / "held-once"
    env = {**os.environ, "PYSPARK_PYTHON": str(python), "KAFKAJET_TEST_SLOW_MARK": str(mark)}
    r = subprocess.run([sys.executable, "-m", "kafkajet", "demo", "--input", str(data)], capture_output=True,
                       text=True, timeout=600, cwd=ROOT, env=env)
    assert mark.exists(), "the source runner was never held"
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "did not connect back in time" in r.stdout and "restarting the query from its checkpoint" in r.stdout
    assert r.stdout.splitlines()[-1].startswith("verdict: OK - 7 users"), r.stdout


def test_ctrl_c_in_the_demo_stops_spark_and_the_broker_without_a_traceback() -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-m", "kafkajet", "demo", "--records", "200000"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True,  # its own process group, as a shell's foreground job
                            preexec_fn=default_ctrl_c)
    assert proc.stdout is not None
    try:
        line = read_line(proc.stdout, 300, "the demo's first line")
        broker_port = int(line.rsplit(":", 1)[1])
        line = read_line(proc.stdout, 300, "the demo's registry line")
        assert line.startswith("schema registry on http://"), line
        line = read_line(proc.stdout, 300, "the demo's load line")  # Spark is running jobs from here on
        assert line.startswith("load:"), line
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: the demo stops its broker and Spark on the way out
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, stdout + stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-5000:]
    assert "demo: interrupted" in stderr
    with pytest.raises(OSError):  # the embedded broker was stopped with the demo
        socket.create_connection(("127.0.0.1", broker_port), timeout=5).close()


def _group_processes(pgid: int) -> list[str]:
    """The command lines of the processes in process group `pgid` (Linux's /proc)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended while listed
            continue
        if int(stat[stat.rindex(")") + 2:].split()[2]) == pgid:
            found.append(cmdline)
    return found


def test_ctrl_c_while_spark_starts_leaves_no_jvm_behind() -> None:
    # PySpark waits for its JVM in a loop; a KeyboardInterrupt there left the JVM (which ignores SIGINT)
    # running on after the demo exited, holding its terminal's output open.
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-m", "kafkajet", "demo", "--records", "1000"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True, preexec_fn=default_ctrl_c)
    try:
        # Spark's JVM, not the `java -version` the demo checks Java with first.
        wait_for(lambda: any("SparkSubmit" in c for c in _group_processes(proc.pid)), 120, "Spark's JVM to start")
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)  # returns once nothing holds the pipes open
        wait_for(lambda: not _group_processes(proc.pid), 30, "every process of the demo to end")
    finally:
        if _group_processes(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stdout + stderr[-3000:]
    assert "demo: interrupted" in stderr and "Traceback" not in stderr, stderr[-3000:]


def test_the_demo_runs_against_a_tls_cluster_given_its_security_settings(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    (tmp_path / "ca.pem").write_text(ca.cert_pem)
    server = ca.issue("broker", ips=("127.0.0.1",)).write(tmp_path, "server")
    (tmp_path / "client.properties").write_text(f"security.protocol=SSL\nssl.ca.location={tmp_path / 'ca.pem'}\n")
    port = free_port()
    with EmbeddedBroker(advertised_listener=f"127.0.0.1:{port}") as broker, \
            TlsProxy(port, ("127.0.0.1", broker.port), *server) as proxy:
        r = demo("--bootstrap-server", proxy.address, "--command-config", str(tmp_path / "client.properties"),
                 "--records", "2000")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines()[-1].startswith("verdict: OK - 2,000 users"), r.stdout
