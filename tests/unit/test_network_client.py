"""NetworkClient against the real broker (Tansu) and scripted fake brokers on local sockets."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kafkajet import Producer
from kafkajet.errors import (
    IllegalStateError,
    KafkaConnectionError,
    ProtocolError,
    RequestTimedOutError,
)
from kafkajet.network import ClientResponse, ConnectionState, NetworkClient
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkajet.testing import EmbeddedBroker
from kafkajet.testing.ports import free_port
from tests.helpers.network_fakes import MAX_API_VERSIONS, FakeBroker
from tests.helpers.waiting import wait_for

DEADLINE_S = 10.0


def now_ms() -> float:
    return time.monotonic() * 1000.0


@pytest.fixture
def client() -> Iterator[NetworkClient]:
    c = NetworkClient(client_id="test-network", request_timeout_ms=5000)
    yield c
    c.close()


def wait_ready(client: NetworkClient, node: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not client.ready(node, now_ms()):
        assert time.monotonic() < deadline, f"node {node} not ready: {client.last_error(node)!r}"
        client.poll(100, now_ms())


def poll_until(client: NetworkClient, done: Callable[[list[ClientResponse]], bool]) -> list[ClientResponse]:
    got: list[ClientResponse] = []
    deadline = time.monotonic() + DEADLINE_S
    while not done(got):
        assert time.monotonic() < deadline, f"condition not met; responses so far: {got}"
        got.extend(client.poll(100, now_ms()))
    return got


def metadata_body() -> dict[str, object]:
    # An empty topic list: "no topics" from v1 on, "all topics" in v0 (the fake brokers' only version).
    return {"topics": [], "allow_auto_topic_creation": False}


# --- real broker ----------------------------------------------------------------------------------


def test_connect_negotiate_and_metadata_round_trip(broker: EmbeddedBroker, client: NetworkClient) -> None:
    client.add_bootstrap(broker.bootstrap_servers)
    assert client.state(-1) is ConnectionState.DISCONNECTED
    assert not client.ready(-1, now_ms())
    assert client.state(-1) in (ConnectionState.CONNECTING, ConnectionState.API_VERSIONS)
    wait_ready(client, -1)

    ranges = client.broker_api_versions(-1)
    assert ranges is not None
    broker_min, broker_max = ranges[ApiKey.METADATA]
    assert client.api_version(-1, ApiKey.METADATA) == min(SUPPORTED_VERSIONS[ApiKey.METADATA][1], broker_max)
    # The advertised Metadata range: Tansu's (DESIGN.md section 4), Apache Kafka 4.4's.
    assert broker_max == (12 if isinstance(broker, EmbeddedBroker) else 13)

    sent_at = now_ms()
    cid = client.send(-1, ApiKey.METADATA, metadata_body(), sent_at, context="ctx-1")
    assert client.in_flight_count(-1) == 1 and client.has_in_flight()
    [resp] = poll_until(client, lambda got: bool(got))
    answered_by = now_ms()
    assert resp.error is None and resp.context == "ctx-1" and resp.correlation_id == cid
    assert resp.node_id == -1 and resp.api_key == ApiKey.METADATA
    assert resp.api_version == client.api_version(-1, ApiKey.METADATA)
    assert 0 <= resp.latency_ms <= answered_by - sent_at
    assert resp.body is not None
    assert [(b["node_id"], b["host"], b["port"]) for b in resp.body["brokers"]] == [
        (broker.node_id, "127.0.0.1", broker.port)]
    assert client.in_flight_count() == 0 and not client.has_in_flight()


def test_explicit_version_is_used(broker: EmbeddedBroker, client: NetworkClient) -> None:
    client.add_bootstrap(broker.bootstrap_servers)
    wait_ready(client, -1)
    client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), version=1)
    [resp] = poll_until(client, lambda got: bool(got))
    assert resp.api_version == 1 and resp.error is None and resp.body is not None
    assert resp.body["brokers"][0]["port"] == broker.port


def test_idle_connection_closed_after_connections_max_idle(broker: EmbeddedBroker) -> None:
    with NetworkClient(connections_max_idle_ms=60_000) as client:
        client.add_bootstrap(broker.bootstrap_servers)
        wait_ready(client, -1)
        start = now_ms()
        assert client.poll(0, start + 30_000) == []
        assert client.state(-1) is ConnectionState.READY
        assert client.poll(0, start + 60_500) == []
        assert client.state(-1) is ConnectionState.DISCONNECTED
        # Idle expiry is not a failure: no error recorded, and reconnecting is allowed at once.
        assert client.last_error(-1) is None
        assert client.connection_delay(-1, start + 60_500) == 0
        assert not client.ready(-1, start + 60_500)
        assert client.state(-1) is not ConnectionState.DISCONNECTED


def test_rebootstrap_when_every_known_broker_failed(broker: EmbeddedBroker) -> None:
    # A long backoff keeps the failed node out of the running for the whole test.
    client = NetworkClient(reconnect_backoff_ms=60_000, reconnect_backoff_max_ms=120_000)
    client.add_bootstrap(broker.bootstrap_servers)
    client.set_nodes({7: ("127.0.0.1", free_port())})
    now = now_ms()
    assert client.least_loaded_node(now) == 7  # known brokers come first while they may work
    assert not client.ready(7, now)
    poll_until(client, lambda _: client.state(7) is ConnectionState.DISCONNECTED)
    assert isinstance(client.last_error(7), KafkaConnectionError)
    assert client.least_loaded_node(now_ms()) == -1
    wait_ready(client, -1)
    client.close()


# --- refused, timed out, corrupt ------------------------------------------------------------------


def test_refused_port_reports_address_and_backoff_grows() -> None:
    port = free_port()
    with NetworkClient(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000) as client:
        client.add_bootstrap(f"127.0.0.1:{port}")
        now = now_ms()
        delays = []
        for _ in range(6):
            assert not client.ready(-1, now)
            deadline = time.monotonic() + DEADLINE_S
            while client.state(-1) is not ConnectionState.DISCONNECTED:
                assert time.monotonic() < deadline
                assert client.poll(1000, now) == []
            err = client.last_error(-1)
            assert isinstance(err, KafkaConnectionError) and f"127.0.0.1:{port}" in str(err)
            # The failure is stamped at `now` plus the real time poll took (a few ms at most).
            delay = client.connection_delay(-1, now)
            delays.append(delay)
            assert client.least_loaded_node(now) is None  # the only node is backing off
            assert not client.ready(-1, now + 1)  # no new attempt inside the backoff
            assert client.state(-1) is ConnectionState.DISCONNECTED
            now += delay
        slack = 30
        for delay, base in zip(delays, [50, 100, 200, 400, 800, 1000], strict=True):
            assert base * 0.8 <= delay <= min(base * 1.2, 1000) + slack, delays
        assert delays[0] < delays[1] < delays[2] < delays[3]
        # Each refused attempt is a server disconnect the sender refreshes metadata for, counted once.
        assert client.server_disconnects() == 6
        assert client.server_disconnects() == 0
        client.disconnect(-1)  # one the client chose: no reason to think the cluster moved
        assert client.server_disconnects() == 0


def test_unresolvable_host_fails_with_its_name() -> None:
    with NetworkClient() as client:
        client.add_bootstrap("no-such-host.invalid:9092")
        # One `now` for both calls: a resolver slower than the backoff (CI saw it) would end the
        # backoff between two readings of the clock.
        now = now_ms()
        assert not client.ready(-1, now)
        err = client.last_error(-1)
        assert isinstance(err, KafkaConnectionError) and "no-such-host.invalid:9092" in str(err)
        assert client.connection_delay(-1, now) > 0


def test_connection_setup_timeout() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        fillers = fill_accept_queue(server)
        try:
            # max = base: the timeout neither grows nor is jittered.
            with NetworkClient(socket_connection_setup_timeout_ms=200,
                               socket_connection_setup_timeout_max_ms=200) as client:
                client.add_bootstrap([server.getsockname()])
                now = now_ms()
                assert not client.ready(-1, now)
                assert client.state(-1) is ConnectionState.CONNECTING
                assert client.poll(0, now + 100) == []
                assert client.state(-1) is ConnectionState.CONNECTING
                client.poll(0, now + 201)
                assert client.state(-1) is ConnectionState.DISCONNECTED
                err = client.last_error(-1)
                assert isinstance(err, KafkaConnectionError) and "200 ms" in str(err)
                assert f"127.0.0.1:{server.getsockname()[1]}" in str(err)
        finally:
            for f in fillers:
                f.close()



@pytest.mark.parametrize("fails", ["at-once", "on-the-socket"])
def test_a_failed_connect_makes_the_next_attempt_try_the_next_address(
        monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    """A name that resolves to several addresses (Java's ClusterConnectionStates): after a connect fails,
    whether connect() refused at once or the socket reported it later, the next attempt takes the next
    address instead of the same dead one again."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        # 255.255.255.255 makes connect() fail at once (ENETUNREACH); a closed port answers "refused" later.
        dead = ("255.255.255.255", 9) if fails == "at-once" else ("127.0.0.1", free_port())
        resolve = socket.getaddrinfo

        def two_addresses(host: str, port: int, *args: object, **kwargs: object) -> object:
            if host == "two.addresses.test":
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", a) for a in (dead, server.getsockname())]
            return resolve(host, port, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
        with NetworkClient(reconnect_backoff_ms=1, reconnect_backoff_max_ms=1) as client:
            client.add_bootstrap([("two.addresses.test", 9092)])
            accepted: list[socket.socket] = []

            def reached_the_live_address() -> bool:
                client.ready(-1, now_ms())
                client.poll(10, now_ms())
                try:
                    accepted.append(server.accept()[0])
                except BlockingIOError:
                    return False
                return True

            wait_for(reached_the_live_address, DEADLINE_S, "a connect to the name's second address")
            assert client.last_error(-1) is not None, "the first address was never tried"
            accepted[0].close()

def fill_accept_queue(server: socket.socket) -> list[socket.socket]:
    """Connections that fill a listen(0) queue: the listener then drops further SYNs, so a connect hangs."""
    fillers = [socket.socket() for _ in range(2)]
    for f in fillers:
        f.setblocking(False)
        f.connect_ex(server.getsockname())
    return fillers


def drain_accept_queue(server: socket.socket) -> None:
    server.setblocking(False)
    while True:
        try:
            server.accept()[0].close()
        except BlockingIOError:
            return


def setup_timeout_of_last_failure(client: NetworkClient) -> float:
    match = re.search(r"not done within (\d+) ms", str(client.last_error(-1)))
    assert match is not None, client.last_error(-1)
    return float(match.group(1))


def time_out_one_connect(client: NetworkClient, now: float, still_connecting_at: float, gone_by: float) -> float:
    """Start a connect at fake time `now` that cannot complete; check it is pending at now+still_connecting_at
    and timed out by now+gone_by; returns the fake time when the next attempt may start."""
    assert not client.ready(-1, now)
    assert client.state(-1) is ConnectionState.CONNECTING
    # poll() adds the real time select() took to the fake `now`: the margins allow a loaded machine.
    client.poll(0, now + still_connecting_at)
    assert client.state(-1) is ConnectionState.CONNECTING, f"timed out before {still_connecting_at} ms"
    now += gone_by
    client.poll(0, now)
    assert client.state(-1) is ConnectionState.DISCONNECTED, f"not timed out within {gone_by} ms"
    return now + client.connection_delay(-1, now)


def test_the_setup_timeout_grows_per_failed_connect_up_to_its_max_and_starts_over_once_connected() -> None:
    """Java's ClusterConnectionStates: socket.connection.setup.timeout.ms doubles per consecutive failed
    connect of the node, up to socket.connection.setup.timeout.max.ms, each value with +-20 % jitter."""
    with socket.socket() as server, NetworkClient(
            socket_connection_setup_timeout_ms=1000, socket_connection_setup_timeout_max_ms=4000,
            reconnect_backoff_ms=1, reconnect_backoff_max_ms=1) as client:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        fillers = fill_accept_queue(server)
        client.add_bootstrap([server.getsockname()])
        now = now_ms()  # a fake clock from here on
        # Each attempt outlives the longest timeout the one before could have drawn.
        for low, high in [(800, 1200), (1600, 2400), (3200, 4000), (3200, 4000)]:
            now = time_out_one_connect(client, now, still_connecting_at=low - 300, gone_by=high + 1)
            assert low <= setup_timeout_of_last_failure(client) <= high
        # The listener takes the next connect: it succeeds, and the following one starts at the base again.
        for f in fillers:
            f.close()
        drain_accept_queue(server)
        assert not client.ready(-1, now)
        poll_until(client, lambda _: client.state(-1) is ConnectionState.API_VERSIONS)
        fillers = fill_accept_queue(server)
        client.disconnect(-1)
        now = time_out_one_connect(client, now + 1000, still_connecting_at=500, gone_by=1201)
        assert 800 <= setup_timeout_of_last_failure(client) <= 1200
        for f in fillers:
            f.close()


def test_the_producer_passes_both_setup_timeout_settings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kafkajet.network")

    def timeouts() -> list[int]:
        return [int(m.group(1)) for r in caplog.records
                if (m := re.search(r"not done within (\d+) ms", r.getMessage())) is not None]

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        fillers = fill_accept_queue(server)
        try:
            host, port = server.getsockname()
            with Producer(bootstrap_servers=f"{host}:{port}", socket_connection_setup_timeout_ms=100,
                          socket_connection_setup_timeout_max_ms=150, reconnect_backoff_ms=1,
                          reconnect_backoff_max_ms=1) as producer:
                wait_for(lambda: len(timeouts()) >= 4, DEADLINE_S, "four timed-out connects")
                producer.close(timeout=0)
        finally:
            for f in fillers:
                f.close()
    seen = timeouts()
    assert 80 <= seen[0] <= 120 and all(t <= 150 for t in seen) and max(seen) > 120, seen


def test_silent_broker_times_out_api_versions() -> None:
    with FakeBroker(silent_handshake=True) as fake, NetworkClient(request_timeout_ms=200) as client:
        client.add_bootstrap([fake.address])
        assert not client.ready(-1, now_ms())
        started = time.monotonic()
        poll_until(client, lambda _: client.state(-1) is ConnectionState.DISCONNECTED)
        # poll wakes up for the request deadline on its own; it did not wait for the 100 ms poll timeouts only.
        assert time.monotonic() - started < 5
        assert isinstance(client.last_error(-1), RequestTimedOutError)
        assert fake.peer_closed.wait(5)


def test_request_timeout_fails_request_and_closes_connection() -> None:
    with FakeBroker(mode="silent") as fake, NetworkClient(request_timeout_ms=300) as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        sent_at = now_ms()
        client.send(-1, ApiKey.METADATA, metadata_body(), sent_at, context="m")
        assert client.poll(0, sent_at) == []
        assert client.poll(0, sent_at + 200) == []  # not yet expired
        [resp] = client.poll(0, sent_at + 301)
        assert isinstance(resp.error, RequestTimedOutError) and resp.body is None and resp.context == "m"
        assert "300 ms" in str(resp.error)
        assert client.state(-1) is ConnectionState.DISCONNECTED
        assert client.in_flight_count() == 0
        assert fake.peer_closed.wait(5)
        assert client.poll(0, sent_at + 400) == []  # reported exactly once


def test_request_timeout_with_real_clock_wakes_poll() -> None:
    with FakeBroker(mode="silent") as fake, NetworkClient(request_timeout_ms=200) as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms())
        started = time.monotonic()
        got: list[ClientResponse] = []
        for _ in range(2):  # a poll may return early on a wake-up; two are plenty, and each is bounded
            got = client.poll(30_000, now_ms())
            if got:
                break
        assert time.monotonic() - started < 5
        assert got, "poll() returned without the timed-out request"
        assert isinstance(got[0].error, RequestTimedOutError)


@pytest.mark.parametrize("mode", ["garbage", "wrong_id"])
def test_corrupt_response_is_protocol_error_and_client_recovers(mode: str) -> None:
    with FakeBroker(mode=mode, misbehave_once=True) as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        # The fake only speaks ApiVersions up to v2: we asked at our max and fell back (KIP-511).
        versions = [r.api_version for r in fake.received if r.api_key == ApiKey.API_VERSIONS]
        assert versions == [SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1], MAX_API_VERSIONS]
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context="bad")
        [resp] = poll_until(client, lambda got: bool(got))
        assert isinstance(resp.error, ProtocolError) and resp.error.retriable
        assert f"127.0.0.1:{fake.port}" in str(resp.error)
        assert client.state(-1) is ConnectionState.DISCONNECTED
        assert fake.peer_closed.wait(5)
        # The same client reconnects after the backoff and works.
        wait_ready(client, -1)
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context="good")
        [resp] = poll_until(client, lambda got: bool(got))
        assert resp.error is None and resp.body == {"brokers": [], "topics": []} and resp.context == "good"
        assert fake.connection_count() == 2


