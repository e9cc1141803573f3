# cython: language_level=3, freethreading_compatible=True, boundscheck=False, wraparound=False
"""append_record() of record.py and append_columns() of columns.py in C, for the compiled build: the per-send()
record encoder and the batch path's.

mypyc compiles record.append_record to about 110 ns a record (table look-ups, a tuple, a join, then a copy into
the batch); this writes the varints and copies key and value straight into the batch's bytearray in under 40
(benchmarks: issue 30's closing note). record.append_record stays the reference: tests compare the bytes of
both, and every shape not handled here goes to it (headers, keys or values that are not bytes, deltas outside
int32/int64), so that its errors are the only ones.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.string cimport memcpy

from kafkajet.protocol.varint import TABLE_SIZE as _table_size
from kafkajet.records.columns import append_columns as _columns_reference
from kafkajet.records.record import append_record as _reference


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1


cdef inline unsigned long long _zigzag(long long v) noexcept nogil:
    return (<unsigned long long>v << 1) ^ <unsigned long long>(v >> 63)


cdef inline Py_ssize_t _varint_size(long long v) noexcept nogil:
    cdef unsigned long long z = _zigzag(v)
    cdef Py_ssize_t n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


cdef inline char* _put_varint(char* p, long long v) noexcept nogil:
    cdef unsigned long long z = _zigzag(v)
    while z >= 0x80:
        p[0] = <char>((z & 0x7F) | 0x80)
        p += 1
        z >>= 7
    p[0] = <char>z
    return p + 1


cdef inline Py_ssize_t _body_size(long long td, long long od, Py_ssize_t klen, Py_ssize_t vlen,
                                  Py_ssize_t hlen) noexcept nogil:
    """A record's bytes after its length varint: attributes, timestamp delta, offset delta, key and value (each a
    length varint, -1 for null, then its bytes), and a header section of hlen bytes (1: a count of 0)."""
    return (1 + _varint_size(td) + _varint_size(od) + _varint_size(klen) + (klen if klen > 0 else 0)
            + _varint_size(vlen) + (vlen if vlen > 0 else 0) + hlen)


cdef inline char* _put_record_head(char* p, Py_ssize_t body, long long td, long long od, object key,
                                   Py_ssize_t klen, object value, Py_ssize_t vlen):
    """Write a record up to its header section (the caller's to write): length, attributes, deltas, key, value.
    key and value are bytes where their length is above 0."""
    p = _put_varint(p, body)
    p[0] = 0  # attributes: unused in magic 2 records
    p = _put_varint(p + 1, td)
    p = _put_varint(p, od)
    p = _put_varint(p, klen)
    if klen > 0:
        memcpy(p, PyBytes_AS_STRING(key), klen)
        p += klen
    p = _put_varint(p, vlen)
    if vlen > 0:
        memcpy(p, PyBytes_AS_STRING(value), vlen)
        p += vlen
    return p


def append_record(object buf, object offset_delta, object timestamp_delta, object key, object value,
                  object headers):
    """record.append_record(buf, offset_delta, timestamp_delta, key, value, headers): the same bytes appended to
    buf, the same count returned."""
    cdef int overflow = 0
    cdef long long od, td
    if (headers or type(buf) is not bytearray or type(offset_delta) is not int or type(timestamp_delta) is not int
            or (key is not None and type(key) is not bytes) or (value is not None and type(value) is not bytes)):
        return _reference(buf, offset_delta, timestamp_delta, key, value, headers)
    od = PyLong_AsLongLongAndOverflow(offset_delta, &overflow)
    if overflow or not -2147483648 <= od <= 2147483647:
        return _reference(buf, offset_delta, timestamp_delta, key, value, headers)
    td = PyLong_AsLongLongAndOverflow(timestamp_delta, &overflow)
    if overflow:
        return _reference(buf, offset_delta, timestamp_delta, key, value, headers)
    cdef Py_ssize_t klen = -1 if key is None else PyBytes_GET_SIZE(key)
    cdef Py_ssize_t vlen = -1 if value is None else PyBytes_GET_SIZE(value)
    cdef Py_ssize_t body = _body_size(td, od, klen, vlen, 1)  # no headers: a count of 0
    cdef Py_ssize_t total = _varint_size(body) + body
    cdef Py_ssize_t start = PyByteArray_GET_SIZE(buf)
    PyByteArray_Resize(buf, start + total)
    cdef char* p = _put_record_head(PyByteArray_AS_STRING(buf) + start, body, td, od, key, klen, value, vlen)
    p[0] = 0  # no headers
    return total


cdef Py_ssize_t _TABLE_SIZE = _table_size
cdef Py_ssize_t _BYTEARRAY_BASE = bytearray().__sizeof__()  # the object without its allocation


def append_columns(object buf, Py_ssize_t limit, Py_ssize_t offset, Py_ssize_t delta, object keys, object values,
                   object klens, object vlens, object headers=None, object hlens=None):
    """columns.append_columns(...) in C: the same records appended to buf, the same count returned.

    mypyc runs the Python one at about 100 ns a record (lists of parts built and joined, then copied into the
    batch); this measures the run once and writes it straight into the batch's bytearray. The lengths columns
    are not read: the bytes give them. Anything but lists of bytes goes to the reference."""
    if (type(buf) is not bytearray or type(values) is not list or (keys is not None and type(keys) is not list)
            or (headers is not None and type(headers) is not list)):
        return _columns_reference(buf, limit, offset, delta, keys, values, klens, vlens, headers, hlens)
    cdef list vs = <list>values
    cdef list ks = <list>keys if keys is not None else None
    cdef list hs = <list>headers if headers is not None else None
    cdef Py_ssize_t m = min(len(vs), _TABLE_SIZE - offset)
    if ks is not None and len(ks) < m or hs is not None and len(hs) < m:
        return _columns_reference(buf, limit, offset, delta, keys, values, klens, vlens, headers, hlens)
    cdef Py_ssize_t room = limit - PyByteArray_GET_SIZE(buf)
    cdef Py_ssize_t used = 0, count = 0, i, klen = -1, vlen, hlen = 1, body, rec
    cdef object v, k = None, h
    # First the run's measure: how many fit, every field checked before a byte is written. The write below
    # computes each size again rather than keep a column of them: a few additions against an allocation.
    for i in range(m):
        v = vs[i]
        if type(v) is not bytes:
            return _columns_reference(buf, limit, offset, delta, keys, values, klens, vlens, headers, hlens)
        if ks is not None:
            k = ks[i]
            if type(k) is not bytes:
                return _columns_reference(buf, limit, offset, delta, keys, values, klens, vlens, headers, hlens)
            klen = PyBytes_GET_SIZE(k)
        if hs is not None:
            h = hs[i]
            if type(h) is not bytes:
                return _columns_reference(buf, limit, offset, delta, keys, values, klens, vlens, headers, hlens)
            hlen = PyBytes_GET_SIZE(h)
        body = _body_size(delta, offset + i, klen, PyBytes_GET_SIZE(v), hlen)
        rec = _varint_size(body) + body
        if used + rec > room and (count or offset):
            break  # a record into an empty batch always goes in; otherwise a prefix that fits
        used += rec
        count += 1
    if count == 0:
        return 0
    cdef Py_ssize_t start = PyByteArray_GET_SIZE(buf)
    if start + used >= buf.__sizeof__() - _BYTEARRAY_BASE and start + used < 2 * start:
        # Beyond the allocation (__sizeof__ counts it): a batch grows a window at a time, each a few percent of
        # what it holds, and bytearray's 1/8 overallocation then copied the whole batch some 35 times on its way
        # to 1 MiB (realloc was half of this function's time). Growing to twice the size and back down keeps the
        # allocation (CPython keeps it on a resize to at least half of it): a few copies at most, for at most
        # twice a growing batch's bytes held. 80 -> 21 ns a record filling 1 MiB in batch.size steps alone;
        # send_batch()'s appending 0.12 -> 0.10 us a record end to end.
        PyByteArray_Resize(buf, 2 * start)
    PyByteArray_Resize(buf, start + used)
    cdef char* p = PyByteArray_AS_STRING(buf) + start
    cdef char* end = p + used
    for i in range(count):
        v = vs[i]
        vlen = PyBytes_GET_SIZE(v)
        if ks is not None:
            k = ks[i]
            klen = PyBytes_GET_SIZE(k)
        if hs is not None:
            h = hs[i]
            hlen = PyBytes_GET_SIZE(h)
        body = _body_size(delta, offset + i, klen, vlen, hlen)
        p = _put_record_head(p, body, delta, offset + i, k, klen, v, vlen)
        if hs is None:
            p[0] = 0
            p += 1
        else:
            memcpy(p, PyBytes_AS_STRING(h), hlen)
            p += hlen
    if p != end:
        raise AssertionError("append_columns kernel: the records' measure and their bytes differ")
    return count
