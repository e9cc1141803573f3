"""Protobuf's Spark pieces: types and message classes by protobuf_types.py, decoded and encoded record by
record by the serdes (message_columns.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kafkajet.schema_registry.formats import PROTOBUF
from kafkajet.spark.formats.message_pieces import MessageColumnsFormat

if TYPE_CHECKING:
    from kafkajet.spark.formats.registry_column import RegistryColumn


class ProtobufSpark(MessageColumnsFormat):
    name = "protobuf"
    schema_format = PROTOBUF
    given_options = ("protobufSchema", "keyProtobufSchema")
    needs = ("google.protobuf", "protobuf")

    def given_schema(self, raw: str, option: str) -> None:
        from kafkajet.spark.formats.protobuf_types import parse_file

        parse_file(raw, option)

    def derived_schema(self, data_type: Any) -> str:
        from kafkajet.spark.formats.protobuf_types import file_schema_of

        return file_schema_of(data_type)

    def arrow_type(self, column: RegistryColumn) -> Any:
        from kafkajet.spark.formats.protobuf_types import arrow_type, message_class

        return arrow_type(message_class(column).DESCRIPTOR)

    def imports(self, client: Any, schema: Any) -> tuple[tuple[str, str], ...]:
        """The files a Protobuf schema imports, registered as references, dependencies first (each once)."""
        out: dict[str, str] = {}

        def visit(refs: Any) -> None:
            for ref in refs:
                if ref.name in out:
                    continue
                dep = client.get_version(ref.subject, ref.version).schema
                visit(dep.references)
                out[ref.name] = dep.schema_str

        visit(schema.references)
        return tuple(out.items())

    def message(self, opts: Mapping[str, str], field: str, schema_str: str) -> str | None:
        from kafkajet.spark.formats.protobuf_types import planned_message

        name = "keyProtobufMessage" if field == "key" else "protobufMessage"
        return planned_message(schema_str, opts.get(name.lower()), name)

    def record_decoding(self, column: RegistryColumn, client: Any
                        ) -> tuple[Any, Callable[[Any], Any], tuple[type[Exception], ...]]:
        """(deserializer, converter to Arrow's values, the errors that make a record undecodable)."""
        from kafkajet.errors import SerializationError
        from kafkajet.schema_registry.protobuf import ProtobufDeserializer
        from kafkajet.spark.formats.protobuf_types import converter, message_class

        cls = message_class(column)
        return (ProtobufDeserializer(cls, schema_registry_client=client),  # type: ignore[arg-type]
                converter(cls.DESCRIPTOR), (SerializationError, OverflowError))

    def record_encoding(self, column: RegistryColumn, client: Any, conf: dict[str, Any]
                        ) -> tuple[Callable[[Any, Any], Any], Any]:
        """(what the serializer takes, made from an Arrow value and its type; the serializer)."""
        from kafkajet.schema_registry.protobuf import ProtobufSerializer
        from kafkajet.spark.formats.protobuf_types import fill, message_class

        cls = message_class(column)

        def make(value: Any, arrow_type: Any) -> Any:
            msg = cls()
            fill(msg, value)
            return msg

        return make, ProtobufSerializer(cls, client, conf)  # type: ignore[arg-type]


SPARK = ProtobufSpark()
