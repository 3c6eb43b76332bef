"""The "svd" rounding of one small real train in one compiled call.

The batched sweep (:mod:`tenalg.tt.linalg.sweeps`) makes some 25 NumPy calls a bond, a
microsecond or more each: a fixed 0.2 ms or so of a rounding, and on small unfoldings
more per bond than LAPACK's own work. For one real train whose cores are small
(:data:`LIMITS`; a sum of trains, as ``round_sum`` rounds, counts as its block-diagonal
cores, which are formed) this module runs the textbook sweep instead, in Numba, LAPACK
included (Oseledets: Householder QR right to left, truncated SVDs left to right), with
the batched sweep's rules: the per-bond tolerance, the rank cap, the noise floor of
cancelling sums, the scale carried as a logarithm. Past the limits, and for complex
trains, the batched sweep's certified Gram paths cost less than LAPACK's QR and SVD.

The results are LAPACK's SVD truncations, which the batched sweep's equal to within
sqrt(u) (its Gram paths are certified to that), so the eps bound holds either way; ranks
may differ only where a singular value sits at the cut to that accuracy. While the
kernel compiles (:mod:`tenalg.kernels.compiler`), for trains with infinite or NaN
entries, and where the result is not finite (:func:`svd` checks it, the caller need
not), :func:`svd` returns None and the caller takes the batched sweep.

>>> import numpy as np
>>> small(np.float64, (8,) * 10, (1,) + (24,) * 9 + (1,)), small(np.complex128, (4, 4), (1, 2, 1))
(True, False)
"""

import functools
import math

import numba
import numpy as np

from ...kernels import compiler
from ...kernels.jit import CACHE
from ...linalg.lapackcalls import unit_roundoff
from .batched import block_sum, split
from .dense import bond_tolerance, norm_from_log
from .smallchain import frobenius
from .sweeps import NOISE, Rounded, first_cores

# per dtype: the largest work l n r min(l, r) of a core that this path takes (however many
# cores: the batched sweep's fixed cost per bond is the same on every core). One train, a
# random sum of two of rank r capped at r, eps 1e-8 (float64) or 1e-4 (float32), against
# the batched sweep: float64 (10, 16, 10) 1.84 ms against 2.35, (100, 3, 8) 6.5 against
# 17.0, (60, 8, 10) 8.0 against 12.8; float32 (40, 4, 20) 11.9 against 20.2, (60, 8, 10)
# 6.3 against 14.2; but float64 (30, 8, 16), work 2^18, 17.1 against 14.4
LIMITS = {np.dtype(np.float64): 1 << 17, np.dtype(np.float32): 1 << 19}


def small(dtype, dims, ranks):
    """Whether a real train of ``dtype`` with these dims (d,) and ranks (d + 1,) is small
    enough for this path (:data:`LIMITS`)."""
    limit = LIMITS.get(np.dtype(dtype))
    if limit is None or len(dims) < 2:
        return False
    return all(l * n * r * min(l, r) <= limit
               for l, n, r in zip(ranks[:-1], dims, ranks[1:], strict=True))


def svd(summands, coefficients, eps, max_rank):
    """:func:`~tenalg.tt.linalg.sweeps.svd` of one train (a sum of the summands' trains,
    formed here: small trains' block-diagonal cores cost little) in one compiled call;
    None where this path does not apply (see the module's docstring) or its kernel is
    compiling."""
    if summands[0][0].shape[0] != 1:
        return None  # several trains: a pack's group
    first = first_cores(summands, coefficients)
    dtype, d = np.result_type(*first), len(summands[0])  # (complex coefficients: complex)
    dims = [c.shape[2] for c in summands[0]]
    ranks = [1] + [sum(s[k].shape[3] for s in summands) for k in range(d - 1)] + [1]
    if not small(dtype, dims, ranks):
        return None
    cores = functools.reduce(block_sum, [[f, *s[1:]] for f, s in zip(first, summands,
                                                                      strict=True)])
    flat = np.concatenate([c.ravel() for c in cores], dtype=dtype)
    out = np.empty_like(flat)
    new_ranks = np.ones((1, d + 1), dtype=np.int64)
    args = (flat, np.array(dims, dtype=np.int64), np.array(ranks, dtype=np.int64),
            bond_tolerance(eps, d), 0 if max_rank is None else max_rank,
            NOISE * unit_roundoff(dtype), out, new_ranks[0])
    if not compiler.ready_for(_sweep, args, dtype):
        return None
    try:
        nrm, log, discarded = _sweep(*args)
    except np.linalg.LinAlgError:  # an infinity or NaN met by LAPACK (which checks first)
        return None
    kept = new_ranks[0].tolist()
    shapes = [(1, kept[k], dims[k], kept[k + 1]) for k in range(d)]
    used = out[:sum(math.prod(s) for s in shapes)]
    if not np.isfinite(used).all():
        return None  # NaN in, or an overflow: the batched sweep's checks say which
    return Rounded(split(used, shapes), new_ranks, norm_from_log([nrm], log),
                   np.array([discarded]))


