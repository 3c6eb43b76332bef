"""LQ and truncated SVD of stacks of matrices (g, rows, cols), certified: a rounding
sweep's bond unfoldings, batched over trains (LQ to orthogonalise, the truncated SVD to
truncate), and :func:`tenalg.linalg.svd`'s one matrix.

Both try a Gram-based fast path first (a GEMM and a tiny Cholesky or ``eigh`` in double
precision cost a fraction of LAPACK's QR or SVD of the tall unfolding, whose cost per
small matrix dominates batched rounding) and keep its result only for the trains where
a rounding-error bound proves it as good as the LAPACK result; the others are factored
by LAPACK (:func:`reference_lq`, :func:`reference_svd`).

**LQ** (:func:`lq`): M = C Q with C the Cholesky factor of M M^H and Q = C^-1 M. The rows
of Q are orthonormal to within ``(err + shift) ||C^-1||_F^2`` (``err`` bounds the rounding
of the Gram matrix, a diagonal ``shift`` of rows u tr(M M^H) keeps the Cholesky
factorisation defined); trains where
that exceeds ``eta`` = sqrt(u) of double precision (1.5e-8), those whose unfolding is
ill-conditioned or rank-deficient, take Householder QR. An orthogonality error eta of the
right parts changes every later singular value by a factor within 1 +- eta, so the rank
decisions and the eps guarantee are unaffected.

:func:`truncated_svd` decides each train's rank from its singular values (see
:func:`keep_ranks`) and returns the kept factors. It first tries the eigendecomposition of
the r x r Gram matrix M^H M (computed in double precision): a GEMM and a small ``eigh``
(:func:`tenalg.linalg.smalleigh.eigh`, many matrices side by side) cost a fraction of the SVD
of the tall unfolding. Eigenvalues of the Gram matrix carry an absolute error of at most
``(rows + r) u tr(M^H M)`` from forming it (taken 4 times over) plus twice the
eigensolver's backward error, at most ``ACCURACY r u tr(M^H M)`` (checked per matrix by
smalleigh); together ``err``. The Gram result is used only for the trains where that error
provably cannot change the outcome:

- the rank decision is robust: with every eigenvalue moved by ``err`` the SVD would keep
  the same rank (both the eps test and the max_rank cap);
- the smallest kept eigenvalue exceeds ``err / eta``, so the kept left factors
  M V Lambda^(-1/2) are orthonormal to ``eta`` = sqrt(u) of double precision (1.5e-8),
  and their product with the right factors Lambda^(1/2) V^H is a best rank-k
  approximation to within k err (Ky Fan);
- where eps decides, the discarded weight plus its error bound, the kept subspace's
  error included (bounded by the gap below the cut), is within the tolerance.

A cut that ``max_rank`` makes needs no gap below it: where the singular values at the cut
(nearly) coincide, which of them are kept is not fixed (LAPACK's choice is as arbitrary),
only how well they approximate (random sums capped at their summands' rank have spectra
dense at the cut: requiring the gap sent them through a Cholesky QR and LAPACK).

Every other train (fine truncations near roundoff, an eps cut inside a cluster,
rank-deficient cases) takes LAPACK's SVD (:func:`reference_svd`), so the eps guarantee
holds either way.

>>> import numpy as np
>>> m = np.random.default_rng(0).standard_normal((3, 8, 4))
>>> left, right, k, tail, used = truncated_svd(m, np.full(3, 1e-12), 2)
>>> k.tolist(), np.allclose(left.transpose(0, 2, 1) @ left, np.eye(2))
([2, 2, 2], True)
"""

import math
import numbers

import numba
import numpy as np

from ..blas import matmul
from ..errors import OperationError
from ..kernels import compiler
from ..kernels.jit import CACHE
from . import householder, smalleigh
from .cholqr import (
    SAFETY,
    accepted,
    certified_cholesky,
    hermitian,
    rank_revealing,
    squares,
)
from .lapackcalls import lapack_threads, unit_roundoff
from .workspace import FRESH

REVEALING = "revealing"  # lq's hint: the next bond's plain Cholesky path would decline


