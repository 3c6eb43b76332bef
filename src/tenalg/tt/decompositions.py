"""Building trains from data: TT-SVD of a dense array and TT-cross of a black box.

>>> import numpy as np
>>> from tenalg import tt
>>> x = tt.random((3, 4, 5), 2, rng=0)
>>> tt.from_dense(x.to_dense(), eps=1e-12).ranks
(1, 2, 2, 1)
"""

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import OperationError
from ..inputs import host_array
from ..linalg import smalleigh
from ..linalg.lapackcalls import lapack_threads, unit_roundoff
from ..linalg.scaling import safe_scaled, times_power_of_two
from ..linalg.truncation import (
    SAFETY,
    checked_options,
    keep_ranks,
    noise_rank,
    residual_within,
)
from .core import check_storage
from .linalg.dense import bond_tolerance, core_dtype
from .train import TensorTrain, full_ranks


def from_dense(array, eps=0.0, max_rank=None, storage="contiguous"):
    """TT-SVD: sequential truncated SVDs with the tolerance eps ||A|| / sqrt(d-1) per bond.

    ||A - train||_F <= eps ||A||_F unless max_rank cuts deeper.

    >>> import numpy as np
    >>> from_dense(np.ones((2, 3, 4)), eps=1e-12).ranks
    (1, 1, 1, 1)
    """
    eps, max_rank = checked_options(eps, max_rank)
    a = host_array(array, "from_dense", "tenalg.tt")
    if a.ndim == 0 or a.size == 0:
        raise OperationError(f"from_dense needs an array with at least one axis and no "
                             f"empty one, got shape {a.shape}")
    a = a.astype(core_dtype(a.dtype), copy=False)
    dims = a.shape
    a, shift, norm = safe_scaled(a, "from_dense")  # the last core scaled back
    delta = bond_tolerance(eps, a.ndim) * norm
    cores, r, m = [], 1, a
    for n in dims[:-1]:
        m = m.reshape(r * n, -1)
        u, m = (_gram_bond(m, delta, max_rank) if m.shape[0] <= m.shape[1] else None) or \
            _lapack_bond(m, delta, max_rank)
        r = u.shape[1]
        cores.append(u.reshape(-1, n, r))
    if shift:
        m = times_power_of_two(m, shift)
    elif len(dims) == 1:  # the array is its own core, which the train must own
        m = m.copy()
    cores.append(m.reshape(r, dims[-1], 1))
    return TensorTrain._from_arrays(cores, check_storage(storage))


def _lapack_bond(m, delta, max_rank):
    """(U_k, S_k V_k^H) of LAPACK's SVD of ``m``, k the rank kept for ``delta``."""
    with lapack_threads(m):
        u, s, vh = np.linalg.svd(m, full_matrices=False)
    k = int(keep_ranks(s[None], np.array([delta]), max_rank)[0][0])
    return u[:, :k], s[:k, None] * vh[:k]


def _gram_bond(m, delta, max_rank):
    """(U_k, U_k^H M) for the wide unfolding ``m`` from the eigenvectors of M M^H, in
    double precision, where certified to keep the rank k that the exact SVD keeps for
    ``delta`` (else None).

    The Gram matrix squares the singular values, so its small eigenvalues are rounding
    noise: k is the eps rank of the eigenvalues above their error bound ``err`` (forming
    M M^H and LAPACK's eigh, as in :func:`~tenalg.linalg.truncation.truncated_svd`), and
    two checks make it exact: the residual M - U_k U_k^H M, formed explicitly (not from
    the Gram matrix), plus the rounding bound of forming it, is within ``delta`` (so k
    suffices), and the eigenvalues from k on, each lowered by ``err``, still weigh more
    than delta^2 (so k - 1 would not): :func:`~tenalg.linalg.truncation.noise_rank` and
    :func:`~tenalg.linalg.truncation.residual_within`, the proof of the truncation's. A rank
    cut by ``max_rank`` is left to LAPACK. On the Zen 4 VM a TT-SVD of a 4^10 tensor of
    rank 8 took 64-66 ms by LAPACK's SVDs (teneva 66), and 11-12 ms so.
    """
    rows, cols = m.shape
    wide = np.result_type(m.dtype, np.float64)
    x = m.astype(wide, copy=False)
    gram = x @ x.conj().T
    if not np.isfinite(gram).all():
        return None  # LAPACK's SVD says what is wrong
    lam, v = smalleigh.reference_eigh(gram)
    lam, v = lam[::-1], v[:, ::-1]
    u = unit_roundoff(wide)
    err = (SAFETY * (cols + rows) + 2 * smalleigh.ACCURACY * rows) * u * max(float(lam.sum()), 0.0)
    k, _, needed = noise_rank(lam[None], np.array([err]), np.array([delta**2]))
    k = int(k[0])
    if (max_rank is not None and k > max_rank) or not needed[0]:
        return None
    vk = np.ascontiguousarray(v[:, :k])
    rest = vk.conj().T @ x
    if not residual_within((x - vk @ rest)[None], x[None], k, delta)[1][0]:
        return None
    return vk.astype(m.dtype, copy=False), rest.astype(m.dtype, copy=False)


