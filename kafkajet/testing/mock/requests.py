"""What every handler module (handlers/) shares: the request as a handler sees it, the answer it gives back,
how a module lists what it serves, and the leadership and coordinator checks of more than one API."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkajet.errors import error_for_name
from kafkajet.protocol import ApiKey, RequestHeader

if TYPE_CHECKING:
    from kafkajet.testing.mock.state import ClusterState, PartitionState

Body = dict[str, Any]
Versions = dict[ApiKey, tuple[int, int]]  # api -> (lowest, highest) version served

READ_COMMITTED = 1  # Fetch's and ListOffsets' isolation_level


def code(name: str) -> int:
    return error_for_name(name).code


def error_code(error: str | None) -> int:
    return code(error) if error else 0


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: Body
    broker_id: int

    @property
    def version(self) -> int:
        return self.header.api_version


@dataclass(slots=True)
class Answer:
    """body None means no response at all (acks=0). wait_ms > 0 asks the server to hold the answer back
    (a Fetch with nothing to return yet) and call the handler again when data arrives or the wait is over.
    close: close the connection once the answer is written (a failed SASL authentication)."""

    body: Body | None
    wait_ms: int = 0
    close: bool = False


Handler = Callable[["ClusterState", Request], Answer]
ErrorBody = Callable[["ClusterState", Request, str], Body]


@dataclass(frozen=True, slots=True)
class Served:
    """One API as a handler module serves it."""

    handle: Handler
    error_body: ErrorBody  # the answer when a fault fails every partition/topic of the request with the error


def _epoch_error(p: PartitionState, client_epoch: int) -> str | None:
    """KIP-320: a client naming an older leader epoch is fenced; a newer one means our metadata lags."""
    if client_epoch < 0 or client_epoch == p.leader_epoch:
        return None
    return "FENCED_LEADER_EPOCH" if client_epoch < p.leader_epoch else "UNKNOWN_LEADER_EPOCH"


def leader_error(state: ClusterState, req: Request, topic: str, index: int,
                 client_epoch: int) -> tuple[PartitionState | None, str | None]:
    """A read (Fetch, ListOffsets) of a partition: the partition, and the error if this broker may not serve it."""
    p = state.partition(topic, index)
    if p is None:
        return None, "UNKNOWN_TOPIC_OR_PARTITION"
    if p.leader != req.broker_id:
        return p, "NOT_LEADER_OR_FOLLOWER"
    return p, _epoch_error(p, client_epoch)


def not_coordinator(state: ClusterState, req: Request, key_type: int, key: str) -> str | None:
    """A coordinator request reaching a broker that does not coordinate its key is answered NOT_COORDINATOR, as
    Kafka answers it, so the client looks the coordinator up again."""
    if state.coordinator(key_type, key) != req.broker_id:
        return "NOT_COORDINATOR"
    return None