def checked_options(eps, max_rank):
    """``(eps, max_rank)`` of a truncation, checked as every truncation checks them: eps a
    finite real number >= 0 (a float), max_rank None or an integer >= 1 (an int).

    >>> checked_options(0, np.int64(4))
    (0.0, 4)
    """
    if not (isinstance(eps, numbers.Real) and 0 <= eps < math.inf):
        raise OperationError(f"eps must be a finite number >= 0, got {eps!r}")
    return float(eps), checked_max_rank(max_rank)


def checked_max_rank(max_rank):
    """``max_rank`` checked: None, or an integer >= 1 (returned as an int)."""
    if max_rank is not None and (not isinstance(max_rank, int | np.integer)
                                 or isinstance(max_rank, bool) or max_rank < 1):
        raise OperationError(f"max_rank must be an integer >= 1 or None, got {max_rank!r}")
    return None if max_rank is None else int(max_rank)


def keep_ranks(s, delta, max_rank):
    """Per row of ``s`` (descending), the smallest k >= 1 whose tail sum_{i>=k} s_i^2 is at
    most delta^2, capped by ``max_rank``; and that tail."""
    g, m = s.shape
    sq = np.abs(s.astype(np.float64)) ** 2
    tail = np.concatenate([np.cumsum(sq[:, ::-1], axis=1)[:, ::-1], np.zeros((g, 1))], axis=1)
    k = np.argmax(tail[:, 1:] <= (np.asarray(delta, dtype=np.float64) ** 2).reshape(-1, 1),
                  axis=1) + 1
    if max_rank is not None:
        k = np.minimum(k, max_rank)
    return k, tail[np.arange(g), k]


def rank_mask(k):
    return np.arange(k.max()) < k[:, None]


def _cut(u, s, vh, k):
    """Kept factors: u[:, :, :kk] and s vh[:, :kk] with the columns past each k zeroed."""
    mask = rank_mask(k)
    kk = mask.shape[1]
    return u[:, :, :kk] * mask[:, None, :], (s[:, :kk, None] * vh[:, :kk, :]) * mask[:, :, None]


def reference_lq(m):
    """LQ by LAPACK's Householder QR of M^H: (l (g, rows, k), q (g, k, cols))."""
    with lapack_threads(m):
        q, r = householder.qr(hermitian(m))
    return hermitian(r), hermitian(q)


def lq(m, gram=True, tol=None):
    """M = L Q per train of ``m`` (g, rows, cols) with the rows of Q orthonormal, Q given
    as F @ B: the Cholesky path returns F = C^-1 and B = M (in double precision; Q is
    formed in single precision), LAPACK's QR F = I and B = Q. Callers that multiply Q
    by a small matrix from the left multiply by F first and skip forming Q. The last
    result says whether a sweep should try the Cholesky path at its next bond: whether
    it served any train here, or M is less than twice as wide as tall (the last core of
    a sum, l > n: 60 x 32 for two trains of rank 30 and n = 32, where giving up made
    every later bond of a sweep take LAPACK's QR, 2.5x slower in all; or 120 x 128 for
    n = 128, r = 60, too ill-conditioned to certify where the interior bonds are not);
    ``gram=False`` skips it (a sweep stops trying after a wide bond where it served
    none). With ``tol`` (relative, per train or for all), the Cholesky path also serves
    only where its factorisation is that accurate: L F B = M to about u cond(C) ||M||,
    which the orthogonality certificate does not bound (a float64 sum whose unfoldings
    had cond 4e5 rounded to 4e-12 at eps 1e-12); never finer than 1000 u of ``m``'s
    dtype, the floor the sweeps resolve.
    Where the plain Cholesky factorisation served no train and every train was
    rank-deficient, it is REVEALING: the next bond goes straight to the rank-revealing
    path (every bond of an exact X + X is rank-deficient).

    >>> import numpy as np
    >>> m = np.random.default_rng(0).standard_normal((2, 3, 8))
    >>> l, f, b, used = lq(m)
    >>> q = f @ b
    >>> np.allclose(l @ q, m), np.allclose(q @ q.transpose(0, 2, 1), np.eye(3))
    (True, True)
    """
    g, rows, cols = m.shape
    if gram and rows <= cols:
        wide = np.result_type(m.dtype, np.float64)
        x = m.astype(wide, copy=False)
        products = matmul(x, hermitian(x))
        trace = np.trace(products, axis1=1, axis2=2).real
        err = SAFETY * (rows + cols) * unit_roundoff(wide) * trace
        c = inv = None
        plain = np.zeros(g, dtype=bool)
        if gram != REVEALING:
            c, inv, plain = certified_cholesky(products, trace, err, x, accepted(m.dtype))
        ok, width = plain, rows
        if not ok.all():
            c, inv, ok, ranks = rank_revealing(x, products, err, c, inv, ok, m.dtype)
            width = int(ranks.max()) if ok.all() else rows
        if tol is not None and ok.any():
            accuracy = SAFETY * unit_roundoff(wide) * np.sqrt(squares(c) * squares(inv))
            ok = ok & (accuracy <= np.maximum(tol, 1e3 * unit_roundoff(m.dtype)))
            width = width if ok.all() else rows
        if ok.any():
            l, f, b = _finish(m, c, inv, ok, width)
            deficient = not plain.any() and width < rows
            return l, f, b, REVEALING if deficient else True
    l, q = reference_lq(m)
    eye = np.broadcast_to(np.eye(q.shape[1], dtype=m.dtype), (g, q.shape[1], q.shape[1]))
    return l, eye, q, bool(gram) and cols < 2 * rows