def _check_tau(tau):
    if not 1 <= tau < np.inf:  # below 1 no submatrix dominates: swaps run to max_iters
        raise OperationError(f"tau must be a finite number >= 1, got {tau!r}")


def maxvol(a, tau=1.05, max_iters=200):
    """Rows of the tall (n, r) matrix ``a`` spanning a submatrix of locally maximal volume.

    Starts from QR with column pivoting of a^T and swaps rows while some coefficient of
    a = B a[rows] exceeds tau in modulus.

    >>> import numpy as np
    >>> sorted(maxvol(np.array([[1.0, 0], [0, 1], [5, 0], [0, 0.5]])).tolist())
    [1, 2]
    """
    _check_tau(tau)
    n, r = a.shape
    if n <= r:
        return np.arange(n)
    rows = scipy.linalg.qr(a.T, mode="r", pivoting=True)[1][:r].copy()
    b = np.linalg.solve(a[rows].T, a.T).T
    for _ in range(max_iters):
        i, j = np.unravel_index(np.argmax(np.abs(b)), b.shape)
        if abs(b[i, j]) <= tau:
            break
        rows[j] = i
        bi = b[i].copy()
        bi[j] -= 1
        b -= np.outer(b[:, j], bi / b[i, j])
    return rows


@dataclass(frozen=True)
class CrossInfo:
    """What TT-cross did: whether a sweep changed no pivots, sweeps run, function values
    requested, and the right index sets (pass them as ``index_sets`` to warm-start).
    Printed, the index sets show as their sizes (they are thousands of numbers).

    >>> CrossInfo(True, 2, 96, (np.zeros((1, 0)), np.zeros((3, 2)), np.zeros((1, 0))))
    CrossInfo(converged=True, nsweeps=2, nevals=96, index_sets=<3 sets of 1, 3, 1 rows>)
    """

    converged: bool
    nsweeps: int
    nevals: int
    index_sets: tuple

    def __repr__(self):
        sizes = ", ".join(str(len(x)) for x in self.index_sets)
        return (f"CrossInfo(converged={self.converged}, nsweeps={self.nsweeps}, "
                f"nevals={self.nevals}, index_sets=<{len(self.index_sets)} sets of {sizes} "
                "rows>)")


def _clip_ranks(dims, ranks):
    r = list(ranks)
    d = len(dims)
    for k in range(1, d):
        r[k] = min(r[k], math.prod(dims[:k]), math.prod(dims[k:]), r[k - 1] * dims[k - 1])
    for k in range(d - 1, 0, -1):
        r[k] = min(r[k], dims[k] * r[k + 1])
    return r


class _Fibers:
    """Evaluates fibers f(I[a], i, J[b]) of the black box and counts the calls."""

    def __init__(self, f):
        self.f, self.nevals, self.dtype = f, 0, None

    def __call__(self, left, n, right):
        ra, rb = len(left), len(right)
        idx = np.concatenate([
            np.repeat(left, n * rb, axis=0),
            np.tile(np.repeat(np.arange(n), rb), ra)[:, None],
            np.tile(right, (ra * n, 1)),
        ], axis=1)
        values = np.asarray(self.f(idx))
        if values.shape != (len(idx),):
            raise OperationError(f"cross: f returned shape {values.shape} for {len(idx)} points")
        if not np.isfinite(values).all():
            raise OperationError(f"cross: f returned NaN or inf at "
                                 f"{int((~np.isfinite(values)).sum())} of {len(idx)} points")
        self.dtype = self.dtype or core_dtype(values.dtype)
        self.nevals += len(idx)
        return values.astype(self.dtype, copy=False).reshape(ra, n, rb)


def _interpolate(c, tau):
    """(Q Q[rows]^-1, rows) for the tall unfolding ``c``."""
    q = np.linalg.qr(c)[0]
    rows = maxvol(q, tau)
    return np.linalg.solve(q[rows].T, q.T).T, rows