@numba.njit(nogil=True)
def _normalized(a):
    """``a`` divided by its largest modulus (by 1 where that is 0 or not finite), and the
    log of the divisor."""
    big = np.abs(a).max()
    if not (big > 0 and big < np.inf):
        return a, 0.0
    return a / big, math.log(big)


@numba.njit(nogil=True)
def _kept(s, delta2, cap):
    """The smallest k >= 1 whose tail sum_{i>=k} s_i^2 is at most ``delta2``, capped by
    ``cap`` (0: none), and that tail (:func:`~tenalg.linalg.truncation.keep_ranks`)."""
    p = s.shape[0]
    k, tail = p, 0.0
    for i in range(p - 1, 0, -1):
        si = np.float64(s[i])
        if tail + si * si > delta2:
            break
        tail += si * si
        k = i
    if 0 < cap < k:
        tail = 0.0
        for i in range(p - 1, cap - 1, -1):
            si = np.float64(s[i])
            tail += si * si
        k = cap
    return k, tail


@numba.njit(cache=CACHE, nogil=True)
def _sweep(flat, dims, ranks, tol, cap, noise, out, new_ranks):
    """Round the train whose cores (ranks[k], dims[k], ranks[k+1]) lie one after the other
    in ``flat``: its cores, each times exp(log / d), into ``out`` and their ranks into
    ``new_ranks``. Returns (the norm in units of exp(log), log, the relative discarded
    weight). Every entry passes through a LAPACK call, which raises LinAlgError on an
    infinity or NaN (Numba checks its inputs)."""
    d = dims.shape[0]
    mats = []  # core k as an (l, n r) matrix
    start = 0
    for k in range(d):
        size = ranks[k] * dims[k] * ranks[k + 1]
        mats.append(flat[start : start + size].reshape(ranks[k], dims[k] * ranks[k + 1]))
        start += size
    log, gross = 0.0, 0.0
    # (LAPACK reads and writes column-major: a transposed C matrix is one, copied as it is)
    for k in range(d - 1, 0, -1):  # M = L Q with Q^T from the QR of M^T
        q, r = np.linalg.qr(mats[k].T)
        mats[k] = np.ascontiguousarray(q.T)
        lf, scale = _normalized(np.ascontiguousarray(r.T))
        log += scale
        left = mats[k - 1].reshape(-1, lf.shape[0])
        if k == 1:  # batched.terms_norm
            for i in range(lf.shape[0]):
                gross += frobenius(np.ascontiguousarray(left[:, i])) * frobenius(lf[i])
        mats[k - 1] = (left @ lf).reshape(mats[k - 1].shape[0], -1)
    net = frobenius(mats[0])
    ratio = gross / net if net > 0 else (1.0 if gross > 0 else 0.0)
    mats[0], scale = _normalized(mats[0])
    log += scale
    nrm = frobenius(mats[0])
    delta = max(tol, noise * ratio) * nrm
    discarded = 0.0
    for k in range(d - 1):
        l, n = mats[k].shape[0], dims[k]
        u, s, vh = np.linalg.svd(mats[k].reshape(l * n, -1), full_matrices=False)
        kk, tail = _kept(s, delta * delta, cap)
        discarded += tail
        mats[k] = np.ascontiguousarray(u[:, :kk]).reshape(l, n * kk)
        right = np.ascontiguousarray(s[:kk].reshape(-1, 1) * vh[:kk])
        nxt = mats[k + 1]
        mats[k + 1] = right @ nxt.reshape(right.shape[1], -1)
        new_ranks[k + 1] = kk
    factor = math.exp(log / d)  # the carried scale given back evenly
    start = 0
    for k in range(d):
        for x in mats[k].ravel():
            out[start] = x * factor
            start += 1
    return nrm, log, math.sqrt(discarded) / (nrm if nrm > 0 else 1.0)
