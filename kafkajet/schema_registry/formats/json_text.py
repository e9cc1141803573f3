"""The canonical text of a schema written in JSON (Avro's and JSON Schema's): the JSON without layout."""

from __future__ import annotations

import json


def compact_json(schema_str: str, normalize: bool) -> str:
    """The JSON without layout (keys sorted when normalizing), so the same schema differently spaced gets the
    same id; a text that is not JSON as it is."""
    try:
        return json.dumps(json.loads(schema_str), separators=(",", ":"), sort_keys=normalize)
    except ValueError:
        return schema_str
