"""The connection setup machine (network/setup.py) without sockets: events in, actions out.

Both connection kinds drive this one machine (node.py with non-blocking sockets, blocking.py with blocking
ones), so what holds here holds for the producer, the admin client and the FetchClient.
"""

from __future__ import annotations

import random
import re
import ssl
from typing import Any

import pytest

from kafkajet.errors import (
    IllegalStateError,
    KafkaConnectionError,
    RebootstrapRequiredError,
    SaslAuthenticationError,
)
from kafkajet.network.connection import CorruptStreamError
from kafkajet.network.setup import START_TLS, ConnectionState, SendRequest, SetupMachine
from kafkajet.network.versions import MAX_API_VERSIONS_ATTEMPTS, max_api_versions_version
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey, encode_request, encode_response
from kafkajet.security.connection import PLAINTEXT, ConnectionSecurity
from kafkajet.security.mechanism import SaslClient
from kafkajet.security.sasl import PlainClient

BROKER = "node 1 (b1:9092)"
OURS = max_api_versions_version()
# What a Kafka 3.x broker lists for the APIs the setup uses.
BROKER_RANGES = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12), ApiKey.SASL_HANDSHAKE: (0, 1),
                 ApiKey.SASL_AUTHENTICATE: (0, 2), ApiKey.PRODUCE: (0, 9)}


def sasl_security(hosts: list[str] | None = None) -> ConnectionSecurity:
    def factory(host: str) -> SaslClient:
        if hosts is not None:
            hosts.append(host)
        return PlainClient("alice", "pw")

    return ConnectionSecurity(sasl=factory)


def answer(api: ApiKey, version: int, body: dict[str, Any]) -> bytes:
    return encode_response(api, version, 7, body)[4:]  # the payload: size prefix removed


def api_versions_answer(version: int, error: int = 0, ranges: dict[ApiKey, tuple[int, int]] | None = None) -> bytes:
    keys = [{"api_key": int(k), "min_version": lo, "max_version": hi}
            for k, (lo, hi) in (BROKER_RANGES if ranges is None else ranges).items()]
    return answer(ApiKey.API_VERSIONS, version, {"error_code": error, "api_keys": keys})


def respond(machine: SetupMachine, request: SendRequest, payload: bytes, sent_at: float = 0.0,
            now: float = 0.0) -> SendRequest | None:
    return machine.on_response(request.api_key, request.version, payload, sent_at, now)


def connected(machine: SetupMachine, now: float = 0.0) -> SendRequest:
    machine.connecting(now, 10_000)
    request = machine.connected(now)
    assert isinstance(request, SendRequest)
    return request


def test_plaintext_setup_is_api_versions_then_ready() -> None:
    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    assert machine.state is ConnectionState.DISCONNECTED
    machine.connecting(1000, 10_000)
    assert machine.state is ConnectionState.CONNECTING
    request = machine.connected(1005)
    assert request == SendRequest(ApiKey.API_VERSIONS, OURS, request.body)
    assert request.body["client_software_name"] == "kafkajet"
    assert machine.state is ConnectionState.API_VERSIONS
    assert respond(machine, request, api_versions_answer(OURS)) is None
    assert machine.state is ConnectionState.READY
    assert machine.api_versions is not None and machine.api_versions[ApiKey.METADATA] == (0, 12)
    assert not machine.check_reauthentication(1e15)  # no SASL session: never due


def test_the_setup_timeout_covers_the_connect_and_the_tls_handshake_only() -> None:
    machine = SetupMachine(BROKER, "b1", ConnectionSecurity(ssl_context=ssl.create_default_context()))
    machine.connecting(1000, 200)
    assert machine.setup_timed_out(1200) is None
    error = machine.setup_timed_out(1201)
    assert isinstance(error, KafkaConnectionError)
    assert str(error).startswith(f"connection to {BROKER} not done within 200 ms")
    assert machine.connected(1100) is START_TLS
    assert machine.state is ConnectionState.TLS_HANDSHAKE
    error = machine.setup_timed_out(1201)  # the handshake keeps the deadline of the connect
    assert error is not None and str(error).startswith(f"TLS handshake with {BROKER} not done within 200 ms")
    request = machine.tls_done(1150)
    assert request.api_key is ApiKey.API_VERSIONS and machine.state is ConnectionState.API_VERSIONS
    assert machine.setup_timed_out(10**9) is None  # from here on request.timeout.ms bounds each request


