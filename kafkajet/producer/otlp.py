"""OTLP MetricsData, the payload of a KIP-714 PushTelemetry request, written by hand.

A broker's telemetry exporter reads the bytes with the OpenTelemetry protobuf classes (Java's client shades
them into kafka-clients), so this writes exactly the few messages a push needs: MetricsData > ResourceMetrics
> ScopeMetrics > Metric with a Sum or a Gauge of NumberDataPoints, attributes as string KeyValues. A protobuf
runtime would be a dependency for some hundred bytes every push interval. Field numbers are those of
opentelemetry-proto's metrics/v1, common/v1 and resource/v1 messages. No I/O, no clock: times come in.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Wire types.
_VARINT, _I64, _LEN = 0, 1, 2

# Sum.aggregation_temporality values (AggregationTemporality).
DELTA = 1
CUMULATIVE = 2


@dataclass(frozen=True, slots=True)
class Point:
    """One metric's value at one time: a Sum's point when `monotonic_sum`, a Gauge's otherwise."""

    name: str
    value: float
    time_ns: int
    start_time_ns: int = 0
    monotonic_sum: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= 0xFFFFFFFFFFFFFFFF  # negatives go as ten-byte two's complement, as protobuf's int64 does
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len(number: int, payload: bytes) -> bytes:
    return _key(number, _LEN) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _len(number, text.encode())


def _fixed64(number: int, value: int) -> bytes:
    return _key(number, _I64) + struct.pack("<Q", value)


def _double(number: int, value: float) -> bytes:
    return _key(number, _I64) + struct.pack("<d", value)


def _uint(number: int, value: int) -> bytes:
    return _key(number, _VARINT) + _varint(value)


def _key_value(key: str, value: str) -> bytes:
    # KeyValue{key = 1, value = 2: AnyValue{string_value = 1}}
    return _string(1, key) + _len(2, _string(1, value))


def _attributes(number: int, attributes: Mapping[str, str]) -> bytes:
    return b"".join(_len(number, _key_value(k, v)) for k, v in sorted(attributes.items()))


def _number_data_point(p: Point) -> bytes:
    # NumberDataPoint{start_time_unix_nano = 2 (fixed64), time_unix_nano = 3 (fixed64), as_double = 4,
    # attributes = 7}
    out = b""
    if p.start_time_ns:
        out += _fixed64(2, p.start_time_ns)
    return out + _fixed64(3, p.time_ns) + _double(4, p.value) + _attributes(7, p.attributes)


def _metric(p: Point, temporality: int) -> bytes:
    # Metric{name = 1, gauge = 5: Gauge{data_points = 1}, sum = 7: Sum{data_points = 1,
    # aggregation_temporality = 2, is_monotonic = 3}}
    point = _len(1, _number_data_point(p))
    if p.monotonic_sum:
        return _string(1, p.name) + _len(7, point + _uint(2, temporality) + _uint(3, 1))
    return _string(1, p.name) + _len(5, point)


def metrics_data(points: Sequence[Point], *, resource: Mapping[str, str], scope_name: str, scope_version: str,
                 temporality: int = CUMULATIVE) -> bytes:
    """MetricsData{resource_metrics = 1: ResourceMetrics{resource = 1: Resource{attributes = 1},
    scope_metrics = 2: ScopeMetrics{scope = 1: InstrumentationScope{name = 1, version = 2}, metrics = 2}}}."""
    scope = _string(1, scope_name) + _string(2, scope_version)
    scope_metrics = _len(1, scope) + b"".join(_len(2, _metric(p, temporality)) for p in points)
    resource_metrics = _len(1, _attributes(1, resource)) + _len(2, scope_metrics)
    return _len(1, resource_metrics)
