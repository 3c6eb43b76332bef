"""Cholesky factors and their inverses for many small real symmetric positive definite
matrices at once, in Numba.

``np.linalg.cholesky`` and ``np.linalg.inv`` on a stack call LAPACK once per matrix
(``inv`` about 8 us for a 16 x 16 matrix, most of it per-call work).
:func:`cholesky_inverse` factors up to BLOCK matrices side by side, the matrix index
fastest, so each step of the column-by-column Cholesky factorisation and of the
substitution for the inverse is one vectorised loop over the block; stacks of fewer than
MIN_STACK matrices take them one at a time in scalar loops. Both are the textbook
algorithms (backward stable like LAPACK's). Like ``np.linalg.cholesky`` it raises
``LinAlgError`` when a matrix is not positive definite. Complex matrices go to LAPACK
(:func:`reference_cholesky_inverse`).

>>> import numpy as np
>>> x = np.random.default_rng(0).standard_normal((16, 4, 6))
>>> c, inv = cholesky_inverse(x @ x.transpose(0, 2, 1))
>>> np.allclose(c @ c.transpose(0, 2, 1), x @ x.transpose(0, 2, 1)), np.allclose(inv @ c, np.eye(4))
(True, True)
"""

import numba
import numpy as np

from ...kernels import compiler
from ...kernels.jit import CACHE
from .dense import lapack_threads

BLOCK = 128  # matrices factored side by side
MIN_STACK = 16  # smaller stacks go one matrix at a time (_factor_each)


@numba.njit(cache=CACHE, error_model="numpy", nogil=True)
def _factor(a, c, inv):
    """Lower Cholesky factors of the stack a (g, n, n) (lower triangle read) into c and
    their inverses into inv; False when a pivot is not positive."""
    g, n, _ = a.shape
    for start in range(0, g, BLOCK):
        b = min(BLOCK, g - start)
        x = np.zeros((n, n, b))  # x[i, k] = L[i, k], then y[i, k] = L^-1[i, k]
        y = np.zeros((n, n, b))
        for i in range(n):
            for k in range(i + 1):
                for j in range(b):
                    x[i, k, j] = a[start + j, i, k]
        for k in range(n):
            for m in range(k):
                for i in range(k, n):
                    for j in range(b):
                        x[i, k, j] -= x[i, m, j] * x[k, m, j]
            for j in range(b):
                if x[k, k, j] <= 0:  # like LAPACK: NaN goes on, as NaN
                    return False
                x[k, k, j] = np.sqrt(x[k, k, j])
                y[k, k, j] = 1 / x[k, k, j]
            for i in range(k + 1, n):
                for j in range(b):
                    x[i, k, j] *= y[k, k, j]
        for k in range(n):
            for i in range(k + 1, n):
                for m in range(k, i):
                    for j in range(b):
                        y[i, k, j] -= x[i, m, j] * y[m, k, j]
                for j in range(b):
                    y[i, k, j] *= y[i, i, j]
        for j in range(b):
            for i in range(n):
                for k in range(n):
                    c[start + j, i, k] = x[i, k, j]
                    inv[start + j, i, k] = y[i, k, j]
    return True


@numba.njit(cache=CACHE, error_model="numpy", nogil=True)
def _factor_each(a, c, inv):
    """:func:`_factor` one matrix at a time, in scalar loops (the same operations in
    the same order, so the same results): for stacks too small to share vector loops,
    where a block of one spends its time in loop overhead (a 20 x 20 matrix 34 us, so
    about 4; LAPACK's cholesky and inv 16 us, mostly per-call work)."""
    g, n, _ = a.shape
    for t in range(g):
        x = np.zeros((n, n))
        y = np.zeros((n, n))
        for i in range(n):
            for k in range(i + 1):
                x[i, k] = a[t, i, k]
        for k in range(n):
            for m in range(k):
                for i in range(k, n):
                    x[i, k] -= x[i, m] * x[k, m]
            if x[k, k] <= 0:
                return False
            x[k, k] = np.sqrt(x[k, k])
            y[k, k] = 1 / x[k, k]
            for i in range(k + 1, n):
                x[i, k] *= y[k, k]
        for k in range(n):
            for i in range(k + 1, n):
                for m in range(k, i):
                    y[i, k] -= x[i, m] * y[m, k]
                y[i, k] *= y[i, i]
        c[t] = x
        inv[t] = y
    return True


def reference_cholesky_inverse(a):
    """LAPACK's lower Cholesky factors of the stack ``a`` and their inverses (on one BLAS
    thread for real matrices over 32 x 32, as the rounding's other LAPACK calls)."""
    with lapack_threads(a):
        c = np.linalg.cholesky(a)
        return c, np.linalg.inv(c)


def cholesky_inverse(a):
    """(C, C^-1) per matrix of the Hermitian positive definite stack ``a`` (g, n, n), C
    lower triangular with a = C C^H, like ``np.linalg.cholesky`` (lower triangle read)."""
    if a.dtype != np.float64:
        return reference_cholesky_inverse(a)
    c, inv = np.empty_like(a), np.empty_like(a)
    factor = _factor if a.shape[0] >= MIN_STACK else _factor_each
    args = (np.ascontiguousarray(a), c, inv)
    if not compiler.ready_for(factor, args, args[0].flags.writeable):
        return reference_cholesky_inverse(a)  # while the kernel compiles off the thread
    if not factor(*args):
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    return c, inv
