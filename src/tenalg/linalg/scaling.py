"""Exact scaling by powers of two, so that a factorisation never squares a number that
overflows or underflows: a matrix of entries near 1e-200 has singular values that NumPy
represents, and squares (Gram matrices, tails of discarded weight) that it does not.

>>> import numpy as np
>>> a, shift, norm = safe_scaled(np.full(4, 1e-200), "svd")
>>> shift, bool(times_power_of_two(a, shift)[0] == 1e-200), round(norm, 12)
(-664, True, 1.53090103458)
"""

import math

import numpy as np

from ..errors import OperationError

# norms whose squares (a truncation's tails) neither overflow nor lose their small
# singular values to underflow; an array outside is scaled by a power of two first
SAFE_NORMS = (2.0 ** -250, 2.0 ** 250)


def times_power_of_two(x, e):
    """Each train's slice of ``x`` (its first axis) times 2^e[train], or all of x times
    2^e for an int e, exactly, in x's dtype (in two float64 factors: 2^e alone need not
    fit a float32, nor 2^1074 a float64)."""
    shape = (-1,) + (1,) * (x.ndim - 1)
    half = e // 2
    y = x * np.ldexp(1.0, half).reshape(shape) * np.ldexp(1.0, e - half).reshape(shape)
    return y.astype(x.dtype, copy=False)


def safe_scaled(a, what):
    """``(a 2^-shift, shift, its Frobenius norm)``: ``a`` itself and shift 0 where its
    norm lies within SAFE_NORMS, else ``a`` scaled so that its largest modulus is in
    [1/2, 1) (a zero array stays zero). An array that holds NaN or inf raises
    OperationError naming ``what``; the check costs a pass only outside SAFE_NORMS."""
    with np.errstate(over="ignore"):  # an overflowing norm is what this looks for
        norm, shift = float(np.linalg.norm(a)), 0
    if not SAFE_NORMS[0] < norm < SAFE_NORMS[1]:  # zero, huge, tiny, or not finite
        if not np.isfinite(a).all():
            raise OperationError(f"{what}: the array holds NaN or inf")
        biggest = float(np.abs(a).max(initial=0))
        if biggest > 0:
            shift = math.frexp(biggest)[1]
            a = times_power_of_two(a, -shift)
            norm = float(np.linalg.norm(a))
    return a, shift, norm
