"""Test helpers for kafkajet and its users: a real embedded broker and (later) an in-process MockCluster."""

from kafkajet.testing.embedded_broker import BrokerStartError, EmbeddedBroker, find_tansu

__all__ = ["BrokerStartError", "EmbeddedBroker", "find_tansu"]
