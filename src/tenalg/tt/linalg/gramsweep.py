"""Two-sided Gram-SVD rounding (Al Daas, Ballard, Manning) of sums of trains, with the
tail it discards bounded, not estimated.

At bond c the unfolding of the sum is X = L R^H; the singular values of X are those of
Lambda_L^(1/2) Q_L^H Q_R Lambda_R^(1/2), from the eigendecompositions of the left Gram
matrix G_L = L^H L and the right one G_R = R^H R (built right to left, blockwise, never
forming the block-diagonal sum). Both are normalised to trace 1. Their computed
eigenvalues are wrong by at most ``e_L`` and ``e_R``: the rounding of forming them
(SAFETY times the GEMMs' inner lengths times u, added along the right sweep) plus twice
the eigensolver's backward error (ACCURACY n u). Eigenvalues below their bound are
noise and masked to zero, which moves them by at most the bound again. By Weyl's
inequality every squared singular value of the product then moves by at most
``shift = 2 (e_L ||G_R|| + e_R ||G_L||)``, so the weight a cut at k discards is at most
the computed tail plus ``shift`` for each of the discarded indices. Each train keeps the
smallest k whose bound is within its tolerance, provided its kept singular values stand
above the noise (s_k^2 >= RESOLVE shift; otherwise their factors would be noise too).

Where no such k exists, eps is below what Gram matrices resolve for that train (about
sqrt(n u) ||X||): the train is rounded by the SVD sweep instead (``fallback``).

Where the bound came from: the old sweep masked eigenvalues below 64 u of the largest
(singular values below 8 sqrt(u) of the largest, 2.8e-3 in float32, 1.2e-7 in float64,
both above the documented floor sqrt(u)) and left their weight out of the tail, so a
component of relative size 1e-3 vanished from a float32 sum rounded at eps = 1e-3.
Single-precision data are now rounded with Gram matrices in double precision (the
cores are few and small; their rounding noise is then far below the float32 floor).

>>> import numpy as np
>>> x = [np.ones((1, 1, 2, 1)), np.ones((1, 1, 2, 1))]
>>> gram([x, x], [1.0, 1.0], eps=1e-3, max_rank=None).ranks.tolist()
[[1, 1, 1]]
"""

import numpy as np

from ...linalg import smalleigh
from ...linalg.lapackcalls import lapack_threads, unit_roundoff
from ...linalg.truncation import SAFETY, rank_mask
from .batched import frobenius, spread
from .dense import bond_tolerance, einsum, norm_from_log, safe_log, scaled_by_log
from .sweeps import NOISE, Rounded, cancellation_ratio, first_cores, normalize_joint, svd

RESOLVE = 4  # kept squared singular values must stand this far above the shift


def right_grams(summands):
    """Gram matrices of the right parts X_{>c} of the sum at bonds c = 0..d-2, blockwise.

    Block (i, j) is <X^i_{>c}, X^j_{>c}> over the right indices; the diagonal blocks of
    the block-diagonal cores are the only ones ever multiplied. Returns the Grams
    normalised to trace 1 (g, R_c, R_c), the log of their scale, and the bound on their
    rounding error in units of u and of the trace (inner lengths times SAFETY, summed).
    """
    m, d, g = len(summands), len(summands[0]), summands[0][0].shape[0]
    grams, logs, errors = [None] * (d - 1), [None] * (d - 1), [None] * (d - 1)
    blocks, log, error = None, np.zeros(g), 0.0
    for c in range(d - 2, -1, -1):
        x, log2 = normalize_joint([s[c + 1] for s in summands], np.zeros(g))
        log = log + 2 * log2
        n, right = x[0].shape[2], sum(xj.shape[3] for xj in x)
        error += SAFETY * (n * right + right)
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
        grams[c], logs[c], errors[c] = full / scale, log, error
    return grams, logs, errors


def _roots(lam, err):
    """Square roots of the eigenvalues above their error bound and their inverses (zero
    at or below it: noise)."""
    keep = lam > err
    root = np.sqrt(np.where(keep, lam, 1))
    return np.where(keep, root, 0), np.where(keep, 1 / root, 0)


def certified_ranks(s, delta, shift, max_rank):
    """Per row of ``s`` (descending singular values, each true s_i^2 within ``shift`` of
    s_i^2): the smallest k >= 1 whose discarded weight bound, the tail sum_{i>=k} s_i^2
    plus ``shift`` per discarded index, is within delta^2, capped by ``max_rank``; that
    bound; and whether the cut is certain: k = 1, or the kept s_k^2 >= RESOLVE shift (at
    k = p the bound is 0, so a k always exists, but kept values at the noise are noise).

    >>> s = np.array([[1.0, 1e-3, 1e-9]])
    >>> certified_ranks(s, np.array([1e-4]), np.array([1e-14]), None)[0].tolist()
    [2]
    """
    g, p = s.shape
    sq = np.abs(s.astype(np.float64)) ** 2
    tail = np.concatenate([np.cumsum(sq[:, ::-1], axis=1)[:, ::-1], np.zeros((g, 1))], axis=1)
    bound = tail + (p - np.arange(p + 1)) * shift[:, None]
    ok = bound[:, 1:] <= (np.asarray(delta, dtype=np.float64) ** 2).reshape(-1, 1)
    k = np.argmax(ok, axis=1) + 1
    if max_rank is not None:
        k = np.minimum(k, max_rank)
    rows = np.arange(g)
    return k, bound[rows, k], (k == 1) | (sq[rows, k - 1] >= RESOLVE * shift)


