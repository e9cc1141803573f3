"""Test helpers for kafkajet and its users: a real embedded broker (Tansu), the in-process MockCluster and a
Schema Registry."""

from kafkajet.testing.embedded_broker import BrokerStartError, EmbeddedBroker, find_tansu
from kafkajet.testing.mock.cluster import MockCluster
from kafkajet.testing.schema_registry import SchemaRegistry

__all__ = ["BrokerStartError", "EmbeddedBroker", "MockCluster", "SchemaRegistry", "find_tansu"]
