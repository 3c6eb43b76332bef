"""Certified Cholesky QR of stacks of wide matrices M (g, k, n): M = C Q with Q = C^-1 M,
kept per matrix only where a rounding-error bound proves the rows of Q orthonormal to
eta = sqrt(u) of double precision (:mod:`tenalg.linalg.truncation` factors its bonds
with it, LAPACK's Householder QR taking what it does not certify).

- :func:`certified_cholesky`: C from the Gram matrix M M^H (computed in double precision,
  shifted to stay positive definite), certified a priori by (err + shift) ||C^-1||_F^2,
  else after a second pass (:func:`second_pass`, CholeskyQR2).
- :func:`rank_revealing`: for rank-deficient M (every bond of an exact X + X), pivoted
  Cholesky stopped at the rank (:func:`~tenalg.linalg.smallchol.pivoted_cholesky`),
  else the eigendecomposition, each kept where the dropped residual is at Householder
  QR's roundoff; L and F are zero past each matrix's rank.

>>> import numpy as np
>>> m = np.random.default_rng(0).standard_normal((2, 3, 40))
>>> gram = m @ m.transpose(0, 2, 1)
>>> trace = np.trace(gram, axis1=1, axis2=2)
>>> c, inv, ok = certified_cholesky(gram, trace, SAFETY * 43 * 2.2e-16 * trace, m)
>>> q = inv @ m
>>> ok.tolist(), np.allclose(q @ q.transpose(0, 2, 1), np.eye(3)), np.allclose(c @ q, m)
([True, True], True, True)
"""

import numpy as np

from ..blas import matmul
from . import smallchol, smalleigh
from .lapackcalls import unit_roundoff

ETA_POWER = 0.5  # a result is accepted when accurate to u ** ETA_POWER (double)
ETA = unit_roundoff(np.float64) ** ETA_POWER
SAFETY = 4  # factor on the rounding-error bounds (Gram matrix and eigh/Cholesky)
# the smallest M whose rank-revealing LQ is factored again below err / eta: rounding
# a + (a + 1e-2 c) at eps 1e-3, (6, 128, 40) 154 -> 55 ms and (6, 64, 30) 34 -> 21 ms with
# it, but (10, 16, 10), 22 x 192 unfoldings, 3.0 -> 4.1 ms (LAPACK's QR is cheap there)
REDO_SIZE = 2**14


def hermitian(x):
    """The conjugate transpose of each matrix of the stack ``x`` (a view for real data)."""
    return (x.conj() if x.dtype.kind == "c" else x).transpose(0, 2, 1)


def accepted(dtype):
    """The orthonormality error a factor stored in ``dtype`` is accepted with: ETA, or
    the unit roundoff of ``dtype`` where larger (a float32 factor is no more orthonormal
    than its storage; asking 1e-8 of it sent the weak directions of a float32
    a + (a + 1e-2 c) to LAPACK at every bond, 1.9x teneva's time)."""
    return max(ETA, unit_roundoff(dtype))


def certified_cholesky(products, trace, err, x, eta=ETA):
    """(C, C^-1, ok) of the Cholesky LQ (:func:`~tenalg.linalg.truncation.lq`) from the
    Gram matrices M M^H of the wide ``x`` (g, k, n), shifted by k u tr (4 err where that
    is not positive definite): ``ok`` where the rows of C^-1 M are orthonormal to ``eta``, by
    the a-priori bound (err + shift) ||C^-1||_F^2, else after a second pass
    (:func:`second_pass`)."""
    rows = products.shape[1]
    u = unit_roundoff(products.dtype)
    tiny = np.finfo(np.float64).tiny
    shift = rows * u * trace + tiny
    c, inv, pd, weight = smallchol.shifted_cholesky(products, shift)
    if not pd.all():
        bad = np.flatnonzero(~pd)
        shift[bad] = 4 * err[bad] + tiny
        c[bad], inv[bad], pd[bad], weight[bad] = smallchol.shifted_cholesky(products[bad],
                                                                            shift[bad])
    bound = (err + shift) * weight  # of the rows of C^-1 M's orthogonality error
    return c, inv, _certify(x, c, inv, bound, eta, pd)


def _certify(x, c, inv, bound, eta, usable):
    """Whether each factor of ``usable`` makes the rows of C^-1 M orthonormal to ``eta``:
    by the a-priori ``bound``, else, where that stays below 1, by a second pass
    (:func:`second_pass`, whose factors replace those in ``c`` and ``inv``).  From 1 on,
    C^-1 M may be rank-deficient (every bond of an exact X + X) and no second pass can
    certify it."""
    ok = usable & (bound <= eta)  # False where NaN
    again = np.flatnonzero(usable & ~ok & (bound < 1))
    if len(again):
        c[again], inv[again], ok[again] = second_pass(x[again], c[again], inv[again], eta)
    return ok


