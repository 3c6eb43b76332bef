"""Scratch buffers that a batched operation reuses from one chunk of matrices to the next.
"""

import math

import numpy as np

from ..blas import matmul


class Workspace:
    """Named scratch buffers that a pack operation reuses from one chunk of trains to the
    next, so its temporaries are faulted in once, not once per chunk. ``reuse=False``
    (single trains) hands out fresh arrays.

    >>> w = Workspace()
    >>> a = w.matmul("t", np.ones((1, 2, 3)), np.ones((1, 3, 2)))
    >>> b = w.matmul("t", np.ones((1, 1, 3)), np.ones((1, 3, 2)))
    >>> a.tolist(), np.shares_memory(a, b)
    ([[[3.0, 3.0], [3.0, 3.0]]], True)
    """

    def __init__(self, reuse=True):
        self.reuse = reuse
        self._buffers = {}

    def array(self, key, shape, dtype):
        """An uninitialised array over the buffer ``key`` (valid until its next use)."""
        if not self.reuse:
            return np.empty(shape, dtype=dtype)
        size = math.prod(shape) * np.dtype(dtype).itemsize
        buf = self._buffers.get(key)
        if buf is None or buf.size < size:
            buf = self._buffers[key] = np.empty(size, dtype=np.uint8)
        return buf[:size].view(dtype).reshape(shape)

    def stack(self, key, arrays, dtype):
        """``arrays`` (of equal shapes) stacked along a new first axis into the buffer
        ``key``, as ``dtype``."""
        shape = arrays[0].shape
        out = self.array(key, (len(arrays), *shape), dtype)
        # one C loop over the arrays (np.stack costs twice as much on many small ones)
        np.concatenate(arrays, out=out.reshape(-1, *shape[1:]), casting="same_kind")
        return out

    def matmul(self, key, a, b):
        """The batched product a (g, i, j) @ b (g, j, k) written into the buffer ``key``
        (:func:`tenalg.blas.matmul`: large stacks are split over the threads). The two
        products of every bond of a rounding sweep take this, not the einsum front end,
        whose parsing and checks cost about 5 us a call: a tenth of a small train's
        rounding."""
        out = self.array(key, (a.shape[0], a.shape[1], b.shape[2]), np.result_type(a, b))
        return matmul(a, b, out)


FRESH = Workspace(reuse=False)
