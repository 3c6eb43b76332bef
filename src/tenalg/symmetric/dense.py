"""The symmetric layer's door to tenalg's dense layer: one cached plan per block shape.

Blocks are C-contiguous arrays, so a plan is fixed by the blocks' extents, dtypes and
modes; building it (validation and layout analysis) happens once per shape. The
symmetric operations keep their plans in schedules cached per structure and execute
them per block (pair). Accumulation uses the addend C = the output (beta = 1); a first
write (beta = 0) takes a plan without addend.

>>> import numpy as np
>>> a = np.ones((2, 3)); out = np.empty((2, 2))
>>> first, add = (contraction_plan(a.shape, a.dtype, (0, 1), a.shape, a.dtype, (2, 1),
...                                 out.shape, out.dtype, (0, 2), accumulate)
...               for accumulate in (False, True))
>>> execute(first, out, a, a).tolist()
[[3.0, 3.0], [3.0, 3.0]]
>>> execute(add, out, a, a).tolist()
[[6.0, 6.0], [6.0, 6.0]]
"""

from ..descriptors import Operand, TensorDescriptor
from ..operations import Operation
from ..plan import Plan
from ..plan_cache import cached_plans


def _descriptor(shape, dtype):
    return TensorDescriptor.contiguous(shape, dtype)


@cached_plans(4096)
def contraction_plan(shape_a, dtype_a, modes_a, shape_b, dtype_b, modes_b, shape_out,
                     dtype_out, modes_out, accumulate):
    """The plan of ``out = sum a b (+ out)`` over the modes absent from ``modes_out``."""
    out = _descriptor(shape_out, dtype_out)
    return Plan(Operation.contraction(
        Operand(_descriptor(shape_a, dtype_a), modes_a),
        Operand(_descriptor(shape_b, dtype_b), modes_b),
        Operand(out, modes_out) if accumulate else None, out=out, out_modes=modes_out,
    ))


@cached_plans(4096)
def reduction_plan(shape, dtype, modes, shape_out, dtype_out, modes_out, accumulate):
    """The plan of ``out = sum a (+ out)``; repeated ``modes`` read a diagonal (no copy)."""
    out = _descriptor(shape_out, dtype_out)
    return Plan(Operation.reduction(
        Operand(_descriptor(shape, dtype), modes),
        Operand(out, modes_out) if accumulate else None, out=out, out_modes=modes_out,
    ))


def execute(plan, out, *arrays):
    """Run ``plan`` into ``out``; a plan with an addend adds to ``out`` (C = out, beta = 1).
    The blocks are checked against the plan's layouts (a tensor's blocks dict is the
    user's to change)."""
    if plan.operation.addend is not None:
        return plan.execute_into(out, *arrays, out, beta=1)
    return plan.execute_into(out, *arrays)


def execute_gathered(plan, *arrays):
    """Run ``plan`` on arrays this layer made in the plan's layouts (gathers: C-contiguous,
    of its extents and dtypes) into a fresh output, unchecked: the checks cost a product
    of (64, 2) and (2, 64) blocks half of its 4.2 us."""
    return plan._execute_unchecked(*arrays)


@cached_plans(4096)
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
