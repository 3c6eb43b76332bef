"""The permutation kernel where out and a share the innermost axis: whole rows moved in
tiles over the next axes (streamed past the caches where out is large).

>>> _ROW_RUN, _ROW_TILE
(256, 32768)
"""


from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..jit import JIT as _JIT
from ..jit import twins as _twins
from .lowlevel import (
    _IDENTITY,
    _LINE,
    _U,
    _like,
    _load,
    _offset_pair,
    _storage_value,
    _store_fence,
    _streamed_store,
    _unary,
)
from .vectors import _VECTOR_BITS, _vector_at

_ROW_RUN, _ROW_TILE = 256, 1 << 15  # row tiles: bytes of out in one run (8 rows at least), in all

# --------------------------------------------------------------------------------------
# permutation whose innermost axis is shared: whole rows, in tiles over the next axes


@intrinsic
def _copy_run(typingctx, out, o, a, s, n, stream):
    """out[o:o + n] = a[s:s + n] (arrays of one storage type, not overlapping there), as
    vectors of _VECTOR_BITS and then units of up to 64 bits: no overlap check, no memcpy
    call (a compiled row loop does both, which cost rows of 32 float64 half the time of
    a permutation in the caches).  Where ``stream`` is nonzero, units up to out's next
    cache line go first, and the vectors from there are streamed past the caches
    (:func:`_streamed_store`)."""
    if out.dtype != a.dtype:
        return None
    bits = out.dtype.bitwidth
    unit = min(bits, 64)

    def codegen(context, builder, sig, args):
        out_, o_, a_, s_, n_, stream_ = args
        i64 = ir.IntType(64)
        per, width = i64(bits // unit), _VECTOR_BITS // unit  # units an element, a vector
        first, last, count = (builder.mul(x, per) for x in (o_, s_, n_))

        def moves(k, done, streamed):  # done vectors of k units from first, last
            vec = ir.VectorType(ir.IntType(unit), k)
            with cgutils.for_range(builder, done) as loop:
                at = builder.mul(loop.index, i64(k))
                src, dst = (
                    _vector_at(context, builder, sig.args[x], arr, builder.add(start, at), vec)
                    for x, arr, start in ((2, a_, last), (0, out_, first)))
                v = builder.load(src, align=unit // 8)
                if streamed:
                    _streamed_store(builder, v, dst, k * unit // 8)
                else:
                    builder.store(v, dst, align=unit // 8)

        address = builder.ptrtoint(_vector_at(context, builder, sig.args[0], out_, first,
                                              ir.VectorType(ir.IntType(unit), 1)), i64)
        streamed = builder.and_(
            builder.icmp_signed("!=", stream_, i64(0)),
            builder.icmp_unsigned("==", builder.urem(address, i64(unit // 8)), i64(0)))
        to_line = builder.udiv(builder.and_(builder.sub(i64(0), address), i64(_LINE - 1)),
                               i64(unit // 8))
        head = builder.select(streamed, builder.select(
            builder.icmp_signed("<", count, to_line), count, to_line), i64(0))
        for k, done in ((1, head), (width, None), (1, None)):
            done = builder.sdiv(count, i64(k)) if done is None else done
            if k == 1:
                moves(1, done, False)
            else:
                with builder.if_else(streamed) as (past, through):
                    with past:
                        moves(k, done, True)
                    with through:
                        moves(k, done, False)
            moved = builder.mul(done, i64(k))
            first, last, count = (builder.add(first, moved), builder.add(last, moved),
                                  builder.sub(count, moved))
        return context.get_dummy_value()

    return types.void(out, types.int64, a, types.int64, types.int64, types.int64), codegen


def _move_rows(out, a, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, stream):
    """out[o + t*sor + i*sop + j*soq] = a[s + t*sar + i*sap + j*saq] for t < n, i < mp,
    j < mq (rows t, written i fastest), elements moved as they are (out and a share a
    storage type); contiguous rows streamed where ``stream`` (:func:`_copy_run`)."""


@overload(_move_rows, jit_options=_JIT)
def _move_rows_impl(out, a, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, stream):
    if out.dtype != a.dtype:  # never called: the kernel converts such rows through buf
        return lambda out, a, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, stream: None

    def impl(out, a, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, stream):
        if sor == 1 and sar == 1:  # contiguous rows: vector runs
            for j in range(mq):
                for i in range(mp):
                    _copy_run(out, o + i * sop + j * soq, a, s + i * sap + j * saq, n,
                              stream)
            return
        for j in range(mq):
            for i in range(mp):
                oi, si = o + i * sop + j * soq, s + i * sap + j * saq
                for t in range(n):
                    out[_U(oi + t * sor)] = a[_U(si + t * sar)]

    return impl



@njit(**_JIT)
def _convert_rows(out, a, ta, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, code, scale,
                  fmt, alpha):
    """As :func:`_move_rows`, storing cast(alpha * unary(a)) (alpha's type computes)."""
    mark = ta[0]
    if code == _IDENTITY and sor == 1 and sar == 1:  # branch-free body: a vector loop
        for j in range(mq):
            for i in range(mp):
                oi, si = o + i * sop + j * soq, s + i * sap + j * saq
                for t in range(n):
                    v = _like(_load(a[_U(si + t)], mark), alpha)
                    w = alpha * v
                    out[_U(oi + t)] = _storage_value(out, w if scale else v, fmt)
        return
    for j in range(mq):
        for i in range(mp):
            oi, si = o + i * sop + j * soq, s + i * sap + j * saq
            for t in range(n):
                v = _unary(code, _like(_load(a[_U(si + t * sar)], mark), alpha))
                out[_U(oi + t * sor)] = _storage_value(out, alpha * v if scale else v, fmt)


def _row_tiles_kernel(shape, offs, strides, ta, tiles, code, scale, fmt, scal, out, a):
    """out = scale(unary(a)) row by row along the shared axis r (last), in tiles over
    out's next axis p (second last) and a's, q (third last); rows of a tile are written
    in out's order.  A plain copy (code < 0) moves the elements as they are, contiguous
    rows in vector runs (:func:`_copy_run`), streamed past the caches where tiles[3]
    (each task then ends with a store fence).  A step of the parallel loop takes one
    tile at tiles[4] consecutive outer positions (small tiles: :func:`_outer_run`)."""
    nd = shape.shape[0]
    r, p, q = nd - 1, nd - 2, nd - 3
    tile_p, tile_q, tile_r, stream, run = tiles[0], tiles[1], tiles[2], tiles[3], tiles[4]
    tp = (shape[p] + tile_p - 1) // tile_p
    tr = (shape[r] + tile_r - 1) // tile_r
    per_outer = (shape[q] + tile_q - 1) // tile_q * tp * tr
    outer = 1
    for ax in range(nd - 3):
        outer *= shape[ax]
    sor, sop, soq, sar, sap, saq = (strides[0, r], strides[0, p], strides[0, q],
                                    strides[1, r], strides[1, p], strides[1, q])
    for u in prange((outer + run - 1) // run * per_outer):
        kqp, kr = divmod(u % per_outer, tr)
        kq, kp = divmod(kqp, tp)
        p0, q0, r0 = kp * tile_p, kq * tile_q, kr * tile_r
        mp, mq, n = min(tile_p, shape[p] - p0), min(tile_q, shape[q] - q0), min(
            tile_r, shape[r] - r0)
        first = u // per_outer * run
        for w in range(first, min(first + run, outer)):
            o, s = _offset_pair(w, shape, strides, nd - 3, offs)
            o += p0 * sop + q0 * soq + r0 * sor
            s += p0 * sap + q0 * saq + r0 * sar
            if code < 0:
                _move_rows(out, a, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, stream)
            else:
                _convert_rows(out, a, ta, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, code,
                              scale, fmt, scal[0])
        if stream and code < 0:
            _store_fence()


_ROW_TILES = _twins(_row_tiles_kernel)
