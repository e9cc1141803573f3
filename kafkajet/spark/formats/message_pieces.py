"""What the formats decoded record by record through a deserializer share (JSON Schema, Protobuf): their
columns' decoder and encoder (message_columns.py), unlike Avro's columnar ones."""

from __future__ import annotations

from typing import Any


class MessageColumnsFormat:
    def decoder(self, column: Any) -> Any:
        from kafkajet.spark.message_columns import RecordDecoder

        return RecordDecoder(column)

    def encoder(self, column: Any) -> Any:
        from kafkajet.spark.message_columns import RecordEncoder

        return RecordEncoder(column)
