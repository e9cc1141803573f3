"""TLS on a non-blocking socket: what the NetworkClient needs beyond plain sockets.

`ssl` is imported inside each function: a plaintext producer never loads OpenSSL (about 6 MB).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Protocol

from kafkajet.errors import KafkaConnectionError, KafkaError, SslAuthenticationError
from kafkajet.network.setup import ConnectionState

if TYPE_CHECKING:
    import ssl


class TlsPeer(Protocol):
    """What these functions read of a connection (network.node.BrokerConnection), which imports them."""

    sock: socket.socket | None

    @property
    def state(self) -> ConnectionState: ...

    def describe(self) -> str: ...

TLS_WRITE_CHUNK = 256 * 1024  # bytes joined for one SSLSocket.send(); a copy, so bounded


def tls_would_block(e: OSError) -> bool:
    import ssl

    return isinstance(e, (ssl.SSLWantReadError, ssl.SSLWantWriteError))


def is_ssl_error(e: OSError) -> bool:
    import ssl

    return isinstance(e, ssl.SSLError)


def join_for_tls(buffers: list[memoryview]) -> bytes:
    """The first buffers, joined up to about TLS_WRITE_CHUNK bytes (at least one buffer whole).

    OpenSSL wants a write it refused (WANT_WRITE) retried with at least as many bytes: the same leading
    buffers always give the same chunk, and new requests only ever add buffers behind them.
    """
    taken, size = 0, 0
    while taken < len(buffers) and (taken == 0 or size + len(buffers[taken]) <= TLS_WRITE_CHUNK):
        size += len(buffers[taken])
        taken += 1
    return b"".join(buffers[:taken])


def tls_error(node: TlsPeer, e: ssl.SSLError, during: str) -> KafkaError:
    import ssl

    from kafkajet.security.tls import verification_reason

    reason = verification_reason(e)
    if node.state is not ConnectionState.READY and not isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        # With TLS 1.3 the broker checks our certificate after our side of the handshake is done, so
        # its refusal (an alert such as "certificate required") arrives with the first response.
        return SslAuthenticationError(f"TLS handshake with {node.describe()} failed: the broker refused "
                                      f"the connection: {reason}")
    return KafkaConnectionError(f"TLS error on the connection to {node.describe()} while {during}: {reason}")

def tls_send_error(node: TlsPeer, e: OSError) -> KafkaError | None:
    import ssl

    if node.state is not ConnectionState.READY and (
            isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError, BrokenPipeError, ConnectionResetError))):
        # A TLS 1.3 broker refuses our certificate after the handshake with an alert and a close; our first
        # write can hit the close before we read the alert. The alert says why: look for it.
        assert isinstance(node.sock, ssl.SSLSocket)
        try:
            node.sock.recv(1)
        except ssl.SSLError as alert:
            if not isinstance(alert, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLWantReadError,
                                      ssl.SSLWantWriteError)):
                return tls_error(node, alert, "sending")
        except OSError:
            pass
    if isinstance(e, ssl.SSLError):
        return tls_error(node, e, "sending")
    return None
