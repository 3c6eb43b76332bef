"""Direct runners: a small plan as one NumPy call on the operands themselves.

For operations too small for the Numba kernels, the cost of a plan is Python, not
arithmetic: building loop-order views and passing through the general reference
kernel costs several microseconds.  When an operation is one NumPy call on the
operands (no unary transform, no conversion; default scalars, or any scalars for an
elementwise operation, which multiplies first), :func:`runner` returns a
function that makes exactly that call: a ufunc on transposed operands, or ``np.einsum``
for a sum over a diagonal (repeated modes: NumPy's einsum reads a strided diagonal three
times faster than ``np.add.reduce`` of the same view, ``iij->j`` on (2048, 2048, 8)).

>>> import numpy as np, tenalg as ta
>>> a = np.arange(6.0).reshape(2, 3)
>>> op = ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji")
>>> run = runner(op)
>>> run.describe, run((a,)).tolist()
('numpy copy of A.transpose((1, 0))', [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
"""

import string

import numpy as np

from ..descriptors import Binary, Reduce, TensorDescriptor, Unary
from ..dtypes import is_complex
from ..layout import repeats
from ..views import diagonal_calls, diagonal_steps

try:
    from . import cpu
except ImportError:  # no Numba: NumPy sums every diagonal
    cpu = None

_UFUNCS = {Binary.ADD: np.add, Binary.MUL: np.multiply,
           Reduce.SUM: np.add, Reduce.PRODUCT: np.multiply}


def _runner(call, describe, single=None, scaled=False):
    """``call(arrays, out=None)`` computes the operation and returns the output;
    ``call.single(a)``, where given, is ``call((a,))`` with nothing in between (a small
    call's time is mostly calls); ``scaled``: ``call(arrays, out, scalars)`` also takes
    the scalars (a tuple in the kind's order; None: the defaults)."""
    call.describe, call.single, call.scaled = describe, single, scaled
    return call


def runner(operation, allocate=None):
    """The direct runner of ``operation``, or None when it is not one NumPy call.

    A runner is called as ``run(arrays, out=None)``; ``run.describe`` says what it does;
    where ``run.scaled``, ``run(arrays, out, scalars)`` runs with scalars too.

    ``allocate`` makes outputs with the plan's layout (default: C order).
    """
    op = operation
    if not _plain(op):
        return None
    allocate = allocate or (lambda: np.empty(op.output.extents, op.output.dtype))
    if op.kind == "permutation":
        return _permutation(op, allocate)
    if op.kind == "reduction":
        return _reduction(op, allocate)
    return _elementwise(op, allocate)


def _plain(op):
    """No transform, conversion, addend or NaN-aware operator; a diagonal (repeated modes)
    only in a sum."""
    if op.kind not in ("permutation", "reduction", "elementwise_binary", "elementwise_trinary"):
        return False
    if op.addend is not None:
        return False
    for x in op.inputs:
        identity = x.unary is Unary.IDENTITY or (
            x.unary is Unary.CONJUGATE and not is_complex(x.dtype)
        )
        if not identity or x.dtype != op.compute:
            return False
    if has_diagonal(op) and op.op is not Reduce.SUM:
        return False
    operators = [o for o in (op.op, op.op_ab, op.op_abc) if o is not None]
    return op.output.dtype == op.compute and all(o in _UFUNCS for o in operators)


def has_diagonal(op):
    """Whether an input of ``op`` repeats a mode (reads a diagonal)."""
    return any(len(set(x.modes)) != len(x.modes) for x in op.inputs)


def _axes(x, modes):
    """Axes of operand ``x`` in the order of ``modes`` (which it must all carry)."""
    return tuple(x.modes.index(m) for m in modes)


def _permutation(op, allocate):
    (a,) = op.inputs
    if set(a.modes) != set(op.out_modes):
        return None  # a broadcast-only output mode
    axes = _axes(a, op.out_modes)
    order = _copy_order(a.descriptor, axes, op.output)

    reverse = axes == tuple(range(len(axes)))[::-1]
    single = None  # a new output straight from the transposed view's copy, where it can be
    if order is not None:
        single = ((lambda a: a.T.copy(order)) if reverse
                  else (lambda a: a.transpose(axes).copy(order)))

    def call(arrays, out=None):
        if out is None and single is not None:
            return single(arrays[0])
        out = allocate() if out is None else out
        np.copyto(out, arrays[0].T if reverse else arrays[0].transpose(axes))
        return out

    return _runner(call, f"numpy copy of A.transpose({axes})", single)


def _copy_order(a, axes, out, probe_limit=1 << 16):
    """The order, "C" or "K", in which ``view.copy`` of A (layout ``a``) transposed by
    ``axes`` has the output's layout, or None; "K" is decided once on a probe array of
    A's layout."""
    if tuple(a.extents[k] for k in axes) != out.extents:
        return None
    if _same_strides(TensorDescriptor.contiguous(out.extents, out.dtype).strides, out):
        return "C"
    return "K" if _gives_layout(a, lambda x: x.transpose(axes).copy(order="K"), out,
                                probe_limit) else None


