"""kafkajet: a fast Kafka producer for Python, built on the Java producer's architecture.

Everything a user names is importable from here: the clients (Producer, Admin), what they return
(RecordMetadata, RecordFuture, BatchFuture, TopicPartition, PartitionInfo, NewTopic, Record, PreparedTransaction) and
the errors users catch, among them Java's categories (KIP-1050) for the recovery a failure calls for
(the whole hierarchy is in kafkajet.errors).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

# First: it decides, before any of them is imported, whether the compiled send-path modules or their .py run.
from kafkajet import _build  # noqa: F401  (isort: keep first)
from kafkajet._version import __version__
from kafkajet.errors import (
    ApplicationRecoverableError,
    AuthenticationError,
    BufferExhaustedError,
    ConfigError,
    DeliveryTimeoutError,
    IllegalStateError,
    InvalidPartitionError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    RecordTooLargeError,
    RefreshRetriableError,
    SerializationError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from kafkajet.producer.futures import BatchFuture, RecordFuture, RecordMetadata

# A library's logger stays silent until the application configures logging (not Python's last-resort stderr).
logging.getLogger("kafkajet").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from kafkajet.admin import Admin, NewTopic
    from kafkajet.cluster import PartitionInfo, TopicPartition
    from kafkajet.producer.producer import Producer
    from kafkajet.records import Record
    from kafkajet.transaction import PreparedTransaction

# The clients pull in the network stack; `import kafkajet.protocol` alone must stay light for the codec, so
# these load on first use. Type checkers see the imports above.
_LAZY = {
    "Producer": "kafkajet.producer.producer",
    "Admin": "kafkajet.admin",
    "NewTopic": "kafkajet.admin",
    "PartitionInfo": "kafkajet.cluster",
    "TopicPartition": "kafkajet.cluster",
    "Record": "kafkajet.records",
    "PreparedTransaction": "kafkajet.transaction",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkajet' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Admin", "ApplicationRecoverableError", "AuthenticationError", "BatchFuture", "BufferExhaustedError",
    "ConfigError",
    "DeliveryTimeoutError", "IllegalStateError", "InvalidPartitionError", "InvalidRecordError", "InvalidTxnStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic", "PartitionInfo", "PreparedTransaction", "Producer", "ProducerClosedError",
    "ProducerFencedError", "Record", "RecordFuture", "RecordMetadata", "RecordTooLargeError",
    "RefreshRetriableError", "SerializationError", "TopicPartition", "TransactionAbortableError",
    "TransactionAbortedError", "__version__",
]
