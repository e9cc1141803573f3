"""The check of a schema given as JSON text in an option (Avro's and JSON Schema's)."""

from __future__ import annotations

import json

from kafkajet.errors import ConfigError


def check_json(raw: str, name: str) -> None:
    try:
        json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"option {name} is not JSON ({e}): give the schema's JSON text") from None
