"""The registry client over HTTPS: a CA file given is trusted (and replaces the system's), a client certificate
is presented, and a server the CA does not vouch for is refused naming the certificate."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kafkajet.schema_registry import SchemaRegistryClient
from kafkajet.schema_registry.client import SchemaRegistryError
from tests.helpers.tls_proxy import CertificateAuthority


@pytest.fixture(scope="module")
def https_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path, Path, list[str]]]:
    d = tmp_path_factory.mktemp("registry-pki")
    ca = CertificateAuthority("registry CA")
    (d / "ca.pem").write_text(ca.cert_pem)
    server_cert, server_key = ca.issue("registry", dns=("localhost",), ips=("127.0.0.1",)).write(d, "server")
    client_cert, client_key = ca.issue("registry-client", client=True).write(d, "client")
    peers: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            cert = self.connection.getpeercert()  # type: ignore[attr-defined]
            peers.append(dict(x[0] for x in cert["subject"])["commonName"] if cert else "")
            body = json.dumps(["orders-value"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(server_cert, server_key)
    ctx.load_verify_locations(cafile=d / "ca.pem")
    ctx.verify_mode = ssl.CERT_OPTIONAL
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", d / "ca.pem", client_cert, client_key, peers
    finally:
        server.shutdown()
        server.server_close()


def test_a_ca_file_is_trusted_and_a_client_certificate_presented(
        https_registry: tuple[str, Path, Path, Path, list[str]]) -> None:
    url, ca, cert, key, peers = https_registry
    client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(ca), "ssl.certificate.location": str(cert),
                                   "ssl.key.location": str(key)})
    assert client.get_subjects() == ["orders-value"]
    assert peers[-1] == "registry-client"


def test_a_registry_the_ca_does_not_vouch_for_is_refused(
        https_registry: tuple[str, Path, Path, Path, list[str]], tmp_path: Path) -> None:
    url = https_registry[0]
    other = tmp_path / "other-ca.pem"
    other.write_text(CertificateAuthority("some other CA").cert_pem)
    client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(other), "max.retries": 0})
    with pytest.raises(SchemaRegistryError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        client.get_subjects()
