"""The producer: the Java producer's internals, one module each (accumulator, batch, buffer pool, sender,
idempotence, metadata, metrics, partitioner, futures) behind the `Producer` facade."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkajet.producer.producer import Producer


def __getattr__(name: str) -> object:
    # The facade pulls in the network stack; importing one internal module (e.g. futures) must not.
    if name == "Producer":
        from kafkajet.producer.producer import Producer

        return Producer
    raise AttributeError(name)


__all__ = ["Producer"]
