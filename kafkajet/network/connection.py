"""Sans-I/O state of one broker connection: framing, in-flight FIFO, outgoing buffer.

No sockets and no clock here (h11 style). The owner feeds received bytes in with `receive_data()` and gets
whole responses paired with the request they answer; it asks `data_to_send()` for what to write and reports
how much the socket took with `bytes_sent()`. The same object serves the non-blocking NetworkClient and the
blocking admin connection, so both follow one set of framing and correlation rules.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kafkajet.errors import KafkaConnectionError, ProtocolError

DEFAULT_MAX_RESPONSE_SIZE = 100 * 1024 * 1024

_INT32 = struct.Struct(">i")
# Every response header version starts with the correlation id, so a frame shorter than this is corrupt.
_MIN_FRAME = 4
# Enough iovecs per sendmsg() to batch small requests without nearing IOV_MAX (1024 on Linux).
_MAX_IOVECS = 64


class CorruptStreamError(ProtocolError, KafkaConnectionError):
    """The response stream of a connection broke the protocol; the connection was closed.

    Both a ProtocolError (what went wrong) and a KafkaConnectionError (what to do): the requests on that
    connection are retriable on a new one, as Java fails them with a network exception.
    """

    retriable = True
    # Responses that arrived whole and matched their requests before the corruption in the same bytes: their
    # requests are already off the in-flight FIFO, so the owner must deliver them before closing, or they
    # would be lost (neither answered nor failed).
    completed: list[tuple[InFlightRequest, bytes]] = []  # noqa: RUF012 - replaced per instance, never mutated
    frames: list[bytes] = []  # noqa: RUF012


@dataclass(slots=True, eq=False)
class InFlightRequest:
    correlation_id: int
    api_key: int
    api_version: int
    send_time_ms: float
    expect_response: bool = True
    context: Any = None
    # Bytes of the frame not yet accepted by the socket; 0 once fully written.
    unsent: int = field(default=0)
    size: int = field(default=0)  # the whole frame's, size prefix included


class FrameDecoder:
    """Cuts a byte stream into 4-byte size-prefixed frames; keeps a partial frame until it is whole."""

    __slots__ = ("_buf", "_max_size", "_need", "_broken")

    def __init__(self, max_size: int = DEFAULT_MAX_RESPONSE_SIZE) -> None:
        self._buf = bytearray()
        self._max_size = max_size
        self._need = -1  # payload size of the frame being assembled, -1 while its prefix is incomplete
        self._broken: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Frames (without their size prefix) completed by `data`, in order."""
        if self._broken is not None:
            raise self._broken
        # With nothing buffered (the common case) frames are cut straight out of `data`: one copy each.
        buffered = bool(self._buf)
        if buffered:
            self._buf += data
        src = self._buf if buffered else data
        frames: list[bytes] = []
        with memoryview(src) as view:
            pos = 0
            end = len(view)
            while True:
                if self._need < 0:
                    if end - pos < 4:
                        break
                    size = _INT32.unpack_from(view, pos)[0]
                    if size < _MIN_FRAME or size > self._max_size:
                        # Checked before anything is allocated: a garbage prefix must not become a 2 GiB buffer.
                        self._broken = _not_kafka(bytes(view[pos : pos + 64])) or CorruptStreamError(
                            f"invalid response frame size {size} (allowed {_MIN_FRAME}..{self._max_size} bytes)"
                        )
                        broken = type(self._broken)(str(self._broken))
                        broken.frames = frames  # the whole frames before the bad prefix still count
                        raise broken
                    self._need = size
                    pos += 4
                if end - pos < self._need:
                    break
                frames.append(bytes(view[pos : pos + self._need]))
                pos += self._need
                self._need = -1
            if not buffered and pos < end:
                self._buf += view[pos:]
        if buffered and pos:
            del self._buf[:pos]
        return frames


class NotKafkaError(CorruptStreamError):
    """The server's answer begins with text (an HTTP server's, an SSH banner), which no Kafka broker sends: the
    address is some other service's, and no retry will change that. The admin and fetch clients give up at once."""


_HTML = (b"<!DO", b"<!do", b"<htm", b"<HTM")


def _not_kafka(head: bytes) -> NotKafkaError | None:
    """NotKafkaError naming what answered when the would-be size prefix is printable ASCII: a Kafka frame of
    that size (hundreds of MB at least) would have been refused anyway, so text is the likelier reading."""
    if len(head) < 4 or not all(0x20 <= b < 0x7F for b in head[:4]):
        return None
    first = head.split(b"\n", 1)[0].decode("ascii", "replace").strip()
    what = " (an HTTP server)" if head.startswith(b"HTTP/") or head[:4] in _HTML else ""
    return NotKafkaError(f"not a Kafka broker{what}: it answered with text, {first!r}; check the port")


