"""Quota throttling (KIP-219) in the NetworkClient: a throttled answer mutes its node until the window ends.

The client runs on a given clock (`T`, far from the real one); poll() adds only the real time its select took,
which the tests measure and allow for, so every bound below is exact to that slack.
"""

from __future__ import annotations

import time

import pytest

from kafkajet.errors import IllegalStateError
from kafkajet.network import ClientResponse, ConnectionState, NetworkClient
from kafkajet.network.throttle import client_throttle_ms
from kafkajet.protocol import ApiKey
from tests.helpers.network_fakes import FakeBroker

DEADLINE_S = 10.0
T = 5_000_000.0  # the client's clock: a fake one, so nothing below depends on when the test runs
BODY = {"topics": [], "allow_auto_topic_creation": False}


def ready_at(client: NetworkClient, node: int, now: float) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not client.ready(node, now):
        assert time.monotonic() < deadline, f"node {node} not ready: {client.last_error(node)!r}"
        client.poll(50, now)


def answered(client: NetworkClient, now: float, count: int = 1) -> tuple[list[ClientResponse], float]:
    """Poll at `now` until `count` answers are in; returns them and the most the client's clock moved meanwhile."""
    got: list[ClientResponse] = []
    started = time.monotonic()
    while len(got) < count:
        assert time.monotonic() - started < DEADLINE_S, f"no answer; so far {got}"
        got.extend(client.poll(50, now))
    return got, (time.monotonic() - started) * 1000.0


def test_a_throttled_answer_mutes_the_node_until_its_window_ends() -> None:
    with FakeBroker(metadata_max=7, throttles=[500]) as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        ready_at(client, -1, T)
        client.send(-1, ApiKey.METADATA, BODY, T, version=6)
        [resp], slack = answered(client, T)
        assert resp.error is None and resp.body is not None and resp.body["throttle_time_ms"] == 500
        # The window runs from the answer's arrival (T, plus at most `slack`) for 500 ms.
        assert 500 - 1e-6 <= client.throttle_delay(-1, T) <= 500 + slack
        for now in (T, T + 250, T + 499.9):
            assert not client.ready(-1, now) and not client.is_ready(-1, now)
            assert 500 - (now - T) - 1e-6 <= client.poll_delay(-1, now) <= 500 - (now - T) + slack
            assert client.least_loaded_node(now) is None  # neither ready nor connecting
            with pytest.raises(IllegalStateError, match="throttled by a quota"):
                client.send(-1, ApiKey.METADATA, BODY, now, version=6)
        assert client.state(-1) is ConnectionState.READY  # muted, not closed: nothing to reconnect
        assert client.connection_delay(-1, T + 250) == 0
        end = T + 500 + slack
        assert client.ready(-1, end) and client.least_loaded_node(end) == -1
        assert client.poll_delay(-1, end) == 0 and client.throttle_delay(-1, end) == 0
        client.send(-1, ApiKey.METADATA, BODY, end, version=6)
        [resp], _ = answered(client, end)
        assert resp.body is not None and resp.body["throttle_time_ms"] == 0
        assert client.ready(-1, end)  # an answer with no throttle time leaves the node as it was


def test_an_answer_the_broker_already_delayed_does_not_mute_the_node() -> None:
    # Metadata before v6: the broker held the answer back for the throttle time itself (Java's
    # MetadataResponse.shouldClientThrottle), so waiting again would only halve the client's throughput.
    with FakeBroker(metadata_max=7, throttles=[500]) as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        ready_at(client, -1, T)
        client.send(-1, ApiKey.METADATA, BODY, T, version=5)
        [resp], _ = answered(client, T)
        assert resp.body is not None and resp.body["throttle_time_ms"] == 500
        assert client.ready(-1, T) and client.throttle_delay(-1, T) == 0


def test_a_shorter_window_announced_later_does_not_end_the_longer_one_early() -> None:
    with FakeBroker(metadata_max=7, throttles=[800, 100]) as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        ready_at(client, -1, T)
        client.send(-1, ApiKey.METADATA, BODY, T, version=6)
        client.write_pending(T)  # written, and nothing read: both requests are out before either answer is in
        client.send(-1, ApiKey.METADATA, BODY, T, version=7)
        _, slack = answered(client, T, count=2)
        assert 800 - 1e-6 <= client.throttle_delay(-1, T) <= 800 + slack
        assert not client.ready(-1, T + 700)


def test_a_throttled_cluster_is_waited_for_not_dodged_through_the_bootstrap_list() -> None:
    with FakeBroker(metadata_max=7, throttles=[400]) as fake, NetworkClient() as client:
        client.add_bootstrap([fake.address])
        ready_at(client, -1, T)
        client.set_nodes({0: fake.address})
        ready_at(client, 0, T)
        client.send(0, ApiKey.METADATA, BODY, T, version=7)
        _, slack = answered(client, T)
        # Node 0 is the only known broker and it is throttled: no node now, rather than a fresh connection to
        # the bootstrap address (the same broker, where the quota is the same).
        assert client.least_loaded_node(T + 399) is None
        assert client.state(-1) is ConnectionState.DISCONNECTED
        assert client.least_loaded_node(T + 400 + slack) == 0


@pytest.mark.parametrize(("api", "version", "throttle", "muted_for"), [
    (ApiKey.PRODUCE, 5, 300, 0),  # before KIP-219 the broker delayed the answer itself
    (ApiKey.PRODUCE, 6, 300, 300),
    (ApiKey.FETCH, 7, 300, 0),
    (ApiKey.FETCH, 8, 300, 300),
    (ApiKey.METADATA, 5, 300, 0),
    (ApiKey.METADATA, 6, 300, 300),
    (ApiKey.API_VERSIONS, 1, 300, 0),
    (ApiKey.API_VERSIONS, 2, 300, 300),
    (ApiKey.FIND_COORDINATOR, 1, 300, 0),
    (ApiKey.FIND_COORDINATOR, 2, 300, 300),
    (ApiKey.INIT_PRODUCER_ID, 0, 300, 0),
    (ApiKey.INIT_PRODUCER_ID, 1, 300, 300),
    (ApiKey.ADD_PARTITIONS_TO_TXN, 1, 300, 300),
    (ApiKey.END_TXN, 0, 300, 0),
    (ApiKey.CREATE_TOPICS, 2, 300, 0),
    (ApiKey.CREATE_TOPICS, 3, 300, 300),
    (ApiKey.DESCRIBE_CLUSTER, 0, 300, 300),  # no override: every version whose answer has the field
    (ApiKey.PRODUCE, 9, 0, 0),
    (ApiKey.PRODUCE, 9, -1, 0),
])
def test_which_answers_mute_their_node_is_java_4_4s_rule(api: ApiKey, version: int, throttle: int,
                                                          muted_for: int) -> None:
    assert client_throttle_ms(api, version, {"throttle_time_ms": throttle}) == muted_for


def test_an_answer_without_a_throttle_time_mutes_nothing() -> None:
    assert client_throttle_ms(ApiKey.PRODUCE, 0, {"responses": []}) == 0
