"""Sums over a diagonal whose terms lie a cache line or more apart (traces, ``iij->j``):
threads load the far-apart terms side by side and prefetch them (:func:`strided_sums`).
"""


import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .. import compiler
from ..jit import JIT as _JIT
from ..jit import twins as _twins
from .calls import _ceil_div
from .lowlevel import _LINE, _U, _prefetch
from .reduction_lanes import _TREE, _add_lane_runs, _fold, _push
from .row_sums import _BLOCK
from .threads import thread_count
from .vectors import _for_each_width, _vector_at

# sums over a diagonal whose terms lie a cache line or more apart wait on memory: from this
# many terms, threads loading side by side beat NumPy's one loop (at most so many sums)
_MIN_STRIDED, _MAX_STRIDED_SUMS = 1 << 10, 1 << 12
_CHAINS = 16  # strided sums added one after the other, each in a register
# ... on threads from this many cache lines read (an ``iij->j`` of 2048 lines: on Zen 4
# 7 us on one thread and no faster on two, which take 3-4 us to start; on Zen 1 38 us on
# one, 21 us on two), prefetching from this many (a 4096^2 trace on two threads of Zen 4
# 13 -> 10 us; on Zen 1 they gain nothing, and below this many they slow an ``iij->j``
# down: its pages' translations are cached); a single sum takes the kernel from as many
# lines as prefetching (below, NumPy's one loop over the diagonal is as fast on one
# thread of Zen 4: a 2048^2 trace 2.3 against 2.6 us, 3000^2 4.0 against 4.9 us)
_PARALLEL_LINES, _PREFETCH_LINES = 1 << 11, 1 << 12
_REAL_SUMS = (np.dtype(np.float32), np.dtype(np.float64))

def _line_lanes(x):
    """How many elements of array x one cache line holds (decided when compiling)."""


@overload(_line_lanes, jit_options=_JIT)
def _line_lanes_impl(x):
    k = 8 * _LINE // x.dtype.bitwidth
    return lambda x: k


