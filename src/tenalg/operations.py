"""Operations: pure, validated descriptions of the six kinds of dense work.

An :class:`Operation` says what to compute (operands with modes, the output and its
modes, operators, the compute type) and nothing about how.  All the checks of
DESIGN.md happen here, once, before any plan or kernel sees it.

>>> import numpy as np, tenalg as ta
>>> a = ta.TensorDescriptor.contiguous((3, 4), np.float32)
>>> op = ta.Operation.reduction(ta.Operand(a, "ij"), out=np.float32, out_modes="i")
>>> op.kind, op.output.extents, op.compute
('reduction', (3,), dtype('float32'))
"""

import numpy as np

from .descriptors import Binary, Operand, Reduce, TensorDescriptor, modes_text, normalize_modes
from .dtypes import compute_type, is_complex, result_type, storage_type
from .errors import AliasError, DescriptorError, DTypeError, ExtentError, OperationError

REDUCING = ("contraction", "sum_product", "reduction")
INPUT_NAMES = ("A", "B", "C")
# Scalars each kind takes, with their defaults.
SCALARS = {
    "contraction": {"alpha": 1, "beta": 0},
    "sum_product": {"alpha": 1, "beta": 0},
    "reduction": {"alpha": 1, "beta": 0},
    "permutation": {"alpha": 1},
    "elementwise_binary": {"alpha": 1, "beta": 1},
    "elementwise_trinary": {"alpha": 1, "beta": 1, "gamma": 1},
}


def input_name(kind, index):
    """How errors and explain() name input ``index`` of a ``kind`` operation."""
    if kind == "sum_product":
        return f"factor {index}"
    return INPUT_NAMES[index]


def _as_operand(x, what):
    if isinstance(x, Operand):
        return x
    raise OperationError(f"{what}: expected a tenalg.Operand, got {type(x).__name__}")


def resolve_extents(named_operands):
    """Extent of every mode over ``(name, operand)`` pairs: equal, or 1 (broadcast).

    1 with n gives n; 1 with 0 gives 0; two different extents other than 1 are an
    ExtentError naming the mode and both operands.
    """
    extents, owner = {}, {}
    for name, operand in named_operands:
        for mode, extent in zip(operand.modes, operand.descriptor.extents, strict=True):
            known = extents.get(mode)
            if known is None or known == 1:
                extents[mode], owner[mode] = extent, name
            elif extent not in (1, known):
                raise ExtentError(mode, known, extent, f"{owner[mode]} and {name}")
    return extents


def output_aligned(array, modes, out_modes):
    """``array`` (NumPy or Dask) of ``modes`` seen in the output's mode order, extent 1 for
    the output modes it lacks, so that it broadcasts against the output (an addend C).

    >>> output_aligned(np.zeros((3, 2)), "ki", "ijk").shape
    (2, 1, 3)
    """
    present = [m for m in out_modes if m in modes]
    array = array.transpose([tuple(modes).index(m) for m in present])
    return array.reshape([array.shape[present.index(m)] if m in present else 1
                          for m in out_modes])


def order_k_strides(out_modes, extents, inputs):
    """Contiguous strides for ``out_modes`` whose physical order follows the inputs.

    Like NumPy's order="K": a mode that is faster in the inputs (the sum of its |strides|
    over the inputs that carry it) is faster in the output; ties and broadcast-only modes
    keep the logical (C) order.
    """
    keys = []
    for position, mode in enumerate(out_modes):
        carriers = [op for op in inputs if mode in op.modes]
        key = sum(
            abs(s) for op in carriers
            for m, s in zip(op.modes, op.descriptor.strides, strict=True) if m == mode
        ) if carriers else np.inf
        keys.append((key, -position))
    inner_first = sorted(range(len(out_modes)), key=lambda p: keys[p])
    strides, step = [0] * len(out_modes), 1
    for p in inner_first:
        strides[p] = step
        step *= max(extents[p], 1)
    return tuple(strides)


def contiguous_strides(extents):
    """Row-major element strides of ``extents``."""
    return TensorDescriptor.contiguous(extents, np.float64).strides


