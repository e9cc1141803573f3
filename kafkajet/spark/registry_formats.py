"""The old name of registered_columns.py (the registered-format columns), kept so that existing imports work."""

from kafkajet.spark.registered_columns import (
    FORMAT_OPTIONS,
    REGISTRY_KEYS,
    SINK_FORMAT_OPTIONS,
    SOURCE_FORMAT_OPTIONS,
    RegistryColumn,
    arrow_type_of,
    column_format,
    derived_schema,
    registry_conf,
    require_format,
    sink_columns,
    source_columns,
)

__all__ = ["FORMAT_OPTIONS", "REGISTRY_KEYS", "SINK_FORMAT_OPTIONS", "SOURCE_FORMAT_OPTIONS", "RegistryColumn",
           "arrow_type_of", "column_format", "derived_schema", "registry_conf", "require_format", "sink_columns",
           "source_columns"]