def gram(summands, coefficients, eps, max_rank):
    """Gram-SVD rounding of the sum; trains whose cuts it cannot certify (eps below the
    Gram matrices' noise) are rounded by the SVD sweep (``Rounded.fallback``). Single
    precision is computed in double.

    >>> x = [np.ones((2, 1, 3, 1)), np.ones((2, 1, 3, 1))]
    >>> res = gram([x, x], [1.0, 1.0], eps=1e-12, max_rank=None)
    >>> res.ranks.tolist(), res.fallback.tolist()
    ([[1, 1, 1], [1, 1, 1]], [True, True])
    """
    dtype = summands[0][0].dtype
    wide = np.result_type(dtype, np.float64)
    stacks = [[x.astype(wide, copy=False) for x in s] for s in summands]
    res = _sweep(stacks, coefficients, eps, max_rank, unit_roundoff(dtype))
    if res is None:
        return svd(summands, coefficients, eps, max_rank)._replace(
            fallback=np.ones(len(summands[0][0]), dtype=bool))
    res = res._replace(cores=[c.astype(dtype, copy=False) for c in res.cores])
    if not res.fallback.any():
        return res
    again = np.flatnonzero(res.fallback)
    other = svd([[x[again] for x in s] for s in summands], coefficients, eps, max_rank)
    return _merged(res, other, again)


def _merged(res, other, rows):
    """``res`` with the trains at ``rows`` replaced by those of ``other``."""
    cores = []
    for a, b in zip(res.cores, other.cores, strict=True):
        out = np.zeros((len(a), max(a.shape[1], b.shape[1]), a.shape[2],
                        max(a.shape[3], b.shape[3])), dtype=a.dtype)
        out[:, : a.shape[1], :, : a.shape[3]] = a
        out[rows] = 0
        out[rows, : b.shape[1], :, : b.shape[3]] = b
        cores.append(out)
    ranks, norms, discarded = res.ranks.copy(), res.norms.copy(), res.discarded.copy()
    ranks[rows], norms[rows], discarded[rows] = other.ranks, other.norms, other.discarded
    return Rounded(cores, ranks, norms, discarded, res.fallback)


def _sweep(summands, coefficients, eps, max_rank, u_data):
    """The two-sided Gram sweep on double-precision stacks; None when no train's cuts
    could be certified (``u_data``: the data's unit roundoff, for the cancellation floor)."""
    d, g = len(summands[0]), summands[0][0].shape[0]
    z, logs = normalize_joint(first_cores(summands, coefficients), np.zeros(g))
    u = unit_roundoff(z[0].dtype)
    tol = bond_tolerance(eps, d)
    grams, glogs, gerrs = right_grams(summands) if d > 1 else ([], [], [])
    lognorm, zero = np.zeros(g), np.zeros(g, dtype=bool)  # zero: a train of norm 0
    ranks = np.ones((g, d + 1), dtype=np.int64)
    discarded = np.zeros(g)
    fallback = np.zeros(g, dtype=bool)
    out = []
    for c in range(d - 1):
        v = np.concatenate(z, axis=3)
        _, k, n, big = v.shape
        vm = v.reshape(g, k * n, big)
        gl = einsum("gma,gmb->gab", vm.conj(), vm)
        sl = np.abs(einsum("gaa->g", gl))
        sl = np.where(sl > 0, sl, 1).astype(sl.dtype)
        lam_l, q_l = smalleigh.reference_eigh(gl / sl.reshape(-1, 1, 1))
        lam_r, q_r = smalleigh.reference_eigh(grams[c])
        eigh_err = 2 * smalleigh.ACCURACY * big
        err_l = (SAFETY * (k * n + big) + eigh_err) * u
        err_r = (gerrs[c] + eigh_err) * u
        rl, il = _roots(lam_l, err_l)
        rr, ir = _roots(lam_r, err_r)
        shift = 2 * (err_l * (lam_r[:, -1] + err_r) + err_r * (lam_l[:, -1] + err_l))
        mat = rl[:, :, None] * einsum("gab,gac->gbc", q_l.conj(), q_r) * rr[:, None, :]
        with lapack_threads(mat):
            uu, s, wh = np.linalg.svd(mat)
        log_sigma = logs + 0.5 * (safe_log(sl) + glogs[c])
        if c == 0:
            net = frobenius(s)
            lognorm, zero = log_sigma + safe_log(net), net == 0
            # the terms' gross magnitude, sum_i ||L_i|| ||R_i|| over the columns (the Grams'
            # diagonals), as batched.terms_norm; ||L|| ||R|| = 1 would count unlike scales
            # of the summands as cancellation
            gross = np.sqrt(np.abs(np.diagonal(gl, axis1=1, axis2=2) / sl.reshape(-1, 1)
                                   * np.diagonal(grams[c], axis1=1, axis2=2))).sum(axis=1)
            floor = np.maximum(tol, NOISE * u_data * cancellation_ratio(gross, net))
        to_rel = np.exp(log_sigma - lognorm)
        kept, tail, certain = certified_ranks(s * to_rel[:, None], floor, shift * to_rel**2,
                                              max_rank)
        fallback |= ~certain
        if fallback.all():
            return None
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
        z, logs = normalize_joint(z, logs)
        ranks[:, c + 1] = kept
        discarded += tail
    if d == 1:
        z = [sum(z)]
        net = frobenius(z[0])
        lognorm, zero = logs + safe_log(net), net == 0
    out.append(z[0])
    return Rounded(spread(out, logs), ranks, norm_from_log(np.where(zero, 0.0, 1.0), lognorm),
                   np.sqrt(discarded), fallback)
