"""Test helpers for kafkajet and its users: Apache Kafka in child JVMs, a real embedded broker (Tansu), the
in-process MockCluster and a Schema Registry."""

from kafkajet.testing.apache_kafka import ApacheKafka, ApacheKafkaUnavailable, OAuthValidation, TlsFiles
from kafkajet.testing.embedded_broker import BrokerStartError, EmbeddedBroker, find_tansu
from kafkajet.testing.mock.cluster import MockCluster
from kafkajet.testing.schema_registry import SchemaRegistry

__all__ = ["ApacheKafka", "ApacheKafkaUnavailable", "BrokerStartError", "EmbeddedBroker", "MockCluster",
           "OAuthValidation", "SchemaRegistry", "TlsFiles", "find_tansu"]
