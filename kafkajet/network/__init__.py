"""Connections to brokers: sans-I/O framing and setup, the producer's NetworkClient, and a blocking admin connection."""

from kafkajet.network.blocking import BlockingConnection, bootstrap_metadata
from kafkajet.network.client import ClientResponse, NetworkClient
from kafkajet.network.connection import NotKafkaError
from kafkajet.network.setup import ConnectionState

__all__ = [
    "BlockingConnection", "ClientResponse", "ConnectionState", "NetworkClient", "NotKafkaError", "bootstrap_metadata",
]
