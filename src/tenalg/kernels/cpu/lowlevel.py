"""Scalar pieces compiled into every CPU kernel: operator codes, 16-bit loads and stores,
LLVM intrinsics (prefetch, streaming stores and their fence), unary and binary operators,
and the row helpers (load, transform, accumulate, store) that the kernels share.

16-bit storage travels as uint16 bits with a one-element format marker beside it
(:data:`_FORMATS`): loads widen the bits exactly (float16 through the F16C conversion,
bfloat16 by a shift; both vectorise), stores round to nearest even in :func:`_encode16`.

>>> from tenalg.dtypes import bfloat16, float16
>>> _FORMATS[float16], _FORMATS[bfloat16], _MARKS[bfloat16].tolist()
(1, 2, [2])
"""

import math
import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ...descriptors import Binary, Reduce, Unary
from ...dtypes import bfloat16, float16
from ..jit import JIT as _JIT

_U = np.uintp  # offsets are never negative: unsigned indices skip wraparound checks

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

_LINE = 64  # bytes in a cache line

# Whether stores may stream past the caches (non-temporal stores, x86 only: their fence is
# SFENCE); which kernels do is theirs to decide (permutation._STREAM_BYTES)
_STREAMS = platform.machine().lower() in ("x86_64", "amd64")

_ROW_PIECE = 1 << 13  # longer rows are split into pieces of this many elements (threads share them)
_ROW = 512     # elements per unit of the elementwise row kernel
_TASKS = 256   # units are dealt out in at most this many tasks (allocations once per task:
# 3 allocations per 512-element unit made the fused trinary 2x slower) ...
_TASK_ELEMENTS = 1 << 14  # ... of this many elements at least (a 16 x 16 add: 11 -> 3 us;
# rows of 1024 float32 summed in 256 tasks of two rows: 0.09 ms on one thread of Zen 1,
# in 32 tasks 0.06)

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


@njit(**_JIT, inline="always")
def _offsets(r, shape, strides, last, offs, result):
    """result[k] = offs[k] + (offsets of flat index r over axes 0..last-1) for each array.
    The outermost index is r itself once the others are taken (r < the product of the
    extents): no division there, none at all over one axis (a sum over axis 1 of (16384,
    8, 8) float64, one output row per index: 815 -> 642 us on one thread of Zen 4).
    Inlined: a call counts each of its four arrays' references up and down, atomically
    (see :func:`tenalg.kernels.jit.twins`)."""
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



@njit(**_JIT, inline="always")
def _task_count(units, elements):
    """How many tasks deal out ``units`` of work over ``elements`` elements: at most
    _TASKS, each of _TASK_ELEMENTS at least, one at least."""
    return max(1, min(units, _TASKS, elements // _TASK_ELEMENTS))


def _like(x, y):
    """x converted to the type of y (a compute-type scalar)."""


@overload(_like, jit_options=_JIT)
def _like_impl(x, y):
    cast = np.dtype(str(y)).type
    return lambda x, y: cast(x)
