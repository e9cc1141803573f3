"""What the formats decoded record by record through a deserializer share (JSON Schema, Protobuf): their
columns' decoder and encoder (message_columns.py), unlike Avro's columnar ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkajet.spark.formats.registry_column import RegistryColumn


class MessageColumnsFormat:
    def decoder(self, column: RegistryColumn) -> Any:
        from kafkajet.spark.formats.message_columns import RecordDecoder

        return RecordDecoder(column)

    def encoder(self, column: RegistryColumn) -> Any:
        from kafkajet.spark.formats.message_columns import RecordEncoder

        return RecordEncoder(column)
