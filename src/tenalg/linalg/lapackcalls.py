"""How the decompositions call LAPACK on stacks of matrices: on how many BLAS threads
(:func:`lapack_threads`), and the unit roundoff their error bounds are written in.

>>> unit_roundoff(np.complex64) == float(np.finfo(np.float32).eps)
True
"""

import contextlib
import functools

import numpy as np

from ..blas import one_blas_thread
from ..dtypes import real_type


@functools.cache
def _eps(dtype):
    return float(np.finfo(real_type(dtype)).eps)


def unit_roundoff(dtype):
    """Machine epsilon of the real counterpart of ``dtype`` (2.2e-16 for float64); cached:
    np.finfo costs ~10 us, and a small rounding asked 43 times."""
    return _eps(np.dtype(dtype))


SMALL_LAPACK = 32 * 32  # elements per matrix up to which LAPACK keeps BLAS's threads


def lapack_threads(a):
    """The context for a LAPACK call on the stack ``a``: one BLAS thread for real
    matrices over SMALL_LAPACK elements (:func:`tenalg.blas.one_blas_thread`: on the
    loaded 2-core machine a 120 x 120 eigh took 119 ms [44-531] on OpenBLAS's two
    threads, 2.1 ms [1.2-14] on one), nothing for smaller ones, which OpenBLAS does not
    thread and where switching costs ~0.3 ms a call (7% of a d 10, n 16, r 10 rounding).

    >>> lapack_threads(np.ones((2, 4, 4)))
    <contextlib.nullcontext object at ...>
    """
    if a.shape[-2] * a.shape[-1] <= SMALL_LAPACK:
        return contextlib.nullcontext()
    return one_blas_thread(a.dtype)
