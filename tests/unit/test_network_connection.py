"""Sans-I/O connection: framing, FIFO correlation, partial writes, bookkeeping. No sockets, no protocol codec."""

from __future__ import annotations

import re
import struct
import tracemalloc

import pytest

from kafkajet.errors import KafkaConnectionError, ProtocolError
from kafkajet.network.connection import Connection, CorruptStreamError, FrameDecoder, NotKafkaError


def frame(correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def queue(conn: Connection, correlation_id: int, *, expect_response: bool = True, size: int = 20,
          now: float = 0.0) -> bytes:
    data = struct.pack(">i", size - 4) + bytes([correlation_id % 256]) * (size - 4)
    conn.send_request(data, correlation_id=correlation_id, api_key=3, api_version=12, now=now,
                      expect_response=expect_response, context=f"ctx{correlation_id}")
    return data


def test_frames_split_at_every_byte_boundary_decode_identically() -> None:
    stream = frame(1, b"alpha") + frame(2, b"") + frame(3, bytes(range(256)) * 3)
    expected = [stream[4:13], stream[17:21], stream[25:]]
    for cut1 in range(len(stream) + 1):
        for cut2 in (cut1, min(len(stream), cut1 + 1), min(len(stream), cut1 + 7)):
            decoder = FrameDecoder()
            got = decoder.feed(stream[:cut1]) + decoder.feed(stream[cut1:cut2]) + decoder.feed(stream[cut2:])
            assert got == expected, (cut1, cut2)
            assert decoder.buffered == 0


def test_byte_by_byte_and_all_at_once() -> None:
    stream = b"".join(frame(i, b"x" * i) for i in range(1, 30))
    one_by_one = FrameDecoder()
    frames = [f for i in range(len(stream)) for f in one_by_one.feed(stream[i : i + 1])]
    assert frames == FrameDecoder().feed(stream)
    assert len(frames) == 29
    assert [struct.unpack(">i", f[:4])[0] for f in frames] == list(range(1, 30))
    assert [len(f) - 4 for f in frames] == list(range(1, 30))


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 3, 100 * 1024 * 1024 + 1, 2**31 - 1])
def test_impossible_sizes_are_protocol_errors_without_allocation(size: int) -> None:
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match=str(size)):
            decoder.feed(struct.pack(">i", size) + b"\x00" * 8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024
    # The decoder stays broken: the stream cannot be resynchronised.
    with pytest.raises(ProtocolError):
        decoder.feed(frame(1))


@pytest.mark.parametrize(("answer", "said"), [
    (b"<!DOCTYPE HTML>\n<html>", "not a Kafka broker (an HTTP server): it answered with text, '<!DOCTYPE HTML>'"),
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "(an HTTP server): it answered with text, 'HTTP/1.1 400 Bad Request'"),
    (b"SSH-2.0-OpenSSH_9.6\r\n", "not a Kafka broker: it answered with text, 'SSH-2.0-OpenSSH_9.6'"),
])
def test_text_where_a_size_prefix_belongs_is_named_not_a_kafka_broker(answer: bytes, said: str) -> None:
    # Once "invalid response frame size 1008813135" (the bytes of "<!DO"), retried until the deadline.
    with pytest.raises(NotKafkaError, match=re.escape(said) + "; check the port$"):
        FrameDecoder().feed(answer)


def test_binary_garbage_is_still_only_a_corrupt_stream() -> None:
    with pytest.raises(CorruptStreamError, match="invalid response frame size") as caught:
        FrameDecoder().feed(b"\x15\x03\x03\x00\x02\x02\x46")  # a TLS alert, from a TLS listener
    assert not isinstance(caught.value, NotKafkaError)


def test_size_limit_is_configurable() -> None:
    assert FrameDecoder(max_size=8).feed(frame(1, b"1234")) == [frame(1, b"1234")[4:]]
    with pytest.raises(ProtocolError):
        FrameDecoder(max_size=8).feed(frame(1, b"12345"))