def second_pass(x, c1, inv1, eta=ETA):
    """CholeskyQR2 for the trains whose first factor C1 the a-priori bound could not
    certify: Q1 = C1^-1 M formed, G2 = Q1 Q1^H = C2 C2^H; C = C1 C2 and C^-1 = C2^-1 C1^-1.

    The a-priori bound multiplies a Frobenius error of the Gram matrix by ||C^-1||_F^2,
    so it cannot pass for a k x n unfolding with k^2 (k + n) u above eta whatever its
    conditioning (k = 120, n = 15360: 2e-7 > 1.5e-8). Here G2 is close to I, and the
    rows of C^-1 M are orthonormal to e2 / (1 - delta - e2), with delta = ||G2 - I||_F
    and e2 bounding G2's rounding ((k + n) u tr G2), that of forming Q1 (2 k u
    ||C1^-1||_F ||M||_F ||Q1||_F) and the Cholesky factorisation's (within the former),
    SAFETY times: certified where that is at most eta. Rows of C1^-1 that are zero (a
    pivoted factor past its rank) stay zero. Returns (C, C^-1, ok)."""
    k, n = x.shape[1], x.shape[2]
    u = unit_roundoff(x.dtype)
    q1 = matmul(inv1, x)
    g2 = matmul(q1, hermitian(q1))
    # rows of C1^-1 that are zero (past a pivoted factor's rank) stay zero: identity there
    unused = ~inv1.any(axis=2)
    g2[:, np.arange(k), np.arange(k)] += unused
    t2 = np.trace(g2, axis1=1, axis2=2).real
    delta = np.sqrt(squares(g2 - np.eye(k)))
    c2, inv2, pd, _ = smallchol.shifted_cholesky(g2, np.zeros(len(x)))
    with np.errstate(invalid="ignore", over="ignore"):  # NaN or inf: not certified
        e2 = SAFETY * ((k + n) * u * t2
                       + 2 * k * u * np.sqrt(squares(inv1) * squares(x) * t2))
        ok = pd & (delta + e2 < 0.5) & (e2 <= eta * (1 - delta - e2))
    return matmul(c1, c2), matmul(inv2, inv1), ok


def rank_revealing(x, products, err, c, inv, ok, storage=None):
    """The LQ of the trains where the Cholesky path declined (rank-deficient M, as every
    bond of an exact X + X), rank-revealing: L (rows, k) and F (k, rows) zero past each
    train's rank k, with the rows of F M orthonormal to :func:`accepted` of the result's
    ``storage`` dtype (by default x's), kept where the residual M - L F M, formed
    explicitly, is at the roundoff of a Householder QR in that storage, row by row
    (:func:`_negligible`): dropping it changes M no more than LAPACK's QR would. By pivoted Cholesky
    (:func:`_pivoted_lq`), else (complex data, or while its kernel compiles) by the
    eigendecomposition (:func:`_eigh_lq`). Fills ``c``, ``inv`` and ``ok`` (fresh where
    None) for those trains, and returns them with each train's rank (rows for the
    others); the stack stays batched instead of one LAPACK QR per matrix (issue 31: 512
    packed X + X spent a third of their rounding there). L is not triangular:
    :func:`~tenalg.tt.linalg.batched.times_lower` checks."""
    g, rows, _ = x.shape
    ranks = np.full(g, rows)
    todo = np.flatnonzero(~ok)
    every = len(todo) == g  # (exact X + X: every train) no copies of the stack
    xs, gram, e = (x, products, err) if every else (x[todo], products[todo], err[todo])
    storage = x.dtype if storage is None else storage
    eta, roundoff = accepted(storage), unit_roundoff(storage)
    found = _pivoted_lq(xs, gram, e, eta, roundoff) if x.dtype == np.float64 else None
    l, f, good, k = _eigh_lq(xs, gram, e, eta, roundoff) if found is None else found
    if not good.any():
        return c, inv, ok, ranks
    if c is None:
        c, inv = np.zeros(products.shape, x.dtype), np.zeros(products.shape, x.dtype)
    rows_ = todo[good]
    c[rows_], inv[rows_], ranks[rows_] = l[good], f[good], k[good]
    ok = ok.copy()
    ok[rows_] = True
    return c, inv, ok, ranks


