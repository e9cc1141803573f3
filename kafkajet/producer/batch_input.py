"""The producer's input made ready to queue: keys and values serialized, headers checked and encoded, timestamps
filled in, sizes checked against max.request.size and buffer.memory. send() uses the single-record pieces off its
fast path; send_batch() and send_arrow() prepare whole columns here, one pass in C per column where it can."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafkajet.clock import wall_ms
from kafkajet.errors import RecordTooLargeError, SerializationError
from kafkajet.producer.batch import Columns, Headers
from kafkajet.records import BATCH_HEADER_SIZE, MAX_COLUMN_LEN, encode_headers, record_size_upper_bound
from kafkajet.serialization import IDENTITY_BYTES, InContext, Serializer, adds_headers

_BYTES_OR_NONE = frozenset((bytes, type(None)))


# --- one record -------------------------------------------------------------------------------------------------


def serialize(serializer: Serializer, obj: Any, topic: str, what: str, headers: Any = None) -> bytes | None:
    """`obj` through the key or value serializer (`what`), its failures as SerializationError naming the topic.
    A context-aware serializer (InContext) is also given the topic and the record's headers."""
    try:
        out = serializer(obj) if type(serializer) is not InContext else serializer.call(obj, topic, headers)
    except SerializationError:
        raise
    except Exception as e:
        raise SerializationError(
            f"{what}.serializer failed on {type(obj).__name__} for topic '{topic}': {e}") from e
    if out is not None and type(out) is not bytes:
        if isinstance(out, (bytearray, memoryview)):
            return bytes(out)
        raise SerializationError(
            f"{what}.serializer returned {type(out).__name__}, not bytes, for topic '{topic}'")
    return out


def check_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """Headers as the encoder takes them: a list of (str, bytes | None) pairs, from such a list (no copy), a
    list or tuple of pairs, or a dict; str values are UTF-8 encoded. SerializationError for anything else."""
    if type(headers) is list and all(type(h) is tuple and len(h) == 2 and type(h[0]) is str
                                     and (type(h[1]) is bytes or h[1] is None) for h in headers):
        return headers  # already what the encoder takes (the Spark sink's shape): no copy
    items: Iterable[Any]
    if isinstance(headers, Mapping):
        items = headers.items()
    elif isinstance(headers, (list, tuple)):
        items = headers
    else:  # a str or bytes would be taken apart character by character, each "pair" a bogus header
        raise SerializationError(
            f"headers must be a list of (str key, bytes | None value) pairs or a dict, "
            f"got {type(headers).__name__} {headers!r:.60}")
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        if (type(item) is not tuple and type(item) is not list) or len(item) != 2:
            # A 2-character str would otherwise unpack as a (key, value) pair.
            raise SerializationError(
                f"each header must be a (str key, bytes | None value) pair, got {type(item).__name__} "
                f"{item!r:.60}")
        k, v = item
        if type(k) is not str:
            raise SerializationError(f"header key must be str, got {type(k).__name__} {k!r}")
        if v is not None and type(v) is not bytes:
            if isinstance(v, str):
                v = v.encode()
            elif isinstance(v, (bytearray, memoryview)):
                v = bytes(v)
            else:
                raise SerializationError(
                    f"header '{k}' value must be bytes, str or None, got {type(v).__name__}")
        out.append((k, v))
    return out


MAX_TIMESTAMP: Final = 2**63 - 1  # a record timestamp is an int64 on the wire


def invalid_timestamp(timestamp: int, record: int | None = None) -> ValueError:
    # Java's ProducerRecord refuses negative timestamps in its constructor, with this message.
    where = "" if record is None else f" (record {record})"
    return ValueError(f"Invalid timestamp: {timestamp}{where}. Timestamp should always be non-negative or None.")


def check_timestamp(timestamp: object, record: int | None = None) -> int:
    """A caller's timestamp as int milliseconds (Java's long), checked before anything is queued.

    Integral types (numpy's too) are taken; a float is refused rather than rounded, because
    `time.time() * 1000` is the usual mistake and silently truncating it would hide which clock was meant.
    """
    where = "" if record is None else f" (record {record})"
    if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Integral):
        raise TypeError(
            f"timestamp_ms must be an int of milliseconds since the epoch, or None, not {type(timestamp).__name__} "
            f"{timestamp!r}{where}: pass int(time.time() * 1000) or time.time_ns() // 1_000_000")
    t = int(timestamp)
    if not 0 <= t <= MAX_TIMESTAMP:
        raise invalid_timestamp(t, record)
    return t


