"""What the strided backends share: the layout analysis of one operation and the kernel
request of one execution (the arrays as views in the analysed loop order).

The reference and the Numba kernels take the same request (:mod:`tenalg.kernels.reference`
says its shape); :class:`StridedRunner` makes it, and each backend's runner calls its own
kernels with it.

>>> import numpy as np, tenalg as ta
>>> a = np.arange(6.0).reshape(2, 3)
>>> op = ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji", order="C")
>>> StridedRunner(op).explain_layout()
['modes before: j:3 (2, 1), i:2 (1, 3)', 'loops after:  j:3 (2, 1), i:2 (1, 3)']
"""

import math

from .. import layout
from ..descriptors import Unary

_LAST = [None, None]  # the last operation analysed and its analysis (see analysis)


def analysis(op):
    """(loops, output recipe, operand recipes, the factor alpha is multiplied by) of a
    permutation, reduction or elementwise operation.  The last one is kept: a plan asks
    several backends about one operation."""
    last_op, last = _LAST
    if last_op is op:
        return last
    loops = layout.analyse(op.out_modes, op.extents, *_layouts(op))
    loops, factor = _repeats(op, loops)
    free = tuple(loop for loop in loops if not loop.reduced)
    recipes = [layout.view_recipe(x.modes, x.descriptor, loops if k < len(op.inputs) else free)
               for k, x in enumerate(op.operands)]
    if factor is not None:  # the input's view skips the loops taken out
        recipes[0] = ("strided", tuple(loop.extent for loop in loops),
                      tuple(loop.strides[1] for loop in loops))
    result = loops, layout.view_recipe(op.out_modes, op.output, free), recipes, factor
    _LAST[:] = op, result
    return result


def _repeats(op, loops):
    """(the loops, the factor alpha is multiplied by, or None): the reduced loops along
    which a reduction's input repeats itself are taken out (:func:`layout.repeats`)."""
    repeated, factor = layout.repeats(op)
    if factor is None:
        return loops, None
    return [loop for loop in loops if not set(loop.modes) <= repeated], factor


def _layouts(op):
    """(strides and modes, extents) of the output, then of each operand: what the layout
    analysis reads."""
    return ([(op.output.strides, op.out_modes)]
            + [(x.descriptor.strides, x.modes) for x in op.operands],
            [op.output.extents] + [x.descriptor.extents for x in op.operands])


def work(op, loops):
    """The size of the iteration space (not the operands': a trace of a 4096^2 matrix reads
    4096 elements) or of the output, whichever is larger."""
    return max(math.prod(loop.extent for loop in loops), op.output.elements)


class StridedRunner:
    """The analysed layout of one operation and its kernel requests; runs nothing itself."""

    def __init__(self, operation):
        self.operation = operation
        self.loops, self._out_recipe, self._recipes, self.factor = analysis(operation)
        self._skip = operation.output.elements == 0

    def scaled(self, scalars):
        """``scalars`` with alpha times :attr:`factor` (the extent of the loops along
        which a sum's input repeats itself: :func:`layout.repeats`), where there is one."""
        if self.factor is None or self.factor == 1:
            return scalars
        return dict(scalars, alpha=scalars["alpha"] * self.factor)

    def request(self, out, arrays, scalars):
        """(kernel function name, positional, keyword arguments) of one execution: the
        arrays as views in the analysed layout, the operation's options, the scalars."""
        op = self.operation
        scalars = self.scaled(scalars)
        out_view = layout.apply_recipe(out, self._out_recipe, writeable=True)
        views = [layout.apply_recipe(x, r) for x, r in zip(arrays, self._recipes, strict=True)]
        if op.kind == "permutation":
            return "permute", (out_view, views[0]), dict(
                alpha=scalars["alpha"], unary=op.inputs[0].unary, compute=op.compute)
        if op.kind == "reduction":
            c = views[1] if op.addend is not None else None
            return "reduce", (out_view, views[0]), dict(
                op=op.op, alpha=scalars["alpha"], beta=scalars["beta"], c=c,
                unary_a=op.inputs[0].unary,
                unary_c=op.addend.unary if c is not None else Unary.IDENTITY, compute=op.compute)
        return "elementwise", (out_view, tuple(views)), dict(
            unaries=tuple(x.unary for x in op.inputs), op_ab=op.op_ab, op_abc=op.op_abc,
            scalars=tuple(scalars[k] for k in ("alpha", "beta", "gamma") if k in scalars),
            compute=op.compute)

    def explain_layout(self):
        """The modes before the analysis and the loops after it, one line each."""
        op = self.operation
        before = layout.mode_records(op.out_modes, op.extents, *_layouts(op))
        lines = [f"modes before: {layout.describe(before)}",
                 f"loops after:  {layout.describe(self.loops)}"]
        if self.factor is not None:
            lines.append("read once along the reduced axes where A repeats itself (stride 0)"
                         + (f", the sum times {self.factor}" if self.factor != 1 else ""))
        return lines

    @property
    def kernel_name(self):
        return {"permutation": "permute", "reduction": "reduce"}.get(self.operation.kind,
                                                                     "elementwise")


STRIDED_KINDS = ("permutation", "reduction", "elementwise_binary", "elementwise_trinary")
