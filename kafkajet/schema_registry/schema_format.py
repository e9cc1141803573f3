"""What kafkajet knows of a schema format, in one interface (Confluent's ParsedSchema and SchemaProvider): its
names, parsing with references, the canonical text registrations are compared by, and the rules of which
reader reads which writer's data. The formats are formats/avro.py, formats/json_schema.py and
formats/protobuf.py; formats/__init__.py is the one table they are found in, by the registry's name. The levels
built on `incompatibilities` are format-neutral (compatibility.py). Standard library only: the registry
server uses it without any extra."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class InvalidSchemaError(ValueError):
    """The text is not a valid schema of its format."""


class SchemaFormat(Protocol):
    """One schema format. `registry_name` is the registry's schemaType (AVRO, JSON, PROTOBUF)."""

    registry_name: str
    # Whether a schema's references name schemas whose text parsing needs (Avro's named types). The others'
    # references are kept with the schema but not read by the registry.
    resolves_references: bool

    def parse(self, schema_str: str, referenced: Sequence[str] = ()) -> Any:
        """The schema as its compatibility rules take it, `referenced` the texts its references name
        (dependencies first); InvalidSchemaError when the text is not a schema of this format (validation)."""
        ...

    def canonical(self, schema_str: str, normalize: bool) -> str:
        """The text two registrations are compared by (keys sorted too when normalizing)."""
        ...

    def incompatibilities(self, reader: Any, writer: Any) -> list[str]:
        """Why data written with the parsed `writer` cannot be read with the parsed `reader` (empty: it can)."""
        ...
