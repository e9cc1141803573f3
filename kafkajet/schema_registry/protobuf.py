"""Protobuf in the Confluent wire format (`pip install 'kafkajet[protobuf]'`): ProtobufSerializer and
ProtobufDeserializer, constructed and called as confluent-kafka's are. The schema registered is the message's
file descriptor, base64-encoded (as confluent-kafka registers it), its imports registered as references
under their file names (Google's well-known types skipped: registries know them); the frame carries the
message-index list that locates the message in its file."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

try:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError, Message
except ModuleNotFoundError as e:  # pragma: no cover - the extra's absence
    raise ModuleNotFoundError("kafkajet's Protobuf serializers need protobuf: pip install 'kafkajet[protobuf]'") from e

from kafkajet.errors import SerializationError
from kafkajet.schema_registry.client import Schema, SchemaReference, SchemaRegistryClient
from kafkajet.schema_registry.formats import PROTOBUF
from kafkajet.schema_registry.serde import BaseDeserializer, BaseSerializer, ctx_what
from kafkajet.serialization import SerializationContext


def _is_builtin(name: str) -> bool:
    return name.startswith(("confluent/", "google/protobuf/", "google/type/"))


def message_indexes(descriptor: Any) -> list[int]:
    """The path from the file to the message: its index among the top-level messages, then nested ones."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    path.append(list(current.file.message_types_by_name.values()).index(current))
    return path[::-1]


def _file_schema(file_descriptor: Any, references: list[SchemaReference]) -> Schema:
    return Schema(base64.standard_b64encode(file_descriptor.serialized_pb).decode("ascii"), PROTOBUF.registry_name, references)


def _message_at(file_proto: Any, indexes: tuple[int, ...], package: str) -> str:
    """The full name of the message the indexes point to in a FileDescriptorProto."""
    messages = file_proto.message_type
    names = [package] if package else []
    msg = None
    for i in indexes:
        if not 0 <= i < len(messages):
            raise IndexError(i)
        msg = messages[i]
        names.append(msg.name)
        messages = msg.nested_type
    return ".".join(names)


class ProtobufSerializer(BaseSerializer[Any]):
    """ProtobufSerializer(msg_type, schema_registry_client, conf=None); conf as AvroSerializer's plus
    skip.known.types (True) and reference.subject.name.strategy (a callable(ctx, file descriptor))."""

    schema_format = PROTOBUF

    def __init__(self, msg_type: type[Message], schema_registry_client: SchemaRegistryClient,
                 conf: Mapping[str, Any] | None = None) -> None:
        descriptor = getattr(msg_type, "DESCRIPTOR", None)
        if descriptor is None or not hasattr(descriptor, "file"):
            raise ValueError(f"msg_type must be a generated Protobuf message class, got {msg_type!r}")
        super().__init__(schema_registry_client, None, conf,
                         {"skip.known.types": True, "reference.subject.name.strategy": None,
                          "use.deprecated.format": False})
        if self._conf["use.deprecated.format"]:
            raise ValueError("use.deprecated.format is not supported (nor by confluent-kafka since 2.0)")
        self._msg_type = msg_type
        self._descriptor = descriptor
        self._indexes = message_indexes(descriptor)
        self._ref_strategy = self._conf["reference.subject.name.strategy"] or (lambda ctx, dep: dep.name)
        self._skip_known = bool(self._conf["skip.known.types"])

    def _record_name(self, obj: Any) -> str | None:
        return self._descriptor.full_name  # type: ignore[no-any-return]

    def _parse(self, schema: Schema) -> Any:
        return None  # the message class is the writer; the registered schema is only its description

    def _references(self, ctx: SerializationContext, file_descriptor: Any) -> list[SchemaReference]:
        refs = []
        for dep in file_descriptor.dependencies:
            if self._skip_known and _is_builtin(dep.name):
                continue
            schema = _file_schema(dep, self._references(ctx, dep))
            subject = self._ref_strategy(ctx, dep)
            if self._auto_register:
                self._registry.register_schema(subject, schema, self._normalize)
            version = self._registry.lookup_schema(subject, schema, self._normalize).version
            if version is None:
                raise SerializationError(f"the registry gave no version for reference {dep.name} under "
                                         f"subject '{subject}'")
            refs.append(SchemaReference(dep.name, subject, version))
        return refs

    def __call__(self, message: Any, ctx: SerializationContext | None = None) -> bytes | None:
        if message is None:
            return None
        ctx = self._require_ctx(ctx)
        if not isinstance(message, self._msg_type):
            raise SerializationError(f"the {ctx_what(ctx)} is a {type(message).__name__}, not the "
                                     f"{self._descriptor.full_name} this serializer was made for")
        if self._schema is None and self._use_schema_id is None and not self._use_latest:
            self._schema = _file_schema(self._descriptor.file, self._references(ctx, self._descriptor.file))
        w = self._writer(message, ctx)
        return self._frame(w.schema_id, w.guid, message.SerializeToString(), ctx, self._indexes)


class ProtobufDeserializer(BaseDeserializer[Any]):
    """ProtobufDeserializer(message_type, conf=None, schema_registry_client=None): records parsed into
    `message_type`. With a registry client the frame's message indexes are checked to point at that message
    in the writer's schema (a record of another type is an error, not a garbled message). conf
    use.latest.version is taken as confluent-kafka takes it: the message class decides the decoding (there the
    latest version feeds data-contract migration rules, which kafkajet does not run)."""

    schema_format = PROTOBUF
    protobuf_framing = True

    def __init__(self, message_type: type[Message], conf: Mapping[str, Any] | None = None,
                 schema_registry_client: SchemaRegistryClient | None = None) -> None:
        super().__init__(schema_registry_client, conf, {"use.deprecated.format": False})
        self._msg_type = message_type
        self._full_name: str = message_type.DESCRIPTOR.full_name

    def _parse(self, schema: Schema) -> Any:
        try:
            proto = descriptor_pb2.FileDescriptorProto()
            proto.ParseFromString(base64.b64decode(schema.schema_str.encode("ascii"), validate=True))
            return proto
        except (ValueError, DecodeError):
            return None  # .proto text (a Java client's registration): no parser here, so no check

    def __call__(self, data: bytes | None, ctx: SerializationContext | None = None) -> Any:
        if data is None:
            return None
        ref, payload = self._unframe(data, ctx)
        if self._registry is not None:
            proto = self._writer_schema(ref, ctx)
            if proto is not None:
                try:
                    name = _message_at(proto, ref.message_indexes or (0,), proto.package)
                except IndexError:
                    raise SerializationError(
                        f"the {ctx_what(ctx)}: message indexes {list(ref.message_indexes or ())} do not name "
                        f"a message of {ref.describe()}") from None
                if name != self._full_name:
                    raise SerializationError(
                        f"the {ctx_what(ctx)} holds a {name} ({ref.describe()}), not the {self._full_name} "
                        f"this deserializer reads")
        msg = self._msg_type()
        try:
            msg.ParseFromString(bytes(payload))
        except DecodeError as e:
            raise SerializationError(
                f"the {ctx_what(ctx)} is not a valid {self._full_name} ({ref.describe()}; truncated or "
                f"corrupt?): {e}") from e
        return msg
