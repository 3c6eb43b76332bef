"""New output arrays with an exact layout: what every backend allocates outputs with.

>>> import numpy as np
>>> from tenalg.descriptors import TensorDescriptor
>>> new = allocator(TensorDescriptor((2, 3), (1, 2), np.float64))
>>> new().strides
(8, 16)
"""

import math

import numpy as np

from .descriptors import TensorDescriptor

_LINE, _LINED_BYTES = 64, 1 << 20


def byte_strides(descriptor):
    """A descriptor's strides in bytes, as NumPy reports them."""
    item = descriptor.dtype.itemsize
    return tuple(s * item for s in descriptor.strides)


def stand_in(shape, strides, dtype, writeable=False):
    """An array of this layout (``strides`` in bytes) over one element of its own, for
    planning, which reads layouts only, never elements: it keeps no array alive and
    allocates nothing of the layout's size.

    >>> x = stand_in((1000, 1000), (8, 8000), np.float64)
    >>> x.shape, x.strides, x.flags.writeable
    ((1000, 1000), (8, 8000), False)
    """
    return np.lib.stride_tricks.as_strided(np.empty(1, dtype), shape, strides,
                                           writeable=writeable)


def strides_match(actual, expected, extents):
    """Equal strides on every axis of extent > 1 (others never move; empty: none do).

    >>> strides_match((8, 8), (8, 16), (3, 1)), strides_match((8, 8), (8, 16), (3, 2))
    (True, False)
    """
    return actual == expected or 0 in extents or all(
        a == b for a, b, e in zip(actual, expected, extents, strict=True) if e > 1
    )


def line_empty(shape, dtype):
    """``np.empty(shape, dtype)``, but from 1 MB on starting on a cache line (64 bytes):
    NumPy's large arrays start 16 bytes past one, where no row of 64 float64 holds a whole
    line, and the permutation kernel streams only whole lines past the caches (a
    (3, 1, 0, 2) permutation of (64,)^4 float64 into a new array 16.1 -> 14.6 ms on two
    threads of Zen 4).  The array is a view of a byte buffer 64 bytes longer.

    >>> a = line_empty((512, 512), np.float64)
    >>> a.ctypes.data % 64, a.shape, a.dtype.name, a.flags.c_contiguous
    (0, (512, 512), 'float64', True)
    """
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    if size < _LINED_BYTES:
        return np.empty(shape, dtype)
    buffer = np.empty(size + _LINE, np.uint8)
    start = -buffer.ctypes.data % _LINE
    return buffer[start:start + size].view(dtype).reshape(shape)


def allocator(descriptor, lined=False):
    """A zero-argument function returning new arrays with ``descriptor``'s exact layout;
    ``lined``: dense ones of 1 MB or more start on a cache line
    (:func:`line_empty`), for the permutation kernel alone.  Its 64 extra bytes cost
    others: a 512^2 float64 GEMM written into such an output took 2.55 against 1.99 ms
    in a loop beside NumPy's own products (glibc then maps and faults in its pages
    afresh, as sizes just past NumPy's own move its mmap threshold)."""
    extents, strides, dtype = descriptor.extents, descriptor.strides, descriptor.dtype
    if descriptor.elements == 0:
        return lambda: np.empty(extents, dtype)
    order = sorted(range(len(extents)), key=lambda ax: -abs(strides[ax]))
    dense_shape = tuple(extents[ax] for ax in order)
    axes = tuple(sorted(range(len(order)), key=order.__getitem__))  # order's inverse
    dense = byte_strides(TensorDescriptor.contiguous(dense_shape, dtype))  # no memory
    if strides_match(tuple(dense[ax] for ax in axes), byte_strides(descriptor), extents):
        empty = line_empty if lined else np.empty
        if axes == tuple(range(len(axes))):
            return lambda: empty(extents, dtype)
        return lambda: empty(dense_shape, dtype).transpose(axes)
    lo, _ = descriptor.bounds()
    span, strides_in_bytes = descriptor.span, byte_strides(descriptor)

    def strided():
        buffer = np.empty(span, dtype)
        return np.lib.stride_tricks.as_strided(buffer[-lo:], extents, strides_in_bytes,
                                               writeable=True)

    return strided
