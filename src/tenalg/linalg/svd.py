"""The truncated SVD of a dense tensor over a bipartition of its axes, as a tensor-network
step splits a contracted pair of sites: ``a = u s v`` to within ``eps ||a||_F``.

The matrix goes to :func:`tenalg.linalg.truncation.truncated_svd`, the truncation that
tensor-train rounding runs on every bond: the eigendecomposition of its smaller Gram
matrix where a rounding-error bound proves the result as good as LAPACK's (the rank, the
discarded weight, factors orthonormal to sqrt(u) of double precision, a best rank-k
approximation), LAPACK's SVD where it cannot. A GEMM and a symmetric eigensolver cost a
fraction of LAPACK's SVD: splitting a (32, 4, 4, 32) float64 tensor, a 128 x 128 matrix,
at rank 32 took 1.1 ms against 1.9 ms for ``np.linalg.svd`` and 1.4 ms for torch's (MKL),
one thread each (``tenalg bench --group mixed`` runs it inside a whole step).

>>> import numpy as np
>>> a = np.random.default_rng(0).standard_normal((4, 3, 5))
>>> u, s, v, info = svd(a, (0, 1), max_rank=2)
>>> u.shape, s.shape, v.shape, info.rank, info.full_rank
((4, 3, 2), (2,), (2, 5), 2, 5)
>>> exact = np.linalg.svd(a.reshape(12, 5), compute_uv=False)
>>> bool(np.allclose(s, exact[:2])), bool(np.isclose(info.discarded_weight, np.sum(exact[2:] ** 2)))
(True, True)
"""

from dataclasses import dataclass

import numpy as np

from ..dtypes import compute_type, real_type
from ..errors import OperationError
from ..views import normalize_axes
from . import truncation
from .scaling import safe_scaled, times_power_of_two


@dataclass(frozen=True)
class TruncationInfo:
    """What :func:`svd` kept: ``rank`` of ``full_rank`` (the smaller side of the matrix)
    singular values, and ``discarded_weight``, the sum of the squares of the others (the
    squared Frobenius error of the truncation; inf where it exceeds float64's range)."""

    rank: int
    full_rank: int
    discarded_weight: float


def svd(a, row_axes, col_axes=None, *, max_rank=None, eps=0.0):
    """Truncated SVD of ``a`` over the bipartition ``row_axes | col_axes`` (``col_axes``
    defaults to the other axes, in order).

    Returns ``(u, s, v, info)``: ``u`` has the row axes' extents and the new bond, with
    orthonormal columns; ``s`` the kept singular values, descending, real; ``v`` the bond
    and the column axes' extents, with orthonormal rows; ``info`` a
    :class:`TruncationInfo`. The rank is the smallest whose discarded weight is at most
    ``(eps ||a||_F)^2``, and at most ``max_rank``; singular values at rounding level
    (and exact zeros) may be dropped even at ``eps=0``. Integers and booleans compute in
    float64, float16 and bfloat16 in float32 (:func:`tenalg.dtypes.compute_type`).
    """
    a = np.asarray(a)
    rows, cols = _bipartition(a.ndim, row_axes, col_axes)
    eps, max_rank = truncation.checked_options(eps, max_rank)
    dtype = np.dtype(np.float64) if a.dtype.kind in "biu" else compute_type([a.dtype])
    row_shape = tuple(a.shape[ax] for ax in rows)
    col_shape = tuple(a.shape[ax] for ax in cols)
    m = a.transpose(rows + cols).astype(dtype, copy=False).reshape(
        int(np.prod(row_shape, dtype=np.int64)), int(np.prod(col_shape, dtype=np.int64)))
    m, shift, _ = safe_scaled(m, "svd")
    u, s, v, discarded = _truncated(m, max_rank, eps)
    if shift:  # scaled back: s exactly; a weight past float's range is inf
        with np.errstate(over="ignore"):
            s, discarded = times_power_of_two(s, shift), float(np.ldexp(discarded, 2 * shift))
    info = TruncationInfo(len(s), min(m.shape), discarded)
    return u.reshape(row_shape + (len(s),)), s, v.reshape((len(s),) + col_shape), info


def _bipartition(ndim, row_axes, col_axes):
    """The row and column axes (non-negative) after checking that they split the axes."""
    rows = normalize_axes(row_axes, ndim)
    cols = (tuple(ax for ax in range(ndim) if ax not in rows) if col_axes is None
            else normalize_axes(col_axes, ndim))
    if sorted(rows + cols) != list(range(ndim)):
        raise OperationError(f"row axes {rows} and column axes {cols} must name each of "
                             f"the {ndim} axes once")
    return rows, cols


def _truncated(m, max_rank, eps):
    """(u, s, v, discarded weight) of the matrix ``m``, exact zeros among s dropped. A wide
    matrix is factored as its conjugate transpose, so that the Gram matrix is the smaller."""
    real = real_type(m.dtype)
    if m.size == 0:
        return (np.zeros((m.shape[0], 0), m.dtype), np.zeros(0, real),
                np.zeros((0, m.shape[1]), m.dtype), 0.0)
    wide = m.shape[0] < m.shape[1]
    x = np.ascontiguousarray(m.conj().T if wide else m)
    delta = np.array([eps * np.linalg.norm(x)])
    # keeping every singular value, the Gram path would need the smallest well above
    # its error bound (a random 512 x 512 matrix: 94 ms to learn it has not, LAPACK 55)
    every = eps == 0 and (max_rank is None or max_rank >= min(m.shape))
    left, right, k, tail, _ = truncation.truncated_svd(x[None], delta, max_rank,
                                                       gram=not every)
    k = int(k[0])
    left, right = left[0, :, :k], right[0, :k]
    s = np.linalg.norm(right, axis=1).astype(real)  # right = diag(s) V^H
    keep = int(np.count_nonzero(s > 0))
    discarded = float(tail[0])
    left, right, s = left[:, :keep], right[:keep], s[:keep]
    other = right / s[:, None]
    if wide:  # x = m^H = L diag(s) W^H, so m = W diag(s) L^H
        return other.conj().T, s, left.conj().T, discarded
    return left, s, other, discarded