class SizeLimits:
    """max.request.size and buffer.memory, which no record may exceed once serialized."""

    __slots__ = ("max_request_size", "buffer_memory", "threshold")

    def __init__(self, max_request_size: int, buffer_memory: int) -> None:
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        # Records whose key+value fit under this need no exact size check: the common case stays cheap.
        self.threshold = min(max_request_size, buffer_memory) - BATCH_HEADER_SIZE - 64

    def check(self, kb: bytes | None, vb: bytes | None, headers: Headers) -> None:
        """RecordTooLargeError if the record, as a batch of its own, exceeds a limit."""
        size = BATCH_HEADER_SIZE + record_size_upper_bound(
            -1 if kb is None else len(kb), -1 if vb is None else len(vb), headers)
        if size > self.max_request_size:
            raise RecordTooLargeError(
                f"The record is {size} bytes when serialized, larger than max.request.size "
                f"({self.max_request_size}); raise max.request.size (and the broker's message.max.bytes) "
                "or send smaller records")
        if size > self.buffer_memory:
            raise RecordTooLargeError(
                f"The record is {size} bytes when serialized, larger than buffer.memory ({self.buffer_memory})")


# --- batch call arguments -----------------------------------------------------------------------------------------


def timestamps_argument(timestamps: Sequence[int | None],
                        timestamps_ms: Sequence[int | None] | None) -> Sequence[int | None]:
    """send_batch(timestamps=) is the old name of timestamps_ms= (send() says timestamp_ms=): warn, and use it."""
    if timestamps_ms is not None:
        raise TypeError("send_batch() got both timestamps_ms= and its deprecated alias timestamps=; pass timestamps_ms=")
    warnings.warn("send_batch(timestamps=) is deprecated; pass timestamps_ms= (the name send() uses)",
                  DeprecationWarning, stacklevel=3)
    return timestamps


def check_lengths(n: int, keys: Sequence[Any] | None, headers: Sequence[Any] | None,
                  partitions: Sequence[int | None] | None, timestamps: Sequence[int | None] | None) -> None:
    """Every optional column as long as `values` (n items)."""
    for name, seq in (("keys", keys), ("headers", headers), ("partitions", partitions),
                      ("timestamps_ms", timestamps)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"send_batch: {name} has {len(seq)} items but values has {n}")


# --- whole columns ------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class PreparedBatch:
    """A batch call's records, ready for the accumulator; the sizes also go to the BatchFuture."""

    keys: Sequence[bytes | None]
    values: Sequence[bytes | None]
    headers: list[Headers] | None  # None when no record has any
    timestamps: list[int]
    key_sizes: list[int] | None  # -1 for a null key; None when the caller gave no keys
    value_sizes: list[int]  # -1 for a null value
    value_lens: list[int] | None  # the values' lengths when none is null (sticky runs need them)
    columns: Columns | None  # set when the records can be encoded column-wise


def _only_bytes(items: Sequence[Any]) -> bool:
    """Whether every item is bytes or None (the type test in C, not a generator step per item)."""
    return set(map(type, items)) <= _BYTES_OR_NONE


def _serialize_column(serializer: Serializer, identity: bool, items: Sequence[Any], topic: str, what: str,
                      headers: Sequence[Any] | None) -> Sequence[bytes | None]:
    """A column of keys or values (`what`) through its serializer; bytes pass as they are when it is the identity.
    A context-aware serializer is given each record's own headers."""
    if identity and _only_bytes(items):
        return items
    if type(serializer) is InContext and headers is not None:
        return [None if x is None else serialize(serializer, x, topic, what, h)
                for x, h in zip(items, headers, strict=True)]
    return [None if x is None else serialize(serializer, x, topic, what) for x in items]


def _lens(items: Sequence[bytes | None]) -> list[int] | None:
    """Every item's length in one C pass; None if some are null."""
    try:
        return list(map(len, items))  # type: ignore[arg-type]
    except TypeError:
        return None


def header_sections(headers: Sequence[Any]) -> list[bytes]:
    """Each record's encoded header section (b"\\x00" for none). Rows often carry the same headers (a source
    tag): each distinct list is encoded once per call."""
    first = headers[0] if headers else None
    if first and headers.count(first) == len(headers):  # identity first: [h] * n costs no comparisons
        return [encode_headers(first)] * len(headers)
    memo: dict[tuple[Any, ...], bytes] = {}
    out: list[bytes] = []
    for h in headers:
        if not h:
            out.append(b"\x00")
            continue
        key = tuple(h)
        section = memo.get(key)
        if section is None:
            section = encode_headers(h)
            if len(memo) < 1024:
                memo[key] = section
        out.append(section)
    return out


