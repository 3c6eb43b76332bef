"""Dense building blocks of the tensor-train layer: tenalg's contractions and dtype rules.

Every core contraction of :mod:`tenalg.tt` goes through :func:`einsum`, which hands the
expression to tenalg's own front end, so it runs on tenalg's plans; the two batched
products of each bond of a rounding sweep, plain matrix products, call
:func:`tenalg.blas.matmul` directly (:meth:`~tenalg.tt.linalg.batched.Workspace.matmul`).

>>> import numpy as np
>>> float(einsum("ij,ij->", np.ones((2, 2)), np.ones((2, 2))))
4.0
"""

import contextlib
import functools
import math

import numpy as np

from ... import api
from ...blas import one_blas_thread
from ...dtypes import COMPUTE_TYPES, real_type, result_type
from ...errors import DTypeError


def einsum(subscripts, *operands, out=None):
    """``tenalg.einsum`` on the operands, as an array (written into ``out`` when given)."""
    return np.asarray(api.einsum(subscripts, *operands, out=out))


def core_dtype(dtype):
    """The dtype a core stores: integers and booleans become float64, others must compute.

    >>> core_dtype(np.int32), core_dtype(np.complex64)
    (dtype('float64'), dtype('complex64'))
    """
    dt = np.dtype(dtype)
    if dt.kind in "biu":
        return np.dtype(np.float64)
    if dt not in COMPUTE_TYPES:
        raise DTypeError(
            f"tensor-train cores are float32, float64, complex64 or complex128, not {dt}"
        )
    return dt


def common_dtype(dtypes):
    """The dtype of a result built from operands of ``dtypes`` (shared, else promoted)."""
    return result_type([core_dtype(d) for d in dtypes])


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


def python_scalar(x):
    """A NumPy scalar as a Python scalar, so that it does not widen float32 arrays."""
    return x.item() if isinstance(x, np.generic | np.ndarray) else x


def scaled_by_log(values, logs, out=None):
    """``values * exp(logs)`` without widening ``values``' dtype (into ``out`` if given)."""
    factor = np.exp(np.asarray(logs, dtype=np.float64)).astype(real_type(values.dtype))
    return np.multiply(values, factor, out=out)


def safe_log(s):
    """Logarithms of positive scales (zeros and infinities count as 1 so nothing blows up)."""
    s = np.asarray(s, dtype=np.float64)
    return np.log(np.where((s > 0) & np.isfinite(s), s, 1.0))


def bond_tolerance(eps, ncores):
    """Relative tolerance per bond: eps / sqrt(d - 1)."""
    return eps / math.sqrt(max(ncores - 1, 1))