def test_responses_are_matched_fifo_with_their_requests() -> None:
    conn = Connection()
    for cid in (7, 8, 9):
        queue(conn, cid)
    conn.bytes_sent(conn.pending_output_bytes)
    got = conn.receive_data(frame(7, b"a") + frame(8, b"b")[:5])
    assert [(r.correlation_id, r.context, p) for r, p in got] == [(7, "ctx7", frame(7, b"a")[4:])]
    got = conn.receive_data(frame(8, b"b")[5:] + frame(9))
    assert [r.correlation_id for r, _ in got] == [8, 9]
    assert conn.in_flight_count == 0


def test_wrong_correlation_id_is_a_protocol_error() -> None:
    conn = Connection()
    queue(conn, 1)
    queue(conn, 2)
    conn.bytes_sent(conn.pending_output_bytes)
    with pytest.raises(ProtocolError, match="correlation id 2 does not match.*1"):
        conn.receive_data(frame(2))


def test_responses_before_the_corruption_come_with_the_error() -> None:
    conn = Connection()
    queue(conn, 1)
    queue(conn, 2)
    queue(conn, 3)
    conn.bytes_sent(conn.pending_output_bytes)
    with pytest.raises(CorruptStreamError, match="correlation id 9 does not match") as caught:
        conn.receive_data(frame(1, b"a") + frame(9))
    assert [(r.correlation_id, p) for r, p in caught.value.completed] == [(1, frame(1, b"a")[4:])]
    assert [r.correlation_id for r in conn.abort_all()] == [2, 3]  # the answered one is not failed again
    conn2 = Connection()
    queue(conn2, 1)
    queue(conn2, 2)
    conn2.bytes_sent(conn2.pending_output_bytes)
    with pytest.raises(CorruptStreamError, match="invalid response frame size") as caught:
        conn2.receive_data(frame(1) + b"\xff\xff\xff\xff")
    assert [r.correlation_id for r, _ in caught.value.completed] == [1]
    assert [r.correlation_id for r in conn2.abort_all()] == [2]


def test_response_without_request_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="no request in flight"):
        Connection().receive_data(frame(5))


def test_corrupt_stream_error_is_a_retriable_connection_error() -> None:
    err = CorruptStreamError("x")
    assert isinstance(err, ProtocolError) and isinstance(err, KafkaConnectionError)
    assert err.retriable


def test_partial_writes_resume_and_report_completed_requests() -> None:
    conn = Connection()
    a = queue(conn, 1, size=10)
    b = queue(conn, 2, size=10, expect_response=False)
    c = queue(conn, 3, size=10)
    assert b"".join(bytes(m) for m in conn.data_to_send()) == a + b + c
    assert conn.bytes_sent(4) == []
    assert bytes(conn.data_to_send()[0]) == a[4:]
    done = conn.bytes_sent(9)  # finishes request 1, 3 bytes into request 2
    assert [r.correlation_id for r in done] == [1]
    assert b"".join(bytes(m) for m in conn.data_to_send()) == b[3:] + c
    assert conn.in_flight_count == 3
    done = conn.bytes_sent(17)
    assert [(r.correlation_id, r.expect_response) for r in done] == [(2, False), (3, True)]
    assert not conn.has_pending_output and conn.data_to_send() == []
    # The fire-and-forget request is finished once written; only 1 and 3 await responses.
    assert conn.in_flight_count == 2
    with pytest.raises(ValueError):
        conn.bytes_sent(1)


def test_abort_all_returns_each_unfinished_request_once_in_order() -> None:
    conn = Connection()
    queue(conn, 1, now=10, size=10)
    queue(conn, 2, now=10, size=10, expect_response=False)
    queue(conn, 3, now=10, size=10)
    queue(conn, 4, now=10, size=10, expect_response=False)
    conn.bytes_sent(25)  # 1 and 2 written, 3 partially
    assert conn.oldest_send_time() == 10
    aborted = conn.abort_all()
    assert [r.correlation_id for r in aborted] == [1, 3, 4]
    assert conn.in_flight_count == 0 and not conn.has_pending_output and conn.oldest_send_time() is None


def test_many_small_requests_are_offered_in_bounded_batches() -> None:
    conn = Connection()
    for cid in range(200):
        queue(conn, cid, size=8)
    total = 0
    while conn.has_pending_output:
        buffers = conn.data_to_send()
        assert 0 < len(buffers) <= 64
        n = sum(len(b) for b in buffers)
        conn.bytes_sent(n)
        total += n
    assert total == 200 * 8
