"""A throwaway MIT Kerberos realm for tests: krb5kdc on a free 127.0.0.1 port, its database, krb5.conf and
keytabs in a temporary directory, stopped (and the directory removed) on close.

    with LocalKdc() as kdc:                       # sets KRB5_CONFIG for this process while it runs
        client = kdc.add_principal("alice")       # -> the path of alice's keytab
        brokers = kdc.service_keytab("kafka", ["127.0.0.1", "localhost"])
        MockCluster(sasl_mechanisms=["GSSAPI"], sasl_gssapi_keytab=brokers)
        Producer({..., "sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": kdc.principal("alice"),
                  "sasl.kerberos.keytab": client})

Needs Debian's krb5-kdc and krb5-admin-server (krb5kdc, kdb5_util, kadmin.local; `make` installs them).
Child processes see the realm through kdc.env. Replay caches are off (KRB5RCACHETYPE=none): the client
and the acceptor share a process, and a test has no replay attacker.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from kafkajet.testing.ports import free_port

_SBIN = os.pathsep.join((os.environ.get("PATH", ""), "/usr/sbin", "/sbin"))


def _tool(name: str) -> str:
    path = shutil.which(name, path=_SBIN)
    if path is None:
        raise RuntimeError(f"{name} not found: install Debian's krb5-kdc and krb5-admin-server (make does)")
    return path


def kdc_available() -> bool:
    return all(shutil.which(t, path=_SBIN) for t in ("krb5kdc", "kdb5_util", "kadmin.local"))


class LocalKdc:
    def __init__(self, realm: str = "KAFKAJET.TEST", start_timeout_s: float = 30.0) -> None:
        self.realm = realm
        self._timeout = start_timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix="kafkajet-kdc-"))
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._saved_env: dict[str, str | None] = {}
        self.env: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"LocalKdc({self.realm}, port={self.port})"

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def start(self) -> LocalKdc:
        self.port = free_port()
        d = self._dir
        (d / "krb5.conf").write_text(
            f"[libdefaults]\n default_realm = {self.realm}\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
            # Names as given: the broker host 127.0.0.1 stays 127.0.0.1 in kafka/127.0.0.1@REALM.
            " rdns = false\n dns_canonicalize_hostname = false\n udp_preference_limit = 1\n"
            f"[realms]\n {self.realm} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n")
        (d / "kdc.conf").write_text(
            f"[kdcdefaults]\n kdc_listen = 127.0.0.1:{self.port}\n kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            f"[realms]\n {self.realm} = {{\n  database_name = {d}/principal\n  key_stash_file = {d}/stash\n"
            f"  acl_file = {d}/kadm5.acl\n  max_life = 10h\n }}\n[logging]\n kdc = FILE:{d}/kdc.log\n")
        self.env = {"KRB5_CONFIG": str(d / "krb5.conf"), "KRB5_KDC_PROFILE": str(d / "kdc.conf"),
                    "KRB5RCACHETYPE": "none"}
        for key, value in self.env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        self._run(_tool("kdb5_util"), "create", "-s", "-r", self.realm, "-P", secrets.token_hex(16))
        self._process = subprocess.Popen([_tool("krb5kdc"), "-n", "-r", self.realm], env={**os.environ, **self.env},
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_listening()
        return self

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + self._timeout
        while True:
            process = self._process
            assert process is not None
            if process.poll() is not None:
                err = process.stderr.read().decode(errors="replace") if process.stderr else ""
                raise RuntimeError(f"krb5kdc exited with {process.returncode}: {err.strip()} {self.log()[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"krb5kdc did not listen on 127.0.0.1:{self.port} within "
                                       f"{self._timeout} s") from None
                time.sleep(0.05)

    def log(self) -> str:
        path = self._dir / "kdc.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def issued(self, client: str, service: str | None = None) -> int:
        """How many tickets the KDC issued to `client` (a principal name) for `service` (default: TGTs,
        that is logins), from its log."""
        service = service or f"krbtgt/{self.realm}@{self.realm}"
        return sum(1 for line in self.log().splitlines()
                   if ": ISSUE: " in line and line.endswith(f" {client} for {service}"))

    def _run(self, *argv: str) -> str:
        done = subprocess.run(argv, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout + done.stderr

    def kadmin(self, query: str) -> str:
        """kadmin.local runs `query` and says nothing on a failure but its text: raise if it says one."""
        out = self._run(_tool("kadmin.local"), "-r", self.realm, "-q", query)
        lowered = out.lower()
        if "error" in lowered or "failed" in lowered or "while " in lowered:
            raise RuntimeError(f"kadmin.local {query.split()[0]}: {out.strip()}")
        return out

    def add_principal(self, name: str, *, max_life: str | None = None, keytab: bool = True) -> str:
        """Adds `name` with a random key; returns the path of a keytab holding it (exported only if
        `keytab`). max_life, e.g. "20 seconds", caps its tickets' lifetime."""
        life = f'-maxlife "{max_life}" ' if max_life else ""
        self.kadmin(f"addprinc -randkey {life}{self.principal(name)}")
        path = self._dir / f"{name.replace('/', '_')}.keytab"
        if keytab:
            self.kadmin(f"ktadd -k {path} {self.principal(name)}")
        return str(path)

    def service_keytab(self, service: str = "kafka", hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> str:
        """One keytab with service/host for every host: the brokers' (the MockCluster's acceptor). Made
        once per service: later calls return the same file."""
        path = self._dir / f"{service}.service.keytab"
        if path.exists():
            return str(path)
        for host in hosts:
            principal = self.principal(f"{service}/{host}")
            self.kadmin(f"addprinc -randkey {principal}")
            self.kadmin(f"ktadd -k {path} {principal}")
        return str(path)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            if process.stderr:
                process.stderr.close()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> LocalKdc:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
