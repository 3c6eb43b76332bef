"""Argument preparation of the reduction kernels (:func:`reduce_call`): the free and
reduced axes, which kernel (row totals, few terms, lanes), the split of each output's
terms among threads, and the two passes over a plane.

>>> import numpy as np
>>> out = np.empty(3)
>>> reduce(out, np.arange(6.0).reshape(2, 3).T, op="max", alpha=1, beta=0, c=None,
...        unary_a="identity", unary_c="identity", compute=np.dtype(np.float64))
>>> out.tolist()
[3.0, 4.0, 5.0]
"""

import functools
import itertools
import math

import numba
import numpy as np

from ...descriptors import Reduce, Unary
from .calls import _Call, _ceil_div, _codes, _fmt, _geometry, _layout, _mark, _unary_code
from .lowlevel import _FORMATS, _IDENTITY, _OPS
from .reduction_lanes import _FEW_TERMS, _LANES, _REDUCE, _ROW_BLOCK, _RUN_BLOCK, _lane_sums
from .reduction_rows import _LONG_ROW, _MIN_ROW_TOTALS, _ROW_TOTALS, _row_ops
from .row_sums import _BLOCK, _CHUNK
from .threads import _on_threads, _threads


@functools.lru_cache(maxsize=1024)
def _reduce_prep(out_layout, c_layout, a_layout, threads):
    """Reduce-kernel arguments up to the codes: the free axes (lane axis last), the
    reduced row (smallest stride, when smaller than the lane's) and walk, the split."""
    (shape, _, _), k = a_layout, len(out_layout[0])
    geometry = [_geometry(*x) for x in (out_layout, c_layout, a_layout)]
    a_st = geometry[2][2]
    free = [ax for ax in range(k) if shape[ax] > 1]
    red = [ax for ax in range(k, len(shape)) if shape[ax] != 1]
    lane = min(free, key=lambda ax: abs(a_st[ax]), default=None)
    row = min(red, key=lambda ax: abs(a_st[ax]), default=None)
    if row is not None and (lane is None or abs(a_st[row]) < abs(a_st[lane])):
        row_len, row_stride = shape[row], a_st[row]
        red.remove(row)
    else:
        row_len, row_stride = 1, 0
    walk = sorted(red, key=lambda ax: -abs(a_st[ax]))
    rest = sorted((ax for ax in free if ax != lane), key=lambda ax: -abs(a_st[ax]))
    order = rest + ([lane] if lane is not None else [])
    strides = np.array([[g[2][ax] for ax in order] or [0] for g in geometry], np.int64)
    free_shape = [shape[ax] for ax in order] or [1]
    lanes = free_shape[-1]
    lane_w = min(lanes, _LANES if row_len == 1 else max(4, _ROW_BLOCK // max(row_len, 1)))
    units = math.prod(free_shape[:-1]) * _ceil_div(lanes, lane_w)
    steps = math.prod(shape[ax] for ax in walk) * _ceil_div(row_len, _CHUNK)
    work = steps * lane_w * min(row_len, _CHUNK)
    nsplit = max(1, min(steps, 2 * threads // units, work // (1 << 15)))
    blocks = _ceil_div(_ceil_div(steps, nsplit), _BLOCK if row_len <= _CHUNK else 1)
    return (np.array(free_shape, np.int64), np.array([g[0] for g in geometry], np.int64),
            strides, lanes, lane_w, row_len, row_stride,
            np.array([shape[ax] for ax in walk], np.int64),
            np.array([a_st[ax] for ax in walk], np.int64), nsplit, blocks.bit_length() + 1)


@functools.lru_cache(maxsize=1024)
def _plane_split(a_layout, k):
    """A reduction whose short contiguous reduced row continues the innermost free (lane)
    axis, over more axes than that row (sum over axes (0, 2) of a C array): lane and row
    form one contiguous plane.  Returns (shape, byte strides) of a's view with the plane
    merged into the lane axis and the row dropped, the lane axis and the row's extent;
    else None."""
    shape, strides, dtype = a_layout
    free = [ax for ax in range(k) if shape[ax] > 1]
    red = [ax for ax in range(k, len(shape)) if shape[ax] > 1]
    if not free or len(red) < 2:
        return None
    lane = min(free, key=lambda ax: abs(strides[ax]))
    row = min(red, key=lambda ax: abs(strides[ax]))
    n = shape[row]
    if strides[row] != dtype.itemsize or n > _CHUNK or strides[lane] != n * dtype.itemsize:
        return None
    keep = [ax for ax in range(len(shape)) if ax != row]
    view_shape = [shape[ax] * (n if ax == lane else 1) for ax in keep]
    view_strides = [dtype.itemsize if ax == lane else strides[ax] for ax in keep]
    return tuple(view_shape), tuple(view_strides), lane, n


def reduce(out, a, *, op, alpha, beta, c, unary_a, unary_c, compute):
    """out = cast(alpha * R(unary_a(a)) + beta * unary_c(c)); a's trailing axes reduced.

    >>> out = np.empty(2)
    >>> reduce(out, np.arange(6.0).reshape(2, 3), op="sum", alpha=1, beta=0, c=None,
    ...        unary_a="identity", unary_c="identity", compute=np.dtype(np.float64))
    >>> out.tolist()
    [3.0, 12.0]
    """
    call = reduce_call(out, a, op=op, alpha=alpha, beta=beta, c=c, unary_a=unary_a,
                       unary_c=unary_c, compute=compute)
    if call is not None:
        call.run((out, a, out if c is None else c), (alpha, beta))
    elif out.size:  # over a plane: two passes
        view_shape, view_strides, lane, n = _split(out, a, op, unary_a, compute)
        plane = np.empty(view_shape[:out.ndim], compute)
        reduce(plane, np.lib.stride_tricks.as_strided(a, view_shape, view_strides), op=op,
               alpha=1, beta=0, c=None, unary_a=unary_a, unary_c=Unary.IDENTITY,
               compute=compute)
        rows = plane.reshape(out.shape[:lane] + (out.shape[lane], n) + out.shape[lane + 1:])
        reduce(out, np.moveaxis(rows, lane + 1, -1), op=op, alpha=alpha, beta=beta, c=c,
               unary_a=Unary.IDENTITY, unary_c=unary_c, compute=compute)


def _split(out, a, op, unary_a, compute):
    """:func:`_plane_split` where it applies: not to a plain sum, which adds the rows of
    all lanes in one call (_add_row_sums; 1.5 against 2.7 ms for the two passes)."""
    if _OPS[Reduce.coerce(op)] == 0 and _unary_code(unary_a, compute) == _IDENTITY:
        return None
    return _plane_split(_layout(a), out.ndim)


def reduce_call(out, a, *, op, alpha, beta, c, unary_a, unary_c, compute):
    """The kernel call of :func:`reduce` (arguments alike), or None: nothing to do, or
    two passes (a reduction over a plane, :func:`_plane_split`)."""
    if out.size == 0 or _split(out, a, op, unary_a, compute) is not None:
        return None
    use_c = c is not None and beta != 0
    codes = (_OPS[Reduce.coerce(op)], _unary_code(unary_a, compute),
             _unary_code(unary_c, compute), alpha != 1, use_c, beta != 1, _fmt(out))
    return _reduce_call(_layout(out), _layout(c if use_c else out), _layout(a), codes,
                        compute, _threads(a.size))


@functools.lru_cache(maxsize=1024)
def _reduce_call(out_layout, c_layout, a_layout, codes, compute, threads):
    prep = _reduce_prep(out_layout, c_layout, a_layout, threads)
    free_shape, offs, strides, lanes, _, row_len, row_stride, walk_shape, *_ = prep
    sources = (0, 2 if codes[4] else 0, 1)  # out, c (out when unused), a
    marks = (_mark(c_layout[2]), _mark(a_layout[2]), _codes(*codes))
    whole = "summed whole" if codes[0] == 0 else "reduced whole"
    whole_rows = _row_ops(codes[0], compute) and codes[1] == _IDENTITY and row_stride == 1
    if (whole_rows and not walk_shape.size and row_len * compute.itemsize >= _LONG_ROW
            and math.prod(out_layout[0]) >= _MIN_ROW_TOTALS):
        return _Call(_ROW_TOTALS[threads == 1], free_shape, offs,
                     (strides, row_len, *marks), sources, 2, compute,
                     _on_threads(f"each output's row of {row_len} {whole}", threads))
    nsplit = prep[9]
    few = _few_terms(prep, codes, a_layout[2], compute)
    if few is not None:
        about = (f"{few[0].size * few[1][0]} terms per output combined in order, lanes of "
                 f"{prep[4]} outputs side by side")
        return _Call(_FEW_TERMS[threads == 1], free_shape, offs,
                     (strides, lanes, prep[4], *few, *marks), sources, 2, compute,
                     _on_threads(about, threads))
    parts = [f"lanes of {prep[4]} outputs side by side"]
    if row_len > 1:
        pieces = whole_rows and prep[4] == 1 and row_len > _CHUNK  # as _reduce_lanes decides
        parts.append(f"reduced rows of {row_len} (stride {row_stride}) "
                     + (whole if pieces else f"in chunks of {_CHUNK} merged pairwise"))
    if len(walk_shape):
        n = len(walk_shape)
        more = " more" if row_len > 1 else ""
        parts.append(f"walking {n}{more} reduced ax{'is' if n == 1 else 'es'}")
    if nsplit > 1:
        parts.append(f"each output's terms in {nsplit} parts")
    about = ", ".join(parts)
    return _Call(_REDUCE[threads == 1], free_shape, offs, (*prep[2:], *marks), sources, 2,
                 compute, _on_threads(about, threads))


def _few_terms(prep, codes, a_type, compute):
    """(starts, run) of :func:`_few_terms_kernel`: the walk in its order, where each output
    of :func:`_reduce_kernel` would reduce one block of terms and no row; else None (an
    empty reduction too: the lane kernel gives op's identity).  A block is _RUN_BLOCK
    terms where the lanes add in vector registers (:func:`_in_registers`), else _BLOCK."""
    _, _, strides, lanes, lane_w, row_len, _, walk_shape, walk_strides, nsplit, _ = prep
    storage = np.dtype(np.uint16) if a_type in _FORMATS else a_type  # as the flats hold it
    in_registers = (codes[0] == 0 and codes[1] == _IDENTITY and strides[2, -1] == 1
                    and _lane_sums(numba.from_dtype(storage), numba.from_dtype(compute)))
    block = _RUN_BLOCK if in_registers else _BLOCK
    if row_len != 1 or nsplit > 1 or not 0 < math.prod(walk_shape) <= block:
        return None
    if not len(walk_shape):  # nothing to walk: one term, each output's own
        walk_shape, walk_strides = [1], [0]
    starts = [sum(i * st for i, st in zip(at, walk_strides, strict=False))
              for at in itertools.product(*map(range, walk_shape[:-1]))]
    return (np.array(starts, np.int64),
            np.array([walk_shape[-1], walk_strides[-1]], np.int64))