def _pivoted_lq(x, products, err, eta, roundoff):
    """(L, F, good, k) of :func:`rank_revealing` by pivoted Cholesky of M M^H, stopped at
    pivots below err / eta (:func:`~tenalg.linalg.smallchol.pivoted_cholesky`: a
    16 x 16 Gram matrix of rank 8 in about a microsecond, where Jacobi's eigh took 20);
    F M is orthonormal to ``err`` ||F||_F^2 as on the Cholesky path, else after a
    second pass (:func:`second_pass`; the bound grows along a sweep of float32
    a + (a + 1e-2 c) and passed 1 at its sixth bond). Trains whose residual is not
    negligible (components between the Gram matrix's noise and err / eta: a + (a +
    1e-2 c), whose bonds all took LAPACK's QR and SVD) are factored again down to the
    noise, ``err``, and certified by a second pass, where M has at least REDO_SIZE
    entries. None while the kernel compiles."""
    found = smallchol.pivoted_cholesky(products, err / eta)
    if found is None:
        return None
    l, f, k = found
    kept = (k >= 1) & _negligible(_residual(x, l, f), x, roundoff)
    good = _certify(x, l, f, err * squares(f), eta, kept)
    redo = np.flatnonzero(~good)
    if len(redo) and x.shape[1] * x.shape[2] >= REDO_SIZE:
        l2, f2, k2 = smallchol.pivoted_cholesky(products[redo], err[redo])
        ok2 = _certify(x[redo], l2, f2, err[redo] * squares(f2), eta, k2 >= 1)
        ok2 &= _negligible(_residual(x[redo], l2, f2), x[redo], roundoff)
        l[redo[ok2]], f[redo[ok2]], k[redo[ok2]], good[redo[ok2]] = l2[ok2], f2[ok2], k2[ok2], True
    return l, f, good, k


def _residual(x, l, f):
    """M - L F M, formed as (I - L F) M."""
    return matmul(np.eye(x.shape[1]) - matmul(l, f), x)


def _eigh_lq(x, products, err, eta, roundoff):
    """(L, F, good, k) of :func:`rank_revealing` from M M^H = V Lambda V^H: L = V_k
    Lambda_k^(1/2) and F = Lambda_k^(-1/2) V_k^H (zero past k) for the k eigenvalues
    above err / eta, with the eigensolver's error added to ``err``; the residual is
    V_rest^H M."""
    rows = x.shape[1]
    u = unit_roundoff(x.dtype)
    lam, v = smalleigh.eigh(products)
    lam, v = lam[:, ::-1], v[:, :, ::-1]
    trace = np.maximum(lam, 0).sum(axis=1)
    e = err + 2 * smalleigh.ACCURACY * rows * u * trace
    keep = (lam >= (e / eta)[:, None]) & (lam > 0)  # a zero M keeps nothing
    # the residual as V_rest V_rest^H M (GEMMs of the discarded rows, each entry within
    # rows u |v| |M| of exact), row by row in M's rows
    first = int(keep.sum(axis=1).min())
    rest = v[:, :, first:] * ~keep[:, None, first:]
    vk = v * keep[:, None, :]
    root = np.sqrt(np.where(keep, lam, 1))
    return (vk * np.where(keep, root, 0)[:, None, :],
            hermitian(vk) * np.where(keep, 1 / root, 0)[:, :, None],
            keep.any(axis=1) & _negligible(matmul(rest, matmul(hermitian(rest), x)), x,
                                           roundoff),
            keep.sum(axis=1))


def _negligible(residual, x, roundoff):
    """Per matrix: whether every row of the residual is at the roundoff of a Householder
    QR of x stored with unit ``roundoff``, which is backward stable row by row:
    ||residual_i|| <= SAFETY rows u ||x_i|| (plus u^2 of ||x||_F, for rows of zeros). In
    norm only, a row 1e-6 of ||M|| could be dropped, which the previous core of a train
    multiplies by a column 1e6 times larger (a float32 sum whose second train was gauged
    so on its first bond lost a fifth of itself at eps 1e-3)."""
    limit = SAFETY * x.shape[1] * roundoff
    floor = limit * roundoff * np.sqrt(squares(x))[:, None]
    return (np.sqrt(_row_squares(residual)) <= limit * np.sqrt(_row_squares(x)) + floor
            ).all(axis=1)


def _row_squares(x):
    """The sum of squared moduli of each row of each matrix of the stack ``x``."""
    if x.dtype.kind == "c":
        return _row_squares(x.real) + _row_squares(x.imag)
    return np.einsum("gij,gij->gi", x, x)


def squares(x):
    """The sum of squared moduli of each matrix of the stack ``x`` (g, rows, cols), in one
    pass (``(abs(x)**2).sum(...)`` makes two temporaries of x's size: 512 residuals of 16
    x 256 took 2.3 ms that way).

    >>> squares(np.array([[[3.0, 4.0]], [[1j, 1.0]]])).tolist()
    [25.0, 2.0]
    """
    if x.dtype.kind == "c":
        return squares(x.real) + squares(x.imag)
    return np.einsum("gij,gij->g", x, x)
