"""JSON Schema records decoded the way the Spark source decodes them (message_columns.RecordDecoder over an
Arrow array of framed payloads), in rows/s, medians of 3; no broker, no Spark: this is the per-record part.

    .venv/bin/python benchmarks/json_schema_decode.py                  # 20,000 records
    .venv/bin/python benchmarks/json_schema_decode.py --jsonschema-only  # every record through jsonschema
    .venv/bin/python benchmarks/json_schema_decode.py --profile

Each record is validated against its writer's schema as confluent-kafka's deserializer does. --jsonschema-only
turns off the compiled acceptance check (kafkajet/schema_registry/json_accept.py), which is what validation
cost before it: jsonschema's walk was 90% of the time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time

import pyarrow as pa

SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Event", "type": "object",
          "additionalProperties": False,
          "required": ["id", "user", "qty", "price", "at", "kind", "region", "n1", "n2"],
          "properties": {"id": {"type": "integer"}, "user": {"type": "string"},
                         "qty": {"type": "integer", "minimum": 0}, "price": {"type": "number"},
                         "at": {"type": "string", "format": "date-time"}, "kind": {"type": "string"},
                         "region": {"type": "string"}, "n1": {"type": "integer"}, "n2": {"type": "integer"},
                         "discount": {"oneOf": [{"type": "null"}, {"type": "number"}]}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--jsonschema-only", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    import kafkajet.schema_registry.json_schema as json_schema
    from kafkajet.schema_registry import SchemaRegistryClient
    from kafkajet.schema_registry.json_schema import JSONSerializer
    from kafkajet.serialization import MessageField, SerializationContext
    from kafkajet.spark.formats.message_columns import RecordDecoder
    from kafkajet.spark.formats.registry_column import RegistryColumn
    from kafkajet.testing import SchemaRegistry

    if args.jsonschema_only:
        json_schema.acceptor = lambda validator: None  # type: ignore[assignment]
    with SchemaRegistry() as registry:
        client = SchemaRegistryClient({"url": registry.url})
        serialize = JSONSerializer(json.dumps(SCHEMA), client)
        ctx = SerializationContext("events", MessageField.VALUE)
        values = pa.array([serialize({"id": i, "user": f"u{i % 100}", "qty": i % 9, "price": i / 4,
                                      "at": "2026-11-26T01:02:03.456Z", "kind": "click", "region": "eu",
                                      "n1": i * 3, "n2": -i, "discount": None if i % 2 else i / 8}, ctx)
                           for i in range(args.records)], pa.binary())
        schema_id = client.get_latest_version("events-value").schema_id
        column = RegistryColumn("value", (("url", registry.url),), json.dumps(SCHEMA), schema_id, "events-value",
                                format="json-schema")
        decoder = RecordDecoder(column)
        decoder.decode_array(values[:100], "events", str)  # the writer's schema fetched once, before the clock
        rates = []
        for _ in range(3):
            start = time.perf_counter()
            out = decoder.decode_array(values, "events", str)
            rates.append(args.records / (time.perf_counter() - start))
            assert out.null_count == 0 and len(out) == args.records
        mode = "jsonschema only" if args.jsonschema_only else "with the acceptance check"
        print(f"{mode}: {statistics.median(rates):,.0f} rows/s (median of 3: "
              f"{', '.join(f'{r:,.0f}' for r in rates)})")
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(decoder.decode_array, values, "events", str)
            pstats.Stats(profile).sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
