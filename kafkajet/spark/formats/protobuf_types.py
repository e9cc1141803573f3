"""Protobuf messages <-> Spark and Arrow types, as Spark's from_protobuf / to_protobuf map them.

Protobuf -> Spark: a message is a struct, repeated fields are arrays, map<K, V> a map, enums their value's
name (a string; an unknown number its digits), google.protobuf.Timestamp a timestamp, int64 / uint64 /
uint32 / fixed* longs (uint64 above 2^63-1 does not fit and fails the record), bytes binary. Scalars without
presence read as the protobuf library gives them (proto3's 0, "" and false for unset); fields with presence
(messages, `optional`, oneof members) read as null when unset. A message that contains itself has no Spark
type and is refused at planning naming the field.

Spark -> Protobuf (the sink): a proto3 file with one message "topLevelRecord", nested structs as nested
messages, nullable scalars as proto3 `optional` (so a null stays null), timestamps as Timestamp. Spark types
with no Protobuf counterpart (date, decimal, timestamp_ntz, nested arrays) are refused naming the field.

Schemas are the registry's base64 FileDescriptorProto (what confluent-kafka's Python serializer and kafkajet's
register); the message classes are built with the protobuf library's own descriptor pool, no protoc.
"""

from __future__ import annotations

import base64
import datetime as dt
import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError

from kafkajet.errors import ConfigError, SerializationError

F = FieldDescriptor
_TIMESTAMP = "google.protobuf.Timestamp"
_SCALAR_ARROW = {
    F.TYPE_DOUBLE: pa.float64(), F.TYPE_FLOAT: pa.float32(), F.TYPE_INT64: pa.int64(), F.TYPE_UINT64: pa.int64(),
    F.TYPE_INT32: pa.int32(), F.TYPE_FIXED64: pa.int64(), F.TYPE_FIXED32: pa.int64(), F.TYPE_BOOL: pa.bool_(),
    F.TYPE_STRING: pa.string(), F.TYPE_BYTES: pa.binary(), F.TYPE_UINT32: pa.int64(), F.TYPE_ENUM: pa.string(),
    F.TYPE_SFIXED32: pa.int32(), F.TYPE_SFIXED64: pa.int64(), F.TYPE_SINT32: pa.int32(), F.TYPE_SINT64: pa.int64(),
}

_LOCK = threading.Lock()
# (imports, schema text, message) -> the generated class: one descriptor pool per planned schema and process.
_CLASSES: dict[tuple[Any, ...], type] = {}


def parse_file(schema_str: str, what: str = "the registered schema") -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(base64.b64decode(schema_str.encode("ascii"), validate=True))
    except (ValueError, DecodeError):
        raise ConfigError(
            f"{what} is not a base64 FileDescriptorProto (the form confluent-kafka's Python serializer and "
            f"kafkajet's register): .proto text, as Java clients register it, cannot be compiled here (no "
            f"protoc); register the serialized descriptor instead") from None
    return proto


