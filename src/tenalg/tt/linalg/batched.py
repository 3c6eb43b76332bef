"""Batched kernels on stacks of trains with equal core shapes.

A stack is a list of d arrays of shape (g, l, n, r): core k of g trains. A single train
is a stack with g = 1, so the single-train operations and the pack operations run the
same code. Long chains are kept finite by normalising every core and the carried factor
before they are multiplied, accumulating the logarithms of the scales.

>>> import numpy as np
>>> a = [np.ones((1, 1, 2, 1)), np.ones((1, 1, 2, 1))]
>>> dot(a, a).tolist()
[4.0]
"""

import math

import numba
import numpy as np

from ...blas import one_blas_thread
from ...kernels import compiler
from ...kernels.jit import CACHE
from ...linalg.scaling import times_power_of_two
from ...linalg.workspace import FRESH
from .dense import einsum, scaled_by_log


def stack(trains):
    """Core arrays of ``trains`` (equal shapes) as a stack."""
    return [np.concatenate([t.cores[k].array()[None] for t in trains])
            for k in range(trains[0].ncores)]


LN2 = math.log(2.0)


def _exponents(x):
    """Per train, the e of the power of two 2^e at or just above its largest modulus (0
    for a slice that is zero or not finite). Scaling by 2^-e is exact, where dividing by
    the modulus itself rounds every entry (a float32 core so scaled cost a mixed float32
    by float64 dot a relative 1e-7)."""
    m = np.abs(x).max(axis=tuple(range(1, x.ndim)), initial=0)
    fraction, e = np.frexp(m)
    return np.where((m > 0) & np.isfinite(m), e - (fraction == 0.5), 0)


def frobenius(x):
    """Frobenius norm of each train's slice of ``x`` (scaled by its largest modulus: no
    overflow or underflow of squares).  A norm needs no exact scaling, and this form
    costs 21 us on a (1, 20, 16, 20) slice where the power-of-two one cost 30 (some 20
    calls a rounding of a small train)."""
    s = np.abs(x).max(axis=tuple(range(1, x.ndim)), initial=0)
    s = np.where((s > 0) & np.isfinite(s), s, 1).astype(s.dtype)
    if x.dtype.kind == "c" and (s < np.finfo(s.dtype).tiny).any():
        # a complex division by a subnormal overflows (as its reciprocal): exact powers
        e = _exponents(x)
        return np.ldexp(frobenius(times_power_of_two(x, -e)), e)
    y = x / s.reshape((-1,) + (1,) * (x.ndim - 1))
    return s * np.sqrt((np.abs(y) ** 2).sum(axis=tuple(range(1, x.ndim))))


def terms_norm(a, b):
    """sum_i ||a[t, :, i]|| ||b[t, i, :]|| for each train t of ``a`` (g, m, r) and ``b``
    (g, r, k): the gross magnitude of the terms the product a b adds, which bounds its
    rounding error, and that of a factorisation stable row by row (Householder's) behind
    b. ||a|| ||b|| bounds it too, but counts one summand's large first core against
    another's large factor: a sum of trains whose scales sit in unlike cores (float32,
    dims (1, 1, 2, 5, 1), X + (X + 0.1 Y) read as cancelling 1e4-fold and lost 4%).

    >>> terms_norm(np.array([[[3.0, 0.0]]]), np.array([[[0.0], [4.0]]])).tolist()
    [0.0]
    """
    g, m, r = a.shape
    columns = frobenius(a.transpose(0, 2, 1).reshape(g * r, m)).reshape(g, r)
    rows = frobenius(b.reshape(g * r, -1)).reshape(g, r)
    return (columns * rows).sum(axis=1)


def normalize(x, logs):
    """Scale each train's slice of ``x`` by the power of two at or just above its largest
    modulus (exactly); add the log of the power to ``logs``.

    One Numba pass (:func:`_normalize_kernel`); these NumPy operations, its twin while it
    compiles, cost 8 us on a 20 x 20 factor (2 us in the kernel), 10 times a rounding.

    >>> y, logs = normalize(np.array([[1.0, -4.0], [0.0, 0.0]]), np.zeros(2))
    >>> y.tolist(), logs.tolist()
    ([[0.25, -1.0], [0.0, 0.0]], [1.3862943611198906, 0.0])
    """
    flat = np.ascontiguousarray(x).reshape(x.shape[0], -1)
    out, new = np.empty(flat.shape, dtype=x.dtype), np.empty(x.shape[0])
    args = (flat, np.ascontiguousarray(logs, dtype=np.float64), out, new)
    if compiler.ready_for(_normalize_kernel, args, (x.dtype, flat.flags.writeable)):
        _normalize_kernel(*args)
        return out.reshape(x.shape), new
    e = _exponents(x)
    return times_power_of_two(x, -e), logs + e * LN2


