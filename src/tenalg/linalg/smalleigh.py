"""Eigendecompositions of many small real symmetric matrices at once: cyclic Jacobi in Numba.

``np.linalg.eigh`` on a stack calls LAPACK once per matrix, about 30 us for a 16 x 16
matrix, most of it per-call work. :func:`eigh` rotates up to BLOCK matrices side by side
instead: a block is stored with the matrix index fastest, so each rotation (p, q), whose
angle every matrix chooses for itself, updates rows p and q of all of them in vectorised
loops. Each matrix is first scaled by a power of two (exactly) to a largest modulus
below 1; it skips the rotation where ``a_pq^2 <= u^2 |a_pp a_qq|`` (the rotation would
change nothing at working precision; it is then the identity, exactly), and a block stops
after a sweep in which no matrix rotated, so a matrix's result does not depend on the
matrices it shared a block with.

Every result is checked: its backward error ``||A V - V diag(w)||_F + ||V^T V - I||_F
||A||_F`` must be at most ``ACCURACY n u ||A||_F`` (Jacobi measures 2-5 n u ||A||_F on
random matrices, LAPACK 1-4). Matrices that fail or are not finite, complex matrices, and
stacks of fewer than MIN_STACK matrices or of matrices larger than MAX_SIZE (where LAPACK
is faster) are decomposed by LAPACK (:func:`reference_eigh`).

>>> import numpy as np
>>> a = np.random.default_rng(0).standard_normal((16, 5, 5))
>>> a = a + a.transpose(0, 2, 1)
>>> w, v = eigh(a)
>>> np.allclose(w, np.linalg.eigvalsh(a)), np.allclose((v * w[:, None]) @ v.transpose(0, 2, 1), a)
(True, True)
"""

import math

import numba
import numpy as np
from scipy.linalg import lapack

from ..kernels import compiler
from ..kernels.jit import JIT, KERNEL
from .lapackcalls import lapack_threads

BLOCK = 128  # matrices rotated side by side
MAX_SWEEPS = 30
MIN_STACK = 16  # smaller stacks go to LAPACK (too few matrices to share the loops)
MAX_SIZE = 32  # larger matrices go to LAPACK (Jacobi's work grows like n^3 per sweep)
ACCURACY = 8  # accepted backward error, in units of n u ||A||_F
_U = float(np.finfo(np.float64).eps)
# the options (JIT, KERNEL) have no fastmath "contract": a loop's vector body and its
# scalar remainder would fuse multiply-adds differently (seen in cached builds), and a
# matrix's result would then depend on its position in the block


@numba.njit(**JIT)
def _angles(a, p, q, c, s):
    """Rotation (c, s) of each matrix of the block a for the pair (p, q), and the update
    of its entries (p, p), (q, q), (p, q). Returns how many matrices rotate."""
    count = 0
    for j in range(c.size):
        x, dp, dq = a[p, q, j], a[p, p, j], a[q, q, j]
        skip = x * x <= _U * _U * abs(dp * dq)
        tau = dq - dp
        t = 2 * x / (abs(tau) + np.sqrt(tau * tau + 4 * x * x))
        t = 0.0 if skip else (t if tau >= 0 else -t)
        cj = 1 / np.sqrt(1 + t * t)
        c[j], s[j] = cj, t * cj
        a[p, p, j], a[q, q, j] = dp - t * x, dq + t * x
        a[p, q, j] = x if skip else 0.0
        count += 0 if skip else 1
    return count


@numba.njit(**JIT)
def _sweeps(a, vt):
    """Cyclic Jacobi on the block a (n, n, b) in place, its upper triangle read and kept
    (a_ik at [min(i, k), max(i, k)]); the rows of vt (n, n, b), the identity on entry,
    become the eigenvectors."""
    n, _, b = a.shape
    c, s = np.empty(b), np.empty(b)
    for _ in range(MAX_SWEEPS):
        rotated = 0
        for p in range(n - 1):
            for q in range(p + 1, n):
                count = _angles(a, p, q, c, s)
                if count == 0:
                    continue
                rotated += count
                for k in range(n):
                    if k != p and k != q:
                        i, l, m, r = min(k, p), max(k, p), min(k, q), max(k, q)
                        for j in range(b):
                            x, y = a[i, l, j], a[m, r, j]
                            a[i, l, j] = c[j] * x - s[j] * y
                            a[m, r, j] = s[j] * x + c[j] * y
                    for j in range(b):
                        x, y = vt[p, k, j], vt[q, k, j]
                        vt[p, k, j] = c[j] * x - s[j] * y
                        vt[q, k, j] = s[j] * x + c[j] * y
        if rotated == 0:
            return