def _finish(m, c, inv, ok, width):
    """(L, F, B) of :func:`lq` from the Cholesky factors, LAPACK's QR where not ``ok``.

    Only the first ``width`` columns of L are kept, with their rows of F (or B): the
    largest rank of the stack that the rank-revealing path
    (:func:`~tenalg.linalg.cholqr.rank_revealing`) found, past which every L is zero,
    so the next bond and the truncation sweep work on those ranks: 512 packed X + X
    (rank 8 -> 16) then decompose 8 x 8 Gram matrices, not 16 x 16 ones of rank 8."""
    c, inv = c[:, :, :width], inv[:, :width]
    l = c.astype(m.dtype, copy=False)
    if m.dtype == inv.dtype:
        f, b = inv, (m if ok.all() else m.copy())
    else:
        k = inv.shape[1]
        f = np.broadcast_to(np.eye(k, dtype=m.dtype), (m.shape[0], k, k)).copy()
        b = matmul(inv, m.astype(inv.dtype)).astype(m.dtype)
    if not ok.all():
        bad = ~ok
        l[bad], b[bad] = reference_lq(m[bad])
        f[bad] = np.eye(m.shape[1])
    return l, f, b


def reference_svd(m, delta, max_rank):
    """The truncation by LAPACK's SVD: (left (g, rows, kk), right (g, kk, r), k, tail)."""
    with lapack_threads(m):
        u, s, vh = np.linalg.svd(m, full_matrices=False)
    k, tail = keep_ranks(s, delta, max_rank)
    return (*_cut(u, s, vh, k), k, tail)


def _gram(m, delta, max_rank, work=FRESH, key="left"):
    """The Gram truncation of every train, the mask of the trains where it is certain
    (the left factors in ``work``'s buffer ``key``) and the Gram matrices."""
    g, rows, r = m.shape
    wide = np.result_type(m.dtype, np.float64)
    x = m.astype(wide, copy=False)
    products = matmul(hermitian(x), x)
    lam, v = smalleigh.eigh(products)  # ascending
    p = min(rows, r)
    eta = accepted(m.dtype)
    d2 = np.asarray(delta, dtype=np.float64) ** 2
    if d2.shape != (g,):
        d2 = np.full(g, d2)
    factor = (SAFETY * (rows + r) + 2 * smalleigh.ACCURACY * r) * unit_roundoff(wide)
    s, err, k, tail, ok = _certify(lam, d2, factor, eta, p, p + 1 if max_rank is None
                                   else max_rank)
    if not ok.all():
        _prove_by_residual(x, lam[:, ::-1][:, :p], v[:, :, ::-1][:, :, :p], err, eta, d2,
                           max_rank, k, tail, ok)
    scaled, right = _factors(s, v, k)
    left = matmul(x, scaled, out=work.array(key, (g, rows, scaled.shape[2]), wide))
    return (left.astype(m.dtype, copy=False), right.astype(m.dtype, copy=False), k, tail, ok,
            products)


