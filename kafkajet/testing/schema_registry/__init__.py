"""A Schema Registry for tests, demos and local work: see server.SchemaRegistry."""

from kafkajet.testing.schema_registry.server import SchemaRegistry

__all__ = ["SchemaRegistry"]
