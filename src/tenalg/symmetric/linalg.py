"""Block linear algebra: SVD and QR over a bipartition of legs, sector by sector.

The row legs fuse into one leg, the column legs into another; every block lands (through
a dense permutation plan, written straight into place) in the matrix of its row sector.
Each sector matrix is factorised on its own; the new bond is a dual leg whose sectors are
the row charges that keep a nonzero rank.

>>> import numpy as np
>>> from tenalg.symmetric import U1, Leg, BlockTensor, contract
>>> leg = Leg(U1(), [(0, 2), (1, 3)])
>>> t = BlockTensor.random((leg, leg, leg.conj()), flux=1, rng=0)
>>> u, s, v, info = svd(t, (0, 1), (2,))
>>> back = contract(contract(u, "abx", s, "xy", "aby"), "aby", v, "yc", "abc")
>>> np.allclose(back.to_dense(), t.to_dense()), info.discarded_weight
(True, 0.0)
"""

import functools
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import compute_type, real_type
from ..errors import OperationError
from ..linalg.truncation import checked_max_rank
from ..views import normalize_axes
from . import dense
from .legs import Leg, LegFusion
from .tensor import BlockTensor


@dataclass
class TruncationInfo:
    """What a truncated SVD kept: ranks per sector (before and after), discarded weight.

    ``discarded_weight`` is the sum of the squares of the dropped singular values, i.e.
    the squared Frobenius error of the truncated factorisation.
    """

    discarded_weight: float = 0.0
    ranks: dict = field(default_factory=dict)
    full_ranks: dict = field(default_factory=dict)


def _bipartition(t, row_axes, col_axes):
    row_axes, col_axes = normalize_axes(row_axes, t.ndim), normalize_axes(col_axes, t.ndim)
    if not row_axes or not col_axes or sorted(row_axes + col_axes) != list(range(t.ndim)):
        raise OperationError(
            f"row axes {row_axes} and column axes {col_axes} must split the {t.ndim} legs "
            "into two non-empty parts"
        )
    return row_axes, col_axes


@functools.lru_cache(maxsize=256)
def _fusions(row_legs, col_legs):
    return LegFusion(row_legs), LegFusion(col_legs, dual=True)


def _sector_matrices(t, row_axes, col_axes):
    """``{row charge: (column charge, matrix)}`` of the blocks, and the two fusions."""
    rows, cols = _fusions(tuple(t.legs[ax] for ax in row_axes),
                          tuple(t.legs[ax] for ax in col_axes))
    dtype = compute_type([t.dtype])
    axes = row_axes + col_axes
    matrices = {}
    for key, block in t.read_blocks().items():
        r, r0, rshape = rows.locate[tuple(key[ax] for ax in row_axes)]
        c, c0, cshape = cols.locate[tuple(key[ax] for ax in col_axes)]
        if r not in matrices:
            matrices[r] = (c, np.zeros((rows.leg.dims[r], cols.leg.dims[c]), dtype))
        window = matrices[r][1][r0:r0 + _size(rshape), c0:c0 + _size(cshape)]
        dense.permute_into(window.reshape(rshape + cshape), block, axes)
    return matrices, rows, cols


def _size(shape):
    return int(np.prod(shape, dtype=np.int64))


def _factors(t, matrices, rows, cols, left, right, ranks):
    """Left factor (row legs + bond) and right factor (bond.conj() + column legs).

    Blocks are copies that own their memory (a view costs later plans a bounds check).
    """
    bond = Leg(t.group, [(r, k) for r, k in ranks.items() if k > 0], dual=True)
    u_blocks, v_blocks = {}, {}
    for r in bond.charges:
        k = ranks[r]
        for charges, start, shape in rows.parts[r]:
            piece = left[r][start:start + _size(shape), :k]
            u_blocks[charges + (r,)] = np.array(piece.reshape(shape + (k,)), t.dtype, order="C")
        for charges, start, shape in cols.parts[matrices[r][0]]:
            piece = right[r][:k, start:start + _size(shape)]
            v_blocks[(r,) + charges] = np.array(piece.reshape((k,) + shape), t.dtype, order="C")
    u = BlockTensor._new(rows.legs + (bond,), t.group.identity, u_blocks, t.dtype, t.group)
    v = BlockTensor._new((bond.conj(),) + cols.legs, t.flux, v_blocks, t.dtype, t.group)
    return u, v, bond


def _keep(spectra, max_rank, cutoff):
    """Kept rank per sector: the largest values over all sectors, at least one."""
    max_rank = checked_max_rank(max_rank)
    if cutoff is not None and not 0 <= cutoff < np.inf:  # NaN too
        raise OperationError(f"cutoff must be a finite number >= 0, got {cutoff}")
    values = np.concatenate([np.zeros(0)] + list(spectra.values()))
    sectors = np.concatenate([np.zeros(0, int)] + [
        np.full(len(s), n) for n, s in enumerate(spectra.values())
    ])
    order = np.argsort(-values, kind="stable")  # keeps each sector's own order
    keep = len(values)
    if cutoff is not None and keep:
        keep = int(np.count_nonzero(values > cutoff * values[order[0]]))
    if max_rank is not None:
        keep = min(keep, max_rank)
    keep = max(keep, min(1, len(values)))
    counts = np.bincount(sectors[order[:keep]], minlength=len(spectra))
    return {r: int(k) for r, k in zip(spectra, counts, strict=True)}


def svd(t, row_axes, col_axes, max_rank=None, cutoff=None):
    """Truncated SVD ``t = U S V`` over the bipartition ``row_axes | col_axes``.

    ``max_rank`` bounds the bond dimension summed over all sectors; ``cutoff`` drops
    singular values <= cutoff * (the largest one). Returns ``(U, S, V, info)``: U has the
    row legs and the bond, S the legs (bond.conj(), bond) with diagonal blocks, V the legs
    bond.conj() and the column legs; ``info`` is a :class:`TruncationInfo`.
    """
    row_axes, col_axes = _bipartition(t, row_axes, col_axes)
    matrices, rows, cols = _sector_matrices(t, row_axes, col_axes)
    left, spectra, right = {}, {}, {}
    for r, (_, m) in matrices.items():
        if m.size:
            left[r], spectra[r], right[r] = np.linalg.svd(m, full_matrices=False)
    ranks = _keep(spectra, max_rank, cutoff)
    discarded = sum(float(np.sum(s[ranks[r]:] ** 2)) for r, s in spectra.items())
    info = TruncationInfo(discarded, dict(ranks), {r: len(s) for r, s in spectra.items()})
    u, v, bond = _factors(t, matrices, rows, cols, left, right, ranks)
    s_dtype = real_type(t.dtype)
    s_blocks = {(r, r): np.diag(spectra[r][: ranks[r]]).astype(s_dtype) for r in bond.charges}
    s = BlockTensor._new((bond.conj(), bond), t.group.identity, s_blocks, s_dtype, t.group)
    return u, s, v, info


def qr(t, row_axes, col_axes):
    """``t = Q R`` over the bipartition, Q with orthonormal columns in every sector.

    Q has the row legs and a new (dual) bond; R has bond.conj() and the column legs.
    """
    row_axes, col_axes = _bipartition(t, row_axes, col_axes)
    matrices, rows, cols = _sector_matrices(t, row_axes, col_axes)
    left, right = {}, {}
    for r, (_, m) in matrices.items():
        if m.size:
            left[r], right[r] = np.linalg.qr(m)
    ranks = {r: q.shape[1] for r, q in left.items()}
    q, r, _ = _factors(t, matrices, rows, cols, left, right, ranks)
    return q, r