def _factors(s, v, k):
    """The kept Gram factors of each train: V_k diag(1 / s) (g, r, kk), which M
    multiplies into the left factor, and diag(s) V_k^H (g, kk, r), the right one (columns
    past a train's k zero; ``v`` holds ascending eigenvectors, ``s`` descending singular
    values). One Numba pass (:func:`_factors_kernel`); these NumPy operations (the
    kernel's twin while it compiles) cost a small train's bond about 15 us."""
    kk = int(k.max())
    g, r, _ = v.shape
    scaled = np.empty((g, r, kk), dtype=v.dtype)
    right = np.empty((g, kk, r), dtype=v.dtype)
    args = (s, v, k, scaled, right)
    if compiler.ready_for(_factors_kernel, args, (v.dtype, v.flags.c_contiguous)):
        _factors_kernel(*args)
        return scaled, right
    mask = rank_mask(k)
    vk = v[:, :, ::-1][:, :, :kk]
    sk = s[:, :kk] * mask
    return (vk * np.where(sk > 0, 1 / np.where(sk > 0, sk, 1), 0)[:, None, :],
            sk[:, :, None] * hermitian(vk))


@numba.njit(cache=CACHE, nogil=True)
def _factors_kernel(s, v, k, scaled, right):
    """:func:`_factors` into ``scaled`` and ``right`` (the same operations, so the same
    values)."""
    g, r, _ = v.shape
    for t in range(g):
        for j in range(scaled.shape[2]):
            sj = s[t, j] if j < k[t] else 0.0
            inv = 1 / sj if sj > 0 else 0.0
            for i in range(r):
                vij = v[t, i, r - 1 - j]
                scaled[t, i, j] = vij * inv
                right[t, j, i] = sj * np.conj(vij)


def _certify_ready():
    """Whether :func:`_certify` is compiled (else its compilation is queued, and the bond
    goes to LAPACK meanwhile: :mod:`tenalg.kernels.compiler`)."""
    return compiler.ready(_certify, _CERTIFY_SIGNATURE, key="signature")


@numba.njit(cache=CACHE, nogil=True)
def _certify(lam, d2, factor, eta, p, cap):
    """Per train (a row of the ascending eigenvalues ``lam`` of M^H M, of which the
    largest p count): the singular values s (descending), the error bound err = factor
    tr, the rank k kept for delta^2 = ``d2`` and ``cap`` (max_rank; p + 1 for none), the
    tail past k, and whether the eigenvalues prove the cut: LAPACK's rank (robust_lower:
    k - 1 would not do; capped, at the cap, or robust_upper: k suffices, the error of
    the kept subspace, bounded by the gap below it, included) with orthonormal left
    factors. One pass per train: the same conditions in NumPy cost a single train's bond
    about 50 us in per-call work."""
    g, r = lam.shape
    s = np.empty((g, p))
    err, tail = np.empty(g), np.empty(g)
    k = np.empty(g, np.int64)
    ok = np.empty(g, np.bool_)
    tails = np.zeros(p + 1)
    for t in range(g):
        trace = 0.0
        for i in range(p):
            s[t, i] = math.sqrt(max(lam[t, r - 1 - i], 0.0))
            trace += max(lam[t, r - 1 - i], 0.0)
        for i in range(p - 1, -1, -1):
            tails[i] = tails[i + 1] + s[t, i] * s[t, i]
        kt = 1  # the first k with tails[k] <= d2 (keep_ranks; 1 where none, d2 NaN)
        for j in range(1, p + 1):
            if tails[j] <= d2[t]:
                kt = j
                break
        kt = min(kt, cap)
        e = factor * trace
        lam_k = max(lam[t, r - kt], 0.0)
        lam_next = max(lam[t, r - 1 - kt], 0.0) if kt < p else 0.0
        rest = tails[kt]
        robust_lower = kt == 1 or rest + lam_k - (p - kt + 1) * e > d2[t]
        capped = rest - (p - kt) * e > d2[t] or kt == cap
        gap = lam_k - lam_next - 2 * e
        theta = e / gap if gap > e else 1.0
        robust_upper = rest + (p - kt) * e + theta * theta * trace <= d2[t]
        ok[t] = lam_k >= e / eta and robust_lower and (capped or robust_upper)
        err[t], k[t], tail[t] = e, kt, rest
    return s, err, k, tail, ok