def test_an_answer_ahead_of_garbage_in_the_same_read_is_delivered() -> None:
    # The answered request is already off the in-flight FIFO when the garbage behind it is found: it must
    # come back answered, not vanish (a vanished Produce request wedged the idempotent producer).
    with FakeBroker(mode="good_then_wrong_id") as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context="answered")
        [resp] = poll_until(client, lambda got: bool(got))
        assert resp.context == "answered" and resp.error is None and resp.body == {"brokers": [], "topics": []}
        assert client.state(-1) is ConnectionState.DISCONNECTED  # and the corrupt stream was closed
        assert fake.peer_closed.wait(5)


# --- in flight, fire-and-forget, disconnects -------------------------------------------------------


def test_max_in_flight_is_respected_and_responses_keep_order() -> None:
    with FakeBroker(mode="hold") as fake, NetworkClient(max_in_flight_requests_per_connection=2) as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context=1)
        assert not client.is_ready(-1, now_ms())  # the first request is not fully written yet
        client.poll(0, now_ms())
        assert client.ready(-1, now_ms())
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context=2)
        client.poll(0, now_ms())
        assert client.in_flight_count(-1) == 2
        assert not client.ready(-1, now_ms()) and not client.is_ready(-1, now_ms())
        with pytest.raises(IllegalStateError, match="not ready"):
            client.send(-1, ApiKey.METADATA, metadata_body(), now_ms())
        assert client.connection_delay(-1, now_ms()) == 0  # connected: the wait is for responses
        fake.release.set()
        got = poll_until(client, lambda got: len(got) == 2)
        assert [r.context for r in got] == [1, 2] and all(r.error is None for r in got)
        assert client.ready(-1, now_ms())