class Connection:
    """Framing plus request bookkeeping for one connection; raises ProtocolError when the stream is corrupt.

    After a ProtocolError the connection must be closed: the byte stream can no longer be trusted.
    """

    def __init__(self, max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE) -> None:
        self._decoder = FrameDecoder(max_response_size)
        # Requests awaiting a response, oldest first: Kafka answers in request order on one connection.
        self._awaiting: deque[InFlightRequest] = deque()
        # Requests whose bytes are not fully written yet, oldest first (any expect_response).
        self._writing: deque[InFlightRequest] = deque()
        self._out: deque[memoryview] = deque()
        self._out_bytes = 0
        self._unwritten_fire_and_forget = 0

    # --- outgoing ---------------------------------------------------------------------------------

    def send_request(
        self,
        frame: bytes | list[Any],
        *,
        correlation_id: int,
        api_key: int,
        api_version: int,
        now: float,
        expect_response: bool = True,
        context: Any = None,
    ) -> InFlightRequest:
        """Queue a complete frame (size prefix included), as bytes or as buffers that concatenate to it, and
        track the request it carries."""
        buffers = [memoryview(frame)] if isinstance(frame, bytes | bytearray) else [memoryview(b) for b in frame]
        size = sum(b.nbytes for b in buffers)
        if not size:
            raise ValueError("empty request frame")
        req = InFlightRequest(correlation_id, api_key, api_version, now, expect_response, context, size, size)
        self._out.extend(buffers)
        self._out_bytes += size
        self._writing.append(req)
        if expect_response:
            self._awaiting.append(req)
        else:
            self._unwritten_fire_and_forget += 1
        return req

    @property
    def has_pending_output(self) -> bool:
        return self._out_bytes > 0

    @property
    def pending_output_bytes(self) -> int:
        return self._out_bytes

    def data_to_send(self) -> list[memoryview]:
        """Buffers to hand to sendmsg()/send(), oldest first; empty when everything is written."""
        if len(self._out) <= _MAX_IOVECS:
            return list(self._out)
        return [self._out[i] for i in range(_MAX_IOVECS)]

    def bytes_sent(self, n: int) -> list[InFlightRequest]:
        """Record that the socket accepted `n` bytes; return requests whose frame is now fully written."""
        if n < 0 or n > self._out_bytes:
            raise ValueError(f"bytes_sent({n}) with {self._out_bytes} bytes pending")
        self._out_bytes -= n
        left = n
        while left:
            head = self._out[0]
            if len(head) <= left:
                left -= len(head)
                self._out.popleft()
            else:
                self._out[0] = head[left:]
                left = 0
        done: list[InFlightRequest] = []
        left = n
        while left and self._writing:
            req = self._writing[0]
            taken = min(left, req.unsent)
            req.unsent -= taken
            left -= taken
            if req.unsent == 0:
                self._writing.popleft()
                if not req.expect_response:
                    self._unwritten_fire_and_forget -= 1
                done.append(req)
        return done

    # --- incoming ---------------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[tuple[InFlightRequest, bytes]]:
        """Responses completed by `data`, each with the request it answers (payload has no size prefix).

        CorruptStreamError if the stream breaks the protocol; its `completed` holds the responses that
        arrived intact before the break, which are off the in-flight FIFO and must still be delivered.
        """
        out: list[tuple[InFlightRequest, bytes]] = []
        broken: CorruptStreamError | None = None
        try:
            frames = self._decoder.feed(data)
        except CorruptStreamError as e:
            frames, broken = e.frames, e
        for frame in frames:
            correlation_id = _INT32.unpack_from(frame, 0)[0]
            if not self._awaiting:
                broken = CorruptStreamError(f"response with correlation id {correlation_id} but no request in flight")
                break
            expected = self._awaiting[0]
            if correlation_id != expected.correlation_id:
                broken = CorruptStreamError(
                    f"response correlation id {correlation_id} does not match the oldest request in flight "
                    f"({expected.correlation_id}, api key {expected.api_key})"
                )
                break
            self._awaiting.popleft()
            out.append((expected, frame))
        if broken is not None:
            broken.completed = out
            raise broken
        return out

    # --- bookkeeping ------------------------------------------------------------------------------

    @property
    def in_flight_count(self) -> int:
        """Requests sent or queued that have not completed (awaiting a response, or not yet written)."""
        return len(self._awaiting) + self._unwritten_fire_and_forget

    def oldest_send_time(self) -> float | None:
        """Send time of the oldest unfinished request (what request.timeout.ms is measured from)."""
        times = []
        if self._awaiting:
            times.append(self._awaiting[0].send_time_ms)
        if self._writing:
            times.append(self._writing[0].send_time_ms)
        return min(times) if times else None

    def abort_all(self) -> list[InFlightRequest]:
        """Every unfinished request, oldest first, removing them; used when the connection closes."""
        # Writes are FIFO, so every fully written request is older than every unwritten one.
        out = [r for r in self._awaiting if r.unsent == 0]
        out.extend(self._writing)
        self._awaiting.clear()
        self._writing.clear()
        self._out.clear()
        self._out_bytes = 0
        self._unwritten_fire_and_forget = 0
        return out
