"""One registered key or value column of a query, planned on the driver into plain data that the executors
receive pickled: which registry, which schema, which format (by Spark's name of it, a key of SPARK_FORMATS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkajet.spark.formats import AVRO_NAME, spark_format


@dataclass(frozen=True)
class RegistryColumn:
    """One registered column of a query: `field` is "key" or "value"; `schema_str` the schema the column is
    planned with (the source's reader schema, the sink's writer schema); `schema_id` its registry id when it
    has one. Protobuf columns also carry `imports` (file name, schema text) of the files the schema imports,
    dependencies first, so executors build the message without asking the registry, and `message`, the full
    name of the message planned with."""

    field: str
    registry: tuple[tuple[str, str], ...]
    schema_str: str
    schema_id: int | None
    subject: str | None
    permissive: bool = False
    format: str = AVRO_NAME  # the format's Spark name (the keyFormat / valueFormat option's value)
    imports: tuple[tuple[str, str], ...] = ()
    message: str | None = None

    @property
    def given_option(self) -> str:
        """The option that gives this column's schema as text (named in messages about a planned schema)."""
        return spark_format(self.format).given_options[self.field == "key"]

    @property
    def planned_with(self) -> str:
        """The planned schema, as error messages name it."""
        if self.schema_id is not None:
            return f"schema id {self.schema_id}" + (f" of subject '{self.subject}'" if self.subject else "")
        return f"the {self.given_option} option's schema"

    @property
    def registry_conf(self) -> dict[str, str]:
        return dict(self.registry)

    def arrow_type(self) -> Any:
        """The Arrow type of the column's decoded values, by its format's type mapping."""
        return spark_format(self.format).arrow_type(self)