def test_fire_and_forget_completes_once_written() -> None:
    with FakeBroker(mode="silent") as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), expect_response=False, context="ff")
        assert client.in_flight_count(-1) == 1
        [resp] = poll_until(client, lambda got: bool(got))
        assert resp.body is None and resp.error is None and resp.context == "ff"
        assert client.in_flight_count(-1) == 0 and client.state(-1) is ConnectionState.READY
        deadline = time.monotonic() + DEADLINE_S
        while not any(r.api_key == ApiKey.METADATA for r in fake.received):
            assert time.monotonic() < deadline
            client.poll(10, now_ms())


def test_large_request_is_written_across_many_partial_writes() -> None:
    topics = [{"name": f"topic-{i:06d}-" + "x" * 40} for i in range(20_000)]  # a ~1 MB request
    with FakeBroker(mode="silent") as fake, NetworkClient(send_buffer_bytes=16 * 1024) as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        cid = client.send(-1, ApiKey.METADATA, {"topics": topics}, now_ms(), expect_response=False, context="big")
        [resp] = poll_until(client, lambda got: bool(got))
        assert resp.context == "big" and resp.error is None and resp.correlation_id == cid
        deadline = time.monotonic() + DEADLINE_S
        while not any(r.correlation_id == cid for r in fake.received):
            assert time.monotonic() < deadline
            client.poll(10, now_ms())
        assert client.state(-1) is ConnectionState.READY


