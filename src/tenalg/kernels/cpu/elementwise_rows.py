"""Fused elementwise kernels (``out = op_abc(op_ab(alpha a, beta b), gamma c)``) over rows
of out's fastest axis, and their argument preparation (:func:`elementwise_call`).

>>> import numpy as np
>>> out = np.empty(2)
>>> elementwise(out, (np.ones(2), np.ones(2)), unaries=("identity",) * 2, op_ab="mul",
...             op_abc=None, scalars=(3, 1), compute=np.dtype(np.float64))
>>> out.tolist()
[3.0, 3.0]
"""

import functools

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ...descriptors import Binary
from ..jit import JIT as _JIT
from ..jit import twins as _twins
from .calls import _Call, _fmt, _geometry, _layout, _mark, _unary_code
from .lowlevel import (
    _FORMATS,
    _IDENTITY,
    _OPS,
    _ROW,
    _ROW_PIECE,
    _U,
    _accumulate,
    _like,
    _load,
    _load_row,
    _offsets,
    _storage_value,
    _store_row,
    _task_count,
)
from .threads import _on_threads, _threads

# --------------------------------------------------------------------------------------
# elementwise rows


@njit(**_JIT, inline="always")
def _direct_row(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal):
    """out[o:o+m] = op_abc(op_ab(s0 a, s1 b), s2 c) in one pass over unit-stride rows of
    real floats (16-bit ones widened as ``marks`` say, the result stored in out's format),
    ops add or mul, no unary: the operations of the buffered path in its order, so the
    results are identical (times 1 is exact).  Of two inputs, one may instead repeat one
    value along the row (codes[10] 2: a's, 3: b's; an outer product's rows).  Inlined, as
    the helpers it calls: called, each call took an atomic reference count up and down
    for each of its arrays, some 150 ns a row on one thread (an outer product of 4096 by
    16 float64 625 us, 46 so; NumPy's einsum 42)."""
    if codes[0] == 2:  # the input count as a literal: each loop is branch-free
        _direct_run(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, 2)
    else:
        _direct_run(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, 3)


def _direct_run(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, inputs):
    """:func:`_direct_row` for ``inputs`` (a literal) inputs."""


@overload(_direct_run, jit_options=_JIT, prefer_literal=True, inline="always")
def _direct_run_impl(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, inputs):
    if not isinstance(inputs, types.IntegerLiteral):
        return None
    if not all(isinstance(x.dtype, types.Float | types.Integer) for x in (out, a, b, c, scal)):
        return (lambda out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, inputs:
                None)  # never called
    trinary = inputs.literal_value == 3

    def impl(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, inputs):
        s0, s1, s2 = scal[0], scal[1], scal[2]
        add_ab, add_abc, fmt = codes[4] == 0, codes[5] == 0, codes[6]
        ma, mb, mc = marks[0], marks[1], marks[2]
        if not trinary and codes[10] == 2:  # a's row is one value
            _held_row(out, o, s0 * _like(_load(a[_U(oa)], ma), s0), b, ob, mb, s1, m, add_ab,
                      fmt)
            return
        if not trinary and codes[10] == 3:  # b's row is one value
            _held_row(out, o, s1 * _like(_load(b[_U(ob)], mb), s1), a, oa, ma, s0, m, add_ab,
                      fmt)
            return
        for i in range(m):  # the tests below select: the loop vectorises
            x = s0 * _like(_load(a[_U(oa + i)], ma), s0)
            y = s1 * _like(_load(b[_U(ob + i)], mb), s1)
            x = x + y if add_ab else x * y
            if trinary:
                z = s2 * _like(_load(c[_U(oc + i)], mc), s2)
                x = x + z if add_abc else x * z
            out[_U(o + i)] = _storage_value(out, x, fmt)
    return impl




