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
from kafkajet.testing.embedded_broker import free_port
from tests.helpers.tls_proxy import CertificateAuthority, TlsProxy
from tests.helpers.waiting import read_line

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


def test_the_demo_takes_an_input_file(tmp_path: Path) -> None:
    data = tmp_path / "orders.csv"
    data.write_text("customer,amount\n" + "".join(f"c{i % 7},{i}\n" for i in range(700)))
    r = demo("--input", str(data))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines()[-1].startswith("verdict: OK - 7 users"), r.stdout


def test_ctrl_c_in_the_demo_stops_spark_and_the_broker_without_a_traceback() -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-m", "kafkajet", "demo", "--records", "200000"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True)  # its own process group, as a shell's foreground job
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
