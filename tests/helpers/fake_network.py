"""A scripted stand-in for NetworkClient, so the Sender is driven pass by pass (Java's MockClient + MockTime).

Requests the sender sends are recorded, never written anywhere; a test answers them with `respond()` (the oldest
unanswered request of that API first, as a broker answers one connection in order) or drops a node with
`disconnect()`. `poll()` hands back what was answered since the last pass and never waits. An answer naming a
throttle time mutes its node from the poll that hands it back, by the real client's rule (network/throttle.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafkajet.errors import AuthenticationError, KafkaConnectionError, KafkaError
from kafkajet.network import ClientResponse
from kafkajet.network.throttle import client_throttle_ms
from kafkajet.network.versions import NO_FEATURES, FinalizedFeatures, negotiate
from kafkajet.protocol import SUPPORTED_VERSIONS, ApiKey


class FakeClock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, start_ms: float = 1_000_000.0) -> None:
        self.now = start_ms

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> float:
        self.now += ms
        return self.now


@dataclass
class SentRequest:
    node: int
    api_key: ApiKey
    body: dict[str, Any]
    sent_ms: float
    expect_response: bool
    context: Any
    correlation_id: int
    answered: bool = False
    version: int | None = None  # as the sender asked; None: the client's negotiated version

    @property
    def produce_partitions(self) -> list[tuple[str, int]]:
        """The (topic, partition) pairs a Produce request carries, in request order."""
        return [(t["name"], p["index"]) for t in self.body["topic_data"] for p in t["partition_data"]]


@dataclass
class FakeNetworkClient:
    nodes: dict[int, tuple[str, int]] = field(default_factory=lambda: {0: ("127.0.0.1", 9092)})
    max_in_flight: int = 5
    requests: list[SentRequest] = field(default_factory=list)
    down: set[int] = field(default_factory=set)
    _ready: list[ClientResponse] = field(default_factory=list)
    _auth_failures: list[AuthenticationError] = field(default_factory=list)
    wakeups: int = 0
    closed: bool = False
    # What ApiVersions finalized (transaction version 2 when transaction.version >= 2).
    features: FinalizedFeatures = NO_FEATURES
    disconnects: int = 0
    throttled_until: dict[int, float] = field(default_factory=dict)
    rebootstraps: list[str] = field(default_factory=list)
    cluster_id: str | None = None

    # --- what the Sender calls -------------------------------------------------------------------------

    def set_nodes(self, nodes: dict[int, tuple[str, int]], cluster_id: str | None = None) -> None:
        self.nodes = dict(nodes)
        self.cluster_id = cluster_id

    def rebootstrap(self, why: str) -> None:
        self.rebootstraps.append(why)

    def in_flight_count(self, node_id: int | None = None) -> int:
        return sum(1 for r in self.requests if not r.answered and (node_id is None or r.node == node_id))

    def has_in_flight(self) -> bool:
        return self.in_flight_count() > 0

    def ready(self, node_id: int, now: float) -> bool:
        return (node_id in self.nodes and node_id not in self.down and self.in_flight_count(node_id) < self.max_in_flight
                and self.throttled_until.get(node_id, float("-inf")) <= now)

    def connection_delay(self, node_id: int, now: float) -> float:
        return 0.0 if node_id not in self.down else 50.0

    def poll_delay(self, node_id: int, now: float) -> float:
        until = self.throttled_until.get(node_id, float("-inf"))
        return until - now if node_id not in self.down and until > now else self.connection_delay(node_id, now)

    def knows(self, node_id: int) -> bool:
        return node_id in self.nodes

    def last_error(self, node_id: int) -> KafkaError | None:
        return KafkaConnectionError(f"node {node_id} is down") if node_id in self.down else None

    def least_loaded_node(self, now: float) -> int | None:
        candidates = [n for n in self.nodes if n not in self.down and self.throttled_until.get(n, float("-inf")) <= now]
        return min(candidates, key=self.in_flight_count) if candidates else None

    def api_version(self, node_id: int, api_key: int) -> int:
        return negotiate({int(api): r for api, r in SUPPORTED_VERSIONS.items()}, api_key)

    def finalized_features(self) -> FinalizedFeatures:
        return self.features

    def send(self, node_id: int, api_key: int, body: dict[str, Any], now: float, *, version: int | None = None,
             expect_response: bool = True, context: Any = None) -> int:
        assert self.ready(node_id, now), f"the sender sent to node {node_id}, which is not ready"
        req = SentRequest(node_id, ApiKey(api_key), body, now, expect_response, context, len(self.requests),
                          version=version)
        self.requests.append(req)
        if not expect_response:
            req.answered = True
            self._ready.append(self._response(req, None, None))
        return req.correlation_id

    def poll(self, timeout_ms: float, now: float) -> list[ClientResponse]:
        out, self._ready = self._ready, []
        for resp in out:
            throttle_ms = 0 if resp.body is None else client_throttle_ms(resp.api_key, resp.api_version, resp.body)
            if throttle_ms and now + throttle_ms > self.throttled_until.get(resp.node_id, float("-inf")):
                self.throttled_until[resp.node_id] = now + throttle_ms
        return out

    def write_pending(self, now: float) -> None:
        pass

    def authentication_failures(self) -> list[AuthenticationError]:
        out, self._auth_failures = self._auth_failures, []
        return out

    def wakeup(self) -> None:
        self.wakeups += 1

    def server_disconnects(self) -> int:
        count, self.disconnects = self.disconnects, 0
        return count

    def close(self) -> None:
        self.closed = True

    # --- what tests call -------------------------------------------------------------------------------

    def pending(self, api: ApiKey | None = None) -> list[SentRequest]:
        return [r for r in self.requests if not r.answered and (api is None or r.api_key == api)]

    def respond(self, api: ApiKey, body: dict[str, Any] | None = None, *, error: KafkaError | None = None,
                node: int | None = None) -> SentRequest:
        """Answer the oldest unanswered request of `api` (on `node`, if given); poll() returns the answer."""
        for req in self.requests:
            if not req.answered and req.api_key == api and (node is None or req.node == node):
                req.answered = True
                self._ready.append(self._response(req, body, error))
                return req
        raise AssertionError(f"no unanswered {api.name} request" + (f" on node {node}" if node is not None else ""))

    def disconnect(self, node_id: int) -> None:
        """The connection drops: each unanswered request on it fails once, and the node is down until up()."""
        self.down.add(node_id)
        self.disconnects += 1
        for req in self.requests:
            if not req.answered and req.node == node_id:
                req.answered = True
                self._ready.append(self._response(req, None, KafkaConnectionError(f"node {node_id} disconnected")))

    def refuse(self, node_id: int) -> None:
        """A connection attempt to `node_id` is refused: it is down, and the failure counts as a disconnect."""
        self.down.add(node_id)
        self.disconnects += 1

    def up(self, node_id: int) -> None:
        self.down.discard(node_id)

    @staticmethod
    def _response(req: SentRequest, body: dict[str, Any] | None, error: KafkaError | None) -> ClientResponse:
        version = req.version if req.version is not None else negotiate({int(api): r for api, r in SUPPORTED_VERSIONS.items()}, req.api_key)
        return ClientResponse(req.node, int(req.api_key), version, req.correlation_id, body, error, req.context, 1.0)


# --- response bodies, as kafkajet.protocol decodes them --------------------------------------------------------


def metadata_body(nodes: dict[int, tuple[str, int]], leaders: dict[str, list[int]]) -> dict[str, Any]:
    """A Metadata answer: `leaders` maps each topic to the leader of partition 0, 1, ..."""
    return {
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, (h, p) in nodes.items()],
        "topics": [
            {"error_code": 0, "name": topic, "is_internal": False, "partitions": [
                {"error_code": 0, "partition_index": i, "leader_id": leader, "leader_epoch": 0,
                 "replica_nodes": [leader], "isr_nodes": [leader]}
                for i, leader in enumerate(partition_leaders)]}
            for topic, partition_leaders in leaders.items()
        ],
    }


def produce_body(req: SentRequest, error_code: int = 0, base_offset: int = 0,
                 errors: dict[tuple[str, int], int] | None = None) -> dict[str, Any]:
    """A Produce answer to `req`: every partition gets `error_code` unless `errors` names it."""
    errors = errors or {}
    responses: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in req.produce_partitions:
        responses.setdefault(topic, []).append({
            "index": partition, "error_code": errors.get((topic, partition), error_code),
            "base_offset": base_offset, "log_append_time_ms": -1, "log_start_offset": 0,
        })
    return {"responses": [{"name": t, "partition_responses": ps} for t, ps in responses.items()]}


def init_producer_id_body(producer_id: int = 1000, epoch: int = 0, error_code: int = 0) -> dict[str, Any]:
    return {"error_code": error_code, "producer_id": producer_id, "producer_epoch": epoch}
