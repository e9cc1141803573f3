"""The MockCluster (cluster.py) and its parts: storage, sequence checks, faults, server, the transaction
(transactions.py) and group (groups.py) coordinators, and the handlers of each API (handlers/, one module per
API or family, with the versions it serves)."""

from kafkajet.testing.mock.faults import (
    DROP,
    DROP_AFTER,
    Action,
    ControlFn,
    Throttled,
    after_append,
    throttled,
)
from kafkajet.testing.mock.sequences import BATCHES_RETAINED, SequenceChecker, Verdict
from kafkajet.testing.mock.server import RequestRecord
from kafkajet.testing.mock.state import NO_LEADER, MockConfig

__all__ = [
    "Action", "BATCHES_RETAINED", "ControlFn", "DROP", "DROP_AFTER", "MockConfig", "NO_LEADER", "RequestRecord",
    "SequenceChecker", "Throttled", "Verdict", "after_append", "throttled",
]
