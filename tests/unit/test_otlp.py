"""The hand-written OTLP MetricsData against Google's protobuf runtime, which decodes it from a schema declared
here with opentelemetry-proto's field numbers (the Apache test checks the same bytes with the broker's own
OpenTelemetry classes)."""

from __future__ import annotations

from typing import Any

# protobuf is in the test extra (kafkajet[protobuf]): missing, this must fail, not skip.
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory  # noqa: E402

from kafkajet.producer.otlp import CUMULATIVE, DELTA, Point, metrics_data

F = descriptor_pb2.FieldDescriptorProto

# (message, [(field, number, type, label, type name)]) as in opentelemetry-proto v1.
_MESSAGES: list[tuple[str, list[tuple[str, int, int, int, str]]]] = [
    ("AnyValue", [("string_value", 1, F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
                  ("bool_value", 2, F.TYPE_BOOL, F.LABEL_OPTIONAL, ""),
                  ("int_value", 3, F.TYPE_INT64, F.LABEL_OPTIONAL, ""),
                  ("double_value", 4, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "")]),
    ("KeyValue", [("key", 1, F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
                  ("value", 2, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".t.AnyValue")]),
    ("Resource", [("attributes", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.KeyValue")]),
    ("InstrumentationScope", [("name", 1, F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
                              ("version", 2, F.TYPE_STRING, F.LABEL_OPTIONAL, "")]),
    ("NumberDataPoint", [("start_time_unix_nano", 2, F.TYPE_FIXED64, F.LABEL_OPTIONAL, ""),
                         ("time_unix_nano", 3, F.TYPE_FIXED64, F.LABEL_OPTIONAL, ""),
                         ("as_double", 4, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, ""),
                         ("as_int", 6, F.TYPE_SFIXED64, F.LABEL_OPTIONAL, ""),
                         ("attributes", 7, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.KeyValue")]),
    ("Gauge", [("data_points", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.NumberDataPoint")]),
    ("Sum", [("data_points", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.NumberDataPoint"),
             ("aggregation_temporality", 2, F.TYPE_INT32, F.LABEL_OPTIONAL, ""),
             ("is_monotonic", 3, F.TYPE_BOOL, F.LABEL_OPTIONAL, "")]),
    ("Metric", [("name", 1, F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
                ("description", 2, F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
                ("unit", 3, F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
                ("gauge", 5, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".t.Gauge"),
                ("sum", 7, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".t.Sum")]),
    ("ScopeMetrics", [("scope", 1, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".t.InstrumentationScope"),
                      ("metrics", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.Metric")]),
    ("ResourceMetrics", [("resource", 1, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".t.Resource"),
                         ("scope_metrics", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.ScopeMetrics")]),
    ("MetricsData", [("resource_metrics", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".t.ResourceMetrics")]),
]


def _decode(data: bytes) -> dict[str, Any]:
    fd = descriptor_pb2.FileDescriptorProto(name="otlp_test.proto", package="t", syntax="proto3")
    for name, fields in _MESSAGES:
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label, type_name=type_name or None)
            if name == "NumberDataPoint" and fname.startswith("as_"):
                f.oneof_index = 0  # `oneof value`: a 0.0 is still written, and read back
        if name == "NumberDataPoint":
            m.oneof_decl.add(name="value")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.MetricsData"))
    msg = cls()
    msg.ParseFromString(data)
    # Every byte was understood: nothing the schema does not name (a wrong field number would land here).
    assert msg.SerializeToString() == data
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def test_sum_and_gauge_decode_with_protobuf() -> None:
    data = metrics_data(
        [Point("org.apache.kafka.producer.record.send.total", 42.0, 2_000_000_000_000_000_001,
               start_time_ns=1_000_000_000_000_000_000, monotonic_sum=True),
         Point("org.apache.kafka.producer.topic.byte.rate", 12.5, 2_000_000_000_000_000_001,
               attributes={"topic": "t-1", "a": "é"})],
        resource={"client_id": "p1"}, scope_name="kafkajet", scope_version="1.2.3")
    assert _decode(data) == {"resource_metrics": [{
        "resource": {"attributes": [{"key": "client_id", "value": {"string_value": "p1"}}]},
        "scope_metrics": [{
            "scope": {"name": "kafkajet", "version": "1.2.3"},
            "metrics": [
                {"name": "org.apache.kafka.producer.record.send.total",
                 "sum": {"data_points": [{"start_time_unix_nano": "1000000000000000000",
                                          "time_unix_nano": "2000000000000000001", "as_double": 42.0}],
                         "aggregation_temporality": CUMULATIVE, "is_monotonic": True}},
                {"name": "org.apache.kafka.producer.topic.byte.rate",
                 "gauge": {"data_points": [{"time_unix_nano": "2000000000000000001", "as_double": 12.5,
                                            "attributes": [{"key": "a", "value": {"string_value": "é"}},
                                                           {"key": "topic", "value": {"string_value": "t-1"}}]}]}},
            ]}],
    }]}


def test_delta_temporality_and_long_payloads() -> None:
    # 300 points: lengths past 127 take two-byte varints.
    points = [Point(f"m{i}" * 20, float(i), 5, monotonic_sum=True) for i in range(300)]
    decoded = _decode(metrics_data(points, resource={}, scope_name="s", scope_version="v", temporality=DELTA))
    metrics = decoded["resource_metrics"][0]["scope_metrics"][0]["metrics"]
    assert [m["name"] for m in metrics] == [p.name for p in points]
    assert {m["sum"]["aggregation_temporality"] for m in metrics} == {DELTA}
    assert metrics[299]["sum"]["data_points"][0]["as_double"] == 299.0
