"""The permutation kernel over tiles of out's fastest axis (last) and a's (second last):
register blocks shuffled in vector registers, staged rows for aliasing strides, streamed
stores for outputs larger than the caches.

>>> _TILES
(64, 64, 4)
"""


import numpy as np
from llvmlite import ir
from numba import njit, prange, types
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
    _store_row,
    _streamed_store,
    _unary,
)
from .permutation_rows import _move_rows
from .vectors import _VECTOR_BITS, _narrowed_bfloat, _vector_at, _widened

_TILES = (64, 64, 4)  # permutation tiles: along p, along q, group side
# ... and those of a permutation that streams its output (:data:`_STREAM_BYTES`): a's rows
# are read in runs of 256 elements, which the prefetchers follow from memory (on two
# threads of Zen 4, medians, against 64 x 64: 8192^2 float32 transposed into an array
# 21.3 -> 16.8 ms, into a new one 36.2 -> 30.9; 4096^2 float64 into an array 6.6 -> 5.5;
# 2048^2 float64 1.52 -> 1.31 ms; 128 x 128 and 256 x 128 in between, 128 x 512 and
# 64 x 256 the same); in the caches such tiles lose (128 x 128: 1024^2 float64 0.28 ->
# 0.39 ms)
_STREAM_TILES = (128, 256, 4)
# Where out's rows along a tile lie a multiple of this many bytes apart (they then share
# few cache sets), blocks that write less than a cache line of each row (AVX2's) leave
# lines half written that are evicted before the next block completes them: such tiles
# go through a buffer of their out rows.  Measured on Zen 1, 2 threads: 8192^2 float32
# (rows 32 KB apart) 110 -> 66 ms, 16384 x 4096 (64 KB) 279 -> 74 ms, 4096^2 float64
# (32 KB) 58 -> 27 ms; not below: 8000^2 float32 (32000 B) would be 1.2x slower, 2048^2
# float64 (16 KB) and 8192^2 float16 (16 KB) gain nothing
_ALIASED = 1 << 15
# Staged tiles at consecutive positions of the tile kernel's axis r (the one before q),
# where out's rows go on along it, are staged together up to this many bytes: each of
# out's rows is then written in one run of them all (:func:`_staged_along_r`).  Measured
# on Zen 1, 2 threads, (64,)*4 float64 permuted (3, 1, 0, 2) (out's rows 2 MB apart, runs
# of 512 bytes -> 2 KB) into out 32.5 -> 28.5 ms, into a new array 43.5 -> 39.9, float32
# into out 16.7 -> 14.4; (32,)*4 float64 into out 2.31 -> 1.84 ms
_STAGED_BYTES = 1 << 17
_MICRO = 8  # side of the blocks a plain-copy tile moves in (unrolled, vectorised)

# --------------------------------------------------------------------------------------
# permutation: tiles over the output's fastest axis (last) and the input's (second last)


_SHUFFLED_BITS = (16, 32, 64, 128)  # element sizes that plain copies move as vectors


