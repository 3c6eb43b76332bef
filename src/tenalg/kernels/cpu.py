"""Numba CPU kernels: blocked permutation, strided reduction, fused elementwise.

Same interface as :mod:`tenalg.kernels.reference`: every argument is a strided view
already shaped by the layout analysis (output first; for a reduction the input's
trailing axes are the reduced ones).  Each array reaches Numba as a 1-D view of the
memory it spans plus an element offset and element strides, so one compiled kernel
serves every rank and layout; only the dtypes select a specialisation.  16-bit storage
travels as uint16 bits with a one-element format marker beside it: loads widen the bits
exactly (float16 through the F16C conversion, bfloat16 by a shift; both vectorise),
stores round to nearest even in :func:`_encode16`.

>>> import numpy as np
>>> from tenalg.descriptors import Unary
>>> out = np.empty((3, 2))
>>> permute(out, np.arange(6.0).reshape(2, 3).T, alpha=2, unary=Unary.IDENTITY,
...         compute=np.dtype(np.float64))
>>> out.tolist()
[[0.0, 6.0], [2.0, 8.0], [4.0, 10.0]]
"""

import contextlib
import functools
import itertools
import math
import platform
from types import FunctionType
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import get_num_threads, njit, prange, set_num_threads, types
from numba.core import cgutils
from numba.extending import intrinsic, overload
from numba.np.ufunc import parallel as _pool

from ..descriptors import Binary, Reduce, Unary
from ..dtypes import STORAGE_TYPES, bfloat16, float16, is_complex

_U = np.uintp  # offsets are never negative: unsigned indices skip wraparound checks
_JIT = {"cache": True, "fastmath": False, "error_model": "numpy", "nogil": True}
_PARALLEL = {**_JIT, "parallel": True}


def _twins(kernel):
    """``kernel`` compiled twice: (parallel over its prange, serial); small problems run
    the serial one, which costs no thread-pool launch.  The serial twin compiles a copy
    named ``<name>_serial``: Numba's on-disk cache keys a function by its name and
    signature, not by ``parallel``, so twins of one name would load whichever of them was
    compiled first (a parallel kernel running on one thread)."""
    serial = FunctionType(kernel.__code__, kernel.__globals__, kernel.__name__ + "_serial",
                          kernel.__defaults__, kernel.__closure__)
    serial.__qualname__ = kernel.__qualname__ + "_serial"
    return njit(**_PARALLEL)(kernel), njit(**_JIT)(serial)


# Unary codes (CONJUGATE becomes IDENTITY for real data in _unary_code).
_UNARY = {u: k for k, u in enumerate(Unary)}
_IDENTITY, _NEGATE, _ABS, _SQRT, _EXP, _LOG, _SIN, _COS, _TANH, _RELU, _RECIP, _CONJ = range(12)
# Binary and reduction operators share codes: add/sum, mul/product, min, max.
_OPS = {Binary.ADD: 0, Binary.MUL: 1, Binary.MIN: 2, Binary.MAX: 3,
        Reduce.SUM: 0, Reduce.PRODUCT: 1, Reduce.MIN: 2, Reduce.MAX: 3}
_IDENTITY_VALUE = (0.0, 1.0, math.inf, -math.inf)
# 16-bit storage formats, as codes for _encode16 (0: no 16-bit storage).
_FORMATS = {float16: 1, bfloat16: 2}
_MARKS = {dt: np.array([code], np.int64) for dt, code in _FORMATS.items()}
_NO_MARK = np.zeros(1, np.int64)

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
# Permutations that write at least this many bytes store whole cache lines past the caches
# (non-temporal stores, x86 only: their fence is SFENCE): the lines are not read before they
# are written, which a store through the caches does, and the caches keep the input (on
# two threads of Zen 4, transposes of 12-31 MB 15-45% faster, of 8-10 MB unchanged: their
# output stays in the 32 MB L3 from call to call)
_STREAMS = platform.machine().lower() in ("x86_64", "amd64")
_STREAM_BYTES = 3 << 22
# Width of the vectors a plain-copy block moves: whole 64-byte lines where AVX-512 has the
# registers (8-byte elements then move in 8 x 8 blocks of full lines, 2x faster than 4 x 4)
_VECTOR_BITS = 512 if "+avx512f" in llvm.get_host_cpu_features().flatten() else 256
_ROW_RUN, _ROW_TILE = 256, 1 << 15  # row tiles: bytes of out in one run (8 rows at least), in all
_ROW_PIECE = 1 << 13  # longer rows are split into pieces of this many elements (threads share them)
_ROW = 512     # elements per unit of the elementwise row kernel
_TASKS = 256   # units are dealt out in at most this many tasks (allocations once per task:
# 3 allocations per 512-element unit made the fused trinary 2x slower) ...
_TASK_ELEMENTS = 1 << 14  # ... of this many elements at least (a 16 x 16 add: 11 -> 3 us;
# rows of 1024 float32 summed in 256 tasks of two rows: 0.09 ms on one thread of Zen 1,
# in 32 tasks 0.06)
_CHUNK = 128   # row chunk summed pairwise by the reduction (NumPy's block size)
_BLOCK = 16    # contributions accumulated naively before entering the cascade
_TREE = 8      # blocks that strided sums add side by side in registers, then pairwise
_RUN_VECTORS = 8  # vector registers of lanes that a run along a reduced axis adds at once
# ... and terms it adds to them before the block enters the cascade: a sum over axis 1 of a
# (512, 512, 64) float32 array on Zen 1, blocks of 16: 8.9 ms on one thread, 4.9 on two (torch
# 5.9 and 3.6); of 64: 6.4 and 4.5.  Its largest relative error, in units of float32's eps:
# 1.55 (torch 1.56, NumPy 10.9, blocks of 16 0.98); over 131072 terms 0.72 (2.13, 116, 0.78)
_RUN_BLOCK = 64
_LANES = 4096  # outputs reduced side by side when the innermost axis is free (long runs per
# walk step: 1 KB runs made a sum over axis 0 of a 4096^2 f32 matrix 2x slower than NumPy)
_ROW_BLOCK = 1 << 14  # elements read per step (lanes x row) when the innermost axis is reduced
# reductions of contiguous rows of at least this many bytes (in the compute type), into at
# least so many outputs, read each row to its end in a kernel of their own
# (_row_totals_kernel; rows of 256 float32 on Zen 1: 0.26 against 0.46 ms for 4096 of them
# in lanes; since a row's last block stays in registers, on one thread of Zen 4, 262144
# rows of 64 float32 2.38 against 3.20 ms, 65536 of 32 float64 0.38 against 0.46; rows
# of 16 float32 are faster in lanes while they stay in cache)
_LONG_ROW, _MIN_ROW_TOTALS = 1 << 7, 16
# sums over a diagonal whose terms lie a cache line or more apart wait on memory: from this
# many terms, threads loading side by side beat NumPy's one loop (at most so many sums)
_MIN_STRIDED, _MAX_STRIDED_SUMS, _LINE = 1 << 10, 1 << 12, 64
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
# Below these sizes NumPy's reference path has lower overhead (measured on contiguous data)
_MIN_ELEMENTS = {"permutation": 1 << 15, "reduction": 1 << 18, "elementwise_binary": 1 << 18,
                 "elementwise_trinary": 1 << 18}
