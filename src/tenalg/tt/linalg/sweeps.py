"""Batched rounding sweeps: SVD (Oseledets), Gram-SVD and randomised, for sums of trains.

Every sweep takes ``summands``: a list of m stacks (each a list of d arrays (g, l, n, r),
one per core, of g trains) and rounds, for each of the g trains, the sum over the m
summands scaled by ``coefficients``. Gram and randomised sweeps never form the
block-diagonal sum; the SVD sweep forms only its first and last cores (the interior ones
enter its first LQ step block by block). Each train gets its own eps-adaptive ranks:
stacks stay rectangular at the largest rank of the group and the columns a train does
not keep are exact zeros, which the next bond's decompositions see as zero singular
values. Every sweep normalises what it multiplies and carries the scale as a logarithm,
so long trains neither overflow nor underflow. Each returns
``Rounded(cores, ranks (g, d+1), norms (g,), discarded (g,))`` where ``discarded`` is the
relative Frobenius bound sqrt(sum of discarded s^2) / ||X||.

Cancellation (X - X) leaves a train whose norm is roundoff of the terms that cancelled;
relative to that norm eps means nothing, so each bond also drops singular values below
64 u times the gross magnitude of the cancelling terms (their norms multiplied before they
were added), which is the working precision of the sum.

>>> import numpy as np
>>> x = [np.ones((1, 1, 2, 1)), np.ones((1, 1, 2, 1))]
>>> svd([x, x], [1.0, 1.0], eps=1e-12, max_rank=None).ranks.tolist()
[[1, 1, 1]]
"""

from typing import NamedTuple

import numpy as np

from ...dtypes import real_type
from ...linalg import householder
from ...linalg.lapackcalls import unit_roundoff
from ...linalg.truncation import lq, truncated_svd
from ...linalg.workspace import FRESH
from .batched import (
    frobenius,
    normalize,
    reverse,
    spread,
    sum_cores,
    terms_norm,
    times_lower,
)
from .dense import (
    bond_tolerance,
    einsum,
    norm_from_log,
    python_scalar,
    safe_log,
    scaled_by_log,
)

OVERSAMPLE = 10
NOISE = 64


class Rounded(NamedTuple):
    cores: list
    ranks: np.ndarray
    norms: np.ndarray
    discarded: np.ndarray
    fallback: np.ndarray | None = None  # (g,): trains a Gram sweep left to the SVD sweep


def first_cores(summands, coefficients):
    return [python_scalar(c) * s[0] for s, c in zip(summands, coefficients, strict=True)]


def normalize_joint(zs, logs):
    """Divide every z of train i by the largest modulus over all of them; log it."""
    log_t = safe_log(np.max([np.abs(z).max(axis=tuple(range(1, z.ndim)), initial=0) for z in zs],
                            axis=0))
    return [scaled_by_log(z, -log_t.reshape((-1,) + (1,) * (z.ndim - 1))) for z in zs], logs + log_t


def orthogonalize_rl(cores, work=FRESH, tol=None):
    """Right-to-left LQ sweep: cores 1..d-1 right-orthonormal, core 0 of unit norm.
    Interior cores may be lists of diagonal blocks (:func:`~tenalg.tt.linalg.batched.sum_cores`).

    Returns the cores, the factors (g, k, k) that right-orthonormal core c is to be
    multiplied by from the left (core c holds B of :func:`~tenalg.linalg.truncation.lq`; factor 0
    is None), the log of each train's norm and the cancellation ratio of the last
    contraction. Cores 0..d-2 are written into ``work``'s buffers. ``tol``: the accuracy
    each LQ must have (relative, see :func:`~tenalg.linalg.truncation.lq`).
    """
    cores = list(cores)
    factors = [None] * len(cores)
    logs = np.zeros(cores[0].shape[0])
    gross = frobenius(cores[0])
    gram = True
    for c in range(len(cores) - 1, 0, -1):
        g, l, n, r = cores[c].shape
        lf, factors[c], b, gram = lq(cores[c].reshape(g, l, n * r), gram, tol)
        cores[c] = b.reshape(g, b.shape[1], n, r)
        lf, logs = normalize(lf, logs)
        if c == 1:
            gross = terms_norm(cores[0].reshape(g, -1, lf.shape[1]), lf)
        cores[c - 1] = times_lower(cores[c - 1], lf, work, ("rl", c - 1))
    gross = cancellation_ratio(gross, frobenius(cores[0]))
    cores[0], logs = normalize(cores[0], logs)
    return cores, factors, logs, gross


def cancellation_ratio(gross, net):
    """gross / net, the factor by which cancellation shrank a result (1 when nothing did)."""
    return np.asarray(gross, dtype=np.float64) / np.where(net > 0, net, gross + (gross == 0))


