"""A scripted fake broker for NetworkClient tests: real TCP, responses built by hand (not by kafkajet.protocol).

It answers ApiVersions the KIP-511 way (UNSUPPORTED_VERSION + its range when asked above v2) and Metadata v0
with an empty cluster, or misbehaves as told: stays silent, sends garbage, answers with a wrong correlation id,
or holds answers until released. With metadata_max set it also speaks Metadata v3-v7 (empty cluster), whose
answers carry `throttles` as their throttle times, one per answer (0 once they run out).
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

API_VERSIONS = 18
METADATA = 3
MAX_API_VERSIONS = 2  # the fake's highest ApiVersions version; ours is higher, which forces the fallback


@dataclass
class Received:
    api_key: int
    api_version: int
    correlation_id: int


@dataclass
class FakeBroker:
    # What to do with requests other than ApiVersions: reply | silent | garbage | wrong_id | hold |
    # good_then_wrong_id
    mode: str = "reply"
    silent_handshake: bool = False
    # Only the first connection misbehaves when set; later ones reply normally (to show recovery).
    misbehave_once: bool = False
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    peer_closed: threading.Event = field(default_factory=threading.Event)
    metadata_max: int = 0  # the highest Metadata version advertised: 0, or 3-7
    throttles: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._connections: list[socket.socket] = []
        self._count = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def connection_count(self) -> int:
        with self._lock:
            return self._count

    def close(self) -> None:
        self._server.close()
        with self._lock:
            for c in self._connections:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
                self._count += 1
                index = self._count
            threading.Thread(target=self._serve, args=(conn, index), daemon=True).start()

    def _serve(self, conn: socket.socket, index: int) -> None:
        mode = "reply" if self.misbehave_once and index > 1 else self.mode
        held: list[bytes] = []
        try:
            while True:
                head = _read_exactly(conn, 4)
                if head is None:
                    self.peer_closed.set()
                    return
                (size,) = struct.unpack(">i", head)
                payload = _read_exactly(conn, size)
                if payload is None:
                    self.peer_closed.set()
                    return
                api_key, api_version, correlation_id = struct.unpack_from(">hhi", payload, 0)
                self.received.append(Received(api_key, api_version, correlation_id))
                if api_key == API_VERSIONS:
                    if not self.silent_handshake:
                        conn.sendall(_api_versions_response(correlation_id, api_version, self.metadata_max))
                    continue
                if mode == "silent":
                    continue
                if api_key == METADATA and api_version >= 3:
                    throttle = self.throttles.pop(0) if self.throttles else 0
                    conn.sendall(_metadata_v3_to_v7(correlation_id, throttle))
                    continue
                if mode == "garbage":
                    conn.sendall(_frame(struct.pack(">i", correlation_id) + b"\xff\xff\xff\x7f garbage"))
                elif mode == "wrong_id":
                    conn.sendall(_metadata_v0(correlation_id + 1000))
                elif mode == "good_then_wrong_id":  # a right answer and garbage behind it, in one write
                    conn.sendall(_metadata_v0(correlation_id) + _metadata_v0(correlation_id + 1000))
                elif mode == "hold":
                    held.append(_metadata_v0(correlation_id))
                    if len(held) >= 2 or self.release.is_set():
                        self.release.wait(30)
                        for r in held:
                            conn.sendall(r)
                        held.clear()
                else:
                    conn.sendall(_metadata_v0(correlation_id))
        except OSError:
            self.peer_closed.set()


def _read_exactly(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _api_versions_response(correlation_id: int, version: int, metadata_max: int = 0) -> bytes:
    if version > MAX_API_VERSIONS:
        # KIP-511: a v0 body with UNSUPPORTED_VERSION and our ApiVersions range only.
        body = struct.pack(">hi", 35, 1) + struct.pack(">hhh", API_VERSIONS, 0, MAX_API_VERSIONS)
        return _frame(struct.pack(">i", correlation_id) + body)
    apis = [(API_VERSIONS, 0, MAX_API_VERSIONS), (METADATA, 0, metadata_max)]
    body = struct.pack(">hi", 0, len(apis)) + b"".join(struct.pack(">hhh", *a) for a in apis)
    if version >= 1:
        body += struct.pack(">i", 0)  # throttle_time_ms
    return _frame(struct.pack(">i", correlation_id) + body)


def _metadata_v3_to_v7(correlation_id: int, throttle_ms: int) -> bytes:
    # The same top level from v3 to v7: throttle_time_ms, brokers [], cluster_id null, controller_id, topics [].
    return _frame(struct.pack(">iiihii", correlation_id, throttle_ms, 0, -1, -1, 0))


def _metadata_v0(correlation_id: int) -> bytes:
    # Metadata v0: brokers [] and topics [].
    return _frame(struct.pack(">iii", correlation_id, 0, 0))