# ... unless NumPy would run its inner loop this many times (a reduction of at least
# _MIN_SLOW_NUMPY elements): each run costs it some 20 ns (a float64 sum of (32, 32, 32)
# over axis 1, 1024 runs, NumPy 22.5 us, the kernels 15.9, on Zen 4; of (256, 128) over
# axis 1, 256 runs, 11.1 and 14.1)
_NUMPY_LOOPS, _MIN_SLOW_NUMPY = 1 << 9, 1 << 12
# Permutations whose tiles (out's fastest extent x a's) hold fewer elements than this cost
# more per element than NumPy's loop: only two threads make up for it (a 15^4 block's
# 15 x 15 tiles, (2, 0, 3, 1): 0.78x NumPy's speed on one thread; 16 x 16: 1.0-1.2x)
_MIN_TILE = 256
# Permutations that keep the innermost axis (rows of n elements): NumPy's strided copy
# runs whole rows, so the kernels need n * _ROW_ELEMENTS elements, at most _MIN_ROWS
_ROW_ELEMENTS, _MIN_ROWS = 1 << 12, 1 << 18
# Below this many elements a thread-pool launch costs more than it saves: on Zen 1 from
# 2^19; on Zen 4 two threads win from 2^18 float64 elements (a sum of (2048, 128) over
# axis 1 36.5 -> 23.0 us, over axis 0 of (512, 512) 49.8 -> 32.3, NumPy 40.7; a 512^2
# transpose into an array 162 -> 106 us, an add 92 -> 53), mostly from 2^17 and not below
_SERIAL_WORK = 1 << 18
# Elementwise rows (out's fastest loop) shorter than this cost the row kernel more per
# row than NumPy's loop: (64, 512, 8) + (64, 512, 1) float32 835 us on two threads of Zen
# 4, NumPy 126; rows of 128 (2048, 128) + (2048, 1) 126 against 61, of 256 84 against 57
_MIN_ROW = 512


# --------------------------------------------------------------------------------------
# scalar helpers (compiled into every kernel)


@intrinsic
def _widen_half(typingctx, bits):
    """float16 bits (uint16) -> float32, exactly (LLVM's fpext: F16C where available)."""
    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _widen_bfloat(typingctx, bits):
    """bfloat16 bits (uint16) -> float32: the bits are the upper half of a float32's."""
    def codegen(context, builder, sig, args):
        wide = builder.shl(builder.zext(args[0], ir.IntType(32)), ir.Constant(ir.IntType(32), 16))
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(types.uint16), codegen


def _load(x, mark):
    """Storage value -> float (16-bit bits are widened as ``mark`` says: 1 float16, else
    bfloat16; ``mark`` is the format code or an array holding it)."""


@overload(_load, jit_options=_JIT)
def _load_impl(x, mark):
    if not isinstance(x, types.Integer):
        return lambda x, mark: x
    if isinstance(mark, types.Array):
        return lambda x, mark: _load(x, mark[0])

    def impl(x, mark):  # both widenings, then a select: loops over it stay vector loops
        half, bfloat = _widen_half(x), _widen_bfloat(x)
        return half if mark == 1 else bfloat

    return impl


@intrinsic
def _narrow_half(typingctx, x):
    """float32 -> float16 bits, rounding to nearest even (LLVM's fptrunc: F16C)."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _float_bits(typingctx, x):
    """The bits of a float32 as a uint32, or the float32 of uint32 bits."""
    if isinstance(x, types.Integer):
        sig = types.float32(types.uint32)
    else:
        sig = types.uint32(types.float32)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(sig.return_type))

    return sig, codegen


@intrinsic
def _prefetch(typingctx, x, index):
    """Ask the cache for the line of ``x[index]`` (an index inside ``x``); loads nothing,
    so the loop goes on while the line, and its page's translation, are fetched."""
    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", [address.type],
            ir.FunctionType(ir.VoidType(), [address.type, i32, i32, i32]))
        # read, keep in all levels (locality 3), data cache
        builder.call(fn, [address, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(x, index), codegen


def _streamed_store(builder, value, pointer, size):
    """Codegen: a store of ``size`` bytes that bypasses the caches (non-temporal: the line
    is not read before it is written, nor does it evict other data); ``pointer`` aligned
    to ``size``.  Only :func:`_store_fence` makes it visible to other threads."""
    store = builder.store(value, pointer, align=size)
    store.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))