@njit(**_JIT, inline="always")
def _held_row(out, o, held, x, ox, mark, scale, m, add, fmt):
    """out[o + i] = held + or * scale * x[ox + i] for i < m: the row of two inputs one of
    which holds one value (sums and products commute exactly: either input may hold it)."""
    for i in range(m):
        v = scale * _like(_load(x[_U(ox + i)], mark), scale)
        out[_U(o + i)] = _storage_value(out, held + v if add else held * v, fmt)


def _rows_kernel(shape, offs, strides, ta, tb, tc, codes, scal, out, a, b, c):
    """out = op_abc(op_ab(s0 u0(a), s1 u1(b)), s2 u2(c)) over rows of the last axis.

    codes: [inputs, u0, u1, u2, op_ab, op_abc, fmt, scale0, scale1, scale2, direct]
    (direct: every row is a unit-stride run of real floats, or one input's a single
    value, see _direct_row).
    """
    nd = shape.shape[0]
    n = shape[nd - 1]
    piece = _ROW_PIECE if codes[10] else _ROW  # one pass needs no buffers: longer units
    chunks = (n + piece - 1) // piece
    outer = 1
    for ax in range(nd - 1):
        outer *= shape[ax]
    units = outer * chunks
    tasks = _task_count(units, outer * n)
    for t in prange(tasks):  # a task's buffers serve all its units
        base = np.empty(4, np.int64)
        buf, tmp = np.empty(_ROW, scal.dtype), np.empty(_ROW, scal.dtype)
        for u in range(t * units // tasks, (t + 1) * units // tasks):
            _offsets(u // chunks, shape, strides, nd - 1, offs, base)
            i0 = (u % chunks) * piece
            m = min(piece, n - i0)
            if codes[10]:
                _direct_row(out, base[0] + i0, a, base[1] + i0 * strides[1, nd - 1], b,
                            base[2] + i0 * strides[2, nd - 1], c, base[3] + i0, m,
                            (ta[0], tb[0], tc[0]), codes, scal)
                continue
            _load_row(buf, m, a, base[1] + i0 * strides[1, nd - 1], strides[1, nd - 1], ta,
                      codes[1], codes[7], scal[0])
            if codes[0] >= 2:
                _load_row(tmp, m, b, base[2] + i0 * strides[2, nd - 1], strides[2, nd - 1],
                          tb, codes[2], codes[8], scal[1])
                _accumulate(codes[4], buf, tmp, m)
                if codes[0] == 3:
                    _load_row(tmp, m, c, base[3] + i0 * strides[3, nd - 1],
                              strides[3, nd - 1], tc, codes[3], codes[9], scal[2])
                    _accumulate(codes[5], buf, tmp, m)
            _store_row(out, base[0] + i0 * strides[0, nd - 1], strides[0, nd - 1], buf, 0, 1,
                       m, codes[6])


_ROWS = _twins(_rows_kernel)



@functools.lru_cache(maxsize=1024)
def _rows_prep(layouts, codes, compute):
    """Kernel arguments of the row kernel: shape, offsets, strides (axes sorted by out's
    strides, then the inputs', and merged where every array steps over the pair as over
    one axis), codes with the one-pass flag (codes[10]) decided.  Rows of contiguous
    arrays are then as long as the arrays: a product of two 256^2 float64 arrays took
    61 us on one thread in rows of 256 (NumPy's 35), 25 us so."""
    out_shape = layouts[0][0]
    geometry = [_geometry(*x) for x in layouts]
    order = sorted((ax for ax in range(len(out_shape)) if out_shape[ax] != 1),  # (any stride)
                   key=lambda ax: [-abs(g[2][ax]) for g in geometry])
    dims = []  # (extent, [stride in each array]) in that order, merged
    for ax in order:
        e, st = out_shape[ax], [g[2][ax] for g in geometry]
        if dims and dims[-1][1] == [x * e for x in st]:
            e *= dims.pop()[0]
        dims.append((e, st))
    shape = [e for e, _ in dims] or [1]
    offs = np.zeros(4, np.int64)
    strides = np.zeros((4, len(shape)), np.int64)
    for k, g in enumerate(geometry):
        offs[k] = g[0]
        strides[k, : len(dims)] = [st[k] for _, st in dims]
    return (np.array(shape, np.int64), offs, strides,
            np.array(codes[:10] + (_one_pass(layouts, codes, compute, strides[:, -1]),),
                     np.int64))


def _one_pass(layouts, codes, compute, last):
    """The row kernel's one-pass code (:func:`_direct_row`; 0: through buffers) for arrays
    whose rows step ``last`` elements: real floats, a real compute type, no transform, add
    or mul (times a complex 1 is not the identity on infinities); 1 where every row has
    unit stride; 2 (3) where of two inputs a's (b's) repeats one value along the row (an
    outer product: on one thread of the test VM, 512^2 float64 into an array 277 us
    through buffers, NumPy's einsum 170)."""
    if not (compute.kind == "f" and all(x[2].kind == "f" or x[2] in _FORMATS
                                        for x in layouts)
            and all(c == _IDENTITY for c in codes[1:4]) and max(codes[4:6]) <= 1
            and last[0] == 1):
        return 0
    steps = tuple(last[1:len(layouts)])
    if all(x == 1 for x in steps):
        return 1
    return {(0, 1): 2, (1, 0): 3}.get(steps, 0)


@functools.lru_cache(maxsize=1024)
def _rows_codes(unaries, ops, fmt, scaled, compute):
    """The row kernel's codes up to the one-pass flag (see :func:`_rows_kernel`)."""
    return ((len(unaries),) + tuple(_unary_code(u, compute) for u in unaries)
            + (_IDENTITY,) * (3 - len(unaries)) + tuple(_OPS[o] for o in ops)
            + (0,) * (2 - len(ops)) + (fmt,) + scaled + (False,) * (3 - len(scaled)))


@functools.lru_cache(maxsize=1024)
def _rows_call(layouts, codes, compute, threads):
    """The row kernel's call over out and 1..3 inputs (layouts: theirs, out first)."""
    shape, offs, strides, codes = _rows_prep(layouts, codes, compute)
    n = len(layouts) - 1
    sources = (0, 1, 2 if n > 1 else 1, 3 if n > 2 else 1)
    marks = tuple(_mark(layouts[k][2]) for k in sources[1:])
    about = (f"rows in units of {_ROW_PIECE} elements, one pass" if codes[10]
             else f"rows in units of {_ROW} elements, through compute-type buffers")
    if codes[10] > 1:
        about += f" ({'ab'[codes[10] - 2]}'s row one value)"
    return _Call(_ROWS[threads == 1], shape, offs, (strides, *marks, codes), sources, 3, compute,
                 _on_threads(about, threads))



def elementwise(out, inputs, *, unaries, op_ab, op_abc, scalars, compute):
    """out = cast(op_abc(op_ab(alpha ua(a), beta ub(b)), gamma uc(c))), one fused pass.

    >>> out = np.empty(3)
    >>> elementwise(out, (np.ones(3), np.arange(3.0)), unaries=("identity",) * 2,
    ...             op_ab="add", op_abc=None, scalars=(2, 3), compute=np.dtype(np.float64))
    >>> out.tolist()
    [2.0, 5.0, 8.0]
    """
    call = elementwise_call(out, inputs, unaries=unaries, op_ab=op_ab, op_abc=op_abc,
                            scalars=scalars, compute=compute)
    if call is not None:
        call.run((out, *inputs), scalars)


def elementwise_call(out, inputs, *, unaries, op_ab, op_abc, scalars, compute):
    """The kernel call of :func:`elementwise` (arguments alike; None: nothing to do)."""
    if out.size == 0:
        return None
    ops = (Binary.coerce(op_ab),) + ((Binary.coerce(op_abc),) if len(inputs) == 3 else ())
    codes = _rows_codes(tuple(unaries), ops, _fmt(out), tuple(s != 1 for s in scalars), compute)
    return _rows_call(tuple(_layout(x) for x in (out, *inputs)), codes, compute,
                      _threads(out.size * len(inputs)))