@numba.njit(cache=CACHE, error_model="numpy", nogil=True)
def _normalize_kernel(x, logs, out, new):
    """:func:`normalize` of the rows of ``x`` (g, size) into ``out`` and ``new`` (the same
    operations: a NaN row, an infinite or a zero one is scaled by 1)."""
    for t in range(x.shape[0]):
        e = exponent(x[t])
        times_power_of_two_row(x[t], -e, out[t])
        new[t] = logs[t] + e * LN2


@numba.njit(error_model="numpy", nogil=True)
def exponent(x):
    """The e of the power of two 2^e at or just above the largest modulus of the 1-D
    ``x`` (0 where that is 0, inf or NaN), as :func:`_exponents`."""
    m = 0.0
    for i in range(x.shape[0]):
        a = abs(x[i])
        if a > m or a != a:  # NaN wins, as in np.max
            m = a
    fraction, e = math.frexp(m)
    return (e - (fraction == 0.5)) if m > 0 and m < np.inf else 0


@numba.njit(error_model="numpy", nogil=True)
def times_power_of_two_row(x, e, out):
    """``out`` = ``x`` (1-D) times 2^e, exactly (in two factors, as
    :func:`~tenalg.linalg.scaling.times_power_of_two`)."""
    half = e // 2
    first, second = math.ldexp(1.0, half), math.ldexp(1.0, e - half)
    for i in range(x.shape[0]):
        out[i] = x[i] * first * second


def block_sum(a, b):
    """Stacks of the sums a + b: first core [A B], interior diag(A, B), last [A; B]."""
    d = len(a)
    if d == 1:
        return [a[0] + b[0]]
    shapes = [(x.shape[0], x.shape[1] + y.shape[1] if k else 1, x.shape[2],
                x.shape[3] + y.shape[3] if k < d - 1 else 1)
               for k, (x, y) in enumerate(zip(a, b, strict=True))]
    out = fresh(shapes, np.result_type(a[0], b[0]))
    for k, (x, y, z) in enumerate(zip(a, b, out, strict=True)):
        la, ra = x.shape[1], x.shape[3]
        l0 = 0 if k == 0 else la
        r0 = 0 if k == d - 1 else ra
        z[:, :la, :, :ra] = x
        z[:, l0:, :, r0:] = y
        if l0 and r0:
            z[:, :la, :, ra:] = 0
            z[:, la:, :, :ra] = 0
    return out


