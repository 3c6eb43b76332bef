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

from ...blas import one_blas_thread
from ...dtypes import real_type
from . import householder
from .batched import FRESH, frobenius, normalize, reverse, spread, sum_cores, times_lower
from .bondsvd import keep_ranks, lq, rank_mask, truncated_svd
from .dense import bond_tolerance, einsum, python_scalar, safe_log, scaled_by_log, unit_roundoff

OVERSAMPLE = 10
EIG_MASK = 64
NOISE = 64


class Rounded(NamedTuple):
    cores: list
    ranks: np.ndarray
    norms: np.ndarray
    discarded: np.ndarray


def _first_cores(summands, coefficients):
    return [python_scalar(c) * s[0] for s, c in zip(summands, coefficients, strict=True)]


def _normalize_joint(zs, logs):
    """Divide every z of train i by the largest modulus over all of them; log it."""
    log_t = safe_log(np.max([np.abs(z).max(axis=tuple(range(1, z.ndim)), initial=0) for z in zs],
                            axis=0))
    return [scaled_by_log(z, -log_t.reshape((-1,) + (1,) * (z.ndim - 1))) for z in zs], logs + log_t


def orthogonalize_rl(cores, work=FRESH):
    """Right-to-left LQ sweep: cores 1..d-1 right-orthonormal, core 0 of unit norm.
    Interior cores may be lists of diagonal blocks (:func:`~tenalg.tt.linalg.batched.sum_cores`).

    Returns the cores, the factors (g, k, k) that right-orthonormal core c is to be
    multiplied by from the left (core c holds B of :func:`~tenalg.tt.linalg.bondsvd.lq`; factor 0
    is None), the log of each train's norm and the cancellation ratio of the last
    contraction. Cores 0..d-2 are written into ``work``'s buffers.
    """
    cores = list(cores)
    factors = [None] * len(cores)
    logs = np.zeros(cores[0].shape[0])
    gross = frobenius(cores[0])
    gram = True
    for c in range(len(cores) - 1, 0, -1):
        g, l, n, r = cores[c].shape
        lf, factors[c], b, gram = lq(cores[c].reshape(g, l, n * r), gram)
        cores[c] = b.reshape(g, b.shape[1], n, r)
        lf, logs = normalize(lf, logs)
        if c == 1:
            gross = frobenius(cores[0]) * frobenius(lf)
        cores[c - 1] = times_lower(cores[c - 1], lf, work, ("rl", c - 1))
    gross = _ratio(gross, frobenius(cores[0]))
    cores[0], logs = normalize(cores[0], logs)
    return cores, factors, logs, gross


def _ratio(gross, net):
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
        cores[c + 1] = work.einsum(("truncate", c + 1), "gkb,gbnc->gknc", right, cores[c + 1])
        ranks[:, c + 1] = k
        discarded += tail
    return cores, ranks, nrm, np.sqrt(discarded) / np.where(nrm > 0, nrm, 1)


def svd(summands, coefficients, eps, max_rank, work=FRESH):
    """Oseledets rounding of the block-diagonal sum: LQ right to left, SVDs left to right.

    The interior cores of the sum are never formed (see
    :func:`~tenalg.tt.linalg.batched.times_lower`). Temporaries go to ``work``'s buffers; the
    rounded cores are fresh arrays."""
    first = _first_cores(summands, coefficients)
    cores = sum_cores([[f, *s[1:]] for f, s in zip(first, summands, strict=True)], work)
    cores, factors, logs, gross = orthogonalize_rl(cores, work)
    cores, ranks, nrm, discarded = truncate(cores, bond_tolerance(eps, len(cores)), max_rank,
                                            gross, factors, work)
    return Rounded(spread(cores, logs), ranks, nrm * np.exp(logs), discarded)


