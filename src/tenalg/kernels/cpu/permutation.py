"""Argument preparation of the permutation kernels (:func:`permute_call`): which kernel
(tiles or row tiles), the tile sizes, staging, alignment and streaming, and the words
that ``explain()`` shows.

>>> import numpy as np
>>> out = np.empty((3, 2))
>>> permute(out, np.arange(6.0).reshape(2, 3).T, alpha=1, unary="identity",
...         compute=np.dtype(np.float64))
>>> out.tolist()
[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
"""

import functools
import math

import numpy as np

from .calls import _Call, _geometry, _layout, _mark, _unary_code
from .lowlevel import _FORMATS, _IDENTITY, _LINE, _ROW_PIECE, _STREAMS
from .permutation_rows import _ROW_RUN, _ROW_TILE, _ROW_TILES
from .permutation_tiles import (
    _ALIASED,
    _PERMUTE,
    _STAGED_BYTES,
    _STREAM_TILES,
    _TILES,
    _block_side,
    _plain_side,
    _registers_serve,
)
from .threads import _on_threads, _threads

# Permutations that write at least this many bytes store whole cache lines past the caches
# (where _STREAMS): the lines are not read before they are written, which a store through
# the caches does, and the caches keep the input (on two threads of Zen 4, transposes of
# 12-31 MB 15-45% faster, of 8-10 MB unchanged: their output stays in the 32 MB L3 from
# call to call)
_STREAM_BYTES = 3 << 22
# tiles of fewer elements are taken this many elements' worth at once (_small_run)
_SMALL_TILE = 1 << 10


@functools.lru_cache(maxsize=1024)
def _tiles_prep(out_layout, a_layout):
    """Tile-kernel arguments (shape, offsets, strides; a's fastest axis, then out's, last),
    or None when both fastest axes coincide (the row kernel's case)."""
    shape = out_layout[0]
    (oo, _, os_), (ao, _, as_) = _geometry(*out_layout), _geometry(*a_layout)
    axes = [ax for ax in range(len(shape)) if shape[ax] > 1]
    fast_out = min(axes, key=lambda ax: abs(os_[ax]), default=None)
    fast_a = min(axes, key=lambda ax: (abs(as_[ax]) or math.inf, ax), default=None)
    if fast_out == fast_a or as_[fast_a] == 0:
        return None
    rest = sorted((ax for ax in axes if ax not in (fast_out, fast_a)),
                  key=lambda ax: -abs(os_[ax]))
    order = rest + [fast_a, fast_out]
    strides = np.array([[os_[ax] for ax in order], [as_[ax] for ax in order]], np.int64)
    return np.array([shape[ax] for ax in order], np.int64), np.array([oo, ao], np.int64), strides


