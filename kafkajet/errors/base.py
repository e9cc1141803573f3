"""One exception hierarchy for everything kafkajet raises.

KafkaError is the root. Client-side problems have their own classes here; broker error codes map to
BrokerError subclasses generated into broker.py from Kafka's error table.
"""

from __future__ import annotations

from typing import Any


class KafkaError(Exception):
    """Root of every error kafkajet raises."""

    retriable: bool = False
    invalid_metadata: bool = False


# --- client-side errors -------------------------------------------------------------------------


class ConfigError(KafkaError, ValueError):
    """A configuration key is unknown, or its value has the wrong type or range."""


class ProtocolError(KafkaError):
    """Bytes on the wire do not follow the Kafka protocol (truncated, impossible length, bad version)."""


class CorruptRecordError(ProtocolError):
    """A record batch failed its CRC, was truncated or declared impossible lengths."""


class KafkaConnectionError(KafkaError):
    """A connection to a broker failed or was lost; requests on it may be retried."""

    retriable = True


class AuthenticationError(KafkaError):
    """The broker refused our credentials, or the TLS/SASL handshake failed."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: the broker's certificate did not verify, or the broker refused ours."""


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed: the mechanism is not enabled on the broker, or the credentials are wrong."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """A client-side deadline passed (max.block.ms, delivery.timeout.ms, a caller's timeout)."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message if cause is None else f"{message} (last cause: {cause!r})")
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause


class BufferExhaustedError(KafkaTimeoutError):
    """No buffer memory became free within max.block.ms."""

    facts = ""  # what was asked for and what was free, without the advice (the producer may know the reason)


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record was not acknowledged within delivery.timeout.ms."""


class RecordTooLargeError(KafkaError):
    """A record is larger than max.request.size or buffer.memory."""


class SerializationError(KafkaError, TypeError):
    """A key or value could not be turned into bytes by its serializer."""


class InvalidPartitionError(KafkaError, ValueError):
    """A record names a partition its topic does not have (Java: "Invalid partition given with record")."""


class ProducerClosedError(KafkaError):
    """The producer was closed before the operation could complete."""


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent (Java's TransactionAbortedException)."""


class IllegalStateError(KafkaError):
    """The operation is not allowed in the producer's current state (e.g. after a fatal error)."""


# --- Java's error categories (KIP-1050) ---------------------------------------------------------
# One `except` per recovery action. The broker errors Java 4.4 places under a category derive from it here
# (tools/gen_errors.py reads the placement from the kafka-clients jar); the third category,
# TransactionAbortableError, is also the class of the broker's TRANSACTION_ABORTABLE code, as in Java.


class ApplicationRecoverableError(KafkaError):
    """Java's ApplicationRecoverableException: this producer cannot go on, the application can. Close it and
    create a new one (its init_transactions() fences what is left and aborts the open transaction).

    ProducerFencedError (a newer producer took the transactional.id, or the coordinator aborted a transaction
    that outlived transaction.timeout.ms), InvalidProducerEpochError and InvalidProducerIdMappingError derive
    from it, as do the consumer group's IllegalGenerationError, UnknownMemberIdError and FencedInstanceIdError
    (send_offsets_to_transaction() with a stale group member)."""


class RefreshRetriableError(KafkaError):
    """Java's RefreshRetriableException: the metadata or the coordinator the request went by is stale. The client
    refreshes it and retries by itself (NotCoordinatorError, CoordinatorNotAvailableError, NotLeaderOrFollowerError
    and the other InvalidMetadataException errors); a caller meets one only as the cause of a KafkaTimeoutError,
    when its time ran out first, and calling again resumes."""

    retriable = True


# --- broker errors ------------------------------------------------------------------------------


class BrokerError(KafkaError):
    """An error code returned by a broker. Subclasses carry the class-level code/name/flags."""

    code: int = -1
    name: str = "UNKNOWN"
    retriable: bool = False
    invalid_metadata: bool = False

    def __init__(self, message: str | None = None, *, code: int | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        detail = f": {message}" if message else ""
        super().__init__(f"[Error {self.code}] {self.name}{detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_broker_error, (type(self), self.message, self.code))


def _rebuild_broker_error(cls: type[BrokerError], message: str | None, code: int) -> BrokerError:
    return cls(message, code=code)


class UnknownBrokerErrorCode(BrokerError):
    """The broker sent an error code this client does not know (a newer broker, or garbage)."""

    name = "UNKNOWN_ERROR_CODE"
