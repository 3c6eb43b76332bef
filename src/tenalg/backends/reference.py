"""The reference backend: short NumPy code that is obviously right, for every kind.

Permutations, reductions and elementwise operations run :mod:`tenalg.kernels.reference`
on the analysed views; contractions and sum_products run ``np.einsum`` in the compute
type.  Every fast backend is tested against this one.

>>> import numpy as np, tenalg as ta
>>> a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
>>> op = ta.Operation.contraction(ta.Operand(a, "ij"), ta.Operand(b, "j"), out_modes="i")
>>> plan = ta.Plan(op, backend="reference")
>>> plan.backend, plan.execute(a, b).tolist()
('reference', [5.0, 14.0])
"""

import numpy as np

from ..kernels import reference
from ..operations import output_aligned
from .strided import STRIDED_KINDS, StridedRunner


class ReferenceRunner(StridedRunner):
    """Runs one permutation, reduction or elementwise operation on the reference kernels."""

    reason = "NumPy reference kernels"

    def run(self, out, arrays, scalars):
        if self._skip:
            return
        name, args, kwargs = self.request(out, arrays, scalars)
        getattr(reference, name)(*args, **kwargs)

    def explain(self):
        return self.explain_layout() + [f"kernel: reference.{self.kernel_name}"]


class EinsumRunner:
    """A contraction or sum_product as one ``np.einsum`` in the compute type:
    ``D = alpha * sum prod op(X_k) + beta * op(C)``."""

    reason = "np.einsum in the compute type"

    def __init__(self, operation):
        self.operation = operation
        labels = {}
        for x in operation.inputs:
            for m in x.modes:
                labels.setdefault(m, len(labels))
        for m in operation.out_modes:
            labels.setdefault(m, len(labels))
        self._args = [[labels[m] for m in x.modes] for x in operation.inputs]
        present = {m for x in operation.inputs for m in x.modes}
        self._out = [labels[m] for m in operation.out_modes if m in present]
        # modes of the output that no input has (C's or the descriptor's): the product
        # is constant along them, a new axis of it (np.einsum refuses such a mode)
        self._expand = tuple(slice(None) if m in present else None
                             for m in operation.out_modes)

    def run(self, out, arrays, scalars):
        op = self.operation
        n = len(op.inputs)
        operands = []
        for x, array, sublist in zip(op.inputs, arrays[:n], self._args, strict=True):
            operands += [reference.load(array, x.unary, op.compute), sublist]
        value = np.einsum(*operands, self._out, dtype=op.compute)[self._expand]
        value = reference.scale(value, scalars["alpha"], op.compute)
        if op.addend is not None and scalars["beta"] != 0:
            c = output_aligned(arrays[n], op.addend.modes, op.out_modes)
            c = reference.load(c, op.addend.unary, op.compute)
            value = value + reference.scale(c, scalars["beta"], op.compute)
        reference.store(out, value)

    def explain(self):
        return ["kernel: reference np.einsum"]


class ReferenceBackend:
    """Every kind on NumPy arrays; the last backend asked, so something always runs."""

    name = "reference"

    def supports(self, operation, kind):
        return kind == "numpy"

    def prepare(self, operation, chosen=False):
        if operation.kind in STRIDED_KINDS:
            return ReferenceRunner(operation)
        return EinsumRunner(operation)
