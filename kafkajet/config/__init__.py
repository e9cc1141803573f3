"""Client configuration: one table of the keys every client shares, extended per client (producer, admin,
fetch), feeding validation, docs and the CLI.

Keys are the Java clients' names ("linger.ms"); keyword arguments in snake_case (linger_ms=5) mean the
same. Values may arrive as strings (properties files, Spark options) and are converted.

`kafkajet.config` is the one import, for users and for the rest of the package; its modules split it by
family, as Java keeps ConfigDef, SaslConfigs, SslConfigs and CommonClientConfigs apart: `keys` (what a key is,
and the validators), `sasl` (the SASL mechanisms), `security` (security.protocol, TLS and their cross-checks),
`clients` (the client tables and the parsing of settings), `schema_registry` (the Schema Registry client's
keys) and `markdown` (the settings reference).
"""

from __future__ import annotations

from kafkajet.config.clients import (
    ADMIN,
    ADMIN_CONFIG,
    BY_NAME,
    BY_SNAKE,
    COMMON_CONFIG,
    FETCH,
    FETCH_CONFIG,
    LIBRDKAFKA_NAMES,
    PRODUCER,
    PRODUCER_CONFIG,
    REFUSED,
    SECURITY_KEYS,
    TABLES,
    ClientConfig,
    ClientTable,
    ProducerConfig,
    default,
    parse_client_config,
    parse_producer_config,
    security_config,
    setting,
)
from kafkajet.config.keys import INT_MAX, ConfigKey
from kafkajet.config.markdown import JAVA_NAMES, SETTINGS_PAGE_HEAD, config_markdown, settings_page
from kafkajet.config.sasl import (
    OAUTHBEARER_METHODS,
    SASL,
    SASL_MECHANISMS,
    SaslMechanism,
    oauthbearer_method,
    oauthbearer_needs_a_provider,
)
from kafkajet.config.schema_registry import (
    SCHEMA_REGISTRY_CONFIG,
    SCHEMA_REGISTRY_KEYS,
    SCHEMA_REGISTRY_OPTIONS,
    RegistryKey,
)
from kafkajet.config.security import (
    SECURITY_PROTOCOLS,
    TLS_VERSIONS,
    check_security,
    ignored_security_keys,
    tls_versions,
)

__all__ = [
    "ADMIN", "ADMIN_CONFIG", "BY_NAME", "BY_SNAKE", "COMMON_CONFIG", "FETCH", "FETCH_CONFIG", "INT_MAX",
    "JAVA_NAMES", "LIBRDKAFKA_NAMES", "OAUTHBEARER_METHODS", "PRODUCER", "PRODUCER_CONFIG", "SASL",
    "REFUSED", "SASL_MECHANISMS", "SCHEMA_REGISTRY_CONFIG", "SCHEMA_REGISTRY_KEYS", "SCHEMA_REGISTRY_OPTIONS",
    "SECURITY_KEYS", "SECURITY_PROTOCOLS", "SETTINGS_PAGE_HEAD", "TABLES", "TLS_VERSIONS", "ClientConfig",
    "ClientTable", "ConfigKey", "ProducerConfig", "RegistryKey", "SaslMechanism", "check_security",
    "config_markdown", "default", "ignored_security_keys", "oauthbearer_method", "oauthbearer_needs_a_provider",
    "parse_client_config", "parse_producer_config", "security_config", "setting", "settings_page",
    "tls_versions",
]
