"""The direct backend: a small operation as one NumPy call on the operands themselves
(:mod:`tenalg.kernels.direct`), where Python overhead, not arithmetic, is the cost.

Scalars other than the defaults go to the reference kernels, unless the call takes
them itself (elementwise operations scale first).

>>> import numpy as np, tenalg as ta
>>> a = np.arange(6.0).reshape(2, 3)
>>> plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out_modes="i"))
>>> plan.backend, plan.execute(a).tolist()
('direct', [3.0, 12.0])
"""

from ..allocation import allocator
from ..kernels import direct
from .reference import ReferenceRunner
from .strided import STRIDED_KINDS


class DirectRunner(ReferenceRunner):
    """``call`` runs the default scalars (and, where ``call.scaled``, any) in one NumPy
    call; :meth:`run` takes anything else to the reference kernels."""

    def __init__(self, operation, call):
        super().__init__(operation)
        self.call = call
        self.reason = "one NumPy call"

    def run(self, out, arrays, scalars):
        if self.call.scaled:
            self.call(arrays, out, tuple(scalars.values()))
        else:
            super().run(out, arrays, scalars)

    def explain(self):
        tail = (")" if self.call.scaled
                else f"; reference.{self.kernel_name} when scalars are given)")
        return self.explain_layout() + [f"kernel: direct ({self.call.describe}{tail}"]


class DirectBackend:
    """Operations that are one NumPy call: no transform, conversion or addend."""

    name = "direct"

    def supports(self, operation, kind):
        return kind == "numpy" and operation.kind in STRIDED_KINDS

    def prepare(self, operation, chosen=False):
        call = direct.runner(operation, allocator(operation.output))
        return None if call is None else DirectRunner(operation, call)
