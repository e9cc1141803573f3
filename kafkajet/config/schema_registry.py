"""The Schema Registry client's keys (confluent-kafka's SchemaRegistryClient's names): the one list the client
checks a configuration against and the Spark options take the registry's settings from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegistryKey:
    name: str
    # A Spark option may carry it: the registry's address and the credentials, text a user writes on the
    # driver. A custom token provider is a callable, and the client's tuning keeps its defaults there.
    option: bool = False


SCHEMA_REGISTRY_CONFIG: tuple[RegistryKey, ...] = (
    RegistryKey("url"),
    RegistryKey("schema.registry.url", option=True),
    RegistryKey("basic.auth.credentials.source", option=True),
    RegistryKey("basic.auth.user.info", option=True),
    RegistryKey("sasl.username"),
    RegistryKey("sasl.password"),
    RegistryKey("bearer.auth.credentials.source", option=True),
    RegistryKey("bearer.auth.token", option=True),
    RegistryKey("bearer.auth.logical.cluster", option=True),
    RegistryKey("bearer.auth.identity.pool.id", option=True),
    RegistryKey("bearer.auth.custom.provider.function"),
    RegistryKey("bearer.auth.custom.provider.config"),
    RegistryKey("timeout"),
    RegistryKey("max.retries"),
    RegistryKey("retries.wait.ms"),
    RegistryKey("retries.max.wait.ms"),
    RegistryKey("cache.capacity"),
    RegistryKey("cache.latest.ttl.sec"),
    RegistryKey("ssl.ca.location"),
    RegistryKey("ssl.certificate.location"),
    RegistryKey("ssl.key.location"),
    RegistryKey("ssl.key.password"),
)
SCHEMA_REGISTRY_KEYS: frozenset[str] = frozenset(k.name for k in SCHEMA_REGISTRY_CONFIG)
# The keys a Spark option carries to the registry client, in the table's order.
SCHEMA_REGISTRY_OPTIONS: tuple[str, ...] = tuple(k.name for k in SCHEMA_REGISTRY_CONFIG if k.option)
