"""LLVM vector helpers of the intrinsics: vector loads at an array's element, dispatch
over vector widths and 16-bit storage formats, widening and narrowing of 16-bit lanes.
:data:`_VECTOR_BITS` is the host's vector width (512 with AVX-512, else 256).

>>> _VECTOR_BITS in (256, 512)
True
"""


from llvmlite import binding as llvm
from llvmlite import ir
from numba import types

# Width of the vectors a plain-copy block moves: whole 64-byte lines where AVX-512 has the
# registers (8-byte elements then move in 8 x 8 blocks of full lines, 2x faster than 4 x 4)
_VECTOR_BITS = 512 if "+avx512f" in llvm.get_host_cpu_features().flatten() else 256

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
