"""Test helpers for TLS: certificates made with `cryptography`, and a TLS terminator in front of a broker.

The embedded broker (Tansu) cannot serve TLS itself, so TlsProxy accepts TLS on 127.0.0.1 and forwards the
plaintext bytes to the broker, whose advertised listener is set to the proxy's address. start() returns once
it listens; stop() ends every connection and joins its threads.
"""

from __future__ import annotations

import datetime
import ipaddress
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# --- certificates ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pem:
    cert: str
    key: str

    def write(self, directory: Path, name: str, *, password: str | None = None) -> tuple[Path, Path]:
        """cert and key files; with a password the key is written encrypted."""
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_text(self.cert)
        key_pem = self.key
        if password is not None:
            key = serialization.load_pem_private_key(self.key.encode(), None)
            key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.BestAvailableEncryption(password.encode())).decode()
        key_path.write_text(key_pem)
        return cert_path, key_path


class CertificateAuthority:
    """A throwaway CA that issues server and client certificates (EC P-256, valid for a day)."""

    def __init__(self, name: str = "kafkajet test CA") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name).issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> str:
        return self._cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, common_name: str, *, dns: tuple[str, ...] = (), ips: tuple[str, ...] = (),
              client: bool = False) -> Pem:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
        return Pem(cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem)


# --- the terminator -------------------------------------------------------------------------------------


class TlsProxy:
    """TLS on 127.0.0.1:port, plaintext to `backend`. With client_ca_file it demands a client certificate.

    Threads and blocking sockets, one thread per connection: OpenSSL then sends its alerts (e.g. TLS 1.3's
    "certificate required") before the connection closes, as a real broker does.
    """

    def __init__(self, port: int, backend: tuple[str, int], cert_file: Path, key_file: Path, *,
                 client_ca_file: Path | None = None) -> None:
        self.port = port
        self.backend = backend
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert_file, key_file)
        if client_ca_file is not None:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(cafile=str(client_ca_file))
        self.handshake_failures: list[str] = []
        self.connections = 0
        self._listener: socket.socket | None = None
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TlsProxy:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.settimeout(0.2)  # so the accept loop sees stop() promptly
        self._spawn(self._accept_loop)
        return self

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        t = threading.Thread(target=target, args=args, name=f"tls-proxy-{self.port}", daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError) as e:
            self.handshake_failures.append(getattr(e, "reason", None) or str(e))
            conn.close()
            return
        self.connections += 1
        try:
            up = socket.create_connection(self.backend, timeout=10)
        except OSError:
            tls.close()
            return
        try:
            self._pump(tls, up)
        finally:
            tls.close()
            up.close()

    def _pump(self, tls: ssl.SSLSocket, up: socket.socket) -> None:
        # One thread moves both directions: an SSLSocket must not be read and written by two threads at once.
        peer = {tls: up, up: tls}
        while not self._stopped.is_set():
            if tls.pending():
                ready: list[socket.socket] = [tls]
            else:
                ready, _, _ = select.select([tls, up], [], [], 0.2)
            for s in ready:
                try:
                    data = s.recv(65536)
                except (ssl.SSLError, OSError):
                    return
                if not data:
                    return
                try:
                    peer[s].sendall(data)
                except OSError:
                    return

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopped.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout_s)

    def __enter__(self) -> TlsProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
