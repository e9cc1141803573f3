"""What every handler module shares: the request as a handler sees it and the answer it gives back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkajet.errors import error_for_name
from kafkajet.protocol import RequestHeader

if TYPE_CHECKING:
    from kafkajet.testing.mock.state import ClusterState

Body = dict[str, Any]


def code(name: str) -> int:
    return error_for_name(name).code


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
