"""Cholesky factors and their inverses for many small real symmetric positive definite
matrices at once, in Numba.

``np.linalg.cholesky`` and ``np.linalg.inv`` on a stack call LAPACK once per matrix
(``inv`` about 8 us for a 16 x 16 matrix, most of it per-call work).
:func:`shifted_cholesky` factors up to BLOCK matrices side by side, the matrix index
fastest, so each step of the column-by-column Cholesky factorisation and of the
substitution for the inverse is one vectorised loop over the block; stacks of fewer than
MIN_STACK matrices take them one at a time in scalar loops. Both are the textbook
algorithms (backward stable like LAPACK's); each matrix gets its own diagonal shift and
reports whether it was positive definite, with the weight of its inverse (what the
rounding certifies its Cholesky LQ by). :func:`cholesky_inverse` raises ``LinAlgError``
like ``np.linalg.cholesky`` instead. Complex matrices, and matrices over MAX_SIZE x
MAX_SIZE, go to LAPACK's potrf and trtri one at a time (faster there than either
kernel). :func:`pivoted_cholesky` factors semidefinite
matrices (the Gram matrices of rank-deficient bonds) with complete pivoting, one matrix
at a time, and stops at their rank.

>>> import numpy as np
>>> x = np.random.default_rng(0).standard_normal((16, 4, 6))
>>> c, inv = cholesky_inverse(x @ x.transpose(0, 2, 1))
>>> np.allclose(c @ c.transpose(0, 2, 1), x @ x.transpose(0, 2, 1)), np.allclose(inv @ c, np.eye(4))
(True, True)
"""

import numba
import numpy as np
from scipy.linalg import lapack

from ..kernels import compiler
from ..kernels.jit import CACHE
from .lapackcalls import lapack_threads

BLOCK = 128  # matrices factored side by side
MIN_STACK = 16  # smaller stacks go one matrix at a time (_factor_each)
# larger matrices go to LAPACK's potrf and trtri, one at a time: per matrix of 64 x 64,
# 26 us against 39-73 blocked and 58 one at a time; 128 x 128 0.19 ms against 0.39-0.81;
# 512 x 512 5.4 ms against 94 (one thread); at 32 x 32 6.2 us against 5.8-9.7
MAX_SIZE = 32


@numba.njit(cache=CACHE, error_model="numpy", nogil=True)
def _factor(a, shift, c, inv, pd, weight):
    """Lower Cholesky factors of the stack a (g, n, n) (lower triangle read, shift (g,)
    added to each diagonal) into c, their inverses into inv, whether every pivot was
    positive into pd (g,) and the sum of the inverse's squares into weight (g,)."""
    g, n, _ = a.shape
    for start in range(0, g, BLOCK):
        b = min(BLOCK, g - start)
        x = np.zeros((n, n, b))  # x[i, k] = L[i, k], then y[i, k] = L^-1[i, k]
        y = np.zeros((n, n, b))
        good = np.ones(b, np.bool_)
        for i in range(n):
            for k in range(i + 1):
                for j in range(b):
                    x[i, k, j] = a[start + j, i, k]
            for j in range(b):
                x[i, i, j] += shift[start + j]
        for k in range(n):
            for m in range(k):
                for i in range(k, n):
                    for j in range(b):
                        x[i, k, j] -= x[i, m, j] * x[k, m, j]
            for j in range(b):
                if x[k, k, j] <= 0:  # like LAPACK: NaN goes on, as NaN
                    good[j] = False
                    x[k, k, j] = 1.0  # the matrix is flagged; its neighbours go on
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
            total = 0.0
            for i in range(n):
                for k in range(n):
                    c[start + j, i, k] = x[i, k, j]
                    inv[start + j, i, k] = y[i, k, j]
                    total += y[i, k, j] * y[i, k, j]
            pd[start + j], weight[start + j] = good[j], total


