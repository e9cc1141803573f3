"""The producer: the Java producer's internals, one module each, behind `Producer` (producer.py).

send_path (send()'s per-record work, compiled), batch_input (input checked and serialized), partitioner,
accumulator (per-partition batch queues), batch (one batch), buffer_pool (buffer.memory), futures (futures and
callbacks), metadata (with metadata_kernel, its compiled kernel), sender (the network thread), idempotence
(producer id and sequences), transactions (the transaction manager), metrics, loss_report (records lost at
exit), telemetry (OpenTelemetry, with opentelemetry.enable); arrow (Arrow tables as input), aio_producer (the
asyncio producer over the same machinery) and send_gate (what it checks so that send() never blocks its
loop)."""

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
