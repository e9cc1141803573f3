"""Connections to brokers: sans-I/O framing and setup, the producer's NetworkClient, and a blocking admin connection."""

from kafkajet.addresses import format_address, parse_address, parse_servers
from kafkajet.cluster import metadata_request_body
from kafkajet.network.blocking import BlockingConnection, bootstrap_metadata
from kafkajet.network.client import ClientResponse, NetworkClient
from kafkajet.network.connection import (
    Connection,
    CorruptStreamError,
    FrameDecoder,
    InFlightRequest,
    NotKafkaError,
)
from kafkajet.network.setup import ConnectionState

__all__ = [
    "BlockingConnection", "ClientResponse", "Connection", "ConnectionState", "CorruptStreamError",
    "FrameDecoder", "InFlightRequest", "NetworkClient", "NotKafkaError", "bootstrap_metadata", "format_address",
    "metadata_request_body", "parse_address", "parse_servers",
]