@numba.njit(cache=CACHE, error_model="numpy", nogil=True)
def _factor_each(a, shift, c, inv, pd, weight):
    """:func:`_factor` one matrix at a time, in scalar loops (the same operations in
    the same order, so the same results): for stacks too small to share vector loops,
    where a block of one spends its time in loop overhead (a 20 x 20 matrix 34 us, so
    about 4; LAPACK's cholesky and inv 16 us, mostly per-call work)."""
    g, n, _ = a.shape
    for t in range(g):
        x = np.zeros((n, n))
        y = np.zeros((n, n))
        good = True
        for i in range(n):
            for k in range(i + 1):
                x[i, k] = a[t, i, k]
            x[i, i] += shift[t]
        for k in range(n):
            for m in range(k):
                for i in range(k, n):
                    x[i, k] -= x[i, m] * x[k, m]
            if x[k, k] <= 0:
                good = False
                x[k, k] = 1.0
            x[k, k] = np.sqrt(x[k, k])
            y[k, k] = 1 / x[k, k]
            for i in range(k + 1, n):
                x[i, k] *= y[k, k]
        for k in range(n):
            for i in range(k + 1, n):
                for m in range(k, i):
                    y[i, k] -= x[i, m] * y[m, k]
                y[i, k] *= y[i, i]
        total = 0.0
        for i in range(n):
            for k in range(n):
                total += y[i, k] * y[i, k]
        c[t], inv[t], pd[t], weight[t] = x, y, good, total


@numba.njit(cache=CACHE, error_model="numpy", nogil=True)
def _pivoted(a, tol, c, f, k):
    """Pivoted Cholesky of each matrix of the stack a (g, n, n) (lower triangle read),
    stopped where the largest remaining pivot is not above tol (g,): P^T A P = L L^T +
    S with L (n, k) lower trapezoidal; into c (g, n, n) P L (zero past column k), into f
    (g, n, n) F = L11^-1 P_k^T (zero past row k), into k (g,) the ranks."""
    g, n, _ = a.shape
    x = np.empty((n, n))
    y = np.empty((n, n))
    perm = np.empty(n, np.int64)
    for t in range(g):
        for i in range(n):
            perm[i] = i
            for m in range(i + 1):
                x[i, m] = x[m, i] = a[t, i, m]
        r = 0
        while r < n:
            p = r
            for i in range(r + 1, n):
                if x[i, i] > x[p, p]:
                    p = i
            if not x[p, p] > tol[t]:  # NaN stops too
                break
            if p != r:
                perm[r], perm[p] = perm[p], perm[r]
                for m in range(n):
                    x[r, m], x[p, m] = x[p, m], x[r, m]
                for m in range(n):
                    x[m, r], x[m, p] = x[m, p], x[m, r]
            x[r, r] = np.sqrt(x[r, r])
            for i in range(r + 1, n):
                x[i, r] /= x[r, r]
            for i in range(r + 1, n):
                for m in range(r + 1, i + 1):
                    x[i, m] -= x[i, r] * x[m, r]
                    x[m, i] = x[i, m]
            r += 1
        for i in range(r):  # y = L11^-1 by forward substitution
            y[i, i] = 1 / x[i, i]
            for m in range(i):
                total = 0.0
                for q in range(m, i):
                    total += x[i, q] * y[q, m]
                y[i, m] = -total * y[i, i]
        c[t] = 0
        f[t] = 0
        for i in range(n):
            for m in range(min(i + 1, r)):
                c[t, perm[i], m] = x[i, m]
        for i in range(r):
            for m in range(i + 1):
                f[t, i, perm[m]] = y[i, m]
        k[t] = r