def right_grams(summands):
    """Gram matrices of the right parts X_{>c} of the sum at bonds c = 0..d-2, blockwise.

    Block (i, j) is <X^i_{>c}, X^j_{>c}> over the right indices; the diagonal blocks of
    the block-diagonal cores are the only ones ever multiplied. Returns the normalised
    Grams (g, R_c, R_c) and the log of their scale.
    """
    m, d, g = len(summands), len(summands[0]), summands[0][0].shape[0]
    grams, logs = [None] * (d - 1), [None] * (d - 1)
    blocks, log = None, np.zeros(g)
    for c in range(d - 2, -1, -1):
        x, log2 = _normalize_joint([s[c + 1] for s in summands], np.zeros(g))
        log = log + 2 * log2
        new = [[None] * m for _ in range(m)]
        for i in range(m):
            for j in range(i, m):
                if blocks is None:
                    b = einsum("ganb,gcnb->gac", x[i], x[j].conj())
                else:
                    b = einsum("ganb,gbd,gcnd->gac", x[i], blocks[i][j], x[j].conj())
                new[i][j], new[j][i] = b, b.conj().transpose(0, 2, 1)
        full = np.concatenate([np.concatenate(row, axis=2) for row in new], axis=1)
        scale = np.abs(einsum("gaa->g", full))
        scale = np.where(scale > 0, scale, 1).astype(scale.dtype).reshape(-1, 1, 1)
        blocks = [[b / scale for b in row] for row in new]
        log = log + safe_log(scale.ravel())
        grams[c], logs[c] = full / scale, log
    return grams, logs


def _roots(lam, u):
    """Square roots of the eigenvalues above the mask and their inverses (zero below it)."""
    keep = lam > EIG_MASK * u * lam[:, -1:]
    root = np.sqrt(np.where(keep, lam, 1))
    return np.where(keep, root, 0), np.where(keep, 1 / root, 0)


def gram(summands, coefficients, eps, max_rank):
    """Gram-SVD rounding (Al Daas, Ballard, Manning) of the sum, two-sided.

    Right Grams GR[c] right to left; then per bond eigh of the left and right Grams, the
    SVD of Lambda_L^(1/2) Q_L^H Q_R Lambda_R^(1/2), truncation, and the updates of cores c
    and c+1. Eigenvalues below 64 u of the largest are masked. Accurate to about
    sqrt(u) ||X||.
    """
    d, g = len(summands[0]), summands[0][0].shape[0]
    z, logs = _normalize_joint(_first_cores(summands, coefficients), np.zeros(g))
    u = unit_roundoff(z[0].dtype)
    tol = bond_tolerance(eps, d)
    grams, glogs = right_grams(summands) if d > 1 else ([], [])
    lognorm = np.zeros(g)
    ranks = np.ones((g, d + 1), dtype=np.int64)
    discarded = np.zeros(g)
    out = []
    for c in range(d - 1):
        v = np.concatenate(z, axis=3)
        _, k, n, big = v.shape
        vm = v.reshape(g, k * n, big)
        gl = einsum("gma,gmb->gab", vm.conj(), vm)
        sl = np.abs(einsum("gaa->g", gl))
        sl = np.where(sl > 0, sl, 1).astype(sl.dtype)
        lam_l, q_l = np.linalg.eigh(gl / sl.reshape(-1, 1, 1))
        lam_r, q_r = np.linalg.eigh(grams[c])
        rl, il = _roots(lam_l, u)
        rr, ir = _roots(lam_r, u)
        mat = rl[:, :, None] * einsum("gab,gac->gbc", q_l.conj(), q_r) * rr[:, None, :]
        uu, s, wh = np.linalg.svd(mat)
        log_sigma = logs + 0.5 * (safe_log(sl) + glogs[c])
        if c == 0:
            net = frobenius(s)
            lognorm = log_sigma + safe_log(net)
            floor = np.maximum(tol, NOISE * u * _ratio(np.ones(g), net))
        srel = s * np.exp(log_sigma - lognorm)[:, None]
        kept, tail = keep_ranks(srel, floor, max_rank)
        mask = rank_mask(kept)
        kk = mask.shape[1]
        left = einsum("gab,gbk->gak", q_l, il[:, :, None] * uu[:, :, :kk] * mask[:, None, :])
        left = scaled_by_log(left, -0.5 * safe_log(sl).reshape(-1, 1, 1))
        out.append(einsum("gknr,grs->gkns", v, left))
        right = einsum("gkb,gcb->gkc", s[:, :kk, None] * wh[:, :kk, :] * mask[:, :, None]
                       * ir[:, None, :], q_r.conj())
        logs = logs + 0.5 * safe_log(sl)
        offsets = np.cumsum([0] + [zj.shape[3] for zj in z])
        z = [einsum("gkr,grnb->gknb", right[:, :, offsets[j] : offsets[j + 1]], s_[c + 1])
             for j, s_ in enumerate(summands)]
        if c == d - 2:
            z = [sum(z)]
        z, logs = _normalize_joint(z, logs)
        ranks[:, c + 1] = kept
        discarded += tail
    if d == 1:
        z = [sum(z)]
        lognorm = logs + safe_log(frobenius(z[0]))
    out.append(z[0])
    return Rounded(spread(out, logs), ranks, np.exp(lognorm), np.sqrt(discarded))