def truncate(cores, tol, max_rank, gross, factors=None, work=FRESH):
    """Left-to-right truncated SVDs of trains whose cores 1..d-1 are right-orthonormal
    (each after its factor from the left, where ``factors`` are given).

    ``tol`` is the tolerance per bond relative to each train's norm, raised to the noise
    level of the cancellation ratio ``gross``. Returns the cores, ranks, the norms (in the
    cores' units) and the relative discarded weight. The cores are written into
    ``work``'s buffers.
    """
    cores = list(cores)
    g, d = cores[0].shape[0], len(cores)
    nrm = frobenius(cores[0])
    tol = np.maximum(tol, NOISE * unit_roundoff(cores[0].dtype) * gross)
    ranks = np.ones((g, d + 1), dtype=np.int64)
    discarded = np.zeros(g)
    gram = True
    for c in range(d - 1):
        _, l, n, r = cores[c].shape
        left, right, k, tail, gram = truncated_svd(cores[c].reshape(g, l * n, r), tol * nrm,
                                                   max_rank, gram, work, ("left", c))
        cores[c] = left.reshape(g, l, n, left.shape[2])
        if factors is not None:
            right = np.matmul(right, factors[c + 1])
        _, b, n, r = cores[c + 1].shape
        cores[c + 1] = work.matmul(("truncate", c + 1), right,
                                   cores[c + 1].reshape(g, b, n * r)).reshape(g, -1, n, r)
        ranks[:, c + 1] = k
        discarded += tail
    return cores, ranks, nrm, np.sqrt(discarded) / np.where(nrm > 0, nrm, 1)


def svd(summands, coefficients, eps, max_rank, work=FRESH):
    """Oseledets rounding of the block-diagonal sum: LQ right to left, SVDs left to right.

    The interior cores of the sum are never formed (see
    :func:`~tenalg.tt.linalg.batched.times_lower`). Temporaries go to ``work``'s buffers; the
    rounded cores are fresh arrays."""
    first = first_cores(summands, coefficients)
    cores = sum_cores([[f, *s[1:]] for f, s in zip(first, summands, strict=True)], work)
    tol = bond_tolerance(eps, len(cores))
    cores, factors, logs, gross = orthogonalize_rl(cores, work, tol)
    cores, ranks, nrm, discarded = truncate(cores, tol, max_rank, gross, factors, work)
    return Rounded(spread(cores, logs), ranks, norm_from_log(nrm, logs), discarded)


def randomized(summands, coefficients, eps, max_rank, rng):
    """Randomize-then-orthogonalize rounding (Al Daas et al.) of the sum, then SVD truncation.

    One Gaussian TT sketch, shared by every summand, of rank min(max_rank, the sum's full
    rank) + 10; contractions W right to left; left to right
    Q = qr(Z W) and Z <- (Q^H Z) X_next summed over the summands; then a right-to-left
    truncated SVD sweep of the (small) left-orthogonal result applies eps and max_rank.
    """
    d, g = len(summands[0]), summands[0][0].shape[0]
    rng = np.random.default_rng(rng)
    z = first_cores(summands, coefficients)
    dims = [x.shape[2] for x in summands[0]]
    total = [sum(s[c].shape[3] for s in summands) for c in range(d - 1)]
    # oversampled also at the full rank: a square Gaussian sketch of an exact rank is
    # ill-conditioned (with extents of 1, cond 1e5-1e8: a float64 sum lost 5.6e-11 at
    # eps 1e-12, a float32 one 7.2e-3 at any eps)
    sketch = [1] + [(t if max_rank is None else min(t, max_rank)) + OVERSAMPLE
                    for t in total] + [1]
    real = real_type(z[0].dtype)
    omega = [rng.standard_normal((sketch[c], n, sketch[c + 1])).astype(real)
             for c, n in enumerate(dims)]
    w, cur = [None] * (d - 1), None
    for c in range(d - 2, -1, -1):
        x = normalize_joint([s[c + 1] for s in summands], np.zeros(g))[0]
        if cur is None:
            cur = [einsum("ganb,cnb->gac", xj, omega[c + 1]) for xj in x]
        else:
            cur = [einsum("ganb,gbd,cnd->gac", xj, wj, omega[c + 1])
                   for xj, wj in zip(x, cur, strict=True)]
        cur, _ = normalize_joint(cur, np.zeros(g))
        w[c] = cur
    z, logs = normalize_joint(z, np.zeros(g))
    out = []
    for c in range(d - 1):
        y = sum(einsum("gknr,grl->gknl", zj, wj) for zj, wj in zip(z, w[c], strict=True))
        _, k, n, big = y.shape
        q, _ = householder.qr(y.reshape(g, k * n, big))  # (inside rounding.run's one thread)
        out.append(q.reshape(g, k, n, q.shape[2]))
        m = [einsum("gml,gmr->glr", q.conj(), zj.reshape(g, k * n, -1)) for zj in z]
        z = [einsum("glr,grnb->glnb", mj, s_[c + 1]) for mj, s_ in zip(m, summands, strict=True)]
        if c == d - 2:
            gross = sum(terms_norm(mj, s_[d - 1].reshape(g, mj.shape[2], -1))
                        for mj, s_ in zip(m, summands, strict=True))
            z = [sum(z)]
            gross = cancellation_ratio(gross, frobenius(z[0]))
        z, logs = normalize_joint(z, logs)
    out.append(sum(z))
    if d == 1:
        gross = cancellation_ratio(sum(frobenius(s[0]) for s in summands), frobenius(out[0]))
    cores, ranks, nrm, discarded = truncate(reverse(out), bond_tolerance(eps, d), max_rank,
                                            gross)
    return Rounded(spread(reverse(cores), logs), ranks[:, ::-1], norm_from_log(nrm, logs),
                   discarded)