def _block_side(bits):
    """Side of the square blocks of ``bits``-bit elements moved by vector shuffles: one
    vector a row, at most 16 rows (32 would spill the registers)."""
    return min(_VECTOR_BITS // bits, 16)


def _plain_side(bits):
    """Side of the blocks in which a plain copy moves ``bits``-bit elements: shuffled
    vectors for 2-, 4-, 8- and 16-byte elements (complex128 as i128 lanes: a 1024^2
    transpose into an array 1.77 -> 1.27 ms on two threads of Zen 4, NumPy 7.0), else
    unrolled scalar loops."""
    return _block_side(bits) if bits in _SHUFFLED_BITS else _MICRO


def _shuffle_masks(k, h):
    """Masks of one transposition stage: rows r and r + h of a k x k block swap their
    off-diagonal h x h blocks (after the stages for 2h, 4h, ..., k/2)."""
    lo, hi = [], []
    for b in range(0, k, 2 * h):
        lo += [b + t for t in range(h)] + [k + b + t for t in range(h)]
        hi += [b + h + t for t in range(h)] + [k + b + h + t for t in range(h)]
    return lo, hi



def _transposed(builder, rows):
    """Codegen: the k vectors ``rows`` (a k x k block, k a power of two, its first stage
    done: see :func:`_first_stage_rows`) transposed by the log2(k) - 1 other stages of
    shuffles."""
    k, h = len(rows), len(rows) // 4
    while h:
        masks = [ir.Constant(ir.VectorType(ir.IntType(32), k), m) for m in _shuffle_masks(k, h)]
        for i in (i for i in range(k) if not i & h):
            rows[i], rows[i + h] = (builder.shuffle_vector(rows[i], rows[i + h], m)
                                    for m in masks)
        h //= 2
    return rows


def _block_rows(context, builder, sig, args, x, start, stride, vec, count):
    """Codegen: pointers to the ``count`` vectors ``vec`` of array argument ``x`` that
    start at elements start + r * stride, r < count."""
    i64 = ir.IntType(64)
    return [_vector_at(context, builder, sig.args[x], args[x],
                       builder.add(start, builder.mul(stride, i64(r))), vec)
            for r in range(count)]


def _first_stage_rows(context, builder, sig, args, start, stride, element, k, align):
    """Codegen: the rows of a k x k block of array argument 3 at ``start`` (rows
    ``stride`` apart) after the first stage of its transposition, assembled by the loads
    from half rows: row i < k/2 is [row i, row i + k/2] of their first halves, row i + k/2
    of their second halves.  That stage moves data across the halves of the vectors,
    which shuffles do slowly where a vector is two 128-bit lanes (AVX2; Zen 1: 8 uops)."""
    h = k // 2
    half = ir.VectorType(element, h)
    first, second = (
        [builder.load(p, align=align) for p in
         _block_rows(context, builder, sig, args, 3, builder.add(start, ir.IntType(64)(c)),
                     stride, half, k)]
        for c in (0, h))
    both = ir.Constant(ir.VectorType(ir.IntType(32), k), list(range(k)))
    return ([builder.shuffle_vector(first[i], first[i + h], both) for i in range(h)]
            + [builder.shuffle_vector(second[i], second[i + h], both) for i in range(h)])



@intrinsic(prefer_literal=True)
def _move_block(typingctx, out, o, so, a, s, sa, alpha, src, dst, stream):
    """out[o + j*so + i] = a[s + i*sa + j] for i, j < k, k = _block_side(element): k rows
    loaded as half vectors put together as the first stage of the transposition leaves
    them, transposed by its other log2(k) - 1 stages of shuffles, stored as vectors;
    where ``stream`` (a literal) is 1 and each stored vector is one whole cache line,
    streamed past the caches (:func:`_streamed_store`: the caller makes sure they start
    on lines).
    alpha None moves the bits as they are; else, in alpha's type, the rows are widened
    and scaled as they load and converted as they store: ``src`` and ``dst``, literals,
    say what 16-bit a and out hold (0: alpha's type, 1 float16, 2 bfloat16), with the
    exact widenings of :func:`_load` and the roundings of :func:`_storage_value`."""
    if not all(isinstance(x, types.IntegerLiteral) for x in (src, dst, stream)):
        return None
    scaled = not isinstance(alpha, types.NoneType)
    bits = alpha.bitwidth if scaled else out.dtype.bitwidth
    out_bytes = out.dtype.bitwidth // 8
    a_align, out_align = _alignment(a), _alignment(out)
    wide_in, wide_out, streamed = src.literal_value, dst.literal_value, stream.literal_value

    def codegen(context, builder, sig, args):
        (_, o, so, _, s, sa, alpha, _, _, _), k = args, _block_side(bits)
        element = (ir.IntType(16) if wide_in else context.get_value_type(sig.args[6])
                   if scaled else ir.IntType(bits))
        rows = _first_stage_rows(context, builder, sig, args, s, sa, element, k, a_align)
        if wide_in:
            rows = [_widened(builder, v, wide_in) for v in rows]
        if scaled:
            scale = builder.insert_element(ir.Constant(ir.VectorType(alpha.type, k),
                                                       ir.Undefined), alpha, ir.IntType(32)(0))
            scale = builder.shuffle_vector(
                scale, scale, ir.Constant(ir.VectorType(ir.IntType(32), k), [0] * k))
            rows = [builder.fmul(v, scale) for v in rows]
        rows = _transposed(builder, rows)
        if wide_out == 1:
            rows = [builder.bitcast(builder.fptrunc(v, ir.VectorType(ir.HalfType(), k)),
                                    ir.VectorType(ir.IntType(16), k)) for v in rows]
        elif wide_out == 2:
            rows = [_narrowed_bfloat(builder, v) for v in rows]
        pointers = _block_rows(context, builder, sig, args, 0, o, so, rows[0].type, k)
        for p, v in zip(pointers, rows, strict=True):
            if streamed and k * out_bytes == _LINE:
                _streamed_store(builder, v, p, _LINE)
            else:
                builder.store(v, p, align=out_align)
        return context.get_dummy_value()

    return types.void(out, types.int64, types.int64, a, types.int64, types.int64, alpha,
                      src, dst, stream), codegen


def _alignment(array):
    """The bytes that the elements of a Numba array type are known to be aligned to:
    NumPy's alignment of the dtype where the array is aligned (complex128's is 8, not
    its size: a complex128 array 8 bytes past 16 is aligned, and 16-byte loads declared
    aligned to 16 became instructions that fault there), else 1."""
    return np.dtype(str(array.dtype)).alignment if array.aligned else 1


def _copy_tile(out, a, dst, src, sop, soq, sap, saq, mp, mq, alpha, fmt, mark, stream):
    """out[dst + i*sop + j*soq] = a[src + i*sap + j*saq] for i < mp, j < mq: moved as
    they are (alpha None: out and a share a storage type), or widened (``mark``: a's
    16-bit format), scaled by alpha in its type and converted to out's storage (``fmt``:
    out's 16-bit format); ``stream``: register blocks may stream (:func:`_move_block`)."""


def _registers_serve(a, out, compute):
    """Whether :func:`_move_block` serves these types (names of a's and out's
    storage, of the compute type): float32 or float64 computing, read and stored as such
    or, computing in float32, in 16 bits (seen by Numba as uint16 bits)."""
    held = {compute, "float16", "bfloat16", "uint16"} if compute == "float32" else {compute}
    return compute in ("float32", "float64") and a in held and out in held


def _scaled_in_registers(out, a, alpha):
    """:func:`_registers_serve` for Numba types (decided when compiling)."""
    return _registers_serve(str(a.dtype), str(out.dtype), str(alpha))


def _fuses(out, a, alpha):
    """Whether the tile kernel scales and converts tiles in registers (when compiling)."""


@overload(_fuses, jit_options=_JIT)
def _fuses_impl(out, a, alpha):
    fused = _scaled_in_registers(out, a, alpha)
    return lambda out, a, alpha: fused


def _moved(out, v, alpha, fmt, mark):
    """v as :func:`_copy_tile` stores it: as it is, or alpha * v in out's storage."""


@overload(_moved, jit_options=_JIT)
def _moved_impl(out, v, alpha, fmt, mark):
    if isinstance(alpha, types.NoneType):
        return lambda out, v, alpha, fmt, mark: v
    return lambda out, v, alpha, fmt, mark: _storage_value(
        out, alpha * _like(_load(v, mark), alpha), fmt)


def _block(out, o, so, a, s, sa, alpha, fmt, mark, stream):
    """One k x k block of :func:`_copy_tile` transposed in registers."""


@overload(_block, jit_options=_JIT, prefer_literal=True)
def _block_impl(out, o, so, a, s, sa, alpha, fmt, mark, stream):
    if isinstance(alpha, types.NoneType):  # the bits as they are
        return lambda out, o, so, a, s, sa, alpha, fmt, mark, stream: _move_block(
            out, o, so, a, s, sa, None, 0, 0, stream)
    if a.dtype != types.uint16:
        return lambda out, o, so, a, s, sa, alpha, fmt, mark, stream: _block_from(
            out, o, so, a, s, sa, alpha, 0, fmt, stream)

    def impl(out, o, so, a, s, sa, alpha, fmt, mark, stream):  # a's format as a literal
        if mark == 1:
            _block_from(out, o, so, a, s, sa, alpha, 1, fmt, stream)
        else:
            _block_from(out, o, so, a, s, sa, alpha, 2, fmt, stream)

    return impl


def _block_from(out, o, so, a, s, sa, alpha, src, fmt, stream):
    """:func:`_move_block` from a's format ``src`` (a literal) into out's,
    ``fmt`` turned into a literal here: each block converts one way, no branch inside."""


@overload(_block_from, jit_options=_JIT, prefer_literal=True)
def _block_from_impl(out, o, so, a, s, sa, alpha, src, fmt, stream):
    if not isinstance(src, types.IntegerLiteral):
        return None
    if out.dtype != types.uint16:
        return lambda out, o, so, a, s, sa, alpha, src, fmt, stream: _move_block(
            out, o, so, a, s, sa, alpha, src, 0, stream)

    def impl(out, o, so, a, s, sa, alpha, src, fmt, stream):
        if fmt == 1:
            _move_block(out, o, so, a, s, sa, alpha, src, 1, stream)
        else:
            _move_block(out, o, so, a, s, sa, alpha, src, 2, stream)

    return impl


def _tile_blocks(out, a, alpha):
    """(whether :func:`_copy_tile`'s blocks are shuffled in registers, their side), for
    Numba types (decided when compiling)."""
    if isinstance(alpha, types.NoneType):
        return out.dtype.bitwidth in _SHUFFLED_BITS, _plain_side(out.dtype.bitwidth)
    shuffle = _scaled_in_registers(out, a, alpha)
    return shuffle, _block_side(alpha.bitwidth) if shuffle else _MICRO


@overload(_copy_tile, jit_options=_JIT)
def _copy_tile_impl(out, a, dst, src, sop, soq, sap, saq, mp, mq, alpha, fmt, mark, stream):
    if isinstance(alpha, types.NoneType) and out.dtype != a.dtype:
        # never called: the kernel converts such tiles through buf
        return (lambda out, a, dst, src, sop, soq, sap, saq, mp, mq, alpha, fmt, mark,
                stream: None)
    shuffle, side = _tile_blocks(out, a, alpha)

    def impl(out, a, dst, src, sop, soq, sap, saq, mp, mq, alpha, fmt, mark, stream):
        if sop != 1 or saq != 1:
            for j in range(mq):
                for i in range(mp):
                    out[_U(dst + i * sop + j * soq)] = _moved(
                        out, a[_U(src + i * sap + j * saq)], alpha, fmt, mark)
            return
        ep, eq = mp - mp % side, mq - mq % side
        if stream and shuffle and (out.ctypes.data + dst * out.itemsize) % _LINE == 0 and (
                soq * out.itemsize) % _LINE == 0:  # every block row starts on a line
            _blocks(out, a, dst, src, soq, sap, ep, eq, alpha, fmt, mark, 1)
        else:
            _blocks(out, a, dst, src, soq, sap, ep, eq, alpha, fmt, mark, 0)
        for j in range(eq):
            for i in range(ep, mp):
                out[_U(dst + i + j * soq)] = _moved(out, a[_U(src + i * sap + j)], alpha, fmt,
                                                    mark)
        for j in range(eq, mq):
            for i in range(mp):
                out[_U(dst + i + j * soq)] = _moved(out, a[_U(src + i * sap + j)], alpha, fmt,
                                                    mark)

    return impl


def _blocks(out, a, dst, src, soq, sap, ep, eq, alpha, fmt, mark, stream):
    """The whole blocks of :func:`_copy_tile` (its first ep x eq elements); ``stream``, a
    literal, says whether register blocks stream (:func:`_move_block`)."""


@overload(_blocks, jit_options=_JIT, prefer_literal=True)
def _blocks_impl(out, a, dst, src, soq, sap, ep, eq, alpha, fmt, mark, stream):
    if not isinstance(stream, types.IntegerLiteral):
        return None
    shuffle, side = _tile_blocks(out, a, alpha)

    def impl(out, a, dst, src, soq, sap, ep, eq, alpha, fmt, mark, stream):
        # blocks along a's rows innermost: the lines of a row band are read back to back
        for i0 in range(0, ep, side):  # unit strides as literals: the blocks vectorise
            for j0 in range(0, eq, side):
                o, s = dst + i0 + j0 * soq, src + i0 * sap + j0
                if shuffle:
                    _block(out, o, soq, a, s, sap, alpha, fmt, mark, stream)
                    continue
                for j in range(side):
                    for i in range(side):
                        out[_U(o + i + j * soq)] = _moved(out, a[_U(s + i * sap + j)], alpha,
                                                          fmt, mark)

    return impl


@njit(**_JIT)
def _tiles(out, a, dst, src, sor, sar, mr, sop, soq, sap, saq, mp, mq, alpha, fmt, mark,
           staged, stream):
    """:func:`_copy_tile` for ``mr`` tiles (sor, sar) apart, or where ``staged`` the same
    into a buffer of their out rows, then row by row into out: each row of the first
    tile, of the second... (runs of mr * mp where out's rows go on from tile to tile;
    each of out's lines written whole at once).  ``stream``: out's lines may be streamed
    (the buffer's never are)."""
    if not staged and mp * mq < _MICRO * _MICRO:  # small tiles: element by element, no blocks
        for r in range(mr):
            o, s = dst + r * sor, src + r * sar
            for j in range(mq):
                for i in range(mp):
                    out[_U(o + i * sop + j * soq)] = _moved(
                        out, a[_U(s + i * sap + j * saq)], alpha, fmt, mark)
        return
    if not staged:
        for r in range(mr):
            _copy_tile(out, a, dst + r * sor, src + r * sar, sop, soq, sap, saq, mp, mq,
                       alpha, fmt, mark, stream)
        return
    rows = np.empty(mr * mp * mq, out.dtype)
    for r in range(mr):
        _copy_tile(rows, a, r * mp, src + r * sar, 1, mr * mp, sap, saq, mp, mq, alpha, fmt,
                   mark, 0)
    _move_rows(out, rows, dst, 0, mp, sop, 1, mr, sor, mp, mq, soq, mr * mp, stream)


@njit(**_JIT)
def _load_tile(buf, a, src, sap, saq, mp, mq, mark, code, scale, alpha):
    """buf[i * mq + j] = alpha * unary(a[src + i*sap + j*saq]) for i < mp, j < mq, in the
    compute type (alpha's)."""
    if code == _IDENTITY and saq == 1:  # branch-free body with unit stride: a vector loop
        for i in range(mp):
            s, b = src + i * sap, i * mq
            for j in range(mq):
                v = _like(_load(a[_U(s + j)], mark), alpha)
                w = alpha * v
                buf[b + j] = w if scale else v
        return
    for i in range(mp):
        s, b = src + i * sap, i * mq
        for j in range(mq):
            v = _unary(code, _like(_load(a[_U(s + j * saq)], mark), alpha))
            buf[b + j] = alpha * v if scale else v


@njit(**_JIT)
def _converted_tiles(out, a, ta, dst, src, sor, sar, mr, sop, soq, sap, saq, mp, mq, code,
                     scale, fmt, scal, staged, stream):
    """The tile kernel's ``mr`` tiles through a compute-type buffer: loaded, transformed
    and scaled (:func:`_load_tile`), then moved as they are where out stores the compute
    type (scal's), else transposed in the buffer and converted row by row."""
    buf = np.empty(2 * mp * mq, scal.dtype)
    for t in range(mr):
        _load_tile(buf, a, src + t * sar, sap, saq, mp, mq, ta[0], code, scale, scal[0])
        at = dst + t * sor
        if _same_dtype(out, scal):  # out stores the compute type: no conversion pass
            _tiles(out, buf, at, 0, 0, 0, 1, sop, soq, mq, 1, mp, mq, None, fmt, 0, staged,
                   stream)
            continue
        flipped = buf[mp * mq:]
        _copy_tile(flipped, buf, 0, 0, 1, mp, mq, 1, mp, mq, None, fmt, 0, 0)  # in registers
        for j in range(mq):  # write rows along out's fastest axis p
            _store_row(out, at + j * soq, sop, flipped, j * mp, 1, mp, fmt)


def _same_dtype(x, y):
    """Whether arrays x and y hold the same type (decided when compiling)."""


@overload(_same_dtype, jit_options=_JIT)
def _same_dtype_impl(x, y):
    same = x.dtype == y.dtype
    return lambda x, y: same


@njit(**_JIT)
def _line_shift(first, item, tile):
    """How far before a row's start (at address ``first``, elements of ``item`` bytes)
    tiles of ``tile`` elements begin so that all but the first start on a cache line
    (0 where no element does)."""
    if first % item:
        return 0
    return (tile - (-first) % _LINE // item) % tile


def _tiles_kernel(shape, offs, strides, ta, tiles, code, scale, fmt, scal, out, a):
    """out = scale(unary(a)) tile by tile (tiles: [along p, along q, group, staged, along
    r, aligned, stream]); tiles are taken in groups of group x group so that the pages one thread
    touches stay few (TLB reach), the groups of a band along q one after the other along p, and
    ``along r`` tiles at once at consecutive positions of the axis r before q (out's rows
    may go on along it).  A plain copy (code < 0) moves elements directly; a scaled or
    converting copy (no transform) of float64, or among float32 and 16-bit data, is
    widened, scaled, transposed and narrowed in registers (:func:`_move_block`); anything
    else goes through a buffer, tile by tile.  ``staged`` tiles write out row by row
    (:func:`_tiles`).  Where ``aligned`` (tiles[5], :func:`_aligns`) the tiles along p
    start where out's rows reach a cache line, the first one narrower.  Where ``stream``
    (tiles[6]), blocks of whole lines are streamed past the caches, and each task ends
    with a store fence."""
    nd = shape.shape[0]
    p, q, r = nd - 1, nd - 2, max(nd - 3, 0)
    tile_p, tile_q, group, staged, stream = tiles[0], tiles[1], tiles[2], tiles[3], tiles[6]
    tr = min(tiles[4], shape[r]) if nd > 2 else 1
    shift = _line_shift(out.ctypes.data + offs[0] * out.itemsize, out.itemsize,
                        tile_p) if tiles[5] else 0  # tiles along p start at -shift
    tp = (shape[p] + shift + tile_p - 1) // tile_p
    tq = (shape[q] + tile_q - 1) // tile_q
    hp, hq = min(group, tp), min(group, tq)  # group sides, no wider than the tile grid
    gp = (tp + hp - 1) // hp
    per_outer = gp * ((tq + hq - 1) // hq) * hp * hq
    rs = (shape[r] + tr - 1) // tr if nd > 2 else 1  # runs of tr positions along r
    outer = rs
    for ax in range(nd - 3):
        outer *= shape[ax]
    sop, soq, sap, saq = strides[0, p], strides[0, q], strides[1, p], strides[1, q]
    sor, sar = (strides[0, r], strides[1, r]) if nd > 2 else (0, 0)
    for u in prange(outer * per_outer):
        g, k = divmod(u % per_outer, hp * hq)
        kp = g % gp * hp + k // hq  # groups along p first: out's rows (along q) are
        kq = g // gp * hq + k % hq  # written whole a band at a time (faulted in so)
        if kp >= tp or kq >= tq:
            continue
        o, s = _offset_pair(u // per_outer // rs, shape, strides, r, offs)
        r0 = u // per_outer % rs * tr
        mr = min(tr, shape[r] - r0) if nd > 2 else 1
        p0 = max(kp * tile_p - shift, 0)
        q0 = kq * tile_q
        mp = min(kp * tile_p - shift + tile_p, shape[p]) - p0
        mq = min(tile_q, shape[q] - q0)
        src = s + r0 * sar + p0 * sap + q0 * saq
        dst = o + r0 * sor + p0 * sop + q0 * soq
        if code < 0:
            _tiles(out, a, dst, src, sor, sar, mr, sop, soq, sap, saq, mp, mq, None, fmt, 0,
                   staged, stream)
        elif code == _IDENTITY and sop == 1 and saq == 1 and _fuses(out, a, scal[0]):
            _tiles(out, a, dst, src, sor, sar, mr, sop, soq, sap, saq, mp, mq, scal[0], fmt,
                   ta[0], staged, stream)
        else:
            _converted_tiles(out, a, ta, dst, src, sor, sar, mr, sop, soq, sap, saq, mp, mq,
                             code, scale, fmt, scal, staged, stream)
        if stream:
            _store_fence()


_PERMUTE = _twins(_tiles_kernel)
