"""The compiled build's kernels (hatch_build.KERNELS) against the Python they stand in for: the same bytes, the
same results, the same errors, over random shapes and the edges of every varint and range.

Like tests/unit/test_build.py's comparisons these need the compiled build: they skip without one, and fail
under `KAFKAJET_EXPECT_COMPILED=1` (make test's compiled run) if it is missing.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable
from typing import Any

import pytest

from kafkajet import _build
from kafkajet.producer import batch as producer_batch
from kafkajet.producer.futures import RecordMetadata
from kafkajet.protocol.varint import TABLE_SIZE
from kafkajet.records import columns, record
from kafkajet.records.columns import MAX_COLUMN_LEN
from kafkajet.records.record import encode_headers


def _kernel(module: str, name: str) -> Callable[..., Any]:
    found = _build.kernel(module, name)
    if found is not None:
        return found
    if os.environ.get("KAFKAJET_EXPECT_COMPILED", "") not in ("", "0") and not _build.DISABLED:
        pytest.fail(f"the compiled build was expected but this checkout runs {_build.describe()}")
    pytest.skip(f"no compiled kernel to compare ({_build.describe()})")


def _outcome(fn: Callable[..., int], buf: bytearray, *args: Any) -> tuple[Any, bytes]:
    try:
        return fn(buf, *args), bytes(buf)
    except Exception as e:  # the same error, by type and message
        return (type(e), str(e)), bytes(buf)


def test_the_record_kernel_appends_what_the_python_encoder_appends() -> None:
    kernel = _kernel("kafkajet.records.record_kernel", "append_record")
    assert producer_batch._append_record is kernel  # and it is what ProducerBatch.try_add calls
    rng = random.Random(30)
    edges = [0, 1, 63, 64, 8191, 8192, 16383, 16384, (1 << 31) - 1, 1 << 31, -1, -64, -65, -(1 << 31),
             -(1 << 31) - 1, (1 << 63) - 1, 1 << 63, -(1 << 63), -(1 << 63) - 1]
    checked = 0
    for i in range(6000):
        key = rng.choice([None, b"", b"k", rng.randbytes(rng.choice((1, 63, 64, 200, 8191, 8192, 20000)))])
        value = rng.choice([None, b"", b"v" * 100, rng.randbytes(rng.choice((1, 127, 128, 8191, 8192, 70000)))])
        offset_delta = rng.choice(edges + [rng.randrange(0, 20000)])
        timestamp_delta = rng.choice(edges + [rng.randrange(-(1 << 40), 1 << 40)])
        headers = rng.choice([None, [], [("trace", b"x")], [("ü", None), ("k", b"")]])
        prefix = bytearray(rng.randbytes(i % 5))
        got = _outcome(kernel, bytearray(prefix), offset_delta, timestamp_delta, key, value, headers)
        want = _outcome(record.append_record, bytearray(prefix), offset_delta, timestamp_delta, key, value, headers)
        assert got == want, (offset_delta, timestamp_delta, key if key is None else len(key),
                             value if value is None else len(value), headers)
        checked += isinstance(want[0], int)
    assert checked > 3000  # most shapes encode (the rest must fail alike)


def test_the_metadata_kernel_makes_the_record_metadata_the_python_makes() -> None:
    kernel = _kernel("kafkajet.producer.metadata_kernel", "new_metadata")
    assert producer_batch._new_metadata is kernel  # and it is what fire_callbacks calls
    fields = ("topic", 3, 1 << 40, 1_700_000_000_000, -1, 100)
    made = kernel(RecordMetadata, *fields)
    want = tuple.__new__(RecordMetadata, fields)
    assert type(made) is RecordMetadata and made == want and made._asdict() == want._asdict()
    assert (made.offset, made.serialized_key_size, hash(made)) == (1 << 40, -1, hash(want))
    with pytest.raises(TypeError, match="tuple subclass"):
        kernel(int, *fields)
    # Each field is held once per live RecordMetadata, and let go with it: no leak, no early free.
    topic = "".join(["leak", "-check"])  # not interned: its count is this test's alone
    before = sys.getrefcount(topic)
    kept = [kernel(RecordMetadata, topic, 0, i, 0, -1, 1) for i in range(1000)]
    assert sys.getrefcount(topic) == before + 1000
    del kept
    for _ in range(10_000):
        kernel(RecordMetadata, topic, 0, 1, 0, -1, 1)
    assert sys.getrefcount(topic) == before


def test_the_column_kernel_appends_what_the_python_column_encoder_appends() -> None:
    kernel = _kernel("kafkajet.records.record_kernel", "append_columns")
    assert producer_batch._append_columns is kernel  # and it is what ProducerBatch.append_columns calls
    rng = random.Random(48)
    edges = [0, 1, 62, 63, 64, 65, 8190, 8191, 8192, 8193, TABLE_SIZE - 2, TABLE_SIZE - 1]
    sizes = [0, 1, 100, 126, 127, 128, 4000, MAX_COLUMN_LEN - 1]  # the preconditions: every length under the limit
    full = 0
    for i in range(1500):
        n = rng.choice([1, 2, 5, 64, 200, 1000])
        size = rng.choice(sizes)
        values = [rng.randbytes(size if rng.random() < 0.7 else rng.choice(sizes)) for _ in range(n)]
        keys = rng.choice([None, [rng.randbytes(rng.choice(sizes[:6])) for _ in range(n)]])
        headers = rng.choice([None, [encode_headers(rng.choice([[], [("h", b"x")], [("ü", None), ("k", b"")]]))
                                     for _ in range(n)]])
        offset, delta = rng.choice(edges), rng.choice(edges + [rng.randrange(TABLE_SIZE)])
        prefix = bytearray(rng.randbytes(61 + i % 7))
        klens = None if keys is None else [len(k) for k in keys]
        vlens = [len(v) for v in values]
        hlens = None if headers is None else [len(h) for h in headers]
        limit = len(prefix) + rng.choice([0, 50, 150, 5000, 1 << 20, 1 << 26])
        if i % 3 == 0:  # room for exactly the first k records: the next one must not go in
            k = rng.randrange(1, n + 1)
            exact = bytearray()
            columns.append_columns(exact, 1 << 30, offset, delta, None if keys is None else keys[:k], values[:k],
                                   None if klens is None else klens[:k], vlens[:k],
                                   None if headers is None else headers[:k], None if hlens is None else hlens[:k])
            limit = len(prefix) + len(exact)
        args = (limit, offset, delta, keys, values, klens, vlens, headers, hlens)
        got = _outcome(kernel, bytearray(prefix), *args)
        want = _outcome(columns.append_columns, bytearray(prefix), *args)
        assert got == want, (n, size, offset, delta, limit - len(prefix), keys is None, headers is None)
        full += want[0] == min(n, TABLE_SIZE - offset)
    assert 300 < full < 1400  # runs that fit whole and runs cut short by the limit, both well represented
    # What is not a list of bytes goes to the reference, with its result or error.
    for values in ((b"a", b"b"), [b"a", bytearray(b"b")], [b"a", None]):
        got = _outcome(kernel, bytearray(61), 1 << 20, 0, 0, None, values, None, [1, 1])
        want = _outcome(columns.append_columns, bytearray(61), 1 << 20, 0, 0, None, values, None, [1, 1])
        assert got == want