@intrinsic
def _store_fence(typingctx):
    """Make this thread's streamed stores visible to others (x86's SFENCE): a task that
    streamed its output ends with it."""
    def codegen(context, builder, sig, args):
        if _STREAMS:
            fn = builder.module.declare_intrinsic("llvm.x86.sse.sfence",
                                                  fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@njit(**_JIT, inline="always")
def _narrow_bfloat(f):
    """float32 -> bfloat16 bits, rounding to nearest even; NaN stays a quiet NaN."""
    b = _float_bits(f)
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (b >> np.uint32(16)) | np.uint32(0x40)
    return np.uint16(quiet if f != f else rounded)


@njit(**_JIT, inline="always")
def _round_odd(x):
    """float64 -> float32 rounded to odd (truncate, then set the last bit if inexact):
    rounding that result again to a 16-bit format rounds x correctly (no double rounding)."""
    f = np.float32(x)
    wide = np.float64(f)
    inexact = wide != x and x == x
    b = _float_bits(f)
    b = b - np.uint32(1) if inexact and abs(wide) > abs(x) else b
    return _float_bits(b | np.uint32(1) if inexact else b)


@njit(**_JIT, inline="always")
def _encode32(x, fmt):
    """float32 -> float16 (fmt 1) or bfloat16 (fmt 2) bits, rounding to nearest even.
    Branch-free (both formats, then a select), so loops over it vectorise."""
    half, bfloat = _narrow_half(x), _narrow_bfloat(x)
    return half if fmt == 1 else bfloat


def _encode16(x, fmt):
    """float -> float16 (fmt 1) or bfloat16 (fmt 2) bits, rounding to nearest even
    (float64 through :func:`_round_odd`: one correct rounding)."""


@overload(_encode16, jit_options=_JIT)
def _encode16_impl(x, fmt):
    if x == types.float32:
        return lambda x, fmt: _encode32(x, fmt)
    return lambda x, fmt: _encode32(_round_odd(np.float64(x)), fmt)


def _storage_value(out, v, fmt):
    """v converted for storage in ``out`` (16-bit bits; real part for a real output)."""


@overload(_storage_value, jit_options=_JIT)
def _storage_value_impl(out, v, fmt):
    real = v.underlying_float if isinstance(v, types.Complex) else v
    if isinstance(out.dtype, types.Integer):
        if real is v:
            return lambda out, v, fmt: _encode16(v, fmt)
        return lambda out, v, fmt: _encode16(v.real, fmt)
    if real is not v and not isinstance(out.dtype, types.Complex):
        return lambda out, v, fmt: v.real
    return lambda out, v, fmt: v


@njit(**_JIT)
def _store_row(out, off, stride, buf, b0, bstride, n, fmt):
    """out[off + i * stride] = buf[b0 + i * bstride] for i < n, converted to out's storage."""
    if stride == 1 and bstride == 1:  # unit strides as literals: a vector loop
        for i in range(n):
            out[_U(off + i)] = _storage_value(out, buf[_U(b0 + i)], fmt)
    elif stride == 1:
        for i in range(n):
            out[_U(off + i)] = _storage_value(out, buf[_U(b0 + i * bstride)], fmt)
    else:
        for i in range(n):
            out[_U(off + i * stride)] = _storage_value(out, buf[_U(b0 + i * bstride)], fmt)


def _reciprocal(x):
    """1 / x; complex as NumPy's reciprocal does it (Smith's division)."""


@overload(_reciprocal, jit_options=_JIT)
def _reciprocal_impl(x):
    if not isinstance(x, types.Complex):
        return lambda x: 1.0 / x

    def impl(x):
        if abs(x.imag) <= abs(x.real):
            r = x.imag / x.real
            d = x.real + x.imag * r
            return complex(1.0 / d, -r / d)
        r = x.real / x.imag
        d = x.real * r + x.imag
        return complex(r / d, -1.0 / d)

    return impl


def _relu(x):
    """max(x, 0) propagating NaN; complex: x where x.real > 0, else 0 (as the reference)."""


@overload(_relu, jit_options=_JIT)
def _relu_impl(x):
    zero = np.dtype(str(x)).type(0)
    if isinstance(x, types.Complex):
        return lambda x: x if x.real > 0 else zero
    return lambda x: zero if x <= 0 else x


@njit(**_JIT)
def _unary(code, x):
    """The unary transform ``code`` of one compute-type value."""
    if code == _IDENTITY:
        return x
    if code == _NEGATE:
        return -x
    if code == _ABS:
        return abs(x)
    if code == _SQRT:
        return np.sqrt(x)
    if code == _EXP:
        return np.exp(x)
    if code == _LOG:
        return np.log(x)
    if code == _SIN:
        return np.sin(x)
    if code == _COS:
        return np.cos(x)
    if code == _TANH:
        return np.tanh(x)
    if code == _RELU:
        return _relu(x)
    if code == _RECIP:
        return _reciprocal(x)
    return np.conj(x)


@njit(**_JIT)
def _negative(x):
    return math.copysign(1.0, x.real) < 0


def _ieee_extremum(builder, name, x, y):
    """Codegen: LLVM's ``llvm.<name>`` (minimum, maximum) of floats or float vectors x
    and y: NaN if either is NaN, -0 below +0, branch-free (loops over it vectorise)."""
    t = x.type
    vector = isinstance(t, ir.VectorType)
    kind = "f32" if isinstance(t.element if vector else t, ir.FloatType) else "f64"
    kind = f"v{t.count}{kind}" if vector else kind
    f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t]),
                                       f"llvm.{name}.{kind}")
    return builder.call(f, [x, y])


def _extremum_of(name):
    """The intrinsic f(x, y) of :func:`_ieee_extremum` for two floats of one type."""
    @intrinsic
    def extremum(typingctx, x, y):
        if not (isinstance(x, types.Float) and x == y):
            return None
        return x(x, y), lambda context, builder, sig, args: _ieee_extremum(builder, name, *args)

    return extremum


_minimum, _maximum = _extremum_of("minimum"), _extremum_of("maximum")


def _extreme(op, x, y):
    """min (op 2) or max (else) of x and y: NaN if either is NaN, -0 below +0 (complex
    numbers by their real parts)."""


@overload(_extreme, jit_options=_JIT)
def _extreme_impl(op, x, y):
    if isinstance(x, types.Float) and isinstance(y, types.Float):  # branch-free: loops
        if y.bitwidth > x.bitwidth:                                  # over it vectorise
            return lambda op, x, y: _extreme(op, _like(x, y), y)
        return lambda op, x, y: (_minimum(x, _like(y, x)) if op == 2
                                 else _maximum(x, _like(y, x)))

    def impl(op, x, y):
        if x != x:
            return x
        if y != y:
            return y
        if op == 2:
            return y if (y.real < x.real or (y == x and _negative(y))) else x
        return y if (y.real > x.real or (y == x and not _negative(y))) else x

    return impl


@njit(**_JIT)
def _combine(op, x, y):
    """add, mul, min, max (codes 0..3); min/max propagate NaN and order -0 below +0."""
    if op == 0:
        return x + y
    if op == 1:
        return x * y
    return _extreme(op, x, y)


@njit(**_JIT)
def _transform(buf, n, code, scale, alpha):
    """buf[:n] = alpha * unary(buf[:n]) (the product only when ``scale``)."""
    if code != _IDENTITY:
        for i in range(n):
            buf[i] = _unary(code, buf[i])
    if scale:
        for i in range(n):
            buf[i] = alpha * buf[i]


def _load_run(buf, n, x, off, mark):
    """buf[:n] = x[off:off + n] widened to the compute type (one vectorisable loop)."""


@overload(_load_run, jit_options=_JIT)
def _load_run_impl(buf, n, x, off, mark):
    if not isinstance(x.dtype, types.Integer):
        def impl(buf, n, x, off, mark):
            for i in range(n):
                buf[i] = x[_U(off + i)]
        return impl

    def impl16(buf, n, x, off, mark):
        if mark[0] == 1:
            for i in range(n):
                buf[i] = _widen_half(x[_U(off + i)])
        else:
            for i in range(n):
                buf[i] = _widen_bfloat(x[_U(off + i)])
    return impl16


@njit(**_JIT)
def _load_row(buf, n, x, off, stride, mark, code, scale, alpha):
    """buf[:n] = alpha * unary(x[off + i * stride]) in the compute type."""
    if stride == 1 and code == _IDENTITY:  # the vectorisable cases first
        _load_run(buf, n, x, off, mark)
        if scale:
            for i in range(n):
                buf[i] = alpha * buf[i]
    elif stride == 0:  # a broadcast: one value, transformed once and copied (loaded
        # element by element, (4096, 1024) + (4096, 1) float32 took 1.3 ms on two threads
        # of Zen 4, 0.77 so; NumPy 1.57)
        buf[0] = _load(x[_U(off)], mark)
        _transform(buf, 1, code, scale, alpha)
        for i in range(1, n):
            buf[i] = buf[0]
    else:
        for i in range(n):
            buf[i] = _load(x[_U(off + i * stride)], mark)
        _transform(buf, n, code, scale, alpha)


@njit(**_JIT)
def _accumulate(op, acc, buf, n):
    """acc[:n] = op(acc[:n], buf[:n]); add and mul in their own (vectorisable) loops."""
    if op == 0:
        for i in range(n):
            acc[i] += buf[i]
    elif op == 1:
        for i in range(n):
            acc[i] *= buf[i]
    else:
        for i in range(n):
            acc[i] = _combine(op, acc[i], buf[i])


