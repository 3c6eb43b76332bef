"""Inner products, norms and vector contractions of one small train in one compiled call.

The batched kernels (:mod:`~tenalg.tt.linalg.batched`) make some ten NumPy and einsum
calls a core, a few microseconds each: a dot of two (d 10, n 2, r 1) trains took 360 us
where teneva's plain NumPy loop takes 74. For one contiguous train whose cores are small
(:data:`LIMIT`) this module runs the same chains in Numba: the same products (BLAS's),
the same exact power-of-two scaling of what is multiplied, its exponent carried (and
given back exactly: the batched kernels carry a logarithm), and
LAPACK's QR for norms. The results equal the batched kernels' to rounding.

Each function returns None where it does not apply or its kernel is compiling
(:mod:`tenalg.kernels.compiler`), and the caller takes the batched kernel, its twin.

>>> import numpy as np
>>> x = [np.ones((1, 2, 1)), np.ones((1, 3, 1))]
>>> float(dot(x, x)), float(norm(x)), contract_vectors(x, [np.ones(2), np.ones(3)]).tolist()
(6.0, 2.449489742783178, [[6.0]])
"""

import math

import numba
import numpy as np

from ...dtypes import COMPUTE_TYPES, real_type
from ...kernels import compiler
from ...kernels.jit import CACHE
from .batched import exponent, times_power_of_two_row

# the largest l n r max(l, r) of a core (its products' work) a dot or norm takes here:
# beyond it the batched kernels' BLAS calls on NumPy's threads cost less than their
# overhead; a vector contraction reads each core once, at any size, but its flat copy of
# the cores must stay small
LIMIT = 1 << 17
FLAT_LIMIT = 1 << 24


def _shapes(cores, limit=LIMIT):
    """The (d, 3) int64 array of the shapes of the (l, n, r) arrays ``cores``, or None
    where a core is past ``limit`` (Python's loop: NumPy's costs more for small d)."""
    shapes = [c.shape for c in cores]
    if limit is not None and max(l * n * r * max(l, r) for l, n, r in shapes) > limit:
        return None
    return np.array(shapes, dtype=np.int64)


def _flat(arrays, dtype):
    return np.concatenate([a.ravel() for a in arrays], dtype=dtype)


def _compute_type(*dtypes):
    dtype = dtypes[0] if len(set(dtypes)) == 1 else np.result_type(*dtypes)
    return dtype if dtype in COMPUTE_TYPES else None


def dot(xs, ys):
    """<x, y> (x conjugated; open outer bonds summed over) of the trains whose cores are
    the (l, n, r) arrays ``xs`` and ``ys``, or None (see the module's docstring)."""
    dtype = _compute_type(xs[0].dtype, ys[0].dtype)
    x, y = _shapes(xs), _shapes(ys)
    if dtype is None or x is None or y is None:
        return None
    args = (_flat(xs, dtype), _flat(ys, dtype), x, y)
    if not compiler.ready_for(_dot, args, dtype):
        return None
    return dtype.type(_dot(*args))


def norm(xs):
    """The Frobenius norm of the train whose cores are ``xs``, by a left-to-right QR
    sweep, or None (see the module's docstring; also for NaN or inf, which LAPACK's
    caller in Numba refuses)."""
    dtype, shapes = _compute_type(xs[0].dtype), _shapes(xs)
    if dtype is None or shapes is None:
        return None
    args = (_flat(xs, dtype), shapes)
    if not compiler.ready_for(_norm, args, dtype):
        return None
    try:
        value = _norm(*args)
    except np.linalg.LinAlgError:
        return None
    return real_type(dtype).type(value)


def contract_vectors(cores, vectors):
    """The (r_0, r_d) matrix of ``cores`` with mode k contracted with ``vectors[k]`` (of
    the right extents; or all of them one after the other in one array), or None (see
    the module's docstring; cores of any size, up to :data:`FLAT_LIMIT` elements in all:
    each is read once, by a GEMV for closed trains)."""
    flat = isinstance(vectors, np.ndarray)
    dtype = _compute_type(cores[0].dtype, *(v.dtype for v in ([vectors] if flat else vectors)))
    shapes = _shapes(cores, limit=None)
    if dtype is None or shapes is None or sum(c.size for c in cores) > FLAT_LIMIT:
        return None
    args = (_flat(cores, dtype), vectors.astype(dtype, copy=False) if flat
            else _flat(vectors, dtype), shapes)
    if not compiler.ready_for(_vectors, args, dtype):
        return None
    return _vectors(*args)


