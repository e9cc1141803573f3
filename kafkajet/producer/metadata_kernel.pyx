# cython: language_level=3, freethreading_compatible=True
"""RecordMetadata's constructor in C, for the compiled build's completion loop (batch.fire_callbacks).

A delivery callback gets a RecordMetadata per record, a NamedTuple. The fastest way Python has to make one,
tuple.__new__(RecordMetadata, (fields...)), builds two argument tuples and copies the fields over: 112 ns
from compiled code, a third of the sender thread's work per record in a send(callback=) loop. This allocates
the instance and sets its six fields, 60 ns with the call; batch.fire_callbacks's tuple.__new__ stays the
reference, and a test compares the two.
"""

from cpython.ref cimport Py_INCREF


cdef extern from "Python.h":
    ctypedef struct PyTypeObject:
        Py_ssize_t tp_basicsize
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)
    void PyTuple_SET_ITEM(object p, Py_ssize_t pos, object o)
    bint PyType_IsSubtype(PyTypeObject* a, PyTypeObject* b)
    PyTypeObject PyTuple_Type


def new_metadata(type cls, object topic, object partition, object offset, object timestamp,
                 object serialized_key_size, object serialized_value_size):
    """tuple.__new__(cls, (topic, partition, offset, timestamp, serialized_key_size, serialized_value_size)) for
    a tuple subclass that adds no fields of its own (a NamedTuple's __slots__ are empty)."""
    if (not PyType_IsSubtype(<PyTypeObject*>cls, &PyTuple_Type)
            or (<PyTypeObject*>cls).tp_basicsize != PyTuple_Type.tp_basicsize):
        raise TypeError(f"new_metadata() needs a tuple subclass without instance fields, not {cls!r}")
    cdef object md = PyType_GenericAlloc(<PyTypeObject*>cls, 6)
    _put(md, 0, topic)
    _put(md, 1, partition)
    _put(md, 2, offset)
    _put(md, 3, timestamp)
    _put(md, 4, serialized_key_size)
    _put(md, 5, serialized_value_size)
    return md


cdef inline void _put(object md, Py_ssize_t i, object field):
    Py_INCREF(field)  # PyTuple_SET_ITEM takes over a reference: give it one of the field's
    PyTuple_SET_ITEM(md, i, field)