@njit(**_JIT)
def _offset_pair(r, shape, strides, last, offs):
    """(out's, a's) offsets of flat index r over axes 0..last-1, as :func:`_offsets`
    gives them, without an array to hold them."""
    o, s = offs[0], offs[1]
    for ax in range(last - 1, 0, -1):
        i = r % shape[ax]
        r //= shape[ax]
        o += i * strides[0, ax]
        s += i * strides[1, ax]
    if last > 0:  # r < shape[0]: no division
        o += r * strides[0, 0]
        s += r * strides[1, 0]
    return o, s


@njit(**_JIT)
def _offsets(r, shape, strides, last, offs, result):
    """result[k] = offs[k] + (offsets of flat index r over axes 0..last-1) for each array.
    The outermost index is r itself once the others are taken (r < the product of the
    extents): no division there, none at all over one axis (a sum over axis 1 of (16384,
    8, 8) float64, one output row per index: 815 -> 642 us on one thread of Zen 4)."""
    for k in range(offs.shape[0]):
        result[k] = offs[k]
    for ax in range(last - 1, 0, -1):
        i = r % shape[ax]
        r //= shape[ax]
        for k in range(offs.shape[0]):
            result[k] += i * strides[k, ax]
    if last > 0:
        for k in range(offs.shape[0]):
            result[k] += r * strides[k, 0]


# --------------------------------------------------------------------------------------
# elementwise rows


@njit(**_JIT)
def _direct_row(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal):
    """out[o:o+m] = op_abc(op_ab(s0 a, s1 b), s2 c) in one pass over unit-stride rows of
    real floats (16-bit ones widened as ``marks`` say, the result stored in out's format),
    ops add or mul, no unary: the operations of the buffered path in its order, so the
    results are identical (times 1 is exact)."""
    if codes[0] == 2:  # the input count as a literal: each loop is branch-free
        _direct_run(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, 2)
    else:
        _direct_run(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, 3)


def _direct_run(out, o, a, oa, b, ob, c, oc, m, marks, codes, scal, inputs):
    """:func:`_direct_row` for ``inputs`` (a literal) inputs."""


