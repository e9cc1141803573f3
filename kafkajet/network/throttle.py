"""Client-side quota throttling (KIP-219): which answers mute their node, and for how long. Sans-I/O, no clock.

A broker over a quota answers at once and names a throttle time; from the versions below the client must then
send that node nothing until the time has passed (the broker also mutes the connection on its side). Before
them, the broker held the answer back for the throttle time itself, so the client must not wait a second time.

The versions are Java 4.4's `AbstractResponse.shouldClientThrottle(version)` overrides (read from
kafka-clients-4.4.0.jar); every other API throttles at each version whose answer carries `throttle_time_ms`
(the base method's rule), which an answer without the field cannot trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# api key -> the first version whose throttle time the client waits out itself.
CLIENT_THROTTLES_FROM: Final[Mapping[int, int]] = {
    0: 6,  # Produce
    1: 8,  # Fetch
    2: 3,  # ListOffsets
    3: 6,  # Metadata
    8: 4,  # OffsetCommit
    9: 4,  # OffsetFetch
    10: 2,  # FindCoordinator
    11: 3,  # JoinGroup
    12: 2,  # Heartbeat
    13: 2,  # LeaveGroup
    14: 2,  # SyncGroup
    15: 2,  # DescribeGroups
    16: 2,  # ListGroups
    18: 2,  # ApiVersions
    19: 3,  # CreateTopics
    20: 2,  # DeleteTopics
    21: 1,  # DeleteRecords
    22: 1,  # InitProducerId
    24: 1,  # AddPartitionsToTxn
    25: 1,  # AddOffsetsToTxn
    26: 1,  # EndTxn
    28: 1,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 2,  # DescribeConfigs
    33: 1,  # AlterConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    37: 1,  # CreatePartitions
    38: 1,  # CreateDelegationToken
    39: 1,  # RenewDelegationToken
    40: 1,  # ExpireDelegationToken
    41: 1,  # DescribeDelegationToken
    42: 1,  # DeleteGroups
    44: 0,  # IncrementalAlterConfigs
    47: 0,  # OffsetDelete
}


def client_throttle_ms(api_key: int, version: int, body: Mapping[str, Any]) -> int:
    """How long the client keeps the node muted after this answer: its throttle time when the client is the
    one to wait it out at this version (Java's NetworkClient.maybeThrottle), else 0."""
    throttle = body.get("throttle_time_ms", 0)
    if not throttle or throttle <= 0 or version < CLIENT_THROTTLES_FROM.get(api_key, 0):
        return 0
    return int(throttle)