class Operation:
    """A validated description of one dense operation (immutable, hashable).

    Build it with the class methods; ``out`` is a TensorDescriptor, a dtype (the
    output is then allocated with order-K strides, or C strides with order="C"),
    or None (dtype = the result type of the inputs).
    """

    __slots__ = (
        "kind", "inputs", "addend", "operands", "output", "out_modes", "compute", "extents",
        "op", "op_ab", "op_abc", "_key",
    )

    def __init__(self, kind, inputs, addend, out, out_modes, compute, op=None, op_ab=None,
                 op_abc=None, order="K"):
        self.kind = kind
        self.inputs = tuple(_as_operand(x, input_name(kind, i)) for i, x in enumerate(inputs))
        self.addend = None if addend is None else _as_operand(addend, "C")
        # the arrays a plan takes, in order: the inputs, then the addend C
        self.operands = self.inputs + ((self.addend,) if self.addend is not None else ())
        self.op, self.op_ab, self.op_abc = op, op_ab, op_abc
        self.out_modes = normalize_modes(out_modes, "output modes")
        self._check_out_modes()
        named = [(input_name(kind, i), x) for i, x in enumerate(self.inputs)]
        if self.addend is not None:
            named.append(("C", self.addend))
        dtypes = [x.dtype for _, x in named]
        self.compute = compute_type([x.dtype for x in self.inputs], compute)
        if self.addend is not None and (compute is None or (
                is_complex(self.addend.dtype) and not is_complex(self.compute))):
            # C is read in the compute type: a 64-bit or complex one widens it, as it
            # widens the output (a float64 C rounded to float32 lost its digits)
            self.compute = compute_type(dtypes, None)
        extents = resolve_extents(named)
        self._check_modes(extents)
        self.output = self._output(out, dtypes, extents, order)
        self._check_output(extents)
        for mode, extent in zip(self.out_modes, self.output.extents, strict=True):
            extents.setdefault(mode, extent)
            if extents[mode] == 1:
                extents[mode] = extent
        self.extents = extents
        self._check_operators()
        self._key = (kind, self.inputs, self.addend, self.output, self.out_modes,
                     self.compute, op, op_ab, op_abc)

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def contraction(cls, a, b, c=None, *, out=None, out_modes, compute=None, order="K"):
        """D = alpha * sum op(A) op(B) + beta * op(C) over the modes absent from D."""
        return cls("contraction", (a, b), c, out, out_modes, compute, order=order)

    @classmethod
    def sum_product(cls, operands, c=None, *, out=None, out_modes, compute=None, order="K"):
        """D = alpha * sum prod_k op(X_k) + beta * op(C), over n >= 1 factors."""
        operands = tuple(operands)
        if not operands:
            raise OperationError("sum_product needs at least one factor")
        return cls("sum_product", operands, c, out, out_modes, compute, order=order)

    @classmethod
    def reduction(cls, a, c=None, *, out=None, out_modes, op="sum", compute=None, order="K"):
        """D = alpha * reduce(op(A)) + beta * op(C) over the modes absent from D."""
        return cls("reduction", (a,), c, out, out_modes, compute, op=Reduce.coerce(op),
                   order=order)

    @classmethod
    def permutation(cls, a, *, out=None, out_modes, compute=None, order="K"):
        """D = alpha * op(A), the modes in the output's order."""
        return cls("permutation", (a,), None, out, out_modes, compute, order=order)

    @classmethod
    def elementwise_binary(cls, a, b, *, out=None, out_modes, op="add", compute=None,
                           order="K"):
        """D = op(alpha op(A), beta op(B))."""
        return cls("elementwise_binary", (a, b), None, out, out_modes, compute,
                   op_ab=Binary.coerce(op), order=order)

    @classmethod
    def elementwise_trinary(cls, a, b, c, *, out=None, out_modes, op_ab="add", op_abc="add",
                            compute=None, order="K"):
        """D = op_abc(op_ab(alpha op(A), beta op(B)), gamma op(C))."""
        return cls("elementwise_trinary", (a, b, c), None, out, out_modes, compute,
                   op_ab=Binary.coerce(op_ab), op_abc=Binary.coerce(op_abc), order=order)

    # -- validation ---------------------------------------------------------------------
    def _check_out_modes(self):
        seen = set()
        for mode in self.out_modes:
            if mode in seen:
                raise OperationError(f"output mode {mode!r} appears twice in {self.out_modes}")
            seen.add(mode)

    def _check_modes(self, extents):
        out = set(self.out_modes)
        if self.kind not in REDUCING:
            for i, x in enumerate(self.inputs):
                for mode in x.modes:
                    if mode not in out:
                        raise OperationError(
                            f"mode {mode!r} of input {input_name(self.kind, i)} is absent "
                            f"from the output {self.out_modes}: a {self.kind} cannot reduce"
                        )
        if self.addend is not None:
            for mode in self.addend.modes:
                if mode not in out:
                    raise OperationError(
                        f"mode {mode!r} of the addend C is absent from the output "
                        f"{self.out_modes}"
                    )
            if len(set(self.addend.modes)) != len(self.addend.modes):
                raise OperationError(f"the addend C repeats a mode: {self.addend.modes}")

    def _output(self, out, dtypes, extents, order):
        if isinstance(out, TensorDescriptor):
            if out.ndim != len(self.out_modes):
                raise DescriptorError(
                    f"output of rank {out.ndim} for {len(self.out_modes)} output modes "
                    f"{self.out_modes}"
                )
            if not out.is_nonoverlapping():
                raise AliasError(
                    f"the output layout {out.extents} with strides {out.strides} overlaps itself"
                )
            return out
        dtype = (result_type(dtypes, self.compute) if out is None
                 else storage_type(out, "output dtype"))
        shape = []
        for mode in self.out_modes:
            if mode not in extents:
                raise OperationError(
                    f"output mode {mode!r} is in no input: pass an output descriptor to "
                    "give a broadcast-only mode its extent"
                )
            shape.append(extents[mode])
        if order == "C":
            strides = contiguous_strides(shape)
        elif order == "K":
            strides = order_k_strides(self.out_modes, shape, self.inputs)
        else:
            raise OperationError(f"order must be 'K' or 'C', not {order!r}")
        return TensorDescriptor(shape, strides, dtype)

    def _check_output(self, extents):
        for mode, extent in zip(self.out_modes, self.output.extents, strict=True):
            known = extents.get(mode)
            if known is not None and known != extent and known != 1:
                raise ExtentError(mode, known, extent, "the inputs and the output")

    def _check_operators(self):
        ordered = [o for o in (self.op, self.op_ab, self.op_abc) if o is not None]
        if any(o.value in ("min", "max") for o in ordered) and is_complex(self.compute):
            raise DTypeError(f"min and max are not defined for complex data ({self.compute})")

    # -- identity -----------------------------------------------------------------------
    def __eq__(self, other):
        return isinstance(other, Operation) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        ins = ", ".join(modes_text(x.modes, "") for x in self.inputs)
        return (
            f"Operation.{self.kind}({ins} -> {modes_text(self.out_modes, '')}, "
            f"{self.output.dtype}, compute={self.compute})"
        )