def randomized(summands, coefficients, eps, max_rank, rng):
    """Randomize-then-orthogonalize rounding (Al Daas et al.) of the sum, then SVD truncation.

    One Gaussian TT sketch, shared by every summand, of rank max_rank + 10 (the full rank
    of the sum when max_rank is None); contractions W right to left; left to right
    Q = qr(Z W) and Z <- (Q^H Z) X_next summed over the summands; then a right-to-left
    truncated SVD sweep of the (small) left-orthogonal result applies eps and max_rank.
    """
    d, g = len(summands[0]), summands[0][0].shape[0]
    rng = np.random.default_rng(rng)
    z = _first_cores(summands, coefficients)
    dims = [x.shape[2] for x in summands[0]]
    total = [sum(s[c].shape[3] for s in summands) for c in range(d - 1)]
    sketch = [1] + [t if max_rank is None else min(t, max_rank + OVERSAMPLE) for t in total] + [1]
    real = real_type(z[0].dtype)
    omega = [rng.standard_normal((sketch[c], n, sketch[c + 1])).astype(real)
             for c, n in enumerate(dims)]
    w, cur = [None] * (d - 1), None
    for c in range(d - 2, -1, -1):
        x = _normalize_joint([s[c + 1] for s in summands], np.zeros(g))[0]
        if cur is None:
            cur = [einsum("ganb,cnb->gac", xj, omega[c + 1]) for xj in x]
        else:
            cur = [einsum("ganb,gbd,cnd->gac", xj, wj, omega[c + 1])
                   for xj, wj in zip(x, cur, strict=True)]
        cur, _ = _normalize_joint(cur, np.zeros(g))
        w[c] = cur
    z, logs = _normalize_joint(z, np.zeros(g))
    out = []
    for c in range(d - 1):
        y = sum(einsum("gknr,grl->gknl", zj, wj) for zj, wj in zip(z, w[c], strict=True))
        _, k, n, big = y.shape
        with one_blas_thread(y.dtype):
            q, _ = householder.qr(y.reshape(g, k * n, big))
        out.append(q.reshape(g, k, n, q.shape[2]))
        m = [einsum("gml,gmr->glr", q.conj(), zj.reshape(g, k * n, -1)) for zj in z]
        z = [einsum("glr,grnb->glnb", mj, s_[c + 1]) for mj, s_ in zip(m, summands, strict=True)]
        if c == d - 2:
            gross = sum(frobenius(mj) * frobenius(s_[d - 1]) for mj, s_ in zip(m, summands,
                                                                             strict=True))
            z = [sum(z)]
            gross = _ratio(gross, frobenius(z[0]))
        z, logs = _normalize_joint(z, logs)
    out.append(sum(z))
    if d == 1:
        gross = _ratio(sum(frobenius(s[0]) for s in summands), frobenius(out[0]))
    cores, ranks, nrm, discarded = truncate(reverse(out), bond_tolerance(eps, d), max_rank,
                                            gross)
    return Rounded(spread(reverse(cores), logs), ranks[:, ::-1], nrm * np.exp(logs), discarded)