def test_every_in_flight_request_fails_once_on_disconnect() -> None:
    with FakeBroker(mode="silent") as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        for i in range(3):
            client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context=i)
            client.poll(0, now_ms())
        client.disconnect(-1)
        assert client.has_in_flight()
        got = client.poll(0, now_ms())
        assert sorted(r.context for r in got) == [0, 1, 2]
        assert all(isinstance(r.error, KafkaConnectionError) and r.body is None for r in got)
        assert client.poll(0, now_ms()) == [] and not client.has_in_flight()
        assert fake.peer_closed.wait(5)


def test_broker_closing_the_connection_fails_requests_naming_it() -> None:
    fake = FakeBroker(mode="silent")
    with NetworkClient() as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context="x")
        client.poll(0, now_ms())
        before_close = now_ms()
        fake.close()
        [resp] = poll_until(client, lambda got: bool(got))
        assert isinstance(resp.error, KafkaConnectionError) and f"127.0.0.1:{fake.port}" in str(resp.error)
        assert client.state(-1) is ConnectionState.DISCONNECTED
        # Asked as of before the close, so a slow machine cannot have ended the backoff already.
        assert client.connection_delay(-1, before_close) > 0


def test_set_nodes_closes_vanished_nodes() -> None:
    with FakeBroker(mode="silent") as fake, NetworkClient() as client:
        client.set_nodes({5: fake.address})
        wait_ready(client, 5)
        client.send(5, ApiKey.METADATA, metadata_body(), now_ms(), context="gone")
        client.poll(0, now_ms())
        client.set_nodes({6: ("127.0.0.1", free_port())})
        [resp] = client.poll(0, now_ms())
        assert resp.context == "gone" and isinstance(resp.error, KafkaConnectionError)
        assert set(client.nodes()) == {6}
        assert not client.ready(5, now_ms())
        assert fake.peer_closed.wait(5)