def _messages(proto: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """Every message's full name in the file, top-level first in file order, then nested ones."""
    out: list[str] = []

    def walk(prefix: str, messages: Any) -> None:
        for m in messages:
            out.append(f"{prefix}{m.name}")
            walk(f"{prefix}{m.name}.", m.nested_type)

    walk(f"{proto.package}." if proto.package else "", proto.message_type)
    return out


def planned_message(schema_str: str, wanted: str | None, option: str) -> str:
    """The message a column is planned with: `wanted` (full or simple name), or the file's first."""
    names = _messages(parse_file(schema_str))
    if not names:
        raise ConfigError("the Protobuf schema defines no message")
    if wanted is None:
        return names[0]
    for name in names:
        if wanted in (name, name.rsplit(".", 1)[-1]):
            return name
    raise ConfigError(f"option {option}={wanted!r}: the schema defines {', '.join(names)}")


def _builtin(name: str) -> descriptor_pb2.FileDescriptorProto:
    """A well-known file (google/protobuf/timestamp.proto, ...) from the protobuf library: registries do not
    hold them as references."""
    try:
        importlib.import_module(name.removesuffix(".proto").replace("/", ".") + "_pb2")
        found = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        raise ConfigError(f"the Protobuf schema imports {name}, which is neither registered as a reference nor "
                          f"a well-known type the protobuf library ships") from None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    return proto


def build_class(schema_str: str, imports: Sequence[tuple[str, str]], message: str) -> type:
    """The message class of `message` in the file `schema_str`, its imports added to a fresh pool first."""
    key = (tuple(imports), schema_str, message)
    with _LOCK:
        hit = _CLASSES.get(key)
    if hit is not None:
        return hit
    pool = descriptor_pool.DescriptorPool()
    files = {name: parse_file(text, f"the imported file {name}") for name, text in imports}
    main = parse_file(schema_str)
    added: set[str] = set()

    def add(proto: descriptor_pb2.FileDescriptorProto) -> None:
        for dep in proto.dependency:
            if dep not in added:
                add(files[dep] if dep in files else _builtin(dep))
        if proto.name not in added:
            added.add(proto.name)
            pool.Add(proto)

    try:
        add(main)
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(message))
    except (TypeError, KeyError) as e:
        raise ConfigError(f"the Protobuf schema does not build ({e})") from e
    with _LOCK:
        _CLASSES[key] = cls
    return cls


def message_class(column: Any) -> Any:
    """The message class a RegistryColumn of format protobuf is planned with."""
    assert column.message is not None
    return build_class(column.schema_str, column.imports, column.message)


def _repeated(f: FieldDescriptor) -> bool:
    # protobuf 7 dropped FieldDescriptor.label for is_repeated, which protobuf 4 (the extra's floor) lacks.
    flag = getattr(f, "is_repeated", None)
    return bool(flag) if flag is not None else f.label == F.LABEL_REPEATED  # type: ignore[attr-defined]


def _presence(f: FieldDescriptor) -> bool:
    """Whether unset is distinguishable from the default (has_presence arrived in protobuf 4.26)."""
    flag = getattr(f, "has_presence", None)
    if flag is not None:
        return bool(flag)
    return not _repeated(f) and (f.message_type is not None or f.containing_oneof is not None
                                 or getattr(f.file, "syntax", "proto3") == "proto2")


def _is_map(f: FieldDescriptor) -> bool:
    return f.message_type is not None and f.message_type.GetOptions().map_entry


def arrow_type(desc: Descriptor, seen: tuple[str, ...] = ()) -> pa.DataType:
    """The Arrow struct type of a message (every field nullable: unset messages and PERMISSIVE's nulls)."""
    if desc.full_name in seen:
        raise ConfigError(f"Protobuf message {desc.full_name} contains itself ({' -> '.join((*seen, desc.full_name))})"
                          f": a recursive message has no Spark type")
    inner = (*seen, desc.full_name)
    fields = []
    for f in desc.fields:
        if _is_map(f):
            key = _field_type(f.message_type.fields_by_name["key"], inner)
            value = _field_type(f.message_type.fields_by_name["value"], inner)
            t: pa.DataType = pa.map_(key, value)
        elif _repeated(f):
            t = pa.list_(pa.field("element", _field_type(f, inner), nullable=False))
        else:
            t = _field_type(f, inner)
        fields.append(pa.field(f.name, t, nullable=True))
    return pa.struct(fields)


def _field_type(f: FieldDescriptor, seen: tuple[str, ...]) -> pa.DataType:
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        if f.message_type.full_name == _TIMESTAMP:
            return pa.timestamp("us", tz="UTC")
        return arrow_type(f.message_type, seen)
    return _SCALAR_ARROW[f.type]


# --- decoded messages -> Arrow's Python values ------------------------------------------------------------


