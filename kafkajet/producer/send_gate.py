"""What a caller that must never block (the asyncio producer's event loop) checks before Producer.send():
whether the topic's metadata and the buffer memory a record needs are there now, and how to wait for them
without blocking: a hook on freed memory, a nudge to the sender, and the error when max.block.ms runs out.

The narrow view of the producer's internals AIOProducer needs, so that it reads none of them itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kafkajet.errors import BufferExhaustedError
from kafkajet.producer.buffer_pool import BufferPool
from kafkajet.producer.metadata import Metadata


class SendGate:
    def __init__(self, metadata: Metadata, pool: BufferPool, wakeup: Callable[[], None], max_block_ms: float,
                 explain: Callable[[BufferExhaustedError], BufferExhaustedError]) -> None:
        self._metadata = metadata
        self._pool = pool
        self.wake_sender = wakeup  # the sender drains now instead of waiting out linger.ms
        self.max_block_ms = max_block_ms
        self.total_memory = pool.total_memory
        self._explain = explain
        # Buffer memory free now, read without the pool's lock (the per-record check): while one caller
        # allocates, the sender thread only frees, so the estimate can only be low. The pool's own method,
        # not a wrapper: one call less per record on the asyncio send path.
        self.free_memory_estimate: Callable[[], int] = pool._available

    def ready(self, topic: str, need: int) -> bool:
        """Whether send() goes through now without waiting: the topic's metadata is at hand and the pool has
        `need` bytes (the estimate). The per-record check, one call: otherwise the caller finds out which
        (partition_count(), free_memory_estimate()) and waits for that."""
        return (self._metadata.cluster.partition_counts.get(topic) is not None
                and self.free_memory_estimate() >= need)

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count in the metadata at hand; None: send() would wait for metadata."""
        return self._metadata.cluster.partition_counts.get(topic)

    def free_memory(self) -> int:
        return self._pool.available_memory()

    def on_memory_freed(self, hook: Callable[[], object] | None) -> None:
        """Call `hook` on the sender thread after every release of memory (None: stop)."""
        self._pool.on_release = hook

    def exhausted(self, need: int) -> BufferExhaustedError:
        """The error send() would raise after max.block.ms without `need` bytes, with the reason if known."""
        return self._explain(self._pool.exhausted(need, self.max_block_ms, self._pool.available_memory()))


class AsyncView(NamedTuple):
    """AIOProducer's one view of a Producer's internals (Producer._async_view())."""

    gate: SendGate
    plain_send: Callable[..., Any]  # the producer's own send: `producer.send is plain_send` unless wrapped
    send_without_future: Callable[..., None]  # send() with the caller's future as the record's callback