@intrinsic
def _add_lane_vector(typingctx, flat, off, step, n, width, res, at):
    """res[at + t] = the sum over i < n of flat[off + i*step + t] for t < width (a power
    of two up to _line_lanes(flat); n <= _BLOCK * _TREE), the lanes side by side in
    vector registers: each block of _BLOCK terms is added in order from zero, one term of
    every block in turn (their additions wait on nothing), and the blocks' sums pairwise,
    ((b0 + b1) + (b2 + b3)) + ..., as the cascade of :func:`_push` adds blocks.  Numba
    keeps no array in registers: added into ``res`` term by term, each addition would
    wait for the store of the one before.  A cache line's lanes are added in one pass
    (LLVM splits them over registers as needed): each term is a far-apart line whose
    page's translation often misses, and in two passes of AVX2's 4 float64 an ``iij->j``
    of (2048, 2048, 8) took 69 us on Zen 1, 44 us so (NumPy 48 us)."""
    bits = flat.dtype.bitwidth
    widths = [1 << e for e in range((8 * _LINE // bits).bit_length())]

    def codegen(context, builder, sig, args):
        data, off, step, n, width, out, at = args
        element, i64 = context.get_value_type(sig.args[0].dtype), ir.IntType(64)
        last = builder.sub(n, i64(1))

        def add_lanes(lanes):
            vec = ir.VectorType(element, lanes)
            zero = ir.Constant(vec, None)
            blocks = [cgutils.alloca_once_value(builder, zero) for _ in range(_TREE)]
            with cgutils.for_range(builder, builder.select(
                    builder.icmp_signed("<", n, i64(_BLOCK)), n, i64(_BLOCK))) as loop:
                for b, block in enumerate(blocks):
                    i = builder.add(i64(b * _BLOCK), loop.index)
                    with builder.if_then(builder.icmp_signed("<", i64(b * _BLOCK), n),
                                         likely=True):
                        term = builder.icmp_signed("<", i, n)  # else a term of no block
                        at_i = builder.add(off, builder.mul(builder.select(term, i, last),
                                                            step))
                        v = builder.load(_vector_at(context, builder, sig.args[0], data,
                                                    at_i, vec), align=bits // 8)
                        builder.store(builder.fadd(builder.load(block),
                                                   builder.select(term, v, zero)), block)
            sums = [builder.load(block) for block in blocks]
            while len(sums) > 1:
                sums = [builder.fadd(x, y) for x, y in zip(sums[::2], sums[1::2], strict=True)]
            builder.store(sums[0], _vector_at(context, builder, sig.args[5], out, at, vec),
                          align=bits // 8)

        _for_each_width(builder, width, widths, add_lanes)
        return context.get_dummy_value()

    sig = types.void(flat, types.int64, types.int64, types.int64, types.int64, res,
                     types.int64)
    return sig, codegen


@njit(**_JIT)
def _add_lane_vectors(flat, o, n, step, rows, row_stride, w, acc):
    """acc[r*w + t] = the sum over i < n of flat[o + i*step + r*row_stride + t] for
    r < rows, t < w, a cache line's lanes at a time (:func:`_line_lanes`), then half as
    many, and so on (:func:`_add_lane_vector`)."""
    k = _line_lanes(flat)
    for r in range(rows):
        start, t = o + r * row_stride, 0
        while t < w:
            width = k
            while width > w - t:
                width //= 2
            _add_lane_vector(flat, start + t, step, n, width, acc, r * w + t)
            t += width


@njit(**_JIT)
def _strided_part(flat, o, lo, hi, step, rows, row_stride, w, lane_stride, ahead, levels,
                  res):
    """res[r*w + t] = sum over lo <= i < hi of flat[o + i*step + r*row_stride +
    t*lane_stride] for r < rows, t < w: one part of :func:`_strided_sums_kernel` (a
    function of its own: inlined in the parallel loop's body it ran 20-25% slower)."""
    m = rows * w
    acc = np.zeros(m, res.dtype)
    stack = np.empty((levels, m), res.dtype)
    zero = acc[0]
    depth = count = 0
    if lane_stride == 1 and w > _line_lanes(flat):  # a term's lines together, in order
        for i0 in range(lo, hi, _BLOCK):
            for r in range(rows):
                _add_lane_runs(flat, o + i0 * step + r * row_stride, step,
                               min(_BLOCK, hi - i0), w, acc, r * w, True, 0)
            depth, count = _push(stack, depth, count, acc, m, 0)
        _fold(stack, depth, acc, m, 0, res)
        return
    if (lane_stride == 1 or w == 1) and not (ahead and hi - lo > _BLOCK * _TREE):
        for i0 in range(lo, hi, _BLOCK * _TREE):  # lanes side by side in registers
            _add_lane_vectors(flat, o + i0 * step, min(_BLOCK * _TREE, hi - i0), step, rows,
                              row_stride, w, acc)
            depth, count = _push(stack, depth, count, acc, m, 0)
        _fold(stack, depth, acc, m, 0, res)
        return
    for i0 in range(lo, hi, _BLOCK):
        i1 = min(i0 + _BLOCK, hi)
        if ahead:
            for i in range(i1, min(i1 + _BLOCK, hi)):
                for r in range(rows):
                    _prefetch(flat, _U(o + i * step + r * row_stride))
        if m <= _CHAINS:
            for r in range(rows):
                for t in range(w):
                    base = o + r * row_stride + t * lane_stride
                    s = zero
                    for i in range(i0, i1):
                        s += flat[_U(base + i * step)]
                    acc[r * w + t] = s
        else:
            for j in range(m):
                acc[j] = 0
            for i in range(i0, i1):
                for r in range(rows):
                    base = o + i * step + r * row_stride
                    if lane_stride == 1:  # a literal unit stride: the lane loop vectorises
                        for t in range(w):
                            acc[r * w + t] += flat[_U(base + t)]
                    else:
                        for t in range(w):
                            acc[r * w + t] += flat[_U(base + t * lane_stride)]
        depth, count = _push(stack, depth, count, acc, m, 0)
    _fold(stack, depth, acc, m, 0, res)  # every part has terms: parts <= n / 2


def _strided_sums_kernel(flat, params, parts, out):
    """out[r*w + t] = sum over i < n of flat[off + i*step + r*row_stride + t*lane_stride]
    (r < h, t < w; ``params`` holds off, n, step, h, row_stride, w, lane_stride, ahead,
    levels: one array, as Numba's dispatch costs 0.1 us an argument): sums over a
    diagonal whose terms lie far apart (a trace, ``iij->j``, a partial trace) wait on
    memory, so ``parts`` threads load them side by side: each takes whole rows r where
    there are as many rows as parts, else a range of i (their partial sums are added in
    order at the end).  Each part adds runs of _BLOCK terms and merges them on a
    pairwise cascade of ``levels``.

    Unit-stride lanes wider than a cache line add each run to all of them at once in
    vector registers (:func:`_add_lane_runs`), a term's lines one after the other: a
    line's lanes at a time, every pass walking the far-apart terms again, a partial
    trace of (64, 32, 64, 32) float64 over axes 0 and 2 (32 lanes) took 77-96 us on two
    threads of Zen 1, 51-59 us so (torch 42-55 us).  Narrower lanes, and single sums,
    add _TREE runs at a time in vector registers (:func:`_add_lane_vector`), in the
    cascade's order: an ``iij->j`` of 2048 terms of 8 lanes took 7.2 us adding one lane
    after the other, 3.8 us so.  Not in parts long
    enough to prefetch: with ``ahead`` the first lane of each row of the next run is
    prefetched while one is added (a far-apart term also misses the TLB, huge pages or
    not, in this VM, and this starts its page walk early: a trace of a 4096^2 matrix
    took 13 us on two threads, 9 us so; a loop over the other lanes' lines made it
    slower than none), and prefetching _TREE runs at a time made that trace 10% and an
    ``iij->j`` of (4096, 4096, 2) 30% slower.  There, up to _CHAINS sums add their runs
    one after the other, each in a register: added term by term into a row of
    accumulators in memory, each addition would wait for the store of the one before
    (a trace 1.6x, an ``iij->j`` 2x slower).  More sums add a term of each in turn, in
    that row, which vectorises over unit-stride lanes."""
    off, n, step, h, row_stride, w, lane_stride, ahead, levels = (
        params[0], params[1], params[2], params[3], params[4], params[5], params[6],
        params[7], params[8])
    by_rows = h >= parts
    partial = np.empty((1 if by_rows else parts, h * w), out.dtype)
    for p in prange(parts):
        if by_rows:  # parts that take rows share slot 0
            r0, r1 = p * h // parts, (p + 1) * h // parts
            _strided_part(flat, off + r0 * row_stride, 0, n, step, r1 - r0, row_stride, w,
                          lane_stride, ahead, levels, partial[0, r0 * w:r1 * w])
        else:
            _strided_part(flat, off, p * n // parts, (p + 1) * n // parts, step, h,
                          row_stride, w, lane_stride, ahead, levels, partial[p])
    for k in range(h * w):
        total = partial[0, k]
        for p in range(1, partial.shape[0]):
            total += partial[p, k]
        out[k] = total


_STRIDED_SUMS = _twins(_strided_sums_kernel)


def strided_sums(dtype, n, step, lanes):
    """A function ``run(a, out)`` that writes the sums over i < n of
    ``a.flat[i*step + r*row_stride + t*lane_stride]`` into ``out[r, t]`` (``lanes`` is
    [(h, row_stride), (w, lane_stride)], at most two, outer first; ``a`` and ``out``
    C-contiguous arrays of ``dtype``), or None when such sums are not worth a kernel:
    fewer than _MIN_STRIDED terms, terms of one sum closer than a cache line, more than
    _MAX_STRIDED_SUMS sums, not float32/float64, or a single sum of fewer than
    _PREFETCH_LINES terms.  Threads share the terms from _PARALLEL_LINES cache lines
    read, and prefetch them from _PREFETCH_LINES.

    >>> run = strided_sums(np.dtype(np.float64), 4096, 4097, [])
    >>> out = np.empty(())
    >>> run(np.eye(4096), out), float(out)
    (True, 4096.0)
    >>> strided_sums(np.dtype(np.float64), 4096, 4097, [(2, 4), (2, 2), (2, 1)]) is None
    True
    """
    dtype = np.dtype(dtype)
    if len(lanes) > 2:  # three free axes or more: not this kernel's (callers merge what they can)
        return None
    (h, row_stride), (w, lane_stride) = [(1, 0)] * (2 - len(lanes)) + list(lanes)
    if (dtype not in _REAL_SUMS or n * h * w < _MIN_STRIDED
            or abs(step) * dtype.itemsize < _LINE or h * w > _MAX_STRIDED_SUMS or n < 2):
        return None
    lines = n * h * min(w, _ceil_div(((w - 1) * abs(lane_stride) + 1) * dtype.itemsize, _LINE))
    parallel, ahead = lines >= _PARALLEL_LINES, lines >= _PREFETCH_LINES
    if h * w == 1 and not ahead:
        return None
    params = np.array([0, n, step, h, row_stride, w, lane_stride, ahead,
                       _ceil_div(n, _BLOCK).bit_length() + 1], np.int64)

    def run(a, out, wait=True):
        """The sums into ``out``; returns False, having written nothing, where ``wait`` is
        False and the kernel is not compiled for these arrays yet (it then compiles off
        the thread: :mod:`tenalg.kernels.compiler`)."""
        threads = min(thread_count(), n // 2) if parallel else 1
        kernel = _STRIDED_SUMS[threads == 1]
        args = (a.reshape(-1), params, threads, out.reshape(-1))
        if not compiler.ready_for(kernel, args, a.flags.writeable, now=wait):
            return False
        kernel(*args)
        return True

    return run
