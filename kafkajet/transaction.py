"""What a transaction is named by outside the producer that ran it: the handle of a prepared transaction
(Producer.prepare_transaction returns it, Admin.complete_transaction takes it, the Spark sink's commit
messages carry it) and the FindCoordinator key types that find its coordinator and a group's.

A leaf module (no kafkajet imports), so the producer, the admin client and the MockCluster share one
definition without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class CoordinatorType(IntEnum):
    """FindCoordinator's key_type (Java's FindCoordinatorRequest.CoordinatorType)."""

    GROUP = 0
    TRANSACTION = 1


GROUP_COORDINATOR = CoordinatorType.GROUP
TXN_COORDINATOR = CoordinatorType.TRANSACTION


@dataclass(frozen=True)
class PreparedTransaction:
    """An open transaction handed to someone else to complete (KIP-939's PreparedTxnState): with these three,
    `Admin.complete_transaction()` commits or aborts it from any process.

    Pickled in the Spark sink's commit messages. Its pickles name kafkajet.transaction; those written before
    it moved here name kafkajet.producer.transactions, which still exports it, so they load too.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    # 2 when the transaction runs under transaction version 2 (KIP-890: Produce v12+ added its partitions, and
    # its EndTxn must be v5); pickles from before the field load as 1.
    transaction_version: int = 1
