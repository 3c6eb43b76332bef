"""The general strided reduction kernel: outputs in lanes side by side along the innermost
free axis, reduced rows in pairwise-merged chunks, a walk over the other reduced axes;
and the few-terms kernel for outputs that each reduce one short block.

>>> _LANES, _RUN_BLOCK
(4096, 64)
"""


import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..jit import JIT as _JIT
from ..jit import twins as _twins
from .lowlevel import (
    _IDENTITY,
    _IDENTITY_VALUE,
    _U,
    _accumulate,
    _combine,
    _like,
    _load,
    _load_row,
    _offsets,
    _storage_value,
    _task_count,
    _unary,
)
from .row_sums import _BLOCK, _CHUNK, _real, _row_totals
from .vectors import _VECTOR_BITS, _for_each_format, _for_each_width, _vector_at, _widened

_TREE = 8      # blocks that strided sums add side by side in registers, then pairwise
_RUN_VECTORS = 8  # vector registers of lanes that a run along a reduced axis adds at once
# ... and terms it adds to them before the block enters the cascade: a sum over axis 1 of a
# (512, 512, 64) float32 array on Zen 1, blocks of 16: 8.9 ms on one thread, 4.9 on two (torch
# 5.9 and 3.6); of 64: 6.4 and 4.5.  Its largest relative error, in units of float32's eps:
# 1.55 (torch 1.56, NumPy 10.9, blocks of 16 0.98); over 131072 terms 0.72 (2.13, 116, 0.78)
_RUN_BLOCK = 64
# ... in runs of at most _RUN_ROWS terms where the run's rows are _FAR_ROWS bytes apart or
# more: each run reads _RUN_VECTORS vectors of every one of its rows, which are then
# streams on pages of their own that the prefetchers and the L1 cache's 8 ways must hold
# at once (rows 4 KB apart share their L1 sets).  A sum over axis 0 of a 2048^2 float64
# matrix on one thread of this Zen 3 VM: runs of 64 2.1-3.4 ms (NumPy 1.5-2.5), of 8
# 1.0-1.1 (4 to 12 alike).  Nearer rows keep runs of 64: over axis 1 of a (512, 512, 64)
# float32 array (rows 256 bytes apart) runs of 8 cost 25-40% more.  The additions, and
# so the result, are the same either way
_RUN_ROWS = 8
_FAR_ROWS = 4096
_LANES = 4096  # outputs reduced side by side when the innermost axis is free (long runs per
# walk step: 1 KB runs made a sum over axis 0 of a 4096^2 f32 matrix 2x slower than NumPy)
_ROW_BLOCK = 1 << 14  # elements read per step (lanes x row) when the innermost axis is reduced

# --------------------------------------------------------------------------------------
# reduction


@njit(**_JIT)
def _pairwise(buf, n, op, acc8):
    """Reduce buf[:n] (n >= 1) with eight interleaved accumulators, as NumPy does."""
    if n < 8:
        r = buf[0]
        for i in range(1, n):
            r = _combine(op, r, buf[i])
        return r
    for k in range(8):
        acc8[k] = buf[k]
    n8 = n - n % 8
    if op == 0:  # the sum in its own loop, which vectorises
        for i in range(8, n8, 8):
            for k in range(8):
                acc8[k] += buf[i + k]
    else:
        for i in range(8, n8, 8):
            for k in range(8):
                acc8[k] = _combine(op, acc8[k], buf[i + k])
    r = _combine(op, _combine(op, _combine(op, acc8[0], acc8[1]), _combine(op, acc8[2], acc8[3])),
                 _combine(op, _combine(op, acc8[4], acc8[5]), _combine(op, acc8[6], acc8[7])))
    for i in range(n8, n):
        r = _combine(op, r, buf[i])
    return r


@njit(**_JIT)
def _push(stack, depth, count, acc, w, op):
    """Push block ``acc[:w]`` on the pairwise cascade; merge equal-sized neighbours."""
    for t in range(w):
        stack[depth, t] = acc[t]
    depth += 1
    count += 1
    k = count
    while k % 2 == 0:
        depth -= 1
        for t in range(w):
            stack[depth - 1, t] = _combine(op, stack[depth - 1, t], stack[depth, t])
        k //= 2
    return depth, count