# --- waiting --------------------------------------------------------------------------------------


def test_wakeup_interrupts_a_long_poll() -> None:
    with NetworkClient() as client:
        done = threading.Event()
        started = threading.Event()

        def run() -> None:
            started.set()
            client.poll(10_000, now_ms())
            done.set()

        t = threading.Thread(target=run)
        t.start()
        assert started.wait(5)
        client.wakeup()  # a wake-up sent before select() starts is kept, never lost
        assert done.wait(1.0)
        t.join()


def test_idle_poll_blocks_for_its_timeout_and_wakeups_coalesce() -> None:
    with NetworkClient() as client:
        started = time.monotonic()
        assert client.poll(150, now_ms()) == []
        assert time.monotonic() - started >= 0.14
        for _ in range(10_000):
            client.wakeup()
        started = time.monotonic()
        client.poll(10_000, now_ms())
        assert time.monotonic() - started < 5.0  # woken, not the 10 s timeout
        # All those wake-ups were one: the next poll blocks again.
        started = time.monotonic()
        client.poll(150, now_ms())
        assert time.monotonic() - started >= 0.14


def test_close_fails_in_flight_and_rejects_new_work() -> None:
    with FakeBroker(mode="silent") as fake:
        client = NetworkClient()
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        client.send(-1, ApiKey.METADATA, metadata_body(), now_ms(), context="c")
        client.close()
        [resp] = client.poll(0, now_ms())
        assert resp.context == "c" and isinstance(resp.error, KafkaConnectionError)
        assert not client.ready(-1, now_ms())
        client.wakeup()  # harmless after close
        client.close()


def test_socket_options_are_applied() -> None:
    with FakeBroker() as fake, NetworkClient(send_buffer_bytes=64 * 1024, receive_buffer_bytes=48 * 1024) as client:
        client.add_bootstrap([fake.address])
        wait_ready(client, -1)
        sock = client._nodes[-1].sock
        assert sock is not None
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        # Linux reports twice the requested size (it adds bookkeeping room); other systems report it as set.
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) in (64 * 1024, 128 * 1024)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) in (48 * 1024, 96 * 1024)


def test_unknown_node_is_not_ready() -> None:
    with NetworkClient(reconnect_backoff_ms=50) as client:
        assert not client.ready(42, now_ms()) and not client.is_ready(42, now_ms())
        assert client.connection_delay(42, now_ms()) == 50
        assert client.least_loaded_node(now_ms()) is None
        with pytest.raises(IllegalStateError):
            client.send(42, ApiKey.METADATA, metadata_body(), now_ms())
