"""Dense building blocks of the tensor-train layer: tenalg's contractions and dtype rules.

Every core contraction of :mod:`tenalg.tt` goes through :func:`einsum`, which hands the
expression to tenalg's own front end, so it runs on tenalg's plans; the two batched
products of each bond of a rounding sweep, plain matrix products, call
:func:`tenalg.blas.matmul` directly (:meth:`~tenalg.linalg.workspace.Workspace.matmul`).

>>> import numpy as np
>>> float(einsum("ij,ij->", np.ones((2, 2)), np.ones((2, 2))))
4.0
"""

import functools
import math

import numpy as np

from ... import api
from ...dtypes import COMPUTE_TYPES, real_type, result_type
from ...errors import DTypeError


def einsum(subscripts, *operands, out=None):
    """``tenalg.einsum`` on the operands, as an array (written into ``out`` when given)."""
    return np.asarray(api.einsum(subscripts, *operands, out=out))


def core_dtype(dtype):
    """The dtype a core stores: integers and booleans become float64, a byte-swapped type
    the machine's own, others must compute.

    >>> core_dtype(np.int32), core_dtype(np.complex64), core_dtype(">f8")
    (dtype('float64'), dtype('complex64'), dtype('float64'))
    """
    dt = np.dtype(dtype)
    if not dt.isnative:
        dt = dt.newbyteorder("=")
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


def python_scalar(x):
    """A NumPy scalar as a Python scalar, so that it does not widen float32 arrays."""
    return x.item() if isinstance(x, np.generic | np.ndarray) else x


def scaled_by_log(values, logs, out=None):
    """``values * exp(logs)`` without widening ``values``' dtype (into ``out`` if given).
    A factor past the dtype's range (the reciprocal of a subnormal largest modulus, 1e-310
    in float64, would be inf) is applied in as many steps as keep each one finite.

    >>> exponent = 310 * np.log(10)  # exp(713.8) is inf
    >>> scaled_by_log(np.array([1e-310]), exponent).round(9).tolist()
    [1.0]
    """
    logs = np.asarray(logs, dtype=np.float64)
    real = real_type(values.dtype)
    top = float(np.abs(logs).max()) if logs.size else 0.0
    steps = math.ceil(top / log_range(real)) if log_range(real) < top < math.inf else 1
    factor = np.exp(logs / steps).astype(real)
    for _ in range(steps - 1):
        values = np.multiply(values, factor)
    return np.multiply(values, factor, out=out)


@functools.cache
def log_range(real):
    """Half the log of the largest finite value of ``real``: a factor of at most its exp
    leaves a product of moduli up to it finite."""
    return 0.5 * math.log(float(np.finfo(real).max))


def safe_log(s):
    """Logarithms of positive scales (zeros and infinities count as 1 so nothing blows up)."""
    s = np.asarray(s, dtype=np.float64)
    return np.log(np.where((s > 0) & np.isfinite(s), s, 1.0))


def norm_from_log(nrm, logs):
    """``nrm * exp(logs)``, a train's norm from its scaled parts (exactly that product
    where exp(logs) is finite): inf past float64's range (as documented for such
    trains), with no overflow warning, and finite wherever the norm is (exp(logs) alone
    may overflow where nrm is small); 0 where nrm is.

    >>> norms = norm_from_log(np.array([1e-10, 2.0, 0.0]), np.array([720.0, 800.0, 800.0]))
    >>> [f"{x:.3g}" for x in norms]
    ['4.92e+302', 'inf', '0']
    """
    nrm = np.asarray(nrm, dtype=np.float64)
    logs = np.asarray(logs, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        scale = np.exp(logs)
        norms = np.where(nrm == 0, 0.0, nrm * scale)
        far = np.isinf(scale) & (nrm > 0) & np.isfinite(nrm)
        if far.any():
            norms = np.where(far, np.exp(logs + safe_log(nrm)), norms)
    return norms


def bond_tolerance(eps, ncores):
    """Relative tolerance per bond: eps / sqrt(d - 1)."""
    return eps / math.sqrt(max(ncores - 1, 1))