def _prove_by_residual(x, lam, v, err, eta, d2, max_rank, k, tail, ok):
    """Where the eigenvalues alone prove no cut (singular values at the Gram matrix's
    noise level might matter: eps below sqrt(err / tr), e.g. an exact X + X at eps =
    1e-8), take k from the eigenvalues above ``err`` and prove it with the residual
    X (I - V_k V_k^H), formed explicitly: within delta (plus its rounding bound,
    (k^1.5 + 1) u ||X||_F, times SAFETY; the factors kept multiply to X V_k V_k^H within
    the same order of rounding), k suffices; the eigenvalues from the k-th on, each
    lowered by ``err``, above delta^2, k - 1 would not. Updates ``k``, ``tail`` (the
    residual's weight) and ``ok`` (delta^2 per train in ``d2``) in place for the trains
    so proven. Rounding X + X (d 20, n 32, r 30, eps 1e-8), whose cuts all took LAPACK's
    SVD: 65-73 -> 50-53 ms."""
    todo = np.flatnonzero(~ok)
    lam, v, e, dd = lam[todo], v[todo], err[todo], d2[todo]
    k2, clean, needed = noise_rank(lam, e, dd)
    g = lam.shape[0]
    sq = np.concatenate([clean, np.zeros((g, 1))], axis=1)
    lam_k, lam_next = sq[np.arange(g), k2 - 1], sq[np.arange(g), k2]
    candidate = (lam_k >= e / eta) & (lam_k - lam_next >= e / eta + 2 * e) & needed
    if max_rank is not None:
        candidate &= k2 <= max_rank
    if not candidate.any():
        return
    todo, k2, dd = todo[candidate], k2[candidate], dd[candidate]
    mask = rank_mask(k2)
    vk = v[candidate][:, :, : mask.shape[1]] * mask[:, None, :]
    xs = x[todo]
    weight, proven = residual_within(xs - matmul(matmul(xs, vk), hermitian(vk)), xs,
                                     k2, np.sqrt(dd))
    todo = todo[proven]
    k[todo], tail[todo], ok[todo] = k2[proven], weight[proven], True


def noise_rank(lam, err, d2):
    """Per row of descending Gram eigenvalues ``lam`` (g, p) with error bound ``err``
    (g,): the rank k kept for delta^2 = ``d2`` (g,) by the eigenvalues above ``err`` (the
    rest are rounding noise, taken as zeros: ``clean``), and whether k - 1 provably would
    not do (the eigenvalues from the k-th on, each lowered by ``err``, outweigh d2)."""
    clean = np.where(lam > err[:, None], lam, 0.0)
    k = keep_ranks(np.sqrt(clean), np.sqrt(d2), None)[0]
    weight_from = np.maximum(lam - err[:, None], 0)[:, ::-1].cumsum(axis=1)[:, ::-1]
    return k, clean, (k == 1) | (weight_from[np.arange(len(k)), k - 1] > d2)


def residual_within(residual, x, k, delta):
    """Per matrix of the stack ``residual``, formed explicitly from ``x`` and a rank-k
    factorisation of it: its weight ||residual||_F^2, and whether its norm plus the
    rounding bound of forming it, (k^1.5 + 1) u ||x||_F times SAFETY (the elementwise
    GEMM bound in the Frobenius norm), is within ``delta`` (a proof that k suffices)."""
    weight = squares(residual)
    bound = SAFETY * (k * np.sqrt(k) + 1) * unit_roundoff(x.dtype) * np.sqrt(squares(x))
    return weight, np.sqrt(weight) + bound <= delta