class BatchInput:
    """Prepares send_batch()'s columns with the producer's serializers and size limits."""

    def __init__(self, key_serializer: Serializer, value_serializer: Serializer, limits: SizeLimits) -> None:
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.key_identity = key_serializer is IDENTITY_BYTES
        self.value_identity = value_serializer is IDENTITY_BYTES
        # A serializer writes the schema id into the headers: every record needs a list for it.
        self.serializers_add_headers = adds_headers(key_serializer) or adds_headers(value_serializer)
        self.limits = limits

    def prepare(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None, headers: Sequence[Any] | None,
                timestamps: Sequence[int | None] | None, *, headers_checked: bool) -> PreparedBatch:
        """Serialize, check and measure the records of one call; raises before anything is queued.
        `headers_checked` when the headers are already lists of (str, bytes | None) pairs (send_arrow() builds
        them so), which spares a check per record."""
        n = len(values)
        if headers is None and self.serializers_add_headers:
            headers = [[] for _ in range(n)]
        vals = self._values(topic, values, headers)
        vlens = _lens(vals)
        ks = [None] * n if keys is None else self._keys(topic, keys, headers)
        klens = None if keys is None else _lens(ks)
        hs = _headers(headers, headers_checked)
        now_ts = wall_ms()
        ts = _timestamps(timestamps, now_ts, n)
        # Every record's sizes (-1 for null), once: for the size check here and for the BatchFuture.
        value_sizes = vlens if vlens is not None else [-1 if v is None else len(v) for v in vals]
        key_sizes = None if keys is None else klens if klens is not None else [
            -1 if k is None else len(k) for k in ks]
        sections = None if hs is None else header_sections(hs)
        hlens = None if sections is None else list(map(len, sections))
        # The largest key, value and header section bound every record: one pass in C each.
        max_v = max(max(value_sizes, default=0), 0)
        max_k = 0 if key_sizes is None else max(max(key_sizes, default=0), 0)
        max_h = 0 if hlens is None else max(hlens)
        if max_v + max_k + max_h > self.limits.threshold:
            self._check_sizes(ks, vals, hs, key_sizes, value_sizes, hlens)
        columns = None
        if (timestamps is None and vlens is not None and (keys is None or klens is not None)
                and max(max_v, max_k, max_h) < MAX_COLUMN_LEN):
            # The common shape (one timestamp, no nulls, no huge records): encoded by column.
            columns = Columns(now_ts, None if keys is None else ks, klens, vlens,  # type: ignore[arg-type]
                              sections, hlens)
        return PreparedBatch(ks, vals, hs, ts, key_sizes, value_sizes, vlens, columns)

    def _values(self, topic: str, values: Sequence[Any], headers: Sequence[Any] | None) -> Sequence[bytes | None]:
        return _serialize_column(self.value_serializer, self.value_identity, values, topic, "value", headers)

    def _keys(self, topic: str, keys: Sequence[Any], headers: Sequence[Any] | None) -> Sequence[bytes | None]:
        return _serialize_column(self.key_serializer, self.key_identity, keys, topic, "key", headers)

    def _check_sizes(self, ks: Sequence[bytes | None], vals: Sequence[bytes | None], hs: list[Headers] | None,
                     key_sizes: list[int] | None, value_sizes: list[int], hlens: list[int] | None) -> None:
        """The per-record check, for calls whose largest key, value and headers together come near a limit."""
        limit = self.limits.threshold
        for i in range(len(value_sizes)):
            size = max(value_sizes[i], 0) + (max(key_sizes[i], 0) if key_sizes else 0) + (hlens[i] if hlens else 0)
            if size > limit:
                self.limits.check(ks[i], vals[i], hs[i] if hs else None)


def _headers(headers: Sequence[Any] | None, checked: bool) -> list[Headers] | None:
    """Each record's headers as the encoder takes them; None when no record has any."""
    if headers is None:
        return None
    hs = headers if checked else [check_headers(h) if h else None for h in headers]
    return hs if any(hs) else None  # type: ignore[return-value]


def _timestamps(timestamps: Sequence[int | None] | None, now_ts: int, n: int) -> list[int]:
    """Each record's timestamp: now for none given; TypeError/ValueError for one that is not an int64 >= 0."""
    if timestamps is None:
        return [now_ts] * n
    ts = [now_ts if t is None else t for t in timestamps]
    if n and (set(map(type, ts)) != {int} or min(ts) < 0 or max(ts) > MAX_TIMESTAMP):
        return [check_timestamp(t, i) for i, t in enumerate(ts)]
    return ts
