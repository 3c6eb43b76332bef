"""The blas backend: contractions and sum_products lowered to batched GEMM
(:class:`tenalg.contraction.ContractionKernel`: NumPy's matmul in the compute type).

>>> import numpy as np, tenalg as ta
>>> a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
>>> plan = ta.Plan(ta.Operation.contraction(ta.Operand(a, "ik"), ta.Operand(b, "kj"),
...                                         out_modes="ij"))
>>> plan.backend, bool(np.allclose(plan.execute(a, b), a @ b))
('blas', True)
"""

from ..contraction import ContractionKernel

CONTRACTING_KINDS = ("contraction", "sum_product")


class BlasRunner:
    """Runs a ContractionKernel with the plan's scalars; einsum's chains call the kernel
    itself (``step``, see :mod:`tenalg.seam`)."""

    reason = "GEMM through NumPy's matmul"

    def __init__(self, operation):
        self.step = ContractionKernel(operation)
        self._inputs = len(operation.inputs)
        self._addend = operation.addend is not None

    def run(self, out, arrays, scalars):
        n = self._inputs
        c = arrays[n] if self._addend else None
        self.step.run(out, arrays[:n], c, scalars["alpha"], scalars["beta"])

    def explain(self):
        return self.step.explain()


class BlasBackend:
    """Every contraction and sum_product of NumPy arrays."""

    name = "blas"

    def supports(self, operation, kind):
        return kind == "numpy" and operation.kind in CONTRACTING_KINDS

    def prepare(self, operation, chosen=False):
        return BlasRunner(operation)