def test_a_refused_api_versions_version_is_retried_lower_then_negotiation_completes() -> None:
    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    first = connected(machine)
    # KIP-511: a v0 body with UNSUPPORTED_VERSION and the broker's own ApiVersions range.
    retry = respond(machine, first, api_versions_answer(0, 35, {ApiKey.API_VERSIONS: (0, 2)}))
    assert retry is not None and (retry.api_key, retry.version) == (ApiKey.API_VERSIONS, 2)
    assert machine.state is ConnectionState.API_VERSIONS
    assert respond(machine, retry, api_versions_answer(2)) is None
    assert machine.state is ConnectionState.READY


def test_a_broker_that_keeps_refusing_api_versions_is_given_up() -> None:
    def refusal(request: SendRequest) -> bytes:  # each answer lists a range just below what was asked
        return api_versions_answer(0, 35, {ApiKey.API_VERSIONS: (0, request.version - 1)})

    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    request: SendRequest | None = connected(machine)
    versions = []
    with pytest.raises(KafkaConnectionError, match=re.escape(f"{BROKER} keeps rejecting our ApiVersions versions")):
        while request is not None:
            versions.append(request.version)
            request = respond(machine, request, refusal(request))
    assert versions == [OURS - i for i in range(MAX_API_VERSIONS_ATTEMPTS)]
    # The count starts again with the next connection.
    machine.reset()
    request = connected(machine)
    assert respond(machine, request, refusal(request)) is not None


def test_an_unreadable_api_versions_answer_is_a_corrupt_stream() -> None:
    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    request = connected(machine)
    with pytest.raises(CorruptStreamError, match=re.escape(f"bad ApiVersions response from {BROKER}")):
        respond(machine, request, b"\0\0\0\7")


