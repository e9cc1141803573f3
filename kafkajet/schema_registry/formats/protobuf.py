"""Protobuf as a schema format: its schemas are the registry's base64 FileDescriptorProto, compared by
Confluent's rules (protobuf_compatibility.py). A schema that is not one (a `.proto` text, or protobuf not
installed) is accepted and not compared: there is no .proto parser here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafkajet.schema_registry import protobuf_compatibility


class ProtobufFormat:
    registry_name = "PROTOBUF"
    resolves_references = False

    def parse(self, schema_str: str, referenced: Sequence[str] = ()) -> Any:
        return protobuf_compatibility.parse(schema_str)

    def canonical(self, schema_str: str, normalize: bool) -> str:
        return schema_str.strip()

    def incompatibilities(self, reader: Any, writer: Any) -> list[str]:
        return protobuf_compatibility.incompatibilities(reader, writer)

    def __repr__(self) -> str:
        return "<schema format PROTOBUF>"


PROTOBUF = ProtobufFormat()