def converter(desc: Descriptor) -> Callable[[Any], dict[str, Any]]:
    """A function from a message of `desc` to the dict pa.array() takes for arrow_type(desc)."""
    plan = [(f.name, _reader(f), _presence(f) and not _repeated(f)) for f in desc.fields]

    def convert(msg: Any) -> dict[str, Any]:
        return {name: (None if presence and not msg.HasField(name) else read(getattr(msg, name)))
                for name, read, presence in plan}

    return convert


def _reader(f: FieldDescriptor) -> Callable[[Any], Any]:
    if _is_map(f):
        value = _scalar_reader(f.message_type.fields_by_name["value"])
        return lambda m: [(k, value(v)) for k, v in m.items()]
    one = _scalar_reader(f)
    if _repeated(f):
        return lambda values: [one(v) for v in values]
    return one


def _scalar_reader(f: FieldDescriptor) -> Callable[[Any], Any]:
    if f.type == F.TYPE_ENUM:
        names = {v.number: v.name for v in f.enum_type.values}
        return lambda n: names.get(n, str(n))
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        if f.message_type.full_name == _TIMESTAMP:
            return lambda t: t.ToDatetime(tzinfo=dt.UTC)
        return converter(f.message_type)
    return lambda v: v


# --- Spark -> Protobuf (the sink) ---------------------------------------------------------------------------


def file_schema_of(data_type: Any, name: str = "topLevelRecord") -> str:
    """The base64 FileDescriptorProto of a Spark struct type: one proto3 message `name`."""
    from pyspark.sql import types as T

    if not isinstance(data_type, T.StructType):
        raise ConfigError(f"a Protobuf column must be a struct (a message); this one is {data_type.simpleString()}")
    proto = descriptor_pb2.FileDescriptorProto(name=f"{name}.proto", syntax="proto3")
    _message_of(data_type, proto.message_type.add(name=name), name, proto)
    return base64.standard_b64encode(proto.SerializeToString()).decode("ascii")


def _message_of(struct: Any, msg: descriptor_pb2.DescriptorProto, full: str,
                file: descriptor_pb2.FileDescriptorProto) -> None:
    """Fill `msg` (full name `full`) with a field per struct field; nested messages and map entries are
    declared inside it, named after their field (capitalised, never clashing with a field's name)."""
    from pyspark.sql import types as T

    taken = {f.name for f in struct.fields}

    def nested(base: str) -> tuple[descriptor_pb2.DescriptorProto, str]:
        name = base[:1].upper() + base[1:]
        while name in taken:
            name += "_"
        taken.add(name)
        return msg.nested_type.add(name=name), f"{full}.{name}"

    def scalar(data_type: Any, fd: descriptor_pb2.FieldDescriptorProto, where: str, base: str) -> None:
        kind = _SPARK_SCALARS.get(type(data_type).__name__)
        if kind is not None:
            fd.type = kind
        elif isinstance(data_type, T.TimestampType):
            fd.type, fd.type_name = F.TYPE_MESSAGE, f".{_TIMESTAMP}"
            if "google/protobuf/timestamp.proto" not in file.dependency:
                file.dependency.append("google/protobuf/timestamp.proto")
        elif isinstance(data_type, T.StructType):
            inner, inner_full = nested(base)
            _message_of(data_type, inner, inner_full, file)
            fd.type, fd.type_name = F.TYPE_MESSAGE, f".{inner_full}"
        else:
            raise ConfigError(f"field {where}: Spark type {data_type.simpleString()} has no Protobuf counterpart "
                              f"here; cast it (a date or decimal to string, timestamp_ntz to timestamp)")

    for number, sf in enumerate(struct.fields, start=1):
        where = f"{full}.{sf.name}"
        fd = msg.field.add(name=sf.name, number=number, label=F.LABEL_OPTIONAL)
        data_type = sf.dataType
        if isinstance(data_type, T.MapType):
            entry, entry_full = nested(f"{sf.name}Entry")
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL)
            value = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL)
            if type(data_type.keyType).__name__ not in _MAP_KEYS:
                raise ConfigError(f"field {where}: Protobuf map keys are strings, integers or booleans, not "
                                  f"{data_type.keyType.simpleString()}")
            scalar(data_type.keyType, key, f"{where} (map key)", "")
            scalar(data_type.valueType, value, f"{where} (map value)", f"{sf.name}Value")
            fd.label, fd.type, fd.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, f".{entry_full}"
            continue
        if isinstance(data_type, T.ArrayType):
            if isinstance(data_type.elementType, (T.ArrayType, T.MapType)):
                raise ConfigError(f"field {where}: an array of {data_type.elementType.typeName()}s has no "
                                  f"Protobuf counterpart (repeated fields do not nest)")
            fd.label = F.LABEL_REPEATED
            data_type = data_type.elementType
        scalar(data_type, fd, where, sf.name)
        if sf.nullable and fd.label != F.LABEL_REPEATED and fd.type != F.TYPE_MESSAGE:
            # proto3 `optional`: presence tracked, so a null reads back as null rather than 0 or "".
            fd.proto3_optional = True
            fd.oneof_index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=f"_{sf.name}")


