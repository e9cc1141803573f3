"""kafkajet: a fast Kafka producer for Python, built on the Java producer's architecture."""

from kafkajet.errors import (
    AuthenticationError,
    BufferExhaustedError,
    ConfigError,
    DeliveryTimeoutError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    SerializationError,
)
from kafkajet.producer.futures import BatchFuture, RecordFuture, RecordMetadata

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The producer pulls in the network stack; keep `import kafkajet.protocol` light for the codec alone.
    if name == "Producer":
        from kafkajet.producer.producer import Producer

        return Producer
    raise AttributeError(name)


__all__ = [
    "AuthenticationError", "BatchFuture", "BufferExhaustedError", "ConfigError", "DeliveryTimeoutError",
    "KafkaError", "KafkaTimeoutError", "Producer", "ProducerClosedError", "RecordFuture", "RecordMetadata", "RecordTooLargeError",
    "SerializationError",
]
