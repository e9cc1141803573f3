"""The Schema Registry clients of a worker process, one per registry, kept across tasks (Spark reuses its
Python workers): the decoders and encoders of every format share them, and with them their caches."""

from __future__ import annotations

import threading
from typing import Any

_LOCK = threading.Lock()
_CLIENTS: dict[tuple[tuple[str, str], ...], Any] = {}


def registry_client(registry: tuple[tuple[str, str], ...]) -> Any:
    from kafkajet.schema_registry import SchemaRegistryClient

    with _LOCK:
        client = _CLIENTS.get(registry)
        if client is None:
            client = _CLIENTS[registry] = SchemaRegistryClient(dict(registry))
        return client