_SPARK_SCALARS = {"BooleanType": F.TYPE_BOOL, "ByteType": F.TYPE_INT32, "ShortType": F.TYPE_INT32,
                  "IntegerType": F.TYPE_INT32, "LongType": F.TYPE_INT64, "FloatType": F.TYPE_FLOAT,
                  "DoubleType": F.TYPE_DOUBLE, "StringType": F.TYPE_STRING, "BinaryType": F.TYPE_BYTES}
_MAP_KEYS = ("BooleanType", "ByteType", "ShortType", "IntegerType", "LongType", "StringType")


# --- Arrow's Python values -> messages (the sink) ------------------------------------------------------------


def fill(msg: Any, value: dict[str, Any], path: str = "") -> None:
    """Set `msg`'s fields from a struct value (pa's to_pylist form); nulls stay unset."""
    desc = msg.DESCRIPTOR
    for f in desc.fields:
        v = value.get(f.name)
        if v is None:
            continue
        where = f"{path}{f.name}"
        try:
            if _is_map(f):
                target = getattr(msg, f.name)
                vf = f.message_type.fields_by_name["value"]
                for k, item in (v.items() if isinstance(v, dict) else v):
                    if vf.type == F.TYPE_MESSAGE:
                        _set_message(target[k], vf, item, f"{where}[{k!r}].")
                    else:
                        target[k] = _scalar(vf, item)
            elif _repeated(f):
                target = getattr(msg, f.name)
                for i, item in enumerate(v):
                    if item is None:
                        raise SerializationError(f"{where}[{i}] is null: repeated Protobuf fields hold no nulls")
                    if f.type == F.TYPE_MESSAGE:
                        _set_message(target.add(), f, item, f"{where}[{i}].")
                    else:
                        target.append(_scalar(f, item))
            elif f.type == F.TYPE_MESSAGE:
                _set_message(getattr(msg, f.name), f, v, f"{where}.")
            else:
                setattr(msg, f.name, _scalar(f, v))
        except (TypeError, ValueError) as e:
            raise SerializationError(f"field {where}: {e}") from e


def _set_message(target: Any, f: FieldDescriptor, value: Any, path: str) -> None:
    if f.message_type.full_name == _TIMESTAMP:
        target.FromDatetime(value if value.tzinfo else value.replace(tzinfo=dt.UTC))
    else:
        target.SetInParent()
        fill(target, value, path)


def _scalar(f: FieldDescriptor, value: Any) -> Any:
    if f.type == F.TYPE_ENUM and isinstance(value, str):
        found = f.enum_type.values_by_name.get(value)
        if found is None:
            raise ValueError(f"{value!r} is not a value of enum {f.enum_type.full_name}")
        return found.number
    return value
