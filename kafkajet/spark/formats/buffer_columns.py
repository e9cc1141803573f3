"""Arrow columns gathered from a buffer of records with numpy, for all records at once: zigzag varints read at
many positions together, and binary columns copied out of the buffer. Kafka's records (arrow_records.py) and
flat Avro records (avro_flat.py) are both decoded with them; they sit here, under the formats, so that the
formats import nothing from the modules above them. No I/O here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided

from kafkajet.errors import CorruptRecordError

_SHORT_RUNS_PER_RECORD = 16  # _gather: runs more often than every 16 records make a Python loop per run too slow


def zigzag_varints(buf: Any, pos: Any) -> tuple[Any, Any]:
    """Zigzag varints at every position of `pos` at once: (values, widths)."""
    byte = buf[pos].astype(np.uint64)
    value = byte & np.uint64(0x7F)
    width = np.ones(len(pos), dtype=np.int64)
    more = np.nonzero(byte >= 0x80)[0]
    shift = 7
    while len(more):
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in a record")
        byte = buf[pos[more] + width[more]].astype(np.uint64)
        value[more] |= (byte & np.uint64(0x7F)) << np.uint64(shift)
        width[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return signed, width


def binary_column(buf: Any, starts: Any, lengths: Any) -> pa.Array:
    """A binary column gathered from buf: null where the length is -1."""
    n = len(starts)
    nulls = lengths < 0
    sizes = np.where(nulls, 0, lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    data = _gather(buf, starts, sizes, offsets) if total else np.zeros(0, dtype=np.uint8)
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    if total >= 1 << 31:
        raise CorruptRecordError(f"{total} bytes in one column: more than an Arrow binary column holds")
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                  pa.py_buffer(data)], null_count=null_count)


def _gather(buf: Any, starts: Any, sizes: Any, offsets: Any) -> Any:
    """buf[starts[i]:starts[i]+sizes[i]] for every i, end to end.

    Runs of records with one size at one stride (what a producer mostly writes) are copied as strided 2-D
    views, a memcpy per run; where runs are short, a byte mask marks the wanted bytes instead (one pass over
    buf), or, when they are few, an index per wanted byte picks them.
    """
    n = len(starts)
    step = np.diff(starts)
    run_starts = np.ones(n, dtype=bool)
    run_starts[1:] = sizes[1:] != sizes[:-1]
    run_starts[2:] |= step[1:] != step[:-1]
    bounds = np.nonzero(run_starts)[0].tolist()
    if len(bounds) > n // _SHORT_RUNS_PER_RECORD + 1:
        total = int(offsets[-1])
        if total * 8 < len(buf):  # few of buf's bytes (keys, say): an index per wanted byte beats a pass over buf
            return buf[np.repeat(starts - offsets[:-1], sizes) + np.arange(total, dtype=np.int64)]
        marks = np.zeros(len(buf) + 1, dtype=np.int8)
        wanted = sizes > 0
        marks[starts[wanted]] = 1
        marks[(starts + sizes)[wanted]] = -1
        return buf[np.cumsum(marks[:-1], dtype=np.int8).view(np.bool_)]
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    bounds.append(n)
    for a, b in zip(bounds[:-1], bounds[1:], strict=False):
        size = int(sizes[a])
        if size:
            rows = as_strided(buf[int(starts[a]):], shape=(b - a, size), strides=(int(step[a]) if b - a > 1 else 0, 1))
            at = int(offsets[a])
            out[at:at + (b - a) * size].reshape(b - a, size)[...] = rows
    return out