@njit(**{**_JIT, "fastmath": {"reassoc"}})
def _sum_run(x, off, n, stride, mark, buf):
    """The sum of x[off + i * stride] widened for i < n, in the compute type of ``buf``.
    Reassociation lets LLVM interleave accumulators (sixteen or more, at least as many
    as NumPy's pairwise leaves use) and vectorise the contiguous case."""
    buf[0] = 0
    r = buf[0]
    if stride == 1:
        for i in range(off, off + n):
            r += _load(x[_U(i)], mark)
    else:
        for i in range(n):
            r += _load(x[_U(off + i * stride)], mark)
    return r


@njit(**{**_JIT, "fastmath": {"reassoc"}})
def _add_row_sums(acc, w, x, off, lane_stride, n, mark, buf):
    """acc[t] += the sum of the contiguous row x[off + t * lane_stride:][:n] widened, for
    t < w: one call for all the lanes of a step (a call per row of 64 elements cost as
    much as reading it), each row reassociated like :func:`_sum_run`."""
    buf[0] = 0
    zero = buf[0]
    for t in range(w):
        start = off + t * lane_stride
        r = zero
        for i in range(start, start + n):
            r += _load(x[_U(i)], mark)
        acc[t] += r


@njit(**_JIT)
def _chunk(a, off, m, stride, ta, code, op, buf, acc8):
    """The op-reduction of unary(a[off + i * stride]) for i < m (m >= 1)."""
    if op == 0 and code == _IDENTITY:
        return _sum_run(a, off, m, stride, ta, buf)
    _load_row(buf, m, a, off, stride, ta, code, False, buf[0])
    return _pairwise(buf, m, op, acc8)


def _vector_sums(x, acc):
    """Whether sums of array x's elements into ``acc`` can add them in vector registers
    (:func:`_lane_sums`; decided when compiling)."""


@overload(_vector_sums, jit_options=_JIT)
def _vector_sums_impl(x, acc):
    plain = _lane_sums(x.dtype, acc.dtype)
    return lambda x, acc: plain


def _lane_sums(x, acc):
    """Whether :func:`_add_lane_run` adds terms of Numba type ``x`` into ``acc``'s: one
    floating type, or 16-bit storage (uint16 bits) widened to float32."""
    return (x == acc and isinstance(x, types.Float)) or (x == types.uint16
                                                          and acc == types.float32)


def _run_lanes(x):
    """The most lanes of array x that :func:`_add_lane_run` adds at once: _RUN_VECTORS
    vector registers' worth of its terms (16-bit ones as float32; decided when
    compiling)."""


@overload(_run_lanes, jit_options=_JIT)
def _run_lanes_impl(x):
    k = _RUN_VECTORS * _VECTOR_BITS // max(x.dtype.bitwidth, 32)
    return lambda x: k


