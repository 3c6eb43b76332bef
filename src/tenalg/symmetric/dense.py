"""The symmetric layer's door to tenalg's dense layer: one cached plan per block shape.

Blocks are C-contiguous arrays, so a plan is fixed by the blocks' extents, dtypes and
modes; building it (validation and layout analysis) happens once per shape, executing
it once per block (pair). Accumulation uses the addend C = the output (beta = 1); a
first write (beta = 0) takes a plan without addend.

>>> import numpy as np
>>> a = np.ones((2, 3)); out = np.empty((2, 2))
>>> contract_into(out, a, (0, 1), a, (2, 1), (0, 2), beta=0).tolist()
[[3.0, 3.0], [3.0, 3.0]]
"""

import functools

from ..descriptors import Operand, TensorDescriptor
from ..operations import Operation
from ..plan import Plan


def _descriptor(shape, dtype):
    return TensorDescriptor.contiguous(shape, dtype)


@functools.lru_cache(maxsize=4096)
def _contraction_plan(shape_a, dtype_a, modes_a, shape_b, dtype_b, modes_b, shape_out,
                      dtype_out, modes_out, accumulate):
    out = _descriptor(shape_out, dtype_out)
    return Plan(Operation.contraction(
        Operand(_descriptor(shape_a, dtype_a), modes_a),
        Operand(_descriptor(shape_b, dtype_b), modes_b),
        Operand(out, modes_out) if accumulate else None, out=out, out_modes=modes_out,
    ))


def contract_into(out, a, modes_a, b, modes_b, modes_out, beta):
    """``out = sum a b + beta * out`` over the modes absent from ``modes_out``.

    With beta = 0 the plan has no addend (cheaper per call); else C is ``out`` itself.
    """
    plan = _contraction_plan(a.shape, a.dtype, modes_a, b.shape, b.dtype, modes_b,
                             out.shape, out.dtype, modes_out, beta != 0)
    if beta == 0:
        return plan.execute_into(out, a, b)
    return plan.execute_into(out, a, b, out, beta=beta)


@functools.lru_cache(maxsize=4096)
def _reduction_plan(shape, dtype, modes, shape_out, dtype_out, modes_out, accumulate):
    out = _descriptor(shape_out, dtype_out)
    return Plan(Operation.reduction(
        Operand(_descriptor(shape, dtype), modes),
        Operand(out, modes_out) if accumulate else None, out=out, out_modes=modes_out,
    ))


def trace_into(out, a, modes, modes_out, beta):
    """``out = sum a + beta * out``; repeated ``modes`` read a diagonal view (no copy)."""
    plan = _reduction_plan(a.shape, a.dtype, modes, out.shape, out.dtype, modes_out, beta != 0)
    if beta == 0:
        return plan.execute_into(out, a)
    return plan.execute_into(out, a, out, beta=beta)


@functools.lru_cache(maxsize=4096)
def _permutation_plan(shape, dtype, out_descriptor, axes):
    modes = tuple(range(len(shape)))
    return Plan(Operation.permutation(
        Operand(_descriptor(shape, dtype), modes), out=out_descriptor, out_modes=axes,
    ))


def permute_into(out, a, axes, alpha=1):
    """``out = alpha * a`` with ``a``'s axes in the order ``axes``; ``out`` may be strided."""
    out_descriptor = TensorDescriptor.from_array(out, "out")
    plan = _permutation_plan(a.shape, a.dtype, out_descriptor, tuple(axes))
    return plan.execute_into(out, a, alpha=alpha)