def truncated_svd(m, delta, max_rank, gram=True, work=FRESH, key="left"):
    """Per train of ``m`` (g, rows, r): the rank k kept for tolerance ``delta`` (g,) and
    ``max_rank``, the kept factors left (g, rows, kk) and right (g, kk, r) with left @ right
    the truncation (columns past each train's k are zero), the discarded weight
    sum of s_i^2 past k, and whether a Gram-based path served any train or should be tried
    at the next bond (``gram=False`` skips them). The Gram path writes the left factors
    into ``work``'s buffer ``key``.

    Tall trains (rows >= 2 r) whose cut the Gram eigenvalues cannot certify (an eps cut
    inside a dense spectrum: 15360 x 120 unfoldings resolve eigenvalue gaps of 1e-3 tr)
    take :func:`_qr_svd`, the SVD of the Cholesky factor of the same Gram matrix, before
    LAPACK's SVD of the whole unfolding (:func:`reference_svd`)."""
    if not gram or not _certify_ready():
        return (*reference_svd(m, delta, max_rank), False)
    left, right, k, tail, ok, products = _gram(m, delta, max_rank, work, key)
    if ok.all():
        return left, right, k, tail, True
    good = np.flatnonzero(ok)
    parts = [(good, left[good], right[good])]
    bad = np.flatnonzero(~ok)
    delta = np.broadcast_to(delta, k.shape)
    if m.shape[1] >= 2 * m.shape[2]:  # (R as large as M: its SVD costs as much)
        l2, r2, k2, t2, served = _qr_svd(m[bad], products[bad], delta[bad], max_rank)
        parts.append((bad[served], l2[served], r2[served]))
        k[bad[served]], tail[bad[served]] = k2[served], t2[served]
        bad = bad[~served]
    if len(bad):
        l3, r3, k[bad], tail[bad] = reference_svd(m[bad], delta[bad], max_rank)
        parts.append((bad, l3, r3))
    if len(bad) == len(ok):  # LAPACK served every train: try again only past a square
        return (*_merged(m, k, parts), tail, m.shape[1] < 2 * m.shape[2])
    return (*_merged(m, k, parts), tail, True)


def _merged(m, k, parts):
    """(left, right, k) of the stack from ``parts``: (trains, their left, their right)."""
    kk = int(k.max())
    left = np.zeros(m.shape[:2] + (kk,), dtype=m.dtype)
    right = np.zeros((m.shape[0], kk, m.shape[2]), dtype=m.dtype)
    for trains, l, r in parts:
        w = min(l.shape[2], kk)
        left[trains, :, :w] = l[:, :, :w]
        right[trains, :w] = r[:, :w]
    return left, right, k


def _qr_svd(m, products, delta, max_rank):
    """The truncation of each tall M (rows >= r) from its Gram matrix M^H M (``products``,
    in double precision): Cholesky R^H R = M^H M + shift
    (:func:`~tenalg.linalg.cholqr.certified_cholesky`, with its second pass), so M = Q R
    with Q = M R^-1 orthonormal to eta where certified; then
    LAPACK's SVD of the small R =
    U S V^H: left = M (R^-1 U_k), right = S_k V_k^H. Q's orthogonality error eta changes
    each singular value by a factor within 1 +- eta (as the LQ's, see :func:`lq`), so the
    rank and tail are LAPACK's to that accuracy. Returns (left, right, k, tail, served)."""
    trace = np.trace(products, axis1=1, axis2=2).real
    rows, r = m.shape[1], m.shape[2]
    err = SAFETY * (rows + r) * unit_roundoff(products.dtype) * trace
    wide = m.astype(products.dtype, copy=False)
    c, inv, served = certified_cholesky(products, trace, err, hermitian(wide),
                                       accepted(m.dtype))
    with lapack_threads(c):
        u, s, vh = np.linalg.svd(hermitian(c))  # R = C^H
    k, tail = keep_ranks(s, delta, max_rank)
    cut_u, right = _cut(u, s, vh, k)
    left = matmul(wide, matmul(hermitian(inv), cut_u))
    return left.astype(m.dtype, copy=False), right.astype(m.dtype, copy=False), k, tail, served


# what _gram passes: eigenvalues (g, r), squared tolerances (g,), two floats, p and the cap
_CERTIFY_SIGNATURE = (numba.float64[:, ::1], numba.float64[::1], numba.float64,
                      numba.float64, numba.int64, numba.int64)