@intrinsic
def _add_lane_run(typingctx, flat, off, step, n, width, res, at, fresh, mark):
    """res[at + t] += flat[off + i*step + t] for i < n, one term after the other, for
    t < width (a power of two up to _run_lanes(flat)), starting from zero where ``fresh``:
    the lanes held in vector registers while the n terms are added; 16-bit terms widen as
    they load (``mark`` 1: float16, else bfloat16).  Numba keeps no array in registers:
    added into ``res`` in memory, term by term, a sum over axis 1 of a (512, 512, 64)
    float32 array took 8.4 ms on one thread of Zen 1 (4.3 on two), 6.9 so (3.85 on two),
    with :func:`_reduce_lanes` moving its odometer once a run; of float16 lanes added in
    memory, 17.7 ms on one thread, widened in registers 6.8."""
    bits = res.dtype.bitwidth
    widths = [1 << e for e in range((_RUN_VECTORS * _VECTOR_BITS // bits).bit_length())
              ] if _lane_sums(flat.dtype, res.dtype) else []  # else never run: see _add_run

    def codegen(context, builder, sig, args):
        data, off, step, n, width, out, at, fresh, mark = args
        element = context.get_value_type(sig.args[5].dtype)

        def add_lanes(lanes, code):  # in vectors of a register each
            k = min(lanes, _VECTOR_BITS // bits)
            vec = ir.VectorType(element, k)
            stored = ir.VectorType(ir.IntType(16), k) if code else vec
            where = [_vector_at(context, builder, sig.args[5], out,
                                builder.add(at, ir.IntType(64)(t)), vec)
                     for t in range(0, lanes, k)]
            totals = [cgutils.alloca_once(builder, vec) for _ in where]
            with builder.if_else(fresh) as (zero, load):
                with zero:
                    for total in totals:
                        builder.store(ir.Constant(vec, None), total)
                with load:
                    for p, total in zip(where, totals, strict=True):
                        builder.store(builder.load(p, align=bits // 8), total)
            with cgutils.for_range(builder, n) as loop:
                start = builder.add(off, builder.mul(loop.index, step))
                for t, total in zip(range(0, lanes, k), totals, strict=True):
                    term = builder.load(
                        _vector_at(context, builder, sig.args[0], data,
                                   builder.add(start, ir.IntType(64)(t)), stored),
                        align=2 if code else bits // 8)
                    if code:
                        term = _widened(builder, term, code)
                    builder.store(builder.fadd(builder.load(total), term), total)
            for p, total in zip(where, totals, strict=True):
                builder.store(builder.load(total), p, align=bits // 8)

        _for_each_width(builder, width, widths, lambda lanes: _for_each_format(
            builder, sig.args[0].dtype, mark, lambda code: add_lanes(lanes, code)))
        return context.get_dummy_value()

    sig = types.void(flat, types.int64, types.int64, types.int64, types.int64, res,
                     types.int64, types.boolean, types.int64)
    return sig, codegen


@njit(**_JIT, inline="always")
def _add_lane_runs(a, off, step, n, w, acc, at, fresh, mark):
    """acc[at + t] (+)= the sum of a[off + i*step + t] for i < n, t < w, by
    :func:`_add_lane_run` (``mark``: 16-bit a's format): the widest runs of lanes that
    fit, then half as wide, ..."""
    t = 0
    while t < w:
        width = _run_lanes(a)
        while width > w - t:
            width //= 2
        _add_lane_run(a, off + t, step, n, width, acc, at + t, fresh, mark)
        t += width


@njit(**_JIT, inline="always")
def _in_registers(op, code, lane_stride, a, acc):
    """Whether :func:`_add_run` adds its lanes in vector registers: plain sums of
    unit-stride lanes (:func:`_vector_sums`)."""
    return op == 0 and code == _IDENTITY and lane_stride == 1 and _vector_sums(a, acc)


@njit(**_JIT, inline="always")
def _add_run(acc, w, op, a, off, step, lane_stride, n, ta, code, buf, fresh):
    """acc[:w] = op(acc[:w], unary(a[off + i*step + t*lane_stride])) for i < n; ``fresh``:
    acc[:w] starts from op's identity, whatever it holds.  Inlined, as the lane runs it
    calls: as calls, they made a sum over axis 1 of a (512, 512, 64) float32 array 12%
    slower on one thread of Zen 1 (8.6 against 7.6 ms).  Sums of strided lanes add each
    term as it loads: through the buffer, the partial trace of a (128,)*4 float32 array
    over axes 1, 3 (lanes 512 bytes apart) took 17.8 ms on one thread, 15.0 so (torch
    14.8); min and max, whose buffered combine vectorises, stay there."""
    if _in_registers(op, code, lane_stride, a, acc):
        _add_lane_runs(a, off, step, n, w, acc, 0, fresh, ta[0])
        return
    if fresh:
        acc[:w] = _IDENTITY_VALUE[op]
    if code == _IDENTITY and lane_stride == 1:  # tight: many loads in flight
        for i in range(n):
            o = off + i * step
            for t in range(w):
                acc[t] = _combine(op, acc[t], _load(a[_U(o + t)], ta))
    elif code == _IDENTITY and op < 2:  # strided sums and products: no buffer pass either
        for i in range(n):
            o = off + i * step
            for t in range(w):
                acc[t] = _combine(op, acc[t], _load(a[_U(o + t * lane_stride)], ta))
    else:  # min and max combine the buffer in vectors
        for i in range(n):
            _load_row(buf, w, a, off + i * step, lane_stride, ta, code, False, acc[0])
            _accumulate(op, acc, buf, w)


@njit(**_JIT)
def _advance(idx, walk_shape, walk_strides, off, n):
    """Move the walk odometer n positions along its innermost axis (n <= what is left
    there), carrying into the outer axes; returns the new offset."""
    last = walk_shape.shape[0] - 1
    if last < 0:
        return off
    idx[last] += n
    off += n * walk_strides[last]
    for ax in range(last, 0, -1):
        if idx[ax] < walk_shape[ax]:
            break
        off += walk_strides[ax - 1] - idx[ax] * walk_strides[ax]
        idx[ax] = 0
        idx[ax - 1] += 1
    return off


@njit(**_JIT)
def _start(idx, walk_shape, walk_strides, pos):
    """Set the walk odometer ``idx`` to position ``pos``; returns its offset."""
    off = 0
    for ax in range(walk_shape.shape[0] - 1, -1, -1):
        idx[ax] = pos % walk_shape[ax]
        pos //= walk_shape[ax]
        off += idx[ax] * walk_strides[ax]
    return off


@njit(**_JIT)
def _fold(stack, depth, acc, w, op, res):
    """res[:w] = the cascade ``stack[:depth]`` folded (``acc`` when it is empty)."""
    for t in range(w):
        r = stack[depth - 1, t] if depth else acc[t]
        for d in range(depth - 2, -1, -1):
            r = _combine(op, stack[d, t], r)
        res[t] = r


@njit(**_JIT)
def _lanes_work(lane_w, row_len, walk_dims, levels, dtype):
    """The buffers of :func:`_reduce_lanes` for up to ``lane_w`` lanes, allocated once per
    task of lane tiles: allocated per tile, they made a sum over the last axis of (512,
    512, 64) float32 (1024 tiles) 6% slower on two threads of Zen 1 (4.40 against 3.99
    ms, with a push saved where one block is all)."""
    return (np.empty(walk_dims, np.int64), np.empty(lane_w, dtype),
            np.empty(max(lane_w, min(row_len, _CHUNK)), dtype),
            np.empty((levels, lane_w), dtype), np.empty(8, dtype))


@njit(**_JIT)
def _row_pieces(res, op, a, a_off, row_len, ta, walk_shape, walk_strides, s0, s1, work):
    """res[0] = the op-reduction of steps s0..s1 of one output's contiguous rows, longer
    than a chunk (as :func:`_reduce_lanes`; shorter ones would push more often than the
    cascade's levels allow): each row's piece among them reduced by :func:`_row_totals`,
    the pieces merged on a cascade.  Chunk by
    chunk, with the lanes' general bookkeeping, a sum of all of a (512, 512, 64) float32
    array took 9.5 ms on one thread of Zen 1 and 5.3 on two; 4.8 and 3.2 ms so (NumPy
    5.9 ms)."""
    idx, acc, _, stack, _ = work
    chunks = (row_len + _CHUNK - 1) // _CHUNK
    off = a_off + _start(idx, walk_shape, walk_strides, s0 // chunks)
    depth = count = 0
    s = s0
    while s < s1:
        ch = s % chunks
        run = min(s1 - s, chunks - ch)
        _row_totals(acc, 1, a, off + ch * _CHUNK, 0, min(run * _CHUNK, row_len - ch * _CHUNK),
                    ta[0], op)
        depth, count = _push(stack, depth, count, acc, 1, op)
        s += run  # the row's end, or the last step
        off = _advance(idx, walk_shape, walk_strides, off, 1)
    _fold(stack, depth, acc, 1, op, res)


@njit(**_JIT)
def _reduce_lanes(res, w, op, a, a_off, lane_stride, row_len, row_stride, ta, code,
                  walk_shape, walk_strides, s0, s1, ident, work):
    """res[:w] = op-reduction of steps s0..s1 for ``w`` lanes (outputs), in the buffers
    ``work`` of :func:`_lanes_work`.

    Step s is walk position s // chunks and row chunk s % chunks.  With a reduced row
    (row_len > 1) a step reduces one chunk of _CHUNK elements per lane (pairwise) and
    pushes them on the lanes' cascades (rows of one chunk: _BLOCK steps a push).
    Without one, a step is one element per lane, and _BLOCK of those, added in runs
    along the innermost walk axis, make one push; _RUN_BLOCK where the lanes add in
    vector registers (:func:`_add_lane_runs`), whose runs cost more to start and end.
    """
    nw = walk_shape.shape[0]
    idx, acc, buf, stack, acc8 = work
    acc[:w] = ident
    if (row_len > _CHUNK and w == 1 and (op == 0 or _real(acc)) and code == _IDENTITY
            and row_stride == 1):  # as _row_ops
        _row_pieces(res, op, a, a_off, row_len, ta, walk_shape, walk_strides, s0, s1, work)
        return
    if row_len > 1:  # step by step, every lane's chunk of the row (reads stay local)
        chunks = (row_len + _CHUNK - 1) // _CHUNK
        off = a_off + _start(idx, walk_shape, walk_strides, s0 // chunks)
        block = _BLOCK if chunks == 1 else 1  # short rows: _BLOCK row sums make a push
        ch = s0 % chunks
        depth = count = filled = 0
        for _ in range(s0, s1):
            m = min(_CHUNK, row_len - ch * _CHUNK)
            o = off + ch * _CHUNK * row_stride
            if op == 0 and code == _IDENTITY and row_stride == 1:
                _add_row_sums(acc, w, a, o, lane_stride, m, ta, buf)
            else:
                for t in range(w):
                    acc[t] = _combine(op, acc[t], _chunk(a, o + t * lane_stride, m, row_stride,
                                                         ta, code, op, buf, acc8))
            filled += 1
            if filled == block:
                depth, count = _push(stack, depth, count, acc, w, op)
                acc[:w] = ident
                filled = 0
            ch += 1
            if ch == chunks:
                ch = 0
                off = _advance(idx, walk_shape, walk_strides, off, 1)
        if filled and depth:  # else the block is all: _fold takes it as it is
            depth, count = _push(stack, depth, count, acc, w, op)
        _fold(stack, depth, acc, w, op, res)
        return
    inner, step = (walk_shape[nw - 1], walk_strides[nw - 1]) if nw else (1, 0)
    off = a_off + _start(idx, walk_shape, walk_strides, s0)
    block = _RUN_BLOCK if _in_registers(op, code, lane_stride, a, acc) else _BLOCK
    run_rows = _RUN_ROWS if abs(step) * a.itemsize >= _FAR_ROWS else block
    depth = count = filled = 0
    s = s0
    while s < s1:  # a run along the innermost walk axis, then the odometer moves once
        run = min(s1 - s, inner - (idx[nw - 1] if nw else 0))
        o, left = off, run
        while left:
            n = min(left, block - filled, run_rows)
            _add_run(acc, w, op, a, o, step, lane_stride, n, ta, code, buf, filled == 0)
            o += n * step
            left -= n
            filled += n
            if filled == block:
                depth, count = _push(stack, depth, count, acc, w, op)
                filled = 0
        off = _advance(idx, walk_shape, walk_strides, off, run)
        s += run
    if filled and depth:
        depth, count = _push(stack, depth, count, acc, w, op)
    _fold(stack, depth, acc, w, op, res)


@njit(**_JIT, inline="always")
def _finish(res, w, out, o, so, c, co, sc, tc, codes, scal):
    """out[o + t*so] = alpha * res[t] + beta * unary_c(c[co + t*sc]).  Inlined: called,
    it made a sum over axis 1 of (16384, 8, 8) float64 (8 outputs a call) 1.6x slower on
    one thread of Zen 4 (642 against 394 us).  Results stored as they are into unit
    strides take a loop of their own, which vectorises: through the general one, which
    reads the codes for every output, a float32 sum over axis 1 of (512, 3, 512) took
    134 us on two threads of Zen 4, 50 so (NumPy 132)."""
    fmt = codes[6]
    if not codes[3] and not codes[4] and so == 1:
        for t in range(w):
            out[_U(o + t)] = _storage_value(out, res[t], fmt)
        return
    for t in range(w):
        v = res[t]
        if codes[3]:
            v = scal[0] * v
        if codes[4]:
            x = _unary(codes[2], _like(_load(c[_U(co + t * sc)], tc), v))
            v = v + scal[1] * x if codes[5] else v + x
        out[_U(o + t * so)] = _storage_value(out, v, fmt)


@njit(**_JIT)
def _finish_parts(part, free_shape, offs, strides, lanes, lane_w, out, c, tc, codes, scal):
    """Combine the nsplit partial results of every unit and finish them (serially)."""
    nf = free_shape.shape[0]
    tiles = (lanes + lane_w - 1) // lane_w
    base = np.empty(3, np.int64)
    for u in range(part.shape[1]):
        _offsets(u // tiles, free_shape, strides, nf - 1, offs, base)
        t0 = (u % tiles) * lane_w
        w = min(lane_w, lanes - t0)
        res = part[0, u, :w].copy()
        for k in range(1, part.shape[0]):
            for t in range(w):
                res[t] = _combine(codes[0], res[t], part[k, u, t])
        _finish(res, w, out, base[0] + t0 * strides[0, nf - 1], strides[0, nf - 1],
                c, base[1] + t0 * strides[1, nf - 1], strides[1, nf - 1], tc, codes, scal)


def _reduce_kernel(free_shape, offs, strides, lanes, lane_w, row_len, row_stride,
                   walk_shape, walk_strides, nsplit, levels, tc, ta, codes, scal, out, c, a):
    """Reduce a over (row, walk) for every free position; lane axis = last free axis.

    offs/strides rows: out, c, a.  codes: [op, unary_a, unary_c, scale_alpha, use_c,
    scale_beta, fmt].  With nsplit > 1 the steps of each output are split into nsplit
    ranges reduced independently and combined at the end.
    """
    nf = free_shape.shape[0]
    tiles = (lanes + lane_w - 1) // lane_w
    outer = 1
    for ax in range(nf - 1):
        outer *= free_shape[ax]
    units = outer * tiles
    steps = (row_len + _CHUNK - 1) // _CHUNK
    for ax in range(walk_shape.shape[0]):
        steps *= walk_shape[ax]
    op = codes[0]
    ident = _IDENTITY_VALUE[op]
    part = np.empty((nsplit, units if nsplit > 1 else 0, lane_w), scal.dtype)
    jobs = units * nsplit
    tasks = _task_count(jobs, units * lane_w * steps * min(row_len, _CHUNK))
    for task in prange(tasks):  # a task's buffers serve all its jobs
        base = np.empty(3, np.int64)
        res = np.empty(lane_w, scal.dtype)
        work = _lanes_work(lane_w, row_len, walk_shape.shape[0], levels, scal.dtype)
        for job in range(task * jobs // tasks, (task + 1) * jobs // tasks):
            u, k = job // nsplit, job % nsplit
            _offsets(u // tiles, free_shape, strides, nf - 1, offs, base)
            t0 = (u % tiles) * lane_w
            w = min(lane_w, lanes - t0)
            _reduce_lanes(res, w, op, a, base[2] + t0 * strides[2, nf - 1],
                          strides[2, nf - 1], row_len, row_stride, ta, codes[1], walk_shape,
                          walk_strides, steps * k // nsplit, steps * (k + 1) // nsplit, ident,
                          work)
            if nsplit == 1:
                _finish(res, w, out, base[0] + t0 * strides[0, nf - 1], strides[0, nf - 1],
                        c, base[1] + t0 * strides[1, nf - 1], strides[1, nf - 1], tc, codes,
                        scal)
            else:
                part[k, u, :w] = res[:w]
    if nsplit > 1:  # only a few units: combine them serially
        _finish_parts(part, free_shape, offs, strides, lanes, lane_w, out, c, tc, codes, scal)


_REDUCE = _twins(_reduce_kernel)


@njit(**_JIT, inline="always")
def _few_terms_tile(res, w, a, at, starts, step, n, ls, op, code, ta, out, o, so, c, co, sc,
                    tc, codes, scal):
    """One tile of :func:`_few_terms_kernel`: ``w`` lanes from a[at], their results into
    out[o] (and c[co] where the epilogue reads it)."""
    if _in_registers(op, code, ls, a, res):
        for k in range(starts.shape[0]):
            _add_lane_runs(a, at + starts[k], step, n, w, res, 0, k == 0, ta[0])
    else:
        res[:w] = _IDENTITY_VALUE[op]
        for k in range(starts.shape[0]):
            for i in range(n):
                base = at + starts[k] + i * step
                for t in range(w):
                    v = _unary(code, _like(_load(a[_U(base + t * ls)], ta), res[0]))
                    res[t] = _combine(op, res[t], v)
    _finish(res, w, out, o, so, c, co, sc, tc, codes, scal)


def _few_terms_kernel(free_shape, offs, strides, lanes, lane_w, starts, run, tc, ta, codes,
                      scal, out, c, a):
    """:func:`_reduce_kernel` where each output has at most one block of terms: runs of
    run[0] terms run[1] apart that start at a[o + starts[k] + t*lane_stride] (the walk in
    its order).  The lanes of each tile of ``lane_w`` of them combine those one after the
    other from op's identity, the order in which :func:`_reduce_lanes` combines one
    block, sums of unit-stride lanes in vector registers (:func:`_add_lane_runs`).  The
    lane kernel's bookkeeping per unit (odometer, cascade, calls) cost some 250 ns: a sum
    over axis 1 of (16384, 8, 8) float64 took 2.1 ms on two threads of Zen 4, 9x torch's
    time (of (16384, 4, 16) 2.1 ms, NumPy 1.5); its passes over the lanes' buffers made
    a "sum" over the last axis of (512, 512, 1) float64 (a copy) 98 us, NumPy 83.  One
    tile a position has a loop of its own, its lane count fixed: with the lanes of each
    tile worked out in one loop, (16384, 8, 8) took 18% longer.  There, the offsets
    step along the last outer axis, worked out afresh (:func:`_offsets`, a call) once a
    run of it: (65536, 8, 8) 1.00-1.06 -> 0.69-0.73 ms (fastest of 400, two threads of
    Zen 4)."""
    nf = free_shape.shape[0]
    tiles = (lanes + lane_w - 1) // lane_w
    units = tiles
    for ax in range(nf - 1):
        units *= free_shape[ax]
    op, code, n, step = codes[0], codes[1], run[0], run[1]
    so, sc, ls = strides[0, nf - 1], strides[1, nf - 1], strides[2, nf - 1]
    tasks = _task_count(units, units * lane_w * n * starts.shape[0])
    for task in prange(tasks):
        base = np.empty(3, np.int64)
        res = np.empty(lane_w, scal.dtype)
        first, last = task * units // tasks, (task + 1) * units // tasks
        if tiles == 1:  # runs of units along the last outer axis: offsets step along it
            inner = free_shape[nf - 2] if nf > 1 else 1
            d0, d1, d2 = (strides[0, nf - 2], strides[1, nf - 2],
                          strides[2, nf - 2]) if nf > 1 else (0, 0, 0)
            u = first
            while u < last:
                _offsets(u, free_shape, strides, nf - 1, offs, base)
                run = min(last, (u // inner + 1) * inner) - u
                for i in range(run):
                    _few_terms_tile(res, lanes, a, base[2] + i * d2, starts, step, n, ls, op,
                                    code, ta, out, base[0] + i * d0, so, c, base[1] + i * d1,
                                    sc, tc, codes, scal)
                u += run
            continue
        for u in range(first, last):
            _offsets(u // tiles, free_shape, strides, nf - 1, offs, base)
            t0 = u % tiles * lane_w
            _few_terms_tile(res, min(lane_w, lanes - t0), a, base[2] + t0 * ls, starts, step,
                            n, ls, op, code, ta, out, base[0] + t0 * so, so, c,
                            base[1] + t0 * sc, sc, tc, codes, scal)


_FEW_TERMS = _twins(_few_terms_kernel)
