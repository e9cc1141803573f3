"""Records encoded a column at a time: the batch path's encoder for runs that share a timestamp delta.

send_batch() and send_arrow() hand over many records with one timestamp. Encoding them one at a time costs a
Python loop step with a dozen operations per record. Here every field is a column (header sections arrive
already encoded, one per record): the length varints come from table look-ups over the whole run, the
running size from one accumulate() and bisect, and the record bytes from a single join. The bytes are
identical to append_record()'s, which the tests check.

Callers guarantee the preconditions (append_columns' docstring); anything else takes append_run()'s loop.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from operator import add

from kafkajet.protocol.varint import TABLE_SIZE, VARINT
from kafkajet.records.record import _ATTR_TS, _LEN, _OFF_NULL_KEY

# Lengths up to this take the column path: a key and a value both at the limit still give a record size
# inside the VARINT table.
MAX_COLUMN_LEN = TABLE_SIZE // 2 - 64
_ZERO_VARINT: list[bytes] = [b"\x00" + v for v in VARINT]  # the previous record's header count + a size
_VPART: list[int] = [_LEN[n] + n for n in range(MAX_COLUMN_LEN)]  # a length varint and that many bytes
_join = b"".join


def _pick(table: Sequence[object], idx: Sequence[int]) -> list:  # type: ignore[type-arg]
    return [table[i] for i in idx]


# Records of one size differ only in their offset delta, key, value and headers: the bytes between those
# (length, attributes, timestamp delta, offset delta, key and value lengths) are the same for every run of that
# shape, so they are made once per shape and offset and a record becomes two parts (four with a key), not five.
# Bounded by prefixes held, not shapes: a table grows to the largest offset delta a batch reached.
_PREFIXES: dict[tuple[int, int, int, int, bool], list[bytes]] = {}
_MAX_PREFIXES = 1 << 16
_held = 0
_UNIFORM_MIN = 16  # shorter runs are cheaper to assemble than a table is to start


# Tables are kept for the runs that recur: small timestamp deltas at small offset deltas, i.e. batches of a
# fixed size filled call after call. A batch that grew past that (batch.max.size) or waited long reaches offsets
# and deltas seldom seen again; a table for it would be built from offset 0 for one use, and many such churned
# the memo (a fifth of send_batch()'s caller time went to building tables), so those runs take _append_span's
# general layout, which builds nothing per shape.
_MEMO_DELTAS = 64
_MEMO_OFFSETS = 1024


def _prefixes(size: int, delta: int, klen: int, vlen: int, headers: bool, upto: int) -> list[bytes]:
    """Prefix bytes of a record of this shape at offset deltas 0..upto-1 (or more)."""
    global _held
    shape = (size, delta, klen, vlen, headers)
    table = _PREFIXES.get(shape, [])
    have = len(table)
    if have < upto:
        upto = min(TABLE_SIZE, max(upto, 2 * have))
        if _held + upto - have > _MAX_PREFIXES:
            _PREFIXES.clear()
            _held = have  # this shape's table carries over into the emptied memo
        head = (VARINT if headers else _ZERO_VARINT)[size] + _ATTR_TS[delta]
        if klen < 0:
            tail = VARINT[vlen]
            more = [head + o + tail for o in _OFF_NULL_KEY[have:upto]]
        else:
            tail = VARINT[klen]
            more = [head + o + tail for o in VARINT[have:upto]]
        # A new list, not an extension in place: another thread may be reading the old one.
        table = _PREFIXES[shape] = table + more
        _held += upto - have
    return table


def _append_uniform(buf: bytearray, offset: int, count: int, size: int, delta: int, keys: Sequence[bytes] | None,
                    values: Sequence[bytes], kl: Sequence[int] | None, vlen: int, headers: Sequence[bytes] | None,
                    start: int) -> int:
    """_append_span() for `count` records of one `size` whose prefixes are kept in tables (a room check
    already done)."""
    stop = start + count
    klen = -1 if kl is None else kl[0]
    width = (2 if keys is None else 4) + (0 if headers is None else 1)
    parts: list[bytes] = [b""] * (width * count)
    parts[0::width] = _prefixes(size, delta, klen, vlen, headers is not None, offset + count)[offset:offset + count]
    if headers is None:
        parts[0] = parts[0][1:]  # the record before the first closed itself: no header count to lead with
    if keys is None:
        parts[1::width] = values[start:stop]
    else:
        parts[1::width] = keys[start:stop]
        parts[2::width] = [VARINT[vlen]] * count
        parts[3::width] = values[start:stop]
    _write(buf, parts, width, headers, start, stop)
    return count


def _write(buf: bytearray, parts: list[bytes], width: int, headers: Sequence[bytes] | None, start: int,
           stop: int) -> None:
    """Append the records whose parts are laid out `width` to a record, each record's header section (if any)
    last; without headers every record's 0 header count is already at the head of the next, bar the last's."""
    if headers is not None:
        parts[width - 1::width] = headers[start:stop]
    buf += _join(parts)
    if headers is None:
        buf += b"\x00"


def append_columns(
    buf: bytearray,
    limit: int,
    offset: int,
    delta: int,
    keys: Sequence[bytes] | None,
    values: Sequence[bytes],
    klens: Sequence[int] | None,
    vlens: Sequence[int],
    headers: Sequence[bytes] | None = None,
    hlens: Sequence[int] | None = None,
) -> int:
    """Append records (keys[i] or a null key, values[i], header section headers[i] or none) with offset
    deltas offset, offset + 1, ... and timestamp delta `delta`, while buf stays within `limit` bytes; a record
    into an empty batch always goes in. Returns how many went in (a prefix of the run).

    Every value and key is bytes shorter than MAX_COLUMN_LEN; 0 <= delta, offset < TABLE_SIZE. headers[i] is
    a whole encoded header section (encode_headers(), b"\x00" for none), hlens[i] its length, and the header
    sections are shorter than MAX_COLUMN_LEN.
    """
    m = min(len(values), TABLE_SIZE - offset)
    done = 0
    while done < m:
        # The offset varint's width is constant within [0, 64), [64, 8192) and [8192, 16384): one span each.
        o = offset + done
        span_end = min(m, done + (64 if o < 64 else 8192 if o < 8192 else TABLE_SIZE) - o)
        done += _append_span(buf, limit, o, delta, keys, values, klens, vlens, headers, hlens, done, span_end)
        if done < span_end:
            break
    return done


def _append_span(buf: bytearray, limit: int, offset: int, delta: int, keys: Sequence[bytes] | None,
                 values: Sequence[bytes], klens: Sequence[int] | None, vlens: Sequence[int],
                 headers: Sequence[bytes] | None, hlens: Sequence[int] | None, start: int, end: int) -> int:
    """Records start..end-1 of the run at offset deltas offset, offset + 1, ...: how many went in."""
    vl = vlens[start:end]
    kl = None if klens is None else klens[start:end]
    hl = None if hlens is None else hlens[start:end]
    # Bytes of a record after its length varint: attributes, timestamp delta, offset delta, the key (or its
    # null marker), value length and value, the header section (without headers: a count of 0).
    fixed = 1 + _LEN[delta] + _LEN[offset] + (1 if kl is None else 0) + (1 if hl is None else 0)
    # Without headers every record ends with the same 0: it is written as the start of the next record's
    # head (and once after the last), which saves a part per record.
    zero_heads = _ZERO_VARINT if hl is None else VARINT
    room = limit - len(buf)
    if (vl.count(vl[0]) == len(vl) and (kl is None or kl.count(kl[0]) == len(kl))
            and (hl is None or hl.count(hl[0]) == len(hl))):
        # Every record the same size (fixed-width values, keys and headers): the sizes need no column at all.
        size = fixed + _VPART[vl[0]] + (0 if kl is None else _VPART[kl[0]]) + (0 if hl is None else hl[0])
        count = min(len(vl), max(0, room) // (_LEN[size] + size))
        if count == 0:
            if offset:
                return 0
            count = 1  # a record into an empty batch always goes in
        if count >= _UNIFORM_MIN and delta < _MEMO_DELTAS and offset + count <= _MEMO_OFFSETS:
            return _append_uniform(buf, offset, count, size, delta, keys, values, kl, vl[0], headers, start)
        heads = [zero_heads[size]] * count
        heads[0] = VARINT[size]  # the record before the first closed itself
        vn = [VARINT[vl[0]]] * count
        kn = None if kl is None else [VARINT[kl[0]]] * count
    else:
        body = _pick(_VPART, vl)
        if kl is not None:
            body = list(map(add, _pick(_VPART, kl), body))
        if hl is not None:
            body = list(map(add, hl, body))
        body = [fixed + b for b in body]
        count = bisect_right(list(accumulate(map(add, _pick(_LEN, body), body))), room)
        if count == 0:
            if offset:
                return 0
            count = 1
        del body[count:]
        heads = _pick(zero_heads, body)
        heads[0] = VARINT[body[0]]
        vn = _pick(VARINT, vl[:count])
        kn = None if kl is None else _pick(VARINT, kl[:count])
    stop = start + count
    width = (5 if keys is None else 7) + (0 if headers is None else 1)
    parts: list[bytes] = [b""] * (width * count)
    parts[0::width] = heads
    parts[1::width] = [_ATTR_TS[delta]] * count
    if keys is None:
        parts[2::width] = _OFF_NULL_KEY[offset:offset + count]
        parts[3::width] = vn
        parts[4::width] = values[start:stop]
    else:
        parts[2::width] = VARINT[offset:offset + count]
        parts[3::width] = kn  # type: ignore[assignment]
        parts[4::width] = keys[start:stop]
        parts[5::width] = vn
        parts[6::width] = values[start:stop]
    _write(buf, parts, width, headers, start, stop)
    return count
