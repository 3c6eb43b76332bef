"""The sum of a contiguous row in vector registers (:func:`_row_total`): blocks of
:data:`_BLOCK` terms added side by side and merged pairwise, shared by the lane and the
row-total reduction kernels.

>>> _CHUNK, _BLOCK
(128, 16)
"""


from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..jit import JIT as _JIT
from .lowlevel import _IDENTITY_VALUE, _ieee_extremum
from .vectors import _VECTOR_BITS, _for_each_format, _vector_at, _widened

_CHUNK = 128   # row chunk summed pairwise by the reduction (NumPy's block size)
_BLOCK = 16    # contributions accumulated naively before entering the cascade

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