@overload(_direct_run, jit_options=_JIT, prefer_literal=True)
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
def _task_count(units, elements):
    """How many tasks deal out ``units`` of work over ``elements`` elements: at most
    _TASKS, each of _TASK_ELEMENTS at least, one at least."""
    return max(1, min(units, _TASKS, elements // _TASK_ELEMENTS))


def _rows_kernel(shape, offs, strides, ta, tb, tc, codes, scal, out, a, b, c):
    """out = op_abc(op_ab(s0 u0(a), s1 u1(b)), s2 u2(c)) over rows of the last axis.

    codes: [inputs, u0, u1, u2, op_ab, op_abc, fmt, scale0, scale1, scale2, direct]
    (direct: every row is a unit-stride run of real floats, see _direct_row).
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
                _direct_row(out, base[0] + i0, a, base[1] + i0, b, base[2] + i0, c,
                            base[3] + i0, m, (ta[0], tb[0], tc[0]), codes, scal)
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


def _vector_at(context, builder, array_type, array, index, vec):
    """Codegen of the intrinsics: a pointer to the ``vec`` that starts at element ``index``
    of a Numba array (its elements read as ``vec``'s element type)."""
    data = context.make_array(array_type)(context, builder, array).data
    base = builder.bitcast(data, vec.element.as_pointer())
    return builder.bitcast(builder.gep(base, [index]), vec.as_pointer())


def _for_each_width(builder, width, widths, emit):
    """Codegen: ``emit(w)`` for each w of ``widths``, run where the value ``width`` is w."""
    for w in widths:
        with builder.if_then(builder.icmp_signed("==", width, ir.IntType(64)(w))):
            emit(w)


def _for_each_format(builder, storage, mark, emit):
    """Codegen: ``emit(code)`` for data of Numba type ``storage``: code 0 for a float type;
    for 16-bit bits (uint16), one emit per format (1 float16, 2 bfloat16), run where the
    value ``mark`` says."""
    if not isinstance(storage, types.Integer):
        emit(0)
        return
    with builder.if_else(builder.icmp_signed("==", mark, ir.IntType(64)(1))) as (half, bfloat):
        with half:
            emit(1)
        with bfloat:
            emit(2)


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


def _narrowed_bfloat(builder, v):
    """Codegen of :func:`_narrow_bfloat` on a float32 vector: its bfloat16 bits."""
    k = v.type.count
    i32 = ir.VectorType(ir.IntType(32), k)
    b = builder.bitcast(v, i32)
    high = builder.lshr(b, ir.Constant(i32, [16] * k))
    up = builder.add(builder.add(b, ir.Constant(i32, [0x7FFF] * k)),
                     builder.and_(high, ir.Constant(i32, [1] * k)))
    quiet = builder.or_(high, ir.Constant(i32, [0x40] * k))
    rounded = builder.select(builder.fcmp_unordered("uno", v, v), quiet,
                             builder.lshr(up, ir.Constant(i32, [16] * k)))
    return builder.trunc(rounded, ir.VectorType(ir.IntType(16), k))


def _widened(builder, v, code):
    """Codegen of :func:`_load` on a vector of 16-bit bits (``code`` 1 float16, 2
    bfloat16): float32 values, exactly."""
    k = v.type.count
    if code == 1:
        return builder.fpext(builder.bitcast(v, ir.VectorType(ir.HalfType(), k)),
                             ir.VectorType(ir.FloatType(), k))
    wide = builder.shl(builder.zext(v, ir.VectorType(ir.IntType(32), k)),
                       ir.Constant(ir.VectorType(ir.IntType(32), k), [16] * k))
    return builder.bitcast(wide, ir.VectorType(ir.FloatType(), k))


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
    a_bytes, out_bytes = a.dtype.bitwidth // 8, out.dtype.bitwidth // 8
    wide_in, wide_out, streamed = src.literal_value, dst.literal_value, stream.literal_value

    def codegen(context, builder, sig, args):
        (_, o, so, _, s, sa, alpha, _, _, _), k = args, _block_side(bits)
        element = (ir.IntType(16) if wide_in else context.get_value_type(sig.args[6])
                   if scaled else ir.IntType(bits))
        rows = _first_stage_rows(context, builder, sig, args, s, sa, element, k, a_bytes)
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
                builder.store(v, p, align=out_bytes)
        return context.get_dummy_value()

    return types.void(out, types.int64, types.int64, a, types.int64, types.int64, alpha,
                      src, dst, stream), codegen


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


def _like(x, y):
    """x converted to the type of y (a compute-type scalar)."""


@overload(_like, jit_options=_JIT)
def _like_impl(x, y):
    cast = np.dtype(str(y)).type
    return lambda x, y: cast(x)


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
    (each task then ends with a store fence)."""
    nd = shape.shape[0]
    r, p, q = nd - 1, nd - 2, nd - 3
    tile_p, tile_q, tile_r, stream = tiles[0], tiles[1], tiles[2], tiles[3]
    tp = (shape[p] + tile_p - 1) // tile_p
    tr = (shape[r] + tile_r - 1) // tile_r
    per_outer = (shape[q] + tile_q - 1) // tile_q * tp * tr
    outer = 1
    for ax in range(nd - 3):
        outer *= shape[ax]
    sor, sop, soq, sar, sap, saq = (strides[0, r], strides[0, p], strides[0, q],
                                    strides[1, r], strides[1, p], strides[1, q])
    for u in prange(outer * per_outer):
        kqp, kr = divmod(u % per_outer, tr)
        kq, kp = divmod(kqp, tp)
        o, s = _offset_pair(u // per_outer, shape, strides, nd - 3, offs)
        p0, q0, r0 = kp * tile_p, kq * tile_q, kr * tile_r
        mp, mq, n = min(tile_p, shape[p] - p0), min(tile_q, shape[q] - q0), min(
            tile_r, shape[r] - r0)
        o += p0 * sop + q0 * soq + r0 * sor
        s += p0 * sap + q0 * saq + r0 * sar
        if code < 0:
            _move_rows(out, a, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, stream)
            if stream:
                _store_fence()
            continue
        _convert_rows(out, a, ta, o, s, n, sor, sar, mp, sop, sap, mq, soq, saq, code, scale,
                      fmt, scal[0])


_ROW_TILES = _twins(_row_tiles_kernel)


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
    depth = count = filled = 0
    s = s0
    while s < s1:  # a run along the innermost walk axis, then the odometer moves once
        run = min(s1 - s, inner - (idx[nw - 1] if nw else 0))
        o, left = off, run
        while left:
            n = min(left, block - filled)
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


_ROW_VECTORS = 8  # vector registers of lanes that a contiguous row's sum adds side by side
_SQUARES = 4  # the op code of a sum of squares (of _row_total only)
_ROW_BATCH = 64  # rows whose totals the row kernel finds before it stores them


def _part_type(context, t):
    """LLVM type of one real part of Numba scalar type ``t`` (16-bit bits: i16)."""
    if isinstance(t, types.Complex):
        t = t.underlying_float
    return ir.IntType(16) if isinstance(t, types.Integer) else context.get_value_type(t)


@intrinsic(prefer_literal=True)
def _row_total(typingctx, x, off, n, mark, like, op):
    """The op-reduction (``op`` a literal: 0 sum, 1 product, 2 min, 3 max as
    :func:`_combine`, _SQUARES the sum of squares of real data) of the contiguous row
    x[off:off + n], widened to the type of
    ``like`` (a compute-type scalar; ``mark``: x's 16-bit format, as :func:`_load`), in a
    fixed order: the row read as terms of _ROW_VECTORS vectors of lanes, each block of
    _BLOCK terms combined in order from op's identity in vector registers, the blocks
    merged lane by lane on a pairwise cascade (older op newer) held on the stack, the
    vectors then combined pairwise ((v0 op v1) op (v2 op v3) ...), then with the whole
    vectors left over (combined on their own in order), each vector's halves until
    one lane is left (two for complex sums, whose lanes alternate real and imaginary
    parts), and the elements left over, combined on their own in order, last.  A sum's
    error bound is NumPy's pairwise one (16 terms in order, then pairs); it reduces the
    lanes once a row, where chunks of 128 summed one by one reduced theirs and pushed a
    scalar each: a sum over the rows of (512, 1024) float32 took 0.10 ms on one thread of
    Zen 1, 0.05 so (torch 0.06).  Complex data are summed only (their product, min and max
    are not lane by lane)."""
    if not isinstance(op, types.IntegerLiteral):
        return None
    code_op, squares = op.literal_value % _SQUARES, op.literal_value == _SQUARES
    compute, storage = like, x.dtype
    complex_sum = isinstance(compute, types.Complex)
    parts = 2 if isinstance(storage, types.Complex) else 1  # real parts an element holds
    part = compute.underlying_float if complex_sum else compute
    if (parts == 2 and not complex_sum) or (complex_sum and (code_op or squares)):
        return None
    lanes = _VECTOR_BITS // part.bitwidth
    width = _ROW_VECTORS * lanes  # real parts a term holds

    def codegen(context, builder, sig, args):
        arr, off, n, mark, _, _ = args
        i64, i32 = ir.IntType(64), ir.IntType(32)
        wide = context.get_value_type(part)
        stored = _part_type(context, storage)
        first = builder.mul(off, i64(parts))  # in real parts from here on
        count = builder.mul(n, i64(parts))
        vec = ir.VectorType(wide, lanes)

        def identity(k):
            return ir.Constant(ir.VectorType(wide, k), [_IDENTITY_VALUE[code_op]] * k)

        def combine(u, v):
            if code_op < 2:
                return (builder.fmul if code_op else builder.fadd)(u, v)
            return _ieee_extremum(builder, "minimum" if code_op == 2 else "maximum", u, v)

        def load(index, k, code):  # k parts from part index, widened to the compute type
            p = _vector_at(context, builder, sig.args[0], arr, index, ir.VectorType(stored, k))
            v = builder.load(p, align=stored.width // 8 if isinstance(stored, ir.IntType)
                             else context.get_abi_sizeof(stored))
            if code:
                v = _widened(builder, v, code)
            v = v if v.type.element == wide else builder.fpext(v, ir.VectorType(wide, k))
            return builder.fmul(v, v) if squares else v

        result = cgutils.alloca_once(builder, context.get_value_type(compute))
        stack = cgutils.alloca_once(builder, vec, size=i64(64 * _ROW_VECTORS))
        depth, pushed = (cgutils.alloca_once(builder, i64) for _ in range(2))
        accs = [cgutils.alloca_once(builder, vec) for _ in range(_ROW_VECTORS)]
        cttz = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i64, [i64, ir.IntType(1)]), "llvm.cttz.i64")

        def slot(level, k):
            return builder.gep(stack, [builder.add(builder.mul(level, i64(_ROW_VECTORS)),
                                                   i64(k))])

        def push():  # the block in accs onto the cascade, merged as the count's bits say
            level = builder.load(depth)
            for k, acc in enumerate(accs):
                builder.store(builder.load(acc), slot(level, k))
                builder.store(identity(lanes), acc)
            builder.store(builder.add(level, i64(1)), depth)
            c = builder.add(builder.load(pushed), i64(1))
            builder.store(c, pushed)
            with cgutils.for_range(builder, builder.call(cttz, [c, ir.IntType(1)(1)])):
                newer = builder.sub(builder.load(depth), i64(1))
                older = builder.sub(newer, i64(1))
                for k in range(_ROW_VECTORS):
                    builder.store(combine(builder.load(slot(older, k)),
                                          builder.load(slot(newer, k))), slot(older, k))
                builder.store(newer, depth)

        def body(code):
            terms = builder.sdiv(count, i64(width))
            builder.store(i64(0), depth)
            builder.store(i64(0), pushed)
            blocks = builder.sdiv(builder.add(terms, i64(_BLOCK - 1)), i64(_BLOCK))
            for acc in accs:
                builder.store(identity(lanes), acc)
            with cgutils.for_range(builder, blocks) as block:
                with builder.if_then(builder.icmp_signed(">", block.index, i64(0))):
                    push()  # the block before: the last one stays in registers
                t0 = builder.mul(block.index, i64(_BLOCK))
                m = builder.sub(terms, t0)
                m = builder.select(builder.icmp_signed("<", m, i64(_BLOCK)), m, i64(_BLOCK))
                with cgutils.for_range(builder, m) as term:
                    at = builder.add(first, builder.mul(builder.add(t0, term.index), i64(width)))
                    for k, acc in enumerate(accs):
                        v = load(builder.add(at, i64(k * lanes)), lanes, code)
                        builder.store(combine(builder.load(acc), v), acc)
            # the cascade folded onto the last block: older op (... op newest), as pushing
            # it and folding would
            with cgutils.for_range(builder, builder.load(depth)) as down:
                level = builder.sub(builder.sub(builder.load(depth), i64(1)), down.index)
                for k, acc in enumerate(accs):
                    builder.store(combine(builder.load(slot(level, k)), builder.load(acc)), acc)
            vs = [builder.load(acc) for acc in accs]
            while len(vs) > 1:
                vs = [combine(vs[i], vs[i + 1]) for i in range(0, len(vs), 2)]
            done = builder.mul(terms, i64(width))
            rest = cgutils.alloca_once_value(builder, identity(lanes))
            vectors = builder.sdiv(builder.sub(count, done), i64(lanes))
            with cgutils.for_range(builder, vectors) as e:
                at = builder.add(first, builder.add(done, builder.mul(e.index, i64(lanes))))
                builder.store(combine(builder.load(rest), load(at, lanes, code)), rest)
            v = combine(vs[0], builder.load(rest))
            while v.type.count > parts:
                h = v.type.count // 2
                v = combine(*(builder.shuffle_vector(
                    v, v, ir.Constant(ir.VectorType(i32, h), list(range(s, s + h))))
                    for s in (0, h)))
            tail = cgutils.alloca_once_value(builder, identity(parts))
            done = builder.add(done, builder.mul(vectors, i64(lanes)))
            left = builder.sdiv(builder.sub(count, done), i64(parts))
            with cgutils.for_range(builder, left) as e:
                at = builder.add(first, builder.add(done, builder.mul(e.index, i64(parts))))
                builder.store(combine(builder.load(tail), load(at, parts, code)), tail)
            v = combine(v, builder.load(tail))
            if not complex_sum:
                builder.store(builder.extract_element(v, i32(0)), result)
                return
            z = context.make_complex(builder, compute)
            z.real = builder.extract_element(v, i32(0))
            z.imag = builder.extract_element(v, i32(1)) if parts == 2 else ir.Constant(wide, 0)
            builder.store(z._getvalue(), result)

        _for_each_format(builder, storage, mark, body)  # 16-bit bits: a loop per format
        return builder.load(result)

    return compute(x, types.int64, types.int64, types.int64, like, op), codegen


def _row_totals(res, w, x, off, step, n, mark, op):
    """res[t] = :func:`_row_total` of the row x[off + t*step:][:n], for t < w, in res's
    type, for op a run-time code (a sum of complex data, any op of real): the code is
    read once for all w rows (read once a row, it cost a 128-element float64 row 7 ns of
    the 28 it took in the row kernel on one thread of Zen 4)."""


def _rows_of(res, w, x, off, step, n, mark, op):
    """:func:`_row_totals` for op a literal."""


@overload(_rows_of, jit_options=_JIT, prefer_literal=True)
def _rows_of_impl(res, w, x, off, step, n, mark, op):
    if not isinstance(op, types.IntegerLiteral):
        return None
    code = op.literal_value

    def impl(res, w, x, off, step, n, mark, op):
        for t in range(w):
            res[t] = _row_total(x, off + t * step, n, mark, res[0], code)

    return impl


@overload(_row_totals, jit_options=_JIT)
def _row_totals_impl(res, w, x, off, step, n, mark, op):
    if isinstance(res.dtype, types.Complex):  # callers sum complex rows only
        return lambda res, w, x, off, step, n, mark, op: _rows_of(res, w, x, off, step, n,
                                                                  mark, 0)

    def impl(res, w, x, off, step, n, mark, op):
        if op == 0:
            _rows_of(res, w, x, off, step, n, mark, 0)
        elif op == 1:
            _rows_of(res, w, x, off, step, n, mark, 1)
        elif op == 2:
            _rows_of(res, w, x, off, step, n, mark, 2)
        else:
            _rows_of(res, w, x, off, step, n, mark, 3)

    return impl


def _real(x):
    """Whether array x holds real floats (decided when compiling)."""


@overload(_real, jit_options=_JIT)
def _real_impl(x):
    real = isinstance(x.dtype, types.Float)
    return lambda x: real


def _row_ops(op, compute):
    """Whether :func:`_row_totals` serves ``op`` (a code) in ``compute``: sums, and every
    op of real data."""
    return op == 0 or np.dtype(compute).kind == "f"


def _row_totals_kernel(free_shape, offs, strides, row_len, tc, ta, codes, scal, out, c, a):
    """Reductions of contiguous rows (:func:`_row_ops`): each output reads its row from
    start to end (switching rows every few KB halves the read rate), threads share the
    outputs.  Arguments as :func:`_reduce_kernel`'s."""
    nf = free_shape.shape[0]
    lanes = free_shape[nf - 1]
    outer = 1
    for ax in range(nf - 1):
        outer *= free_shape[ax]
    so, sc, sa = strides[0, nf - 1], strides[1, nf - 1], strides[2, nf - 1]
    rows = outer * lanes
    tasks = _task_count(rows, rows * row_len)
    for k in prange(tasks):  # a task's buffers serve all its rows
        base = np.empty(3, np.int64)
        res = np.empty(_ROW_BATCH, scal.dtype)
        u, end = k * rows // tasks, (k + 1) * rows // tasks
        while u < end:  # a batch of the rows of one outer position
            _offsets(u // lanes, free_shape, strides, nf - 1, offs, base)
            t = u % lanes
            w = min(lanes - t, end - u, _ROW_BATCH)
            _row_totals(res, w, a, base[2] + t * sa, sa, row_len, ta[0], codes[0])
            _finish(res, w, out, base[0] + t * so, so, c, base[1] + t * sc, sc, tc, codes, scal)
            u += w


_ROW_TOTALS = _twins(_row_totals_kernel)


def _squares_kernel(x, mark, parts):
    """parts[k] = the float64 sum of squares of the k-th of len(parts) equal pieces of x."""
    pieces, n = parts.shape[0], x.shape[0]
    for k in prange(pieces):
        lo = k * n // pieces
        parts[k] = _row_total(x, lo, (k + 1) * n // pieces - lo, mark, np.float64(0), _SQUARES)


_SQUARE_SUMS = _twins(_squares_kernel)


def sum_of_squares(a):
    """The float64 sum of the squares of the elements of a real array that fills its memory
    (in any order of axes; each square exact for 32- and 16-bit data), in memory order as
    :func:`_row_total` adds (pieces of it on threads, added exactly), or None where ``a``
    is not such an array: no float64 copy,
    where one cost a float32 norm 20x NumPy's time.

    >>> sum_of_squares(np.array([3.0, 4.0], np.float32))
    25.0
    """
    if not (a.dtype in _REAL_SUMS or a.dtype in _FORMATS) or _dense_order(*_layout(a)) is None:
        return None
    threads = _threads(a.size)
    parts = np.empty(2 * threads if threads > 1 else 1)
    _SQUARE_SUMS[threads == 1](_memory(a), _FORMATS.get(a.dtype, 0), parts)
    return math.fsum(parts) if threads > 1 else float(parts[0])


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
    >>> run(np.eye(4096), out); float(out)
    4096.0
    """
    dtype = np.dtype(dtype)
    (h, row_stride), (w, lane_stride) = [(1, 0)] * (2 - len(lanes)) + list(lanes)
    if (dtype not in _REAL_SUMS or len(lanes) > 2 or n * h * w < _MIN_STRIDED
            or abs(step) * dtype.itemsize < _LINE or h * w > _MAX_STRIDED_SUMS or n < 2):
        return None
    lines = n * h * min(w, _ceil_div(((w - 1) * abs(lane_stride) + 1) * dtype.itemsize, _LINE))
    parallel, ahead = lines >= _PARALLEL_LINES, lines >= _PREFETCH_LINES
    if h * w == 1 and not ahead:
        return None
    params = np.array([0, n, step, h, row_stride, w, lane_stride, ahead,
                       _ceil_div(n, _BLOCK).bit_length() + 1], np.int64)

    def run(a, out):
        threads = min(_thread_counter()(), n // 2) if parallel else 1
        _STRIDED_SUMS[threads == 1](a.reshape(-1), params, threads, out.reshape(-1))

    return run


# --------------------------------------------------------------------------------------
# Python side: flat views and layout choices


class _Memory:
    """A bare ``__array_interface__`` so that NumPy wraps raw memory without copying."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address, span, typestr):
        self.__array_interface__ = {"data": (address, False), "shape": (span,),
                                    "typestr": typestr, "version": 3}


def _layout(x):
    """The hashable layout of x: shape, byte strides, dtype (the key of cached preparations)."""
    return x.shape, x.strides, x.dtype


@functools.lru_cache(maxsize=1024)
def _geometry(shape, strides, dtype):
    """(offset of element 0 in the spanned memory, span, element strides) of a layout."""
    item = dtype.itemsize
    steps = tuple(st // item for st in strides)
    lo = sum(st * (e - 1) for e, st in zip(shape, steps, strict=True) if st < 0)
    hi = sum(st * (e - 1) for e, st in zip(shape, steps, strict=True) if st > 0)
    return -lo, (hi - lo + 1 if math.prod(shape) else 0), steps


@functools.lru_cache(maxsize=1024)
def _dense_order(shape, strides, dtype):
    """The axis order in which a layout is C-contiguous (no gaps, no negative or repeated
    strides), or None: its memory is then that of the axes so permuted.

    >>> _dense_order((2, 3), (8, 16), np.dtype(np.float64))
    (1, 0)
    """
    order = sorted(range(len(shape)), key=lambda ax: -strides[ax])
    step = dtype.itemsize
    for ax in reversed(order):
        if shape[ax] != 1 and strides[ax] != step:
            return None
        step *= shape[ax]
    return tuple(order)


@njit(**_JIT)
def _bits_address(x):
    return x.ctypes.data


def _address(x):
    """The address of x's element 0 (16-bit storage is viewed as bits for Numba)."""
    return _bits_address(x.view(np.uint16) if x.dtype in _FORMATS else x)


def _memory(x):
    """A 1-D view of the memory x spans (16-bit storage as uint16 bits).  Every view is
    typed writeable, so that one specialisation serves read-only inputs too (kernels
    never write their inputs).  A view of a plain writeable array is a slice of that
    array, of its axes permuted where that makes it contiguous (a transposed output);
    otherwise the view does not keep x alive: use it only while x is."""
    flags = x.flags
    if flags.writeable and flags.c_contiguous:
        flat = x.reshape(-1)
    elif flags.writeable and (order := _dense_order(*_layout(x))) is not None:
        flat = x.transpose(order).reshape(-1)
    else:
        offset, span, _ = _geometry(*_layout(x))
        root = x
        while isinstance(root.base, np.ndarray):
            root = root.base
        start, rest = divmod(_address(x) - _address(root), x.itemsize) if (
            root is not x and root.dtype == x.dtype and root.flags.c_contiguous
            and root.flags.writeable) else (0, 1)
        start -= offset
        if rest == 0 and start >= 0 and start + span <= root.size:
            flat = root.reshape(-1)[start:start + span]
        else:
            typestr = "<u2" if x.dtype in _FORMATS else x.dtype.str
            address = x.__array_interface__["data"][0] - offset * x.itemsize
            return np.asarray(_Memory(address, span, typestr))
    return flat.view(np.uint16) if x.dtype in _FORMATS else flat


@functools.cache
def _thread_counter():
    """The C getter behind ``numba.get_num_threads()`` (the calling thread's setting),
    without the two locks that takes on every call: 0.09 us instead of 0.9.  Starts
    Numba's thread pool, after which the getter exists."""
    get_num_threads()
    return getattr(_pool, "_get_num_threads", get_num_threads)


def _threads(work):
    """Threads to use for ``work`` elements: small problems run on one."""
    return _thread_counter()() if work >= _SERIAL_WORK else 1


@functools.lru_cache(maxsize=1024)
def _codes(*codes):
    """The integer codes of a kernel call as an array (cached, so never written)."""
    return np.array(codes, np.int64)


@contextlib.contextmanager
def one_thread():
    """The kernels run inside on the calling thread alone: for work next to BLAS calls.

    After a parallel kernel Numba's workers spin for milliseconds on the cores that the
    next GEMM's threads need, and OpenBLAS's threads spin after a GEMM on those that the
    kernels' workers need.  Memory-bound conversions lose little on one thread.
    """
    threads = get_num_threads()
    set_num_threads(1)
    try:
        yield
    finally:
        set_num_threads(threads)


def thread_count():
    """The threads a parallel kernel runs on now (numba's setting for the calling thread)."""
    return _thread_counter()()


class _Call(NamedTuple):
    """One kernel call, fixed but for its arrays and scalars: ``kernel(shape, offs,
    *static, scal, *flats)``.  The flats are the memory of ``arrays[k]`` for k in
    ``sources`` (arrays: out, then the inputs), ``offs`` the offsets of their element 0
    in it; scal holds the call's scalars (``scalars`` of them, missing ones 1) in the
    compute type.  :meth:`rebased` makes the call take the arrays that the views it was
    made for were cut from, so that a plan calls it without making views."""

    kernel: object  # the parallel twin, or the serial one for one thread
    shape: np.ndarray
    offs: np.ndarray
    static: tuple
    sources: tuple
    scalars: int
    compute: np.dtype
    about: str  # the kernel and its layout, for explain()

    def run(self, arrays, values):
        flats = [_memory(x) for x in arrays]
        if len(values) < self.scalars:
            values = tuple(values) + (1,) * (self.scalars - len(values))
        self.kernel(self.shape, self.offs, *self.static, _scalars(values, self.compute),
                    *[flats[k] for k in self.sources])

    def rebased(self, arrays):
        """This call on ``arrays`` themselves rather than on the views made from them
        (every view of a plan starts at its array's element 0)."""
        offs = [_geometry(*_layout(arrays[k]))[0] for k in self.sources]
        return self._replace(offs=np.array(offs, np.int64))


def _ceil_div(n, d):
    return -(-n // d)


def _mark(dtype):
    """The format marker of a storage dtype (for 16-bit storage; a dummy for others)."""
    return _MARKS.get(dtype, _NO_MARK)


def _fmt(x):
    return _FORMATS.get(x.dtype, 0)


@functools.lru_cache(maxsize=256)
def _unary_code(unary, compute):
    code = _UNARY[Unary.coerce(unary)]
    return _IDENTITY if code == _CONJ and not is_complex(compute) else code


def _scalars(values, compute):
    """Host scalars (a tuple) as an array of the compute type (a real type keeps the real
    part).  Python ints and non-zero floats, whose equality means identity (unlike -0.0
    and 0.0), come from a cache, so the array is never written."""
    if all(type(v) is int or (type(v) is float and v != 0) for v in values):
        return _cached_scalars(values, compute)
    return _cached_scalars.__wrapped__(values, compute)


@functools.lru_cache(maxsize=256)
def _cached_scalars(values, compute):
    if is_complex(compute):
        return np.array([complex(v) for v in values], compute)
    return np.array([float(np.real(v)) for v in values], compute)


def _fastest(loops, k):
    """The loop where operand k (0: the output) has its smallest non-zero stride."""
    return min((loop for loop in loops if loop.strides[k] and loop.extent > 1),
               key=lambda loop: abs(loop.strides[k]), default=None)


def _min_elements(kind, loops, bits):
    """The problem size from which the kernels beat NumPy, for this kind and layout
    (``bits``: of the narrowest element type)."""
    if loops and kind == "reduction":
        inner = _fastest(loops, 1)
        runs = math.prod(loop.extent for loop in loops) // inner.extent if inner else 0
        if runs >= _NUMPY_LOOPS:  # NumPy's inner loop (along a's fastest axis) runs often
            return _MIN_SLOW_NUMPY
    if loops and kind == "permutation":
        row, inner = _fastest(loops, 0), _fastest(loops, 1)
        if row is not None and row is inner:
            return min(max(row.extent * _ROW_ELEMENTS, _MIN_ELEMENTS[kind]), _MIN_ROWS)
        if row is not None and inner is not None and (
                row.extent * inner.extent < _MIN_TILE
                or min(row.extent, inner.extent) < _plain_side(bits)):
            return _SERIAL_WORK
    if loops and kind.startswith("elementwise"):
        row = _fastest(loops, 0)
        if row is not None and row.extent < _MIN_ROW:
            return math.inf
    return _MIN_ELEMENTS.get(kind, math.inf)


def supports(kind, dtypes, ndim, elements, loops=None):
    """Whether the Numba kernels should run this problem (large enough, known dtypes).

    ``loops`` (the layout's, optional) refines the size needed: a reduction qualifies
    smaller where NumPy would run its inner loop (along the input's smallest-stride loop)
    many times, each run paying its per-loop cost (``iij->j`` on (2048, 2048, 8): 2048
    runs of 8 elements; a sum of (32, 32, 32) over axis 1: 1024 of 32); a permutation
    that keeps the innermost axis needs more, the longer its rows (NumPy copies them
    whole), and one whose tiles are small, or narrower than a register block (moved
    element by element), two threads' worth: on one thread of Zen 4 (64, 512, 4)
    float64 to axes (0, 2, 1) took 70.6 us against NumPy's 42.9, on two (1024, 512, 4)
    931 against 1269.  Elementwise work along rows shorter than _MIN_ROW stays on
    NumPy.  16-bit data that NumPy would convert qualifies from _MIN_SLOW_NUMPY
    elements: a float16 sum of (64, 4096) took 0.82 ms that way on Zen 1, 0.083 ms in
    the kernels (torch 0.05).

    >>> supports("reduction", (np.dtype(np.float32),) * 2, 2, 1 << 20)
    True
    """
    if not all(np.dtype(d) in STORAGE_TYPES for d in dtypes):
        return False
    if any(d in _FORMATS for d in dtypes) and (kind != "permutation" or len(set(dtypes)) > 1):
        return elements >= _MIN_SLOW_NUMPY  # NumPy converts 16-bit storage 5-20x slower
    return elements >= _min_elements(kind, loops,
                                     8 * min(np.dtype(d).itemsize for d in dtypes))


@functools.lru_cache(maxsize=1024)
def _rows_prep(layouts, codes, compute):
    """Kernel arguments of the row kernel: shape, offsets, strides (axes sorted by out's
    strides, then the inputs'), codes with the one-pass flag (codes[10]) decided."""
    out_shape = layouts[0][0]
    geometry = [_geometry(*x) for x in layouts]
    order = sorted(range(len(out_shape)),
                   key=lambda ax: [-abs(g[2][ax]) for g in geometry])
    shape = [out_shape[ax] for ax in order] or [1]
    offs = np.zeros(4, np.int64)
    strides = np.zeros((4, len(shape)), np.int64)
    for k, g in enumerate(geometry):
        offs[k] = g[0]
        strides[k, : len(order)] = [g[2][ax] for ax in order]
    # one pass (_direct_row): unit-stride rows of real floats in every array, a real
    # compute type, no transform, add or mul (times a complex 1 is not the identity on
    # infinities)
    direct = (compute.kind == "f" and all(x[2].kind == "f" or x[2] in _FORMATS
                                          for x in layouts)
              and all(c == _IDENTITY for c in codes[1:4]) and max(codes[4:6]) <= 1
              and bool((strides[: len(layouts), -1] == 1).all()))
    return (np.array(shape, np.int64), offs, strides,
            np.array(codes[:10] + (direct,), np.int64))


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
    return _Call(_ROWS[threads == 1], shape, offs, (strides, *marks, codes), sources, 3, compute,
                 _on_threads(about, threads))


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
        about = (f"rows of up to {tiles[2]} elements, in tiles of {tiles[0]} x {tiles[1]} "
                 "rows" + (", streamed past the caches" if stream else ""))
        tiles = np.array([*tiles, stream], np.int64)
    else:
        how, staged, side = _tile_moves(out_layout[2], a_layout[2], strides, code, compute)
        # staged rows stream from their buffer, blocks where a block row is a whole line
        stream = stream and side is not None and (staged or side * out_layout[2].itemsize
                                                  == _LINE)
        tiles = _STREAM_TILES if stream else tiles
        along_r = _staged_along_r(shape, strides, tiles, out_layout[2].itemsize) if staged else 1
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


def _staged_along_r(shape, strides, tiles, itemsize):
    """How many staged tiles the tile kernel takes at once along the axis r before q:
    where a tile spans out's axis p whole and out's rows go on along r, up to
    :data:`_STAGED_BYTES` of them; else 1."""
    if len(shape) < 3 or shape[-1] > tiles[0] or strides[0, -3] != shape[-1] * strides[0, -1]:
        return 1
    tile = shape[-1] * min(tiles[1], shape[-2]) * itemsize
    return int(max(1, min(shape[-3], _STAGED_BYTES // tile)))


def _on_threads(about, threads):
    return f"{about}; {threads} thread{'s' if threads > 1 else ''}"


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