@numba.njit(**JIT)
def _load(a, start, x):
    """Block x (n, n, b) <- the lower triangles of a[start : start + b], each scaled by a
    power of two to a largest modulus below 1, kept in x's upper triangle. Returns the
    exponents and whether each matrix is finite (a matrix that is not becomes zero)."""
    n, _, b = x.shape
    exponent = np.zeros(b, dtype=np.int64)
    finite = np.ones(b, dtype=np.bool_)
    x[:] = 0.0
    for j in range(b):
        big = 0.0
        for i in range(n):
            for k in range(i + 1):
                big = max(big, abs(a[start + j, i, k]))
        if not np.isfinite(big):
            finite[j] = False
            continue
        exponent[j] = math.frexp(big)[1]
        scale = math.ldexp(1.0, -exponent[j])
        for i in range(n):
            for k in range(i + 1):
                x[k, i, j] = a[start + j, i, k] * scale
    return exponent, finite


@numba.njit(**JIT)
def _backward_errors(a, x, vt):
    """Per matrix of the block: ||A V - V diag(w)||_F + ||V^T V - I||_F ||A||_F, for the
    symmetric A given by the upper triangle of ``a`` and w the diagonal of ``x``,
    relative to n u ||A||_F."""
    n, _, b = a.shape
    res, orth, norm = np.zeros(b), np.zeros(b), np.zeros(b)
    r, o = np.empty(b), np.empty(b)
    for i in range(n):
        for k in range(n):
            for j in range(b):
                r[j] = -vt[k, i, j] * x[k, k, j]
                o[j] = -1.0 if i == k else 0.0
            for m in range(n):
                lo, hi = min(i, m), max(i, m)
                for j in range(b):
                    r[j] += a[lo, hi, j] * vt[k, m, j]
                    o[j] += vt[i, m, j] * vt[k, m, j]
            lo, hi = min(i, k), max(i, k)
            for j in range(b):
                res[j] += r[j] * r[j]
                orth[j] += o[j] * o[j]
                norm[j] += a[lo, hi, j] * a[lo, hi, j]
    norm = np.sqrt(norm)
    return (np.sqrt(res) + np.sqrt(orth) * norm) / (n * _U * np.where(norm > 0, norm, 1.0))


@numba.njit(**KERNEL)
def _jacobi(a, w, v, ok):
    """Eigenvalues (ascending) into w (g, n), vectors into v (g, n, n) and whether each
    passed the backward-error check into ok (g,), for the symmetric stack a (g, n, n)."""
    g, n, _ = a.shape
    for start in range(0, g, BLOCK):
        b = min(BLOCK, g - start)
        x = np.empty((n, n, b))
        exponent, finite = _load(a, start, x)
        x0 = x.copy()
        vt = np.zeros((n, n, b))
        for i in range(n):
            vt[i, i, :] = 1.0
        _sweeps(x, vt)
        good = finite & (_backward_errors(x0, x, vt) <= ACCURACY)
        for j in range(b):
            m = start + j
            order = np.argsort(np.array([x[i, i, j] for i in range(n)]))
            for i in range(n):
                w[m, i] = math.ldexp(x[order[i], order[i], j], exponent[j])
                for k in range(n):
                    v[m, k, i] = vt[order[i], k, j]
            ok[m] = good[j]


def reference_eigh(a):
    """LAPACK's eigendecomposition of each matrix of the stack (``np.linalg.eigh``), on
    one BLAS thread for real matrices over 32 x 32 (:func:`.dense.lapack_threads`). A
    single real matrix calls LAPACK's dsyevd (NumPy's driver) directly: NumPy's checks
    and error state cost 5 of the 35 us of a 20 x 20 matrix, 9 times per rounding of a
    small train."""
    with lapack_threads(a):
        if a.ndim == 3 and a.shape[0] == 1 and a.shape[1] and a.dtype == np.float64:
            w, v, info = lapack.dsyevd(a[0], lower=1)
            if info == 0:
                return w[None], v[None]
        return np.linalg.eigh(a)


def _layout_key(a):
    """What of ``a`` its Numba type depends on besides the dtype (float64 here)."""
    return a.ndim, a.flags.c_contiguous, a.flags.f_contiguous, a.flags.writeable


def eigh(a):
    """(w (g, n) ascending, v (g, n, n)) with a[i] = v[i] diag(w[i]) v[i]^H, like
    ``np.linalg.eigh`` on the Hermitian stack ``a`` (g, n, n), whose lower triangle is read."""
    g, n, _ = a.shape
    if a.dtype != np.float64 or n > MAX_SIZE or g < MIN_STACK:
        return reference_eigh(a)
    w, v, ok = np.empty((g, n)), np.empty((g, n, n)), np.empty(g, dtype=np.bool_)
    if not compiler.ready_for(_jacobi, (a, w, v, ok), _layout_key(a)):
        return reference_eigh(a)  # while the kernel compiles off the thread
    _jacobi(a, w, v, ok)
    if not ok.all():
        w[~ok], v[~ok] = reference_eigh(a[~ok])
    return w, v