def test_sasl_follows_api_versions_with_negotiated_versions_and_the_session_lifetime_sets_reauthentication() -> None:
    hosts: list[str] = []
    machine = SetupMachine(BROKER, "b1", sasl_security(hosts), random.Random(5))
    handshake = respond(machine, connected(machine), api_versions_answer(OURS))
    assert handshake == SendRequest(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert machine.state is ConnectionState.AUTHENTICATING and hosts == ["b1"]
    authenticate = respond(machine, handshake, answer(ApiKey.SASL_HANDSHAKE, 1, {
        "error_code": 0, "mechanisms": ["PLAIN"]}))
    version = min(SUPPORTED_VERSIONS[ApiKey.SASL_AUTHENTICATE][1], 2)
    assert authenticate == SendRequest(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": b"\0alice\0pw"})
    # Sent at 5000, answered at 5400: the session's clock started before we read the answer.
    done = respond(machine, authenticate, answer(ApiKey.SASL_AUTHENTICATE, version, {
        "error_code": 0, "auth_bytes": b"", "session_lifetime_ms": 10_000}), sent_at=5000, now=5400)
    assert done is None and machine.state is ConnectionState.READY
    # Java's rule: at a random 85-95 % of the lifetime (this seed's draw), counted from the send.
    assert machine.reauth_at_ms == 5000 + random.Random(5).uniform(0.85, 0.95) * 10_000
    assert not machine.check_reauthentication(machine.reauth_at_ms - 1)
    assert machine.check_reauthentication(machine.reauth_at_ms)
    assert machine.state is ConnectionState.READY and machine.reauth_due  # due: the owner drains, then renews
    again = machine.reauthenticate()
    assert again.api_key is ApiKey.SASL_HANDSHAKE and machine.state is ConnectionState.AUTHENTICATING
    assert not machine.check_reauthentication(10**12)  # under way: not due a second time
    assert hosts == ["b1", "b1"]  # a new mechanism object per exchange
    authenticate = respond(machine, again, answer(ApiKey.SASL_HANDSHAKE, 1, {"error_code": 0, "mechanisms": []}))
    assert authenticate is not None
    assert respond(machine, authenticate, answer(ApiKey.SASL_AUTHENTICATE, version, {
        "error_code": 0, "auth_bytes": b"", "session_lifetime_ms": 0})) is None
    assert machine.state is ConnectionState.READY and not machine.reauth_due
    assert machine.reauth_at_ms == float("inf")


def test_a_refused_sasl_exchange_raises_the_brokers_reason() -> None:
    machine = SetupMachine(BROKER, "b1", sasl_security())
    handshake = respond(machine, connected(machine), api_versions_answer(OURS))
    assert handshake is not None
    authenticate = respond(machine, handshake, answer(ApiKey.SASL_HANDSHAKE, 1, {
        "error_code": 0, "mechanisms": ["PLAIN"]}))
    assert authenticate is not None
    with pytest.raises(SaslAuthenticationError, match=re.escape(f"PLAIN authentication failed on {BROKER}: bad password")):
        respond(machine, authenticate, answer(ApiKey.SASL_AUTHENTICATE, authenticate.version, {
            "error_code": 58, "error_message": "bad password", "auth_bytes": b""}))


def test_sasl_against_a_broker_without_it_fails_after_api_versions() -> None:
    machine = SetupMachine(BROKER, "b1", sasl_security())
    without_sasl = {k: v for k, v in BROKER_RANGES.items()
                    if k not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)}
    with pytest.raises(SaslAuthenticationError, match="SASL is not enabled on this listener"):
        respond(machine, connected(machine), api_versions_answer(OURS, ranges=without_sasl))


def test_an_unreadable_sasl_answer_is_a_corrupt_stream() -> None:
    machine = SetupMachine(BROKER, "b1", sasl_security())
    handshake = respond(machine, connected(machine), api_versions_answer(OURS))
    assert handshake is not None
    with pytest.raises(CorruptStreamError, match=re.escape(f"bad SASL_HANDSHAKE response from {BROKER}")):
        respond(machine, handshake, b"\0\0\0\7\0")


def test_a_response_the_setup_did_not_ask_for_is_a_corrupt_stream() -> None:
    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    request = connected(machine)
    with pytest.raises(CorruptStreamError, match="unexpected METADATA response during setup"):
        machine.on_response(ApiKey.METADATA, 1, answer(ApiKey.METADATA, 1, {"brokers": [], "topics": []}), 0, 0)
    assert request.api_key is ApiKey.API_VERSIONS


def test_events_out_of_order_are_refused() -> None:
    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    with pytest.raises(IllegalStateError):
        machine.connected(0)
    connected(machine)
    with pytest.raises(IllegalStateError):
        machine.tls_done(0)
    with pytest.raises(IllegalStateError):
        machine.reauthenticate()


def test_reset_forgets_what_the_connection_negotiated() -> None:
    machine = SetupMachine(BROKER, "b1", sasl_security(), random.Random(1))
    handshake = respond(machine, connected(machine), api_versions_answer(OURS))
    assert handshake is not None and machine.api_versions is not None
    machine.reset()
    assert machine.state is ConnectionState.DISCONNECTED and machine.api_versions is None
    assert machine.reauth_at_ms == float("inf") and not machine.reauth_due
    assert machine.setup_timed_out(10**12) is None



def test_api_versions_v5_names_the_expected_cluster_and_node_and_v4_leaves_them_out() -> None:
    """KIP-1242: from v5 the broker checks the cluster id and node id the client expects; a broker without v5
    (Tansu) refuses it and the retry at v4 carries neither, quietly."""
    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    machine.cluster_check = ("cluster-A", 1)
    first = connected(machine)
    assert (first.version, first.body["cluster_id"], first.body["node_id"]) == (5, "cluster-A", 1)
    retry = respond(machine, first, api_versions_answer(0, 35, {ApiKey.API_VERSIONS: (0, 4)}))
    assert retry is not None and retry.version == 4
    assert encode_request(ApiKey.API_VERSIONS, 4, 1, "c", retry.body) == encode_request(
        ApiKey.API_VERSIONS, 4, 1, "c", {**retry.body, "cluster_id": None, "node_id": -1})
    assert respond(machine, retry, api_versions_answer(4)) is None
    assert machine.state is ConnectionState.READY
    bootstrap = SetupMachine("node -1 (b1:9092)", "b1", PLAINTEXT)
    assert connected(bootstrap).body["cluster_id"] is None  # nothing to check a bootstrap address against


def test_rebootstrap_required_in_api_versions_names_the_misrouted_node() -> None:
    machine = SetupMachine(BROKER, "b1", PLAINTEXT)
    machine.cluster_check = ("cluster-A", 1)
    first = connected(machine)
    with pytest.raises(KafkaConnectionError, match=r"node 1 \(b1:9092\) is not node 1 of cluster cluster-A "
                                                   r"\(REBOOTSTRAP_REQUIRED") as raised:
        respond(machine, first, api_versions_answer(5, 129))
    assert isinstance(raised.value.__cause__, RebootstrapRequiredError)
