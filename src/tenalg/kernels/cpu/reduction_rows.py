"""Reductions that read each output's contiguous row to its end (:data:`_ROW_TOTALS`), and
:func:`sum_of_squares` of a whole array (the norm's first pass).

>>> import numpy as np
>>> from tenalg.kernels import compiler
>>> x = np.full(5, 2.0)
>>> first = sum_of_squares(x)  # None while the kernel compiles off the thread
>>> compiler.wait(), sum_of_squares(x)
(True, 20.0)
"""

import math

import numpy as np
from numba import prange

from .. import compiler
from ..jit import twins as _twins
from .calls import _dense_order, _layout, _memory
from .diagonal_sums import _REAL_SUMS
from .lowlevel import _FORMATS, _offsets, _task_count
from .reduction_lanes import _finish
from .row_sums import _ROW_BATCH, _SQUARES, _row_total, _row_totals
from .threads import _threads

# reductions of contiguous rows of at least this many bytes (in the compute type), into at
# least so many outputs, read each row to its end in a kernel of their own
# (_row_totals_kernel; rows of 256 float32 on Zen 1: 0.26 against 0.46 ms for 4096 of them
# in lanes; since a row's last block stays in registers, on one thread of Zen 4, 262144
# rows of 64 float32 2.38 against 3.20 ms, 65536 of 32 float64 0.38 against 0.46; rows
# of 16 float32 are faster in lanes while they stay in cache)
_LONG_ROW, _MIN_ROW_TOTALS = 1 << 7, 16

def _row_ops(op, compute):
    """Whether :func:`_row_totals` serves ``op`` (a code) in ``compute``: sums, and every
    op of real data."""
    return op == 0 or np.dtype(compute).kind == "f"


def _row_totals_kernel(free_shape, offs, strides, row_len, tc, ta, codes, scal, out, c, a):
    """Reductions of contiguous rows (:func:`_row_ops`): each output reads its row from
    start to end (switching rows every few KB halves the read rate), threads share the
    outputs.  Arguments as :func:`_reduce_kernel`'s."""
    nf = free_shape.shape[0]
    lanes = free_shape[nf - 1]
    outer = 1
    for ax in range(nf - 1):
        outer *= free_shape[ax]
    so, sc, sa = strides[0, nf - 1], strides[1, nf - 1], strides[2, nf - 1]
    rows = outer * lanes
    tasks = _task_count(rows, rows * row_len)
    for k in prange(tasks):  # a task's buffers serve all its rows
        base = np.empty(3, np.int64)
        res = np.empty(_ROW_BATCH, scal.dtype)
        u, end = k * rows // tasks, (k + 1) * rows // tasks
        while u < end:  # a batch of the rows of one outer position
            _offsets(u // lanes, free_shape, strides, nf - 1, offs, base)
            t = u % lanes
            w = min(lanes - t, end - u, _ROW_BATCH)
            _row_totals(res, w, a, base[2] + t * sa, sa, row_len, ta[0], codes[0])
            _finish(res, w, out, base[0] + t * so, so, c, base[1] + t * sc, sc, tc, codes, scal)
            u += w


_ROW_TOTALS = _twins(_row_totals_kernel)


def _squares_kernel(x, mark, parts):
    """parts[k] = the float64 sum of squares of the k-th of len(parts) equal pieces of x."""
    pieces, n = parts.shape[0], x.shape[0]
    for k in prange(pieces):
        lo = k * n // pieces
        parts[k] = _row_total(x, lo, (k + 1) * n // pieces - lo, mark, np.float64(0), _SQUARES)


_SQUARE_SUMS = _twins(_squares_kernel)


def sum_of_squares(a):
    """The float64 sum of the squares of the elements of a real array that fills its memory
    (in any order of axes; each square exact for 32- and 16-bit data), in memory order as
    :func:`_row_total` adds (pieces of it on threads, added exactly), or None where ``a``
    is not such an array, or where the kernel is not compiled for it yet (it then compiles
    off the thread: :mod:`tenalg.kernels.compiler`): no float64 copy,
    where one cost a float32 norm 20x NumPy's time.

    >>> x = np.array([3.0, 4.0], np.float32)
    >>> sum_of_squares(x) in (None, 25.0), compiler.wait(), sum_of_squares(x)
    (True, True, 25.0)
    """
    if not (a.dtype in _REAL_SUMS or a.dtype in _FORMATS) or _dense_order(*_layout(a)) is None:
        return None
    threads = _threads(a.size)
    parts = np.empty(2 * threads if threads > 1 else 1)
    kernel, args = _SQUARE_SUMS[threads == 1], (_memory(a), _FORMATS.get(a.dtype, 0), parts)
    if not compiler.ready_for(kernel, args, a.dtype):
        return None
    kernel(*args)
    return math.fsum(parts) if threads > 1 else float(parts[0])