@numba.njit(nogil=True)
def _normalized(a, e):
    """``a`` (C-contiguous) scaled by the power of two at or just above its largest
    modulus, exactly (as batched.normalize), and ``e`` plus that power's exponent."""
    flat = a.reshape(-1)
    shift = exponent(flat)
    out = np.empty_like(flat)
    times_power_of_two_row(flat, -shift, out)
    return out.reshape(a.shape), e + shift


@numba.njit(nogil=True)
def _times_two_to(a, e):
    """``a`` times 2^e, exactly (to inf or 0 where the product leaves the range), in steps
    of at most 2^1000 (an open train's result holds entries far below its largest)."""
    flat = np.ascontiguousarray(a).reshape(-1)
    out = flat.copy()
    while e != 0:
        step = max(min(e, 1000), -1000)
        times_power_of_two_row(out, step, out)
        e -= step
    return out.reshape(a.shape)


@numba.njit(nogil=True)
def frobenius(a):
    """The Frobenius norm of ``a``, scaled by its largest modulus (no under- or overflow
    of the squares); real or complex."""
    big = np.abs(a).max()
    if not (big > 0 and big < np.inf):
        return big
    total = 0.0
    for x in a.ravel():
        y = x / big
        total += y.real * y.real + y.imag * y.imag
    return big * math.sqrt(total)


@numba.njit(cache=CACHE, nogil=True)
def _dot(x, y, xshapes, yshapes):
    """The dot of the trains whose cores lie one after the other in ``x`` and ``y`` (of
    the (l, n, r) shapes ``xshapes``, ``yshapes``), as batched.dot."""
    m = np.eye(xshapes[0, 0], dtype=x.dtype)
    e, xs, ys = 0, 0, 0
    for k in range(xshapes.shape[0]):
        la, n, ra = xshapes[k, 0], xshapes[k, 1], xshapes[k, 2]
        lb, rb = yshapes[k, 0], yshapes[k, 2]
        a, e = _normalized(x[xs : xs + la * n * ra].reshape(la * n, ra), e)
        b, e = _normalized(y[ys : ys + lb * n * rb].reshape(lb, n * rb), e)
        xs, ys = xs + a.size, ys + b.size
        t = np.ascontiguousarray(m @ b).reshape(la * n, rb)
        m, e = _normalized(np.ascontiguousarray(np.conj(a).T @ t), e)
    return _times_two_to(np.full(1, np.trace(m)), e)[0]


@numba.njit(cache=CACHE, nogil=True)
def _norm(x, shapes):
    """The norm of the train whose cores (of ``shapes``) lie one after the other in
    ``x``, as batched.norm (R factors of QRs left to right)."""
    r = np.ones((1, 1), dtype=x.dtype)
    e, start = 0, 0
    for k in range(shapes.shape[0]):
        l, n, rr = shapes[k, 0], shapes[k, 1], shapes[k, 2]
        a, e = _normalized(x[start : start + l * n * rr].reshape(l, n * rr), e)
        start += a.size
        m = a if k == 0 else np.ascontiguousarray(r @ a)
        _, factor = np.linalg.qr(m.reshape(-1, rr))
        r, e = _normalized(np.ascontiguousarray(factor), e)
    return _times_two_to(np.full(1, frobenius(r)), e)[0]


@numba.njit(cache=CACHE, nogil=True)
def _vectors(x, v, shapes):
    """The matrix of the train whose cores (of ``shapes``) lie one after the other in
    ``x`` contracted with the vectors one after the other in ``v``."""
    m = np.eye(shapes[0, 0], dtype=x.dtype)
    e, start, at = 0, 0, 0
    for k in range(shapes.shape[0]):
        l, n, r = shapes[k, 0], shapes[k, 1], shapes[k, 2]
        core = x[start : start + l * n * r].reshape(l, n * r)
        start += core.size
        t = np.ascontiguousarray(m @ core).reshape(m.shape[0], n, r)  # then the vector
        step = np.zeros((m.shape[0], r), dtype=x.dtype)
        for i in range(m.shape[0]):
            for j in range(n):
                w = v[at + j]  # (a zero entry too: NaN times 0 is NaN, as in the twin)
                for c in range(r):
                    step[i, c] += t[i, j, c] * w
        at += n
        m, e = _normalized(step, e)
    return _times_two_to(m, e)