def pivoted_cholesky(a, tol):
    """(C, F, k) per matrix of the real symmetric positive semidefinite stack ``a`` (g,
    n, n), by Cholesky factorisation with complete pivoting stopped at the first pivot
    not above ``tol`` (g,): C = P L (n, n, zero past column k), F = L11^-1 P_k^T (zero
    past row k), so F A F^T = I_k and C F A = A on the pivots, with A - C F A the
    Schur complement's weight (at most ``tol`` per remaining pivot). None while the
    kernel compiles off the thread (the caller takes its eigendecomposition instead).

    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((2, 3, 6))
    >>> x = np.concatenate([x, x], axis=1)  # rank 3 of 6
    >>> c, f, k = pivoted_cholesky(x @ x.transpose(0, 2, 1), np.full(2, 1e-10))
    >>> q = f @ x
    >>> eye3 = np.diag([1.0, 1, 1, 0, 0, 0])
    >>> k.tolist(), np.allclose(c @ q, x), np.allclose(q @ q.transpose(0, 2, 1), eye3)
    ([3, 3], True, True)
    """
    g = a.shape[0]
    c, f, k = np.empty_like(a), np.empty_like(a), np.empty(g, dtype=np.int64)
    args = (np.ascontiguousarray(a), np.ascontiguousarray(tol, dtype=np.float64), c, f, k)
    if not compiler.ready_for(_pivoted, args, args[0].flags.writeable):
        return None
    _pivoted(*args)
    return c, f, k


def reference_cholesky_inverse(a):
    """LAPACK's lower Cholesky factors of the stack ``a`` and their inverses (on one BLAS
    thread for real matrices over 32 x 32, as the rounding's other LAPACK calls)."""
    with lapack_threads(a):
        c = np.linalg.cholesky(a)
        return c, np.linalg.inv(c)


def shifted_cholesky(a, shift):
    """(C, C^-1, pd, weight) per matrix of the Hermitian stack ``a`` (g, n, n) plus
    ``shift`` (g,) times the identity: C lower triangular with C C^H = a + shift I (lower
    triangle read), whether that matrix is positive definite (C and C^-1 are meaningless
    where not) and ||C^-1||_F^2. A matrix's result does not depend on the others'.

    >>> a = np.stack([np.eye(2), -np.eye(2)])
    >>> c, inv, pd, weight = shifted_cholesky(a, np.array([3.0, 0.0]))
    >>> c[0].tolist(), pd.tolist(), float(weight[0])
    ([[2.0, 0.0], [0.0, 2.0]], [True, False], 0.5)
    """
    g, n, _ = a.shape
    c, inv = np.empty_like(a), np.empty_like(a)
    pd, weight = np.empty(g, dtype=bool), np.empty(g)
    factor = _factor if g >= MIN_STACK else _factor_each
    args = (np.ascontiguousarray(a), np.ascontiguousarray(shift, dtype=np.float64), c, inv,
            pd, weight)
    if (a.dtype == np.float64 and n <= MAX_SIZE
            and compiler.ready_for(factor, args, args[0].flags.writeable)):
        factor(*args)
    else:  # complex matrices, larger ones, and real ones while the kernel compiles
        _lapack_factors(*args)
    return c, inv, pd, weight


def _lapack_factors(a, shift, c, inv, pd, weight):
    """:func:`shifted_cholesky`'s results by LAPACK's potrf and trtri, one matrix at a
    time (on one BLAS thread for real matrices over 32 x 32)."""
    potrf, trtri = lapack.get_lapack_funcs(("potrf", "trtri"), (a,))
    eye = np.eye(a.shape[1])
    with lapack_threads(a):
        for t in range(len(a)):
            factor, info = potrf(a[t] + shift[t] * eye, lower=1, clean=1)
            pd[t] = info == 0
            weight[t] = np.nan
            if pd[t]:
                c[t] = factor
                inv[t] = trtri(factor, lower=1)[0]
                with np.errstate(over="ignore"):  # a huge inverse weighs inf: not certified
                    weight[t] = (np.abs(inv[t]) ** 2).sum()


def cholesky_inverse(a):
    """(C, C^-1) per matrix of the Hermitian positive definite stack ``a`` (g, n, n), C
    lower triangular with a = C C^H, like ``np.linalg.cholesky`` (lower triangle read;
    it raises ``LinAlgError`` where a matrix is not positive definite)."""
    c, inv, pd, _ = shifted_cholesky(a, np.zeros(a.shape[0]))
    if not pd.all():
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    return c, inv
