"""The Dask backend's runner: one tenalg Operation on Dask arrays.

:func:`run_operation` is what the backend seam (``supports`` / ``prepare``) wraps:
contractions, sum-products, reductions and permutations whose operands are Dask arrays,
with identity or conjugate unaries, lowered to :mod:`tenalg.distributed.dense`.

>>> import dask.array as da
>>> import tenalg as ta
>>> x = da.ones((4, 3), chunks=2)
>>> op = ta.Operation.reduction(ta.Operand(ta.TensorDescriptor.contiguous((4, 3), "f8"),
...                             "ij"), out_modes="j")
>>> BACKEND.supports(op, "dask"), run_operation(op, [x]).compute().tolist()
(True, [4.0, 4.0, 4.0])
>>> BACKEND.prepare(op).execute([x], {"alpha": 2}).compute().tolist()
[8.0, 8.0, 8.0]
"""

import dask.array as da  # optional dependency: imported only in tenalg.distributed
import numpy as np

from ..errors import OperationError
from ..operations import output_aligned
from . import dense

KINDS = ("contraction", "sum_product", "reduction", "permutation")
def runs(operation):
    """Whether the backend runs ``operation``: one of :data:`KINDS`, every operand (the
    addend too) read as it is or conjugated."""
    operands = operation.inputs + (() if operation.addend is None else (operation.addend,))
    return operation.kind in KINDS and all(x.unary in dense.LAZY_UNARIES for x in operands)


def _read(operand, array):
    return dense.read(array, operand.unary)


def run_operation(operation, arrays, *, alpha=1, beta=0, addend=None, memory_limit=None):
    """``operation`` on ``arrays`` (Dask or NumPy, one per input) as a lazy Dask array
    of the operation's output dtype: D = alpha * op(inputs) + beta * addend, the addend
    read as the operation's C (its modes and unary) where it has one, else taken in the
    output's layout."""
    if operation.kind not in KINDS:
        raise OperationError(f"the dask backend does not run {operation.kind} operations")
    if len(arrays) != len(operation.inputs):
        raise OperationError(f"{operation.kind}: {len(operation.inputs)} inputs, "
                             f"{len(arrays)} arrays")
    arrays = [_read(x, dense._dask(a)) for x, a in zip(operation.inputs, arrays, strict=True)]
    modes = [x.modes for x in operation.inputs]
    out_modes = operation.out_modes
    if operation.kind == "reduction":
        op = getattr(operation.op, "value", operation.op)
        result = dense.reduce(arrays[0], modes[0], out_modes, op, memory_limit=memory_limit)
    elif operation.kind == "permutation":
        result = dense.permute(arrays[0], [modes[0].index(m) for m in out_modes],
                               memory_limit=memory_limit)
    else:
        letters = dense._letters(*modes, out_modes)
        expression = ",".join(letters[:-1]) + "->" + letters[-1]
        result = dense.einsum(expression, *arrays, memory_limit=memory_limit)
    if addend is not None and operation.addend is not None:
        c = operation.addend
        addend = output_aligned(_read(c, dense._dask(addend)), c.modes, out_modes)
    result = dense._scaled(result, alpha, addend, beta)
    return result.astype(np.dtype(operation.output.dtype), copy=False)


class DaskRunner:
    """The runner of one operation (the seam's protocol): ``execute`` gives a lazy Dask
    array; ``run`` computes into a NumPy ``out``."""

    reason = "operands are Dask arrays"

    def __init__(self, operation):
        self.operation = operation

    def execute(self, arrays, scalars=None):
        return run_operation(self.operation, list(arrays[: len(self.operation.inputs)]),
                             addend=_addend(self.operation, arrays), **(scalars or {}))

    def run(self, out, arrays, scalars=None):
        out[...] = self.execute(arrays, scalars).compute()
        return out

    def execute_into(self, out, arrays, scalars=None):
        if isinstance(out, da.Array):
            raise OperationError("a Dask array cannot be written in place; use execute")
        return self.run(out, arrays, scalars)

    def explain(self):
        return [f"dask: {self.operation.kind} as blockwise tenalg kernels on NumPy blocks, "
                f"chunks from a per-task memory model (tenalg.distributed)"]


def _addend(operation, arrays):
    return arrays[len(operation.inputs)] if len(arrays) > len(operation.inputs) else None




class DaskBackend:
    """The backend object of the seam: ``name``, ``supports``, ``prepare``."""

    name = "dask"

    def supports(self, operation, kind):
        return kind == "dask" and runs(operation)

    def prepare(self, operation, chosen=False):
        return DaskRunner(operation) if runs(operation) else None


BACKEND = DaskBackend()