def sum_cores(terms, work=FRESH):
    """The cores of the sum of the stacks ``terms``, with the interior cores left as
    lists of their diagonal blocks (first [A B ...] and last [A; B; ...] are formed, in
    ``work``'s buffers); one term is returned as it is.

    >>> x = [np.ones((1, 1, 2, 1)), np.ones((1, 1, 2, 1)), np.ones((1, 1, 2, 1))]
    >>> [c.shape if isinstance(c, np.ndarray) else len(c) for c in sum_cores([x, x])]
    [(1, 1, 2, 2), 2, (1, 2, 2, 1)]
    """
    if len(terms) == 1:
        return terms[0]
    if len(terms[0]) == 1:
        return [sum(t[0] for t in terms)]
    ends = []
    for key, axis in ((0, 3), (-1, 1)):
        parts = [t[key] for t in terms]
        shape = list(parts[0].shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        out = work.array(("sum", key), tuple(shape), np.result_type(*parts))
        ends.append(np.concatenate(parts, axis=axis, out=out))
    return [ends[0], *([t[k] for t in terms] for k in range(1, len(terms[0]) - 1)), ends[1]]


def times_lower(core, lf, work, key):
    """``core`` (g, l, n, r) times ``lf`` (g, r, k) over r, into ``work``'s buffer ``key``.

    ``core`` may be a list of diagonal blocks (:func:`sum_cores`): block i meets only its
    own rows of lf, and where lf is lower trapezoidal (lf[b, j] = 0 for j > b, as the L
    of an LQ) only its columns up to its last row, so the zeros of the block-diagonal core
    and of lf are never multiplied (a rank-revealing L, :mod:`~tenalg.linalg.truncation`,
    is full: its blocks meet every column).

    >>> lf = np.tril(np.ones((1, 2, 2)))
    >>> blocks = [np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1))]
    >>> times_lower(blocks, lf, FRESH, "t")[:, :, 0, :].tolist()
    [[[1.0, 0.0], [1.0, 1.0]]]
    """
    if isinstance(core, np.ndarray):
        g, l, n, r = core.shape
        return work.matmul(key, core.reshape(g, l * n, r), lf).reshape(g, l, n, lf.shape[2])
    g, n, k = core[0].shape[0], core[0].shape[2], lf.shape[2]
    lower = not np.triu(lf, 1).any()
    rows = sum(x.shape[1] for x in core)
    out = work.array(key, (g, rows, n, k), np.result_type(lf, *core))
    flat = out.reshape(g, rows * n, k)
    lo = off = 0
    for x in core:
        l, r = x.shape[1], x.shape[3]
        w = min(k, off + r) if lower else k
        part = flat[:, lo * n : (lo + l) * n]
        np.matmul(x.reshape(g, l * n, r), lf[:, off : off + r, :w], out=part[:, :, :w])
        part[:, :, w:] = 0
        lo, off = lo + l, off + r
    return out


def dot(a, b):
    """<a, b> for each train pair, conjugating a; open outer bonds are summed over."""
    e = np.broadcast_to(np.eye(a[0].shape[1], dtype=np.result_type(a[0], b[0])),
                        (a[0].shape[0], a[0].shape[1], b[0].shape[1]))
    logs = np.zeros(a[0].shape[0])
    for x, y in zip(a, b, strict=True):
        x, logs = normalize(x, logs)
        y, logs = normalize(y, logs)
        e = einsum("ganc,gand->gcd", x.conj(), einsum("gab,gbnd->gand", e, y))
        e, logs = normalize(e, logs)
    return scaled_by_log(einsum("gaa->g", e), logs)


def norm(a):
    """Frobenius norm of each train, by a left-to-right QR sweep (no sum of squares)."""
    logs = np.zeros(a[0].shape[0])
    r = None
    with one_blas_thread(a[0].dtype):  # once, not per core
        for x in a:
            x, logs = normalize(x, logs)
            m = x if r is None else einsum("gab,gbnc->ganc", r, x)
            g, l, n, rr = m.shape
            r = np.linalg.qr(m.reshape(g, l * n, rr), mode="r")
            r, logs = normalize(r, logs)
    return scaled_by_log(frobenius(r), logs)


def fresh(shapes, dtype):
    """New arrays of ``shapes`` in one allocation (a large one is faulted in as huge
    pages, far fewer faults than one per 4 KB page of many smaller arrays).

    >>> [a.shape for a in fresh([(2, 3), (4,)], np.float64)]
    [(2, 3), (4,)]
    """
    return split(np.empty(sum(math.prod(s) for s in shapes), dtype=dtype), shapes)


def split(flat, shapes):
    """Views of the 1-D ``flat``, one after the other, of ``shapes``.

    >>> [a.tolist() for a in split(np.arange(5), [(2,), (1, 3)])]
    [[0, 1], [[2, 3, 4]]]
    """
    sizes = [math.prod(s) for s in shapes]
    ends = np.cumsum(sizes).tolist()
    return [flat[e - n : e].reshape(s) for s, n, e in zip(shapes, sizes, ends, strict=True)]


def spread(cores, logs):
    """Multiply each train's cores by exp(logs / d), giving back a carried scale evenly
    (into fresh arrays)."""
    d = len(cores)
    outs = fresh([c.shape for c in cores], cores[0].dtype)
    return [scaled_by_log(c, (logs / d).reshape(-1, 1, 1, 1), out=o)
            for c, o in zip(cores, outs, strict=True)]


def reverse(cores):
    """The stack of the reversed trains (core k becomes core d-1-k, transposed)."""
    return [c.transpose(0, 3, 2, 1) for c in reversed(cores)]


def unstack(cores, ranks):
    """Per train, its cores cut to its own ranks (``ranks`` is (g, d+1)); views of the
    stacks where a core keeps the stack's full ranks in every train."""
    cut, bonds = [], ranks.T.tolist()  # (each train's rank at each bond)
    for k, c in enumerate(cores):
        left, right = bonds[k], bonds[k + 1]
        if left.count(c.shape[1]) == len(left) and right.count(c.shape[3]) == len(right):
            cut.append(list(c))
        else:
            cut.append([np.ascontiguousarray(x[:l, :, :r])
                        for x, l, r in zip(c, left, right, strict=True)])
    return [list(arrays) for arrays in zip(*cut, strict=True)]
