"""A plain TCP forwarder whose backend can be changed: a bootstrap address (a DNS name, a load balancer)
that starts answering for another cluster."""

from __future__ import annotations

import socket
import threading


class Forwarder:
    """Listens on 127.0.0.1 (port `port`, or a free one); each connection is piped to the backend of the
    moment it is accepted. `connections` counts them, so a test sees whether a client came back."""

    def __init__(self, backend: tuple[str, int], port: int = 0) -> None:
        self.backend = backend
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.2)
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, name="forwarder", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> Forwarder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join(10)
        with self._lock:
            for s in self._sockets:
                s.close()
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection(self.backend, timeout=5)
            except OSError:
                conn.close()
                continue
            with self._lock:
                self.connections += 1
                self._sockets += [conn, up]
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