_NUMPY_MAX_RANK = 64  # no probe array beyond it (a descriptor may describe more modes)


def _gives_layout(a, numpy_call, out, probe_limit=1 << 16):
    """Whether ``numpy_call`` on an array of A's layout (``a``, a descriptor) returns an
    array of ``out``'s layout: decided once, on a probe array of at most ``probe_limit``
    elements (False beyond it)."""
    if not 0 < a.span <= probe_limit or len(a.extents) > _NUMPY_MAX_RANK:
        return False
    lo, _ = a.bounds()
    item = a.dtype.itemsize
    # zeros, not np.empty: a reduction of uninitialised memory warned of invalid values
    probe = np.lib.stride_tricks.as_strided(
        np.zeros(a.span, a.dtype)[-lo:], a.extents, tuple(s * item for s in a.strides))
    result = numpy_call(probe)
    return (isinstance(result, np.ndarray) and result.shape == out.extents
            and _same_strides(tuple(s // item for s in result.strides), out))


def _same_strides(strides, out):
    """Whether element ``strides`` are ``out``'s on every axis that moves (extent > 1)."""
    return all(s == t for s, t, e in zip(strides, out.strides, out.extents, strict=True)
               if e > 1)


def _reduction(op, allocate):
    (a,) = op.inputs
    if has_diagonal(op):
        return _diagonal_sum(op, allocate)
    kept = [m for m in a.modes if m in op.out_modes]
    if len(kept) != len(op.out_modes) or any(
        a.descriptor.extents[a.modes.index(m)] != op.output.extents[op.out_modes.index(m)]
        for m in kept
    ):
        return None  # a broadcast-only output mode
    reduced = tuple(k for k, m in enumerate(a.modes) if m not in op.out_modes)
    out_axes = tuple(op.out_modes.index(m) for m in kept)  # out viewed in A's mode order
    ufunc = _UFUNCS[op.op]
    repeated, factor = repeats(op)  # axes along which A repeats itself: read once
    once = tuple(slice(0, 1) if m in repeated else slice(None) for m in a.modes)

    def call(arrays, out=None):
        out = allocate() if out is None else out
        x = arrays[0][once] if repeated else arrays[0]
        ufunc.reduce(x, axis=reduced, out=out.transpose(out_axes))
        if factor not in (None, 1):
            np.multiply(out, factor, out=out)
        return out

    def single(x):  # NumPy's own result where it has the output's layout: no out= to make
        return ufunc.reduce(x, axis=reduced)  # (an 8 x 8 sum's plan 1.47 -> 0.92 us)

    # (a full reduction gives a NumPy scalar, which _gives_layout declines)
    if repeated or not (out_axes == tuple(range(len(out_axes)))
                       and _gives_layout(a.descriptor, single, op.output)):
        single = None
    return _runner(call, f"numpy.{ufunc.__name__}.reduce over A's axes {reduced}", single)


def _diagonal_sum(op, allocate):
    numpy_sum = _numpy_diagonal_sum(op, allocate)
    strided = _strided_sums(op, allocate, numpy_sum)
    return numpy_sum if strided is None else strided


def _numpy_diagonal_sum(op, allocate):
    """A sum over a diagonal by NumPy: np.add.reduce of its diagonal view for a sum of
    everything, else np.einsum; None for a broadcast-only output mode or more modes than
    np.einsum has letters (52)."""
    if not op.out_modes:
        return _full_diagonal_sum(op, allocate)
    modes = dict.fromkeys(op.inputs[0].modes)
    if len(modes) > len(string.ascii_letters):
        return None
    letters = dict(zip(modes, string.ascii_letters, strict=False))
    if any(m not in letters for m in op.out_modes):
        return None  # a broadcast-only output mode
    subscripts = "".join(letters[m] for m in op.inputs[0].modes) + "->" + "".join(
        letters[m] for m in op.out_modes)

    def call(arrays, out=None):
        out = allocate() if out is None else out
        np.einsum(subscripts, arrays[0], out=out)
        return out

    return _runner(call, f"numpy.einsum('{subscripts}')")


def _strided_sums(op, allocate, numpy_sum):
    """A sum over one diagonal of a C-contiguous array into at most two free axes, in
    order (more where they merge into two: :func:`_merged_lanes`), of a C-contiguous
    output (a trace, ``iij->j``, a partial trace) by
    :func:`tenalg.kernels.cpu.strided_sums`, whose threads load the far-apart terms side
    by side (NumPy waits on them one loop at a time); None where that kernel does not
    apply.  While the kernel compiles (off the thread), ``numpy_sum`` runs the sums."""
    a = op.inputs[0]
    d, modes = a.descriptor, a.modes
    repeated = [m for m in dict.fromkeys(modes) if modes.count(m) > 1]
    free = [k for k, m in enumerate(modes) if modes.count(m) == 1]
    if (cpu is None or len(repeated) != 1 or list(op.out_modes) != [modes[k] for k in free]
            or not all(_c_order(x) for x in (d, op.output))):
        return None
    step = sum(s for s, m in zip(d.strides, modes, strict=True) if m == repeated[0])
    lanes = [(d.extents[k], d.strides[k]) for k in free]
    if len(lanes) > 2:  # the kernel's limit; two lanes as they are keep their measured path
        lanes = _merged_lanes(lanes)
    run = cpu.strided_sums(d.dtype, op.extents[repeated[0]], step, lanes)
    if run is None or numpy_sum is None:
        return None

    def call(arrays, out=None):
        out = allocate() if out is None else out
        if not run(arrays[0], out, wait=False):
            numpy_sum(arrays, out)
        return out

    return _runner(call, f"cpu.strided_sums over A's diagonal (step {step}, lanes {lanes})")


def _merged_lanes(lanes):
    """Free axes as (extent, element stride), outer first, without extent-1 axes and with
    each axis that continues the one before it in memory (outer stride = extent x stride)
    merged into it: the output, C-ordered, lies in the same order along the merged axes.
    ``iijkl->jkl`` keeps one lane of all three axes.

    >>> _merged_lanes([(3, 16), (1, 5), (2, 8), (4, 1)])
    [(6, 8), (4, 1)]
    """
    merged = []
    for extent, stride in lanes:
        if extent == 1:
            continue
        if merged and merged[-1][1] == extent * stride:
            merged[-1] = (merged[-1][0] * extent, stride)
        else:
            merged.append((extent, stride))
    return merged


def _c_order(descriptor):
    """Whether ``descriptor`` lays its elements out in C order (extent-1 axes aside)."""
    return _same_strides(TensorDescriptor.contiguous(descriptor.extents,
                                                     descriptor.dtype).strides, descriptor)


def _full_diagonal_sum(op, allocate):
    """A sum of everything over a diagonal (a trace): ``np.add.reduce`` of NumPy's own
    diagonal view, pairwise like ``np.trace`` and without einsum's parsing."""
    pairs, _ = diagonal_steps(op.inputs[0].modes)

    def call(arrays, out=None):
        x = diagonal_calls(arrays[0], pairs)
        return np.add.reduce(x, axis=None, out=allocate() if out is None else out)

    def single(x):  # the same sum into NumPy's own 0-d result (an 8 x 8 trace 2.6 -> 1.7 us)
        return np.asarray(np.add.reduce(diagonal_calls(x, pairs), axis=None))

    same_type = op.output.dtype == op.inputs[0].descriptor.dtype
    return _runner(call, f"numpy.add.reduce of A's diagonal (axes {pairs})",
                   single if same_type else None)


def _broadcastable(x, shape):
    """``x`` (in out's mode order) with axes of extent 1 for the modes it lacks."""
    return x if shape is None else x.reshape(shape)


def _elementwise(op, allocate):
    """One ufunc (two for a trinary) on the operands in out's mode order; scalars other
    than 1 multiply their operand first, in the compute type, as the reference does."""
    if any(set(x.modes) != set(op.out_modes) and len(set(x.modes)) < len(x.modes)
           for x in op.inputs):
        return None  # a diagonal broadcast along a mode it lacks
    # an operand lacking some of out's modes gets axes of extent 1 there (NumPy then
    # broadcasts it: a (32, 32) times a row had run on the reference, 25x NumPy's time)
    shapes = [None if set(x.modes) == set(op.out_modes) else tuple(
        x.descriptor.extents[x.modes.index(m)] if m in x.modes else 1 for m in op.out_modes)
        for x in op.inputs]
    orders = [_axes(x, [m for m in op.out_modes if m in x.modes]) for x in op.inputs]
    orders = [None if axes == tuple(range(len(axes))) else axes for axes in orders]
    ufuncs = [_UFUNCS[op.op_ab]] + ([_UFUNCS[op.op_abc]] if len(orders) == 3 else [])
    compute = op.compute
    in_order = not any(orders) and not any(shapes)  # no views to make

    def call(arrays, out=None, scalars=None):
        terms = arrays if in_order else [
            _broadcastable(x if axes is None else x.transpose(axes), shape)
            for x, axes, shape in zip(arrays, orders, shapes, strict=True)]
        if scalars is not None:
            terms = [x if s == 1 else np.multiply(x, np.asarray(s, compute))
                     for x, s in zip(terms, scalars, strict=True)]
        out = allocate() if out is None else out
        ufuncs[0](terms[0], terms[1], out=out)
        if len(terms) == 3:
            ufuncs[1](out, terms[2], out=out)
        return out

    names = " then ".join(f"numpy.{u.__name__}" for u in ufuncs)
    return _runner(call, f"{names}, scalars other than 1 multiplied in first", scaled=True)