@functools.lru_cache(maxsize=1024)
def _row_tiles_prep(out_layout, a_layout):
    """Row-tile kernel arguments: shape, offsets, strides (axes merged where both arrays
    allow; out's order, then a's next axis q, out's next axis p, the row last), tiles."""
    shape = out_layout[0]
    (oo, _, os_), (ao, _, as_) = _geometry(*out_layout), _geometry(*a_layout)
    dims = []  # (extent, out stride, a stride) in out's order, merged
    for ax in sorted((ax for ax in range(len(shape)) if shape[ax] > 1),
                     key=lambda ax: -abs(os_[ax])):
        e, so, sa = shape[ax], os_[ax], as_[ax]
        if dims and dims[-1][1:] == (so * e, sa * e):
            e *= dims.pop()[0]
        dims.append((e, so, sa))
    dims = [(1, 0, 0)] * (3 - len(dims)) + dims
    rest, p, row = dims[:-2], dims[-2], dims[-1]
    q = min(range(len(rest)), key=lambda k: abs(rest[k][2]) or math.inf)
    dims = rest[:q] + rest[q + 1:] + [rest[q], p, row]
    tile_r = min(row[0], _ROW_PIECE)
    width = tile_r * out_layout[2].itemsize  # bytes of one row piece of out
    tile_p = min(p[0], max(8, _ROW_RUN // width))
    tile_q = min(rest[q][0], max(1, _ROW_TILE // (tile_p * width)))
    return (np.array([d[0] for d in dims], np.int64), np.array([oo, ao], np.int64),
            np.array([[d[1] for d in dims], [d[2] for d in dims]], np.int64),
            np.array([tile_p, tile_q, tile_r], np.int64))


@functools.lru_cache(maxsize=1024)
def _permute_prep(out_layout, a_layout):
    """(kernel twins, shape, offsets, strides, tiles) of a permutation: the tile kernel,
    or the row-tile kernel when out's and a's fastest axes coincide."""
    tiled = _tiles_prep(out_layout, a_layout)
    if tiled is None:
        return (_ROW_TILES, *_row_tiles_prep(out_layout, a_layout))
    return (_PERMUTE, *tiled, _TILES)


def permute(out, a, *, alpha, unary, compute):
    """out[...] = cast(alpha * unary(a)); blocked over out's and a's fastest axes, or
    whole rows where those coincide.

    >>> out = np.empty((2, 2), np.float32)
    >>> permute(out, np.eye(2), alpha=1, unary="negate", compute=np.dtype(np.float64))
    >>> out.tolist()
    [[-1.0, -0.0], [-0.0, -1.0]]
    """
    call = permute_call(out, a, alpha=alpha, unary=unary, compute=compute)
    if call is not None:
        call.run((out, a), (alpha,))


def permute_call(out, a, *, alpha, unary, compute):
    """The kernel call of :func:`permute` (arguments alike; None: nothing to do)."""
    if out.size == 0:
        return None
    code = _unary_code(unary, compute)
    if code == _IDENTITY and alpha == 1 and out.dtype == a.dtype:
        code = -1  # a plain copy: elements move as they are (16-bit bits too)
    return _permute_call(_layout(out), _layout(a), code, alpha != 1, compute,
                         _threads(out.size))


@functools.lru_cache(maxsize=1024)
def _permute_call(out_layout, a_layout, code, scale, compute, threads):
    twins, shape, offs, strides, tiles = _permute_prep(out_layout, a_layout)
    stream = _streams(shape, out_layout[2])
    if twins is _ROW_TILES:
        stream = stream and code < 0  # rows moved as they are
        run = _outer_run(shape, tiles)
        about = (f"rows of up to {tiles[2]} elements, in tiles of {tiles[0]} x {tiles[1]} "
                 "rows" + (f", {run} tiles along the outer axes at once" if run > 1 else "")
                 + (", streamed past the caches" if stream else ""))
        tiles = np.array([*tiles, stream, run], np.int64)
    else:
        how, staged, side = _tile_moves(out_layout[2], a_layout[2], strides, code, compute)
        # staged rows stream from their buffer, blocks where a block row is a whole line
        stream = stream and side is not None and (staged or side * out_layout[2].itemsize
                                                  == _LINE)
        tiles = _STREAM_TILES if stream else tiles
        along_r = (_staged_along_r(shape, strides, tiles, out_layout[2].itemsize) if staged
                   else _small_along_r(shape, tiles))
        if along_r > 1:
            how += f", {along_r} tiles along the next axis at once"
        aligned = _aligns(shape, strides, tiles, out_layout[2].itemsize)
        if aligned:
            how += ", shifted along out's rows onto cache lines"
        if stream:
            how += ", whole lines streamed past the caches"
        tiles = np.array([*tiles, staged, along_r, aligned, stream], np.int64)
        about = f"tiles of {tiles[0]} x {tiles[1]} in groups of {tiles[2]} x {tiles[2]}, {how}"
    static = (strides, _mark(a_layout[2]), tiles, code, scale, _FORMATS.get(out_layout[2], 0))
    return _Call(twins[threads == 1], shape, offs, static, (0, 1), 1, compute,
                 _on_threads(about, threads))


def _streams(shape, out_type):
    """Whether a permutation's stores stream past the caches: where the host has the
    store fence, and out is larger than the last-level cache would keep
    (:data:`_STREAM_BYTES`)."""
    return _STREAMS and math.prod(shape) * out_type.itemsize >= _STREAM_BYTES


def _tile_moves(out_type, a_type, strides, code, compute):
    """(how the tile kernel moves a tile, in words; whether it stages the tile's out rows
    in a buffer: where blocks write less than a cache line of each of out's rows and
    those rows alias in the caches (:data:`_ALIASED`); the side of the blocks that write
    out, None where elements are stored one by one)."""
    side = None  # of the blocks that write out (None: an element or a row at a time)
    if not (strides[0, -1] == 1 and strides[1, -2] == 1):
        how = "element by element (strided fastest axes)"
    elif code < 0:
        side = _plain_side(out_type.itemsize * 8)
        how = f"moved as they are in {side} x {side} blocks"
    elif code == _IDENTITY and _registers_serve(str(a_type), str(out_type), str(compute)):
        side = _block_side(compute.itemsize * 8)
        how = f"scaled and converted in {side} x {side} register blocks"
    else:
        side = _plain_side(out_type.itemsize * 8) if out_type == compute else None
        how = "through a compute-type buffer"
    row_bytes = int(strides[0, -2]) * out_type.itemsize
    staged = side is not None and side * out_type.itemsize < _LINE and row_bytes % _ALIASED == 0
    if staged:
        how += f", then row by row (out's rows {abs(row_bytes)} bytes apart)"
    return how, staged, side


def _aligns(shape, strides, tiles, itemsize):
    """Whether the tile kernel shifts its tiles along out's rows (p) so that their block
    rows start on cache lines: out's rows contiguous, at least four tiles long, and all
    starting at one offset within a line (the other strides whole lines).  Stores that
    straddle two lines cost a transpose into an existing array 10-25% on Zen 4: 8192^2
    float32 into a NumPy array (16 bytes past a line) 23.4-28.1 -> 21.0-24.3 ms, 4096^2
    float64 11.2-11.8 -> 8.3-9.3 ms."""
    return bool(strides[0, -1] == 1 and _LINE % itemsize == 0 and shape[-1] >= 4 * tiles[0]
                and all(st * itemsize % _LINE == 0 for st in strides[0, :-1]))


def _small_along_r(shape, tiles):
    """How many tiles the tile kernel takes at once along the axis r before q
    (:func:`_small_run`)."""
    if len(shape) < 3:
        return 1
    return _small_run(min(tiles[0], shape[-1]) * min(tiles[1], shape[-2]), shape[-3])


def _outer_run(shape, tiles):
    """How many outer positions the row-tile kernel takes a tile at (:func:`_small_run`):
    rows of 5 float64 in 2 x 2 tiles of (20000, 2, 2, 5) permuted (0, 2, 1, 3) took 1.1 ms
    on two threads tile by tile, NumPy's copy 0.9."""
    return _small_run(math.prod(tiles), math.prod(shape[:-3]))


def _small_run(tile, positions):
    """Tiles of ``tile`` elements taken at once, of ``positions``: 1024 elements' worth
    (:data:`_SMALL_TILE`) where tiles are smaller, else one.  Tile by tile, each cost a
    step of the parallel loop's odometer: a (100000, 2, 2) float64 array permuted
    (0, 2, 1) took 7.6 ms on two threads, NumPy's copy 1.9; in runs, 2.7 ms, and 0.7-0.9
    where tiles of no whole block move element by element."""
    return int(max(1, min(positions, _SMALL_TILE // max(1, tile))))


def _staged_along_r(shape, strides, tiles, itemsize):
    """How many staged tiles the tile kernel takes at once along the axis r before q:
    where a tile spans out's axis p whole and out's rows go on along r, up to
    :data:`_STAGED_BYTES` of them; else 1."""
    if len(shape) < 3 or shape[-1] > tiles[0] or strides[0, -3] != shape[-1] * strides[0, -1]:
        return 1
    tile = shape[-1] * min(tiles[1], shape[-2]) * itemsize
    return int(max(1, min(shape[-3], _STAGED_BYTES // tile)))
