"""Reference kernels: short NumPy code that is obviously right.

Same interface as :mod:`tenalg.kernels.cpu`: every argument is a strided view already
shaped by the layout analysis (output first; for reductions the input's trailing axes
are the reduced ones).  Arithmetic runs in the compute type; the cast to the output
dtype happens at the final write.

>>> import numpy as np
>>> from tenalg.descriptors import Reduce, Unary
>>> out = np.empty(2)
>>> reduce(out, np.arange(6.0).reshape(2, 3), op=Reduce.SUM, alpha=1, beta=0, c=None,
...        unary_a=Unary.IDENTITY, unary_c=Unary.IDENTITY, compute=np.dtype(np.float64))
>>> out.tolist()
[3.0, 12.0]
"""

import numpy as np

from ..descriptors import Binary, Reduce, Unary


def _relu(x):
    if np.iscomplexobj(x):
        return np.where(x.real > 0, x, 0)
    return np.where(np.isnan(x), x, np.maximum(x, 0))


UNARY = {
    Unary.IDENTITY: lambda x: x,
    Unary.NEGATE: np.negative,
    Unary.ABS: np.abs,
    Unary.SQRT: np.sqrt,
    Unary.EXP: np.exp,
    Unary.LOG: np.log,
    Unary.SIN: np.sin,
    Unary.COS: np.cos,
    Unary.TANH: np.tanh,
    Unary.RELU: _relu,
    Unary.RECIPROCAL: np.reciprocal,
    Unary.CONJUGATE: np.conjugate,
}


def minimum(a, b):
    """Elementwise min: NaN propagates, and -0 is below +0."""
    pick_a = (a < b) | np.isnan(a) | ((a == b) & np.signbit(a))
    return np.where(pick_a, a, b)


def maximum(a, b):
    """Elementwise max: NaN propagates, and +0 is above -0."""
    pick_a = (a > b) | np.isnan(a) | ((a == b) & ~np.signbit(a))
    return np.where(pick_a, a, b)


BINARY = {Binary.ADD: np.add, Binary.MUL: np.multiply, Binary.MIN: minimum, Binary.MAX: maximum}
_UFUNCS = {op: f for op, f in BINARY.items() if isinstance(f, np.ufunc)}  # take an out=


def load(x, unary, compute):
    """``unary(x)`` in the compute type (the abs of complex data stays complex-typed)."""
    y = UNARY[unary](np.asarray(x).astype(compute, copy=unary is not Unary.IDENTITY))
    return y.astype(compute, copy=False)


def scale(x, s, compute):
    """``s * x`` in the compute type; multiplying by 1 is skipped (no -0 surprises)."""
    if s == 1:
        return x
    return np.asarray(s, compute) * x


def store(out, value):
    """Write ``value`` into ``out``, converting at the final write."""
    out[...] = np.asarray(value).astype(out.dtype, copy=False)


def _reduce_axes(x, axes, op):
    if op is Reduce.SUM:
        return np.sum(x, axis=axes)
    if op is Reduce.PRODUCT:
        return np.prod(x, axis=axes)
    minimum = op is Reduce.MIN
    r = (np.min(x, axis=axes, initial=np.inf) if minimum
         else np.max(x, axis=axes, initial=-np.inf))
    if not np.any(r == 0):  # signed zeros decide nothing: one pass (max of 10^5: 4-10x
        return r            # NumPy's time with the two passes below)
    # a zero result is -0.0 for min where any -0.0 took part, +0.0 for max where any +0.0
    signed = np.any((x == 0) & (np.signbit(x) if minimum else ~np.signbit(x)), axis=axes)
    return np.where((r == 0) & signed, -0.0 if minimum else 0.0, r).astype(x.dtype)


def permute(out, a, *, alpha, unary, compute):
    """out = alpha * unary(a)."""
    with np.errstate(all="ignore"):
        store(out, scale(load(a, unary, compute), alpha, compute))


def reduce(out, a, *, op, alpha, beta, c, unary_a, unary_c, compute):
    """out = alpha * R(unary_a(a)) over a's trailing axes + beta * unary_c(c)."""
    axes = tuple(range(out.ndim, a.ndim))
    if (op is Reduce.SUM and unary_a is Unary.IDENTITY and alpha == 1 and beta == 0
            and a.dtype == compute == out.dtype):
        np.add.reduce(a, axis=axes, out=out)  # the plain sum: straight into out
        return
    with np.errstate(all="ignore"):
        value = scale(_reduce_axes(load(a, unary_a, compute), axes, op), alpha, compute)
        if beta != 0:
            value = value + scale(load(c, unary_c, compute), beta, compute)
    store(out, value)


def elementwise(out, inputs, *, unaries, op_ab, op_abc, scalars, compute):
    """out = op_abc(op_ab(alpha ua(a), beta ub(b)), gamma uc(c)) (binary: without c)."""
    ops = (op_ab,) if len(inputs) == 2 else (op_ab, op_abc)
    with np.errstate(all="ignore"):
        if (out.dtype == compute and all(op in _UFUNCS for op in ops)
                and not any(np.may_share_memory(out, x) for x in inputs)):
            _accumulate(out, inputs, unaries, scalars, ops, compute)
            return
        terms = [
            scale(load(x, u, compute), s, compute)
            for x, u, s in zip(inputs, unaries, scalars, strict=True)
        ]
        value = BINARY[op_ab](terms[0], terms[1])
        if len(terms) == 3:
            value = BINARY[op_abc](value, terms[2])
    store(out, value)


def _accumulate(out, inputs, unaries, scalars, ops, compute):
    """:func:`elementwise` term by term into ``out`` (of the compute type, apart from the
    inputs), the ops sums or products: fresh temporaries' page faults were most of a
    first (64,)^3 trinary, 6.9 ms (NumPy's 2x + 3y + z: 1.9 ms)."""
    scratch = None
    for k, (x, u, s) in enumerate(zip(inputs, unaries, scalars, strict=True)):
        y = load(x, u, compute)
        if s != 1:
            if k == 0:
                target = out
            elif y is not x and type(y) is np.ndarray:  # a copy of x: ours to overwrite
                target = y
            else:
                scratch = np.empty(out.shape, compute) if scratch is None else scratch
                target = scratch
            y = np.multiply(np.asarray(s, compute), y, out=target)
        if k == 0 and y is not out:
            np.copyto(out, y)
        elif k > 0:
            _UFUNCS[ops[k - 1]](out, y, out=out)