def cross(f, dims, ranks=None, nsweeps=10, tau=1.05, index_sets=None, rng=None,
          storage="contiguous"):
    """TT-cross interpolation of f: (k, d) integer indices -> (k,) values, at fixed ranks.

    One-site alternating cross: left to right, QR of each fiber unfolding and maxvol
    (tau) pick the next left index set, core = Q Q(I, :)^-1; right to left the same on
    the transposed unfolding. Ranks are clipped so r_k <= r_{k-1} n_{k-1}, r_k <= n_k r_{k+1}
    and to the products of the dims on either side. Stops when a sweep changes no pivots
    (``info.converged``) or after ``nsweeps``. ``index_sets`` from a previous
    ``info.index_sets`` warm-start the next call (ranks then default to theirs).

    >>> import numpy as np
    >>> train, info = cross(lambda i: 1.0 + i.sum(axis=1), (4, 4, 4), 2, rng=0)
    >>> info.converged, train.ranks
    (True, (1, 2, 2, 1))
    """
    dims = tuple(int(n) for n in dims)
    d = len(dims)
    if not dims or min(dims) < 1:
        raise OperationError(f"cross needs dimensions >= 1, got {dims}")
    if isinstance(nsweeps, bool) or int(nsweeps) != nsweeps or nsweeps < 1:
        raise OperationError(f"cross: nsweeps must be a positive integer, got {nsweeps!r}")
    _check_tau(tau)
    if index_sets is not None:
        index_sets = [np.asarray(j, dtype=np.int64) for j in index_sets]
        if len(index_sets) != d - 1:
            raise OperationError(f"cross: {d} cores need {d - 1} index sets")
        if ranks is None:
            ranks = [len(j) for j in index_sets]
    if ranks is None:
        raise OperationError("cross needs ranks (or index_sets to take them from)")
    r = _clip_ranks(dims, full_ranks(dims, ranks))
    rng = np.random.default_rng(rng)
    right = [None] * d + [np.zeros((1, 0), dtype=np.int64)]
    if index_sets is None:
        for k in range(d - 1, 0, -1):
            pick = rng.choice(dims[k] * r[k + 1], size=r[k], replace=False)
            i, b = np.divmod(pick, r[k + 1])
            right[k] = np.concatenate([i[:, None], right[k + 1][b]], axis=1)
    else:
        for k, j in enumerate(index_sets, start=1):
            if j.shape != (r[k], d - k):
                raise OperationError(
                    f"cross: index set {k} has shape {j.shape}, expected {(r[k], d - k)}"
                )
            outside = (j < 0) | (j >= np.array(dims[k:]))
            if outside.any():  # else f would get them (NumPy wraps negative ones round)
                row, col = np.argwhere(outside)[0]
                raise OperationError(
                    f"cross: index set {k} holds index {j[row, col]} for mode {k + col} "
                    f"of dimension {dims[k + col]} (row {row})")
            right[k] = j
    fibers = _Fibers(f)
    left = [np.zeros((1, 0), dtype=np.int64)] + [None] * d
    converged, sweep = False, 0
    while sweep < nsweeps and not converged:
        sweep += 1
        start = [j.copy() for j in right[1:d]]
        for k in range(d - 1):
            c = fibers(left[k], dims[k], right[k + 1]).reshape(r[k] * dims[k], r[k + 1])
            rows = maxvol(np.linalg.qr(c)[0], tau)
            a, i = np.divmod(rows, dims[k])
            left[k + 1] = np.concatenate([left[k][a], i[:, None]], axis=1)
        cores = [None] * d
        for k in range(d - 1, 0, -1):
            c = fibers(left[k], dims[k], right[k + 1])
            core, rows = _interpolate(c.reshape(r[k], dims[k] * r[k + 1]).T, tau)
            cores[k] = core.T.reshape(r[k], dims[k], r[k + 1])
            i, b = np.divmod(rows, r[k + 1])
            right[k] = np.concatenate([i[:, None], right[k + 1][b]], axis=1)
        cores[0] = fibers(left[0], dims[0], right[1])
        converged = all(np.array_equal(a, b) for a, b in zip(start, right[1:d], strict=True))
    train = TensorTrain._from_arrays([np.ascontiguousarray(c) for c in cores],
                                     check_storage(storage))
    return train, CrossInfo(converged, sweep, fibers.nevals, tuple(right[1:d]))
