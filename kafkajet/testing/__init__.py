"""Test helpers for kafkajet and its users: a real embedded broker (Tansu) and the in-process MockCluster."""

from kafkajet.testing.embedded_broker import BrokerStartError, EmbeddedBroker, find_tansu
from kafkajet.testing.mock.cluster import MockCluster

__all__ = ["BrokerStartError", "EmbeddedBroker", "MockCluster", "find_tansu"]
