"""Front ends: NumPy arrays in, NumPy arrays out, each one Operation and a cached Plan.

Arrays of a kind that has a front end of its own (Dask's: :mod:`tenalg.seam`) go to the
function of the same name there, or are refused where it has none: never converted.

>>> import numpy as np, tenalg as ta
>>> a = np.arange(12.0).reshape(3, 4)
>>> float(ta.trace(a)), ta.sum(a, axis=0).tolist()
(15.0, [12.0, 15.0, 18.0, 21.0])
"""

import functools
import math

import ml_dtypes
import numpy as np

from . import calls
from .calls import (
    KERNEL_TYPES,
    cache_key,
    call,
    check_cast,
    is_one,
    kernel_array,
    output_array,
    plain_ints,
    plan_for,
    rank0,
    run,
)
from .descriptors import Unary
from .dtypes import bfloat16, real_type, storage_type
from .einsum import einsum
from .errors import DescriptorError, IntegerTypeError, OperationError, OutputMismatchError
from .inputs import as_array
from .kernels import cpu
from .seam import call_front_end, changed, foreign_kind
from .views import (
    axis_index,
    check_inside,
    check_offset,
    diagonal,
    diagonals,
    normalize_axis,
    one_axis,
)

__all__ = [
    "contract", "diagonal", "einsum", "diagonals", "elementwise_binary", "elementwise_trinary",
    "inner_product", "inner_product_host", "norm", "norm_host", "partial_trace", "permute",
    "reduce", "sum", "sum_host", "to_host", "trace",
]


def reduce(a, modes_in, modes_out, op="sum", *, alpha=1, c=None, beta=0, out=None,
           unary_a=Unary.IDENTITY, compute_dtype=None):
    """``alpha * op`` over the modes of ``unary_a(a)`` absent from ``modes_out``, plus
    ``beta * c``.

    Repeated modes in ``modes_in`` read a diagonal.

    >>> reduce(np.arange(6.0).reshape(2, 3), "ij", "i", "max").tolist()
    [2.0, 5.0]
    >>> reduce(np.array([[-3.0, 2.0]]), "ij", "i", "max", unary_a="abs").tolist()
    [3.0]
    """
    foreign = type(a) is not np.ndarray or c is not None or out is not None
    if foreign and (kind := foreign_kind((a, c, out))):  # Dask arrays, say
        return call_front_end(kind, "reduce", a, modes_in, modes_out, op,
                              alpha=changed(alpha, 1), c=c, beta=changed(beta, 0), out=out,
                              compute_dtype=compute_dtype, unary_a=_given(unary_a))
    a = as_array(a, "a")
    addend = None if c is None else (as_array(c, "c"), modes_out, Unary.IDENTITY)
    return run("reduction", [(a, modes_in, unary_a, "A")], modes_out, addend=addend,
                out=out, options=(("op", op), ("compute", compute_dtype)), alpha=alpha,
                beta=beta)


def _reduction_plan(a, modes_in, modes_out, out, compute_dtype, out_dtype=None):
    """The plan of a plain sum of ``a`` (a front end's; ``out`` may be None; ``out_dtype``
    the type of an allocated output, None: a's)."""
    options = (("op", "sum"), ("compute", compute_dtype))
    if out is None and out_dtype is not None:
        options += (("out_dtype", out_dtype),)
    return plan_for("reduction", [(a, modes_in, Unary.IDENTITY, "A")], modes_out, out=out,
                 options=options)


def sum_axes(axis, ndim):
    """``axis`` (None, an int or a sequence) as a tuple of axes in range(ndim), in the
    order given, checked as NumPy checks it."""
    if axis is None:
        return tuple(range(ndim))
    single = one_axis(axis)
    if ndim == 0 and single and axis_index(axis) in (0, -1):
        return ()  # NumPy's reductions take axis 0 or -1 (not (0,)) of a 0-d array
    if not single and not hasattr(axis, "__iter__"):
        raise IntegerTypeError(f"axis must be an integer or a tuple of them, got {axis!r}")
    axes = (axis,) if single else tuple(axis)
    axes = tuple(normalize_axis(ax, ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise OperationError(f"axis {axis} repeats an axis")
    return axes


def _sum_types(a, dtype, out):
    """``(dtype, compute)`` of a kernel sum of ``a`` (``dtype`` None: a's own; compute
    None: the plan's choice), or None where NumPy's routine gives the result: a dtype the
    kernels do not store (integers, bool, object, longdouble) or a narrowing ``dtype=``
    (NumPy then adds in the narrow type, the kernels would not)."""
    result = a.dtype if dtype is None else np.dtype(dtype)
    if not (a.dtype in KERNEL_TYPES and result in KERNEL_TYPES
            and (out is None or out.dtype in KERNEL_TYPES)
            and np.can_cast(a.dtype, result, "safe")):
        return None
    if result not in _WIDE or a.dtype == result:
        return result, None
    return result, _WIDE[a.dtype.kind == "c"]  # complex data adds in complex128


def _numpy_sum(function, a, *args, dtype=None, out=None, **kwargs):
    """NumPy's own sum or trace (``function``) for what the kernels do not compute, an
    ``out`` of the wrong kind refused as the kernels' path refuses it (OutputTypeError)."""
    check_inside(a, "a")  # (an as_strided layout: NumPy would read past its buffer)
    if out is not None:  # the type NumPy's sum gives, read off an empty sum
        check_cast(np.add.reduce(np.empty(1, a.dtype)[:0], dtype=dtype, keepdims=True).dtype,
                    out)
    return rank0(function(a, *args, dtype=dtype, out=out, **kwargs), out)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, *,  # noqa: A001 - NumPy's name
        compute_dtype=None, initial=None, where=None):
    """Sum over ``axis`` (int, tuple or None for all), as ``numpy.sum``: any array-like and
    dtype, NumPy's ``dtype``, ``out``, ``keepdims``, ``initial`` and ``where``.

    Float and complex data add in tenalg's kernels (pairwise, in the compute type); other
    dtypes, and sums with ``initial`` or ``where``, take NumPy's own sum (integers wrap
    around as NumPy's do).  Unlike NumPy, a sum of everything is a rank-0 array, not a
    NumPy scalar (the dense layer's rule).

    >>> sum(np.ones((2, 3)), axis=-1).tolist()
    [3.0, 3.0]
    >>> sum([[1, 2], [3, 4]], axis=0, keepdims=True)
    array([[4, 6]])
    >>> sum([[1.0, 2.0], [3.0, 4.0]], axis=1, initial=10, where=[True, False]).tolist()
    [11.0, 13.0]
    """
    if (type(a) is np.ndarray and type(axis) is int and dtype is None and out is None
            and not keepdims and compute_dtype is None and initial is None and where is None
            and (single := calls.planned(("sum", axis), a)) is not None):
        return single(a)  # what calls.call would run, in fewer steps
    if (type(a) is not np.ndarray or out is not None) and (kind := foreign_kind((a, out))):
        return call_front_end(kind, "sum", a, axis, dtype=dtype, out=out,  # Dask arrays, say
                              keepdims=changed(keepdims, False), compute_dtype=compute_dtype,
                              initial=initial, where=where)
    a = as_array(a, "a")
    if initial is not None or where is not None:  # NumPy's masked and started sums
        if compute_dtype is not None:
            raise OperationError("compute_dtype applies to tenalg's kernels, which take "
                                 "neither initial nor where")
        return _numpy_sum(np.sum, a, axis=sum_axes(axis, a.ndim), dtype=dtype,
                          out=output_array(out), keepdims=keepdims,
                          **({} if initial is None else {"initial": initial}),
                          where=True if where is None else where)
    if (dtype is None and not keepdims and compute_dtype is None and plain_ints(axis)
            and a.dtype in KERNEL_TYPES and (out is None or kernel_array(out))):
        # the common call, cached whole with its checks (an 8 x 8 sum: 10 -> 5 us)
        return call((a,), out, ("sum", axis), _sum_plan, axis, None, a.dtype,
                    first=_sum_first, numpy_out=True)
    out = output_array(out)
    axes = sum_axes(axis, a.ndim)  # checked first: NumPy's errors become tenalg's
    types = _sum_types(a, dtype, out)
    if types is None:
        return _numpy_sum(np.sum, a, axis=axes, dtype=dtype, out=out, keepdims=keepdims)
    result, compute = types
    target = out
    if keepdims and out is not None:  # the kernels write the kept axes of out
        kept = tuple(1 if k in axes else n for k, n in enumerate(a.shape))
        if out.shape != kept:
            raise OutputMismatchError(f"out: shape {out.shape}, expected {kept} (keepdims)")
        target = out[tuple(0 if k in axes else slice(None) for k in range(a.ndim))]
    compute = compute_dtype if compute_dtype is not None else compute
    total = call((a,), target, ("sum", axes, result, compute), _sum_plan, axes, compute,
                  result, numpy_out=True)
    if keepdims and out is None:
        total = total.reshape([1 if k in axes else n for k, n in enumerate(a.shape)])
    return out if out is not None else total


def _sum_plan(arrays, out, axis, compute_dtype, result):
    """The plan of a sum over ``axis`` (checked here) in ``compute_dtype`` into a
    ``result``-typed output or ``out`` (which the result must cast to)."""
    a = arrays[0]
    axes = sum_axes(axis, a.ndim)
    check_cast(result, out)
    modes = tuple(range(a.ndim))
    kept = tuple(m for m in modes if m not in axes)
    # summed axes that run backwards are read forwards, in memory order (a reversed
    # 3162^2 float32 sum took the strided path: 5x NumPy's time)
    select = _forwards(a, axes)
    view = a if select is None else a[select]
    return _reduction_plan(view, modes, kept, out, compute_dtype,
                           None if result == a.dtype else result), select


# NumPy sums these well and, up to FIRST_SIZE elements, in about the time a first call's
# planning takes (0.5 ms): such a call is answered by NumPy while the plan is built (a
# first ta.trace of a 256 x 256 matrix took 0.5 ms planned, np.trace 0.05 ms)
_FIRST_TYPES = frozenset(map(np.dtype, ("float32", "float64", "complex64", "complex128")))
FIRST_SIZE = 1 << 18


def _numpy_first(a):
    """Whether NumPy answers a first call on ``a``: a C-ordered array (the plan's result
    is then C-ordered too) of NumPy's good types and at most FIRST_SIZE elements."""
    return a.dtype in _FIRST_TYPES and a.size <= FIRST_SIZE and a.flags.c_contiguous


def _sum_first(arrays, axis, compute_dtype, result):
    """NumPy's sum over ``axis``, a first call's (:func:`_numpy_first`; else None)."""
    a = arrays[0]
    return np.asarray(np.add.reduce(a, axis=sum_axes(axis, a.ndim))) if _numpy_first(a) else None


def sum_host(a):
    """The sum of all entries as a Python scalar."""
    return _host_scalar(sum(a))


def _host_scalar(x):
    """A rank-0 result (of any kind of array: :func:`to_host`) as a Python scalar."""
    value = to_host(x)[()]
    return value.item() if isinstance(value, np.generic) else value


def trace(a, axis1=0, axis2=1, *, offset=0, dtype=None, out=None):
    """Sum of the diagonal of axes ``axis1``, ``axis2``; survivors keep their order.

    A diagonal view plus a reduction: no copy, no identity tensor.  Unequal extents
    trace the leading square, as NumPy does.  NumPy's ``offset``, ``dtype`` and ``out``
    are keywords here: the positional arguments after ``a`` are the two axes (DESIGN's
    signature), where ``numpy.trace`` takes ``offset`` first.  Any array-like and dtype;
    dtypes the kernels do not store take ``numpy.trace``.  The trace of a matrix is a
    rank-0 array.

    >>> float(trace(np.arange(9.0).reshape(3, 3)))
    12.0
    >>> trace(np.arange(9).reshape(3, 3), offset=1)
    array(6)
    """
    if (type(a) is np.ndarray and type(axis1) is int and type(axis2) is int and offset == 0
            and type(offset) is int and dtype is None and out is None
            and (single := calls.planned(("trace", ((axis1, axis2),)), a)) is not None):
        return single(a)  # what calls.call would run, in fewer steps
    if (type(a) is not np.ndarray or out is not None) and (kind := foreign_kind((a, out))):
        return call_front_end(kind, "trace", a, axis1, axis2,  # Dask arrays, say
                              offset=changed(offset, 0), dtype=dtype, out=out)
    a = as_array(a, "a")
    if (type(axis1) is int and type(axis2) is int and type(offset) is int and dtype is None
            and a.dtype in KERNEL_TYPES and (out is None or kernel_array(out))):
        pair = ((axis1, axis2),)  # the common call, cached whole with its checks
        if offset:
            a = a[offset_index(a, pair[0], offset)]
        return call((a,), out, ("trace", pair), _partial_trace_plan, pair, None, a.dtype,
                    first=_trace_first, numpy_out=True)
    out = output_array(out)
    offset = check_offset(offset)
    types = _sum_types(a, dtype, out)
    if types is None:
        i, j = offset_index(a, (axis1, axis2), 0, axes=True)
        return _numpy_sum(np.trace, a, int(offset), i, j, dtype=dtype, out=out)
    result, compute = types
    pair = ((axis1, axis2),)
    a = a[offset_index(a, pair[0], offset)] if offset else a
    key = ("trace", pair, result, compute) if plain_ints(pair) else None
    return call((a,), out, key, _partial_trace_plan, pair, compute, result, numpy_out=True)


def offset_index(a, pair, offset, axes=False):
    """The index of ``a`` whose (axis1, axis2) diagonal starts ``offset`` along axis2
    (negative: along axis1), or with ``axes`` the pair checked and normalised."""
    if a.ndim < 2:
        raise DescriptorError(f"a trace needs two axes, got a tensor of rank {a.ndim}")
    i, j = (normalize_axis(ax, a.ndim) for ax in pair)
    if i == j:
        raise DescriptorError(f"axes repeat in the trace pair {tuple(pair)}")
    if axes:
        return i, j
    index = [slice(None)] * a.ndim
    index[j if offset > 0 else i] = slice(abs(int(offset)), None)
    return tuple(index)


def partial_trace(a, pairs, *, out=None):
    """Trace over several axis pairs at once, e.g. ``[(0, 2), (1, 3)]``; any array-like
    and dtype (those the kernels do not store take NumPy's sum of the diagonals).

    >>> partial_trace(np.ones((2, 3, 2)), [(0, 2)]).tolist()
    [2.0, 2.0, 2.0]
    """
    if (type(a) is not np.ndarray or out is not None) and (kind := foreign_kind((a, out))):
        return call_front_end(kind, "partial_trace", a, pairs, out=out)  # Dask arrays, say
    a = as_array(a, "a")
    try:
        pairs = tuple(tuple(p) for p in pairs)
    except TypeError:
        raise DescriptorError(f"trace pairs are pairs of axes, got {pairs!r}") from None
    if a.dtype in KERNEL_TYPES and (out is None or kernel_array(out)):
        key = ("partial_trace", pairs) if plain_ints(pairs) else None
        return call((a,), out, key, _partial_trace_plan, pairs, None, a.dtype,
                    first=_trace_first, numpy_out=True)
    view = diagonals(a, pairs)  # survivors, then one diagonal axis per pair
    return _numpy_sum(np.sum, view, axis=tuple(range(-len(pairs), 0)), out=output_array(out))


def _trace_first(arrays, pairs, compute_dtype, result):
    """NumPy's sum of the diagonals of ``pairs``, a first call's (:func:`_numpy_first`;
    else None)."""
    a = arrays[0]
    if not _numpy_first(a):
        return None
    return np.asarray(np.add.reduce(diagonals(a, pairs), axis=tuple(range(-len(pairs), 0))))


def _partial_trace_plan(arrays, out, pairs, compute_dtype, result):
    """The plan of a (partial) trace of ``arrays[0]`` and the index of its leading
    square."""
    a = arrays[0]
    labels = list(range(a.ndim))
    index = [slice(None)] * a.ndim
    seen = set()
    for pair in pairs:
        if len(pair) != 2:
            raise DescriptorError(f"a trace pair has two axes, got {pair}")
        i, j = (normalize_axis(ax, a.ndim) for ax in pair)
        if i == j or i in seen or j in seen:
            raise DescriptorError(f"axes repeat in the trace pairs {list(pairs)}")
        seen.update((i, j))
        n = min(a.shape[i], a.shape[j])
        if a.shape[i] != a.shape[j]:  # trace the leading square
            index[i] = index[j] = slice(0, n)
        labels[j] = labels[i]
    check_cast(result, out)
    select = tuple(index) if any(s != slice(None) for s in index) else None
    kept = tuple(m for k, m in enumerate(labels) if k not in seen)
    view = a if select is None else a[select]
    return _reduction_plan(view, labels, kept, out, compute_dtype,
                           None if result == a.dtype else result), select


def permute(a, axes=None, *, alpha=None, out=None):
    """A new C-ordered array with ``a``'s axes in the order ``axes`` (None: reversed, as
    ``numpy.transpose``), times ``alpha`` (None: 1): ``np.transpose(a, axes)`` copied.

    Any array-like and dtype: float and complex data move through tenalg's kernels,
    others (and real data times a complex ``alpha``, a complex result as NumPy's product)
    through NumPy's copy.  An ``out`` array takes the result under NumPy's 'same_kind'
    rule (a complex result into a real array raises OutputTypeError).

    >>> permute(np.arange(6.0).reshape(2, 3), (1, 0)).flags.c_contiguous
    True
    >>> permute([[1, 2], [3, 4]])
    array([[1, 3],
           [2, 4]])
    """
    if type(a) is np.ndarray and type(axes) is tuple and alpha is None and out is None:
        try:
            single = calls.planned(("permute", axes), a)
        except TypeError:  # an unhashable axis (a 0-d array): the general path reads it
            single = None
        if single is not None and plain_ints(axes):
            return single(a)  # a planned call, in fewer steps (see calls.CALLS)
    if (type(a) is not np.ndarray or out is not None) and (kind := foreign_kind((a, out))):
        return call_front_end(kind, "permute", a, axes, alpha=changed(alpha, 1),  # Dask's
                              out=out)
    a = as_array(a, "a")
    if axes is None:
        axes = tuple(range(a.ndim - 1, -1, -1))
    complex_scale = alpha is not None and np.iscomplexobj(alpha) and a.dtype.kind != "c"
    if a.dtype in KERNEL_TYPES and (out is None or kernel_array(out)) and not complex_scale:
        key = ("permute", axes) if plain_ints(axes) else None
        return call((a,), out, key, _permute_plan, axes,
                     scalars=None if alpha is None else {"alpha": alpha}, numpy_out=True,
                     first=_permute_first if alpha is None else None)
    out = output_array(out)
    check_inside(a, "a")  # (an as_strided layout: NumPy's copy would read past its buffer)
    moved = a.transpose(permutation(axes, a.ndim))
    if alpha is not None:
        moved = np.multiply(moved, alpha)
    if out is None:
        return np.array(moved, order="C")
    check_cast(moved.dtype, out)
    np.copyto(out, moved)
    return out


def permutation(axes, ndim):
    """``axes`` checked as a permutation of range(ndim), negatives normalised."""
    axes = tuple(axes)
    if sorted(normalize_axis(ax, ndim) for ax in axes) != list(range(ndim)):
        raise DescriptorError(f"axes {axes} are not a permutation of range({ndim})")
    return tuple(normalize_axis(ax, ndim) for ax in axes)


def _permute_first(arrays, axes):
    """NumPy's transposed copy, a first call's (:func:`_numpy_first`; else None): the
    same values as the plan's (a copy), while the plan, 0.3-0.8 ms of Python for a new
    layout, is built on the compiling thread."""
    a = arrays[0]
    if not _numpy_first(a):
        return None
    return np.array(a.transpose(permutation(axes, a.ndim)), order="C")


def _permute_plan(arrays, out, axes):
    a = arrays[0]
    out_modes = permutation(axes, a.ndim)
    check_cast(a.dtype, out)
    return plan_for("permutation", [(a, range(a.ndim), Unary.IDENTITY, "A")], out_modes,
                 out=out, options=(("order", "C"),)), None


def elementwise_binary(a, modes_a, b, modes_b, modes_out, op="add", *, alpha=1, beta=1,
                       unary_a=Unary.IDENTITY, unary_b=Unary.IDENTITY, out=None,
                       compute_dtype=None):
    """``op(alpha unary_a(a), beta unary_b(b))`` with broadcasting by mode labels.

    >>> elementwise_binary(np.ones((2, 3)), "ij", np.arange(3.0), "j", "ij").tolist()
    [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    """
    foreign = type(a) is not np.ndarray or type(b) is not np.ndarray or out is not None
    if foreign and (kind := foreign_kind((a, b, out))):  # Dask arrays, say
        return call_front_end(kind, "elementwise_binary", a, modes_a, b, modes_b, modes_out,
                              op, alpha=changed(alpha, 1), beta=changed(beta, 1),
                              unary_a=_given(unary_a), unary_b=_given(unary_b), out=out,
                              compute_dtype=compute_dtype)
    return _elementwise("elementwise_binary", (as_array(a, "a"), as_array(b, "b")),
                        (modes_a, modes_b), (unary_a, unary_b), modes_out, (("op", op),),
                        compute_dtype, out, alpha=alpha, beta=beta)


def elementwise_trinary(a, modes_a, b, modes_b, c, modes_c, modes_out, op_ab="add",
                        op_abc="add", *, alpha=1, beta=1, gamma=1, unary_a=Unary.IDENTITY,
                        unary_b=Unary.IDENTITY, unary_c=Unary.IDENTITY, out=None,
                        compute_dtype=None):
    """``op_abc(op_ab(alpha a, beta b), gamma c)`` in one pass (unary transforms optional).

    >>> x = np.ones((2, 2))
    >>> elementwise_trinary(x, "ij", x, "ij", x, "ij", "ij", alpha=2, gamma=3).tolist()
    [[6.0, 6.0], [6.0, 6.0]]
    """
    foreign = (type(a) is not np.ndarray or type(b) is not np.ndarray
               or type(c) is not np.ndarray or out is not None)
    if foreign and (kind := foreign_kind((a, b, c, out))):  # Dask arrays, say
        return call_front_end(kind, "elementwise_trinary", a, modes_a, b, modes_b, c, modes_c,
                              modes_out, op_ab, op_abc, alpha=changed(alpha, 1),
                              beta=changed(beta, 1), gamma=changed(gamma, 1),
                              unary_a=_given(unary_a), unary_b=_given(unary_b),
                              unary_c=_given(unary_c), out=out, compute_dtype=compute_dtype)
    arrays = (as_array(a, "a"), as_array(b, "b"), as_array(c, "c"))
    return _elementwise("elementwise_trinary", arrays,
                        (modes_a, modes_b, modes_c), (unary_a, unary_b, unary_c), modes_out,
                        (("op_ab", op_ab), ("op_abc", op_abc)), compute_dtype, out,
                        alpha=alpha, beta=beta, gamma=gamma)


def _elementwise(kind, arrays, modes, unaries, modes_out, ops, compute_dtype, out, **scalars):
    """Run an elementwise front-end call through :func:`call` (cached on :func:`cache_key`);
    scalars all exactly 1 (the defaults) are not passed on, so that a plan takes its
    shortest path (an 8 x 8 add 19.5 -> 13 us, NumPy 1.2)."""
    key = cache_key((kind, modes, unaries, modes_out, ops, compute_dtype), (*modes, modes_out))
    if all(map(is_one, scalars.values())):
        scalars = None
    return call(arrays, out, key, _elementwise_plan, kind, modes, unaries, modes_out, ops,
                 compute_dtype, scalars=scalars)


def _elementwise_plan(arrays, out, kind, modes, unaries, modes_out, ops, compute_dtype):
    operands = [(x, m, u, "ABC"[k])
                for k, (x, m, u) in enumerate(zip(arrays, modes, unaries, strict=True))]
    return plan_for(kind, operands, modes_out, out=out,
                 options=(*ops, ("compute", compute_dtype))), None


def contract(a, modes_a, b, modes_b, modes_out, *, alpha=1, c=None, beta=0, out=None,
             unary_a=Unary.IDENTITY, unary_b=Unary.IDENTITY, compute_dtype=None):
    """``alpha * sum a b`` over the modes absent from ``modes_out``, plus ``beta * c``.

    >>> x = np.arange(4.0).reshape(2, 2)
    >>> contract(x, "ij", x, "jk", "ik").tolist()
    [[2.0, 3.0], [6.0, 11.0]]
    """
    foreign = (type(a) is not np.ndarray or type(b) is not np.ndarray or c is not None
               or out is not None)
    if foreign and (kind := foreign_kind((a, b, c, out))):  # Dask arrays, say
        return call_front_end(kind, "contract", a, modes_a, b, modes_b, modes_out,
                              alpha=changed(alpha, 1), c=c, beta=changed(beta, 0), out=out,
                              compute_dtype=compute_dtype, unary_a=_given(unary_a),
                              unary_b=_given(unary_b))
    arrays = (as_array(a, "a"), as_array(b, "b")) + (() if c is None else (as_array(c, "c"),))
    key = cache_key(("contraction", modes_a, modes_b, modes_out, unary_a, unary_b, compute_dtype,
                c is None), (modes_a, modes_b, modes_out))
    scalars = None if is_one(alpha) and type(beta) is int and beta == 0 else {
        "alpha": alpha, "beta": beta}
    return call(arrays, out, key, _contraction_plan, modes_a, modes_b, modes_out, unary_a,
                 unary_b, compute_dtype, scalars=scalars)


def _given(unary):
    """A unary as a front end of another kind of array is given it: None where it is the
    identity (the default: not given)."""
    return None if unary in (None, Unary.IDENTITY, "identity") else unary


def _contraction_plan(arrays, out, modes_a, modes_b, modes_out, unary_a, unary_b,
                      compute_dtype):
    addend = None if len(arrays) == 2 else (arrays[2], modes_out, Unary.IDENTITY)
    return plan_for("contraction", [(arrays[0], modes_a, unary_a, "A"),
                                 (arrays[1], modes_b, unary_b, "B")],
                 modes_out, addend=addend, out=out,
                 options=(("compute", compute_dtype),)), None


def inner_product(a, b):
    """``sum(conj(a) * b)`` as a rank-0 array (conjugate-linear on the left, like vdot)
    of two arrays of one shape (vdot flattens any two of one size) and a kernel dtype.

    >>> inner_product(np.array([1j, 2]), np.array([1j, 1])).item()
    (3+0j)
    """
    foreign = type(a) is not np.ndarray or type(b) is not np.ndarray
    if foreign and (kind := foreign_kind((a, b))):  # Dask arrays, say
        return call_front_end(kind, "inner_product", a, b)
    a, b = as_array(a, "a"), as_array(b, "b")
    if a.shape != b.shape:
        raise DescriptorError(f"inner_product of shapes {a.shape} and {b.shape}")
    if (a.dtype == b.dtype and a.dtype in _BLAS_TYPES and a.strides == b.strides
            and (a.flags.c_contiguous or a.flags.f_contiguous)):
        # one BLAS dot on both in memory order (the plan conjugated a copy of complex a:
        # 4-7x np.vdot's time; 11 us for 32 x 32)
        return np.asarray(np.vdot(a.ravel(order="K"), b.ravel(order="K")))
    modes = tuple(range(a.ndim))
    return contract(a, modes, b, modes, (), unary_a=Unary.CONJUGATE)


def inner_product_host(a, b):
    """:func:`inner_product` as a Python scalar."""
    return _host_scalar(inner_product(a, b))


def norm(a):
    """Frobenius norm: the float64 sum of squares where none overflowed or underflowed to
    matter, else scaled by a power of two so that huge or tiny entries do neither.

    The result is real (float for complex input) and a rank-0 array (NumPy's
    ``linalg.norm`` of the flattened array gives a NumPy scalar).  Any array-like:
    integers and bool count as float64, as in NumPy; other dtypes the kernels do not
    store (object, longdouble) take ``numpy.linalg.norm``.  The norm of nothing is 0.

    >>> float(norm(np.full(4, 1e300)))
    2e+300
    >>> norm([3, 4])
    array(5.)
    """
    if type(a) is not np.ndarray and (kind := foreign_kind((a,))):  # Dask arrays, say
        return call_front_end(kind, "norm", a)
    a = as_array(a, "a")
    check_inside(a, "a")  # (its flat views and casts are NumPy's, which do not check)
    if a.dtype not in KERNEL_TYPES:
        if a.dtype.kind not in "biu":
            return np.asarray(np.linalg.norm(a.ravel()))
        a = a.astype(np.float64)
    dtype = _norm_type(a.dtype)
    if a.size == 0:  # (the largest of no entries would be -inf)
        return np.asarray(0.0, dtype)
    # (dtypes compared with dtypes: compared with types, a microsecond each)
    total = None if a.dtype in _WIDE else cpu.sum_of_squares(_real_memory(a))  # no float64
    if total is None:  # (BLAS's dot sets no NumPy error state: no np.errstate, 1 us)
        total = _squares64(a if a.dtype in _WIDE else _scaled64(a, 0))  # exact, or scaled
    if _NO_LOST_SQUARES <= total < math.inf:  # nothing overflowed, nothing that counts lost
        root = math.sqrt(total)
        if dtype is not _FLOAT64 and root > _MAX_NORM[dtype]:
            with np.errstate(over="ignore"):  # rounded to the dtype: its max, or inf past it
                return np.asarray(root, dtype)
        return np.asarray(root, dtype)
    parts = (a.real, a.imag) if np.iscomplexobj(a) else (a,)
    largest = [_max_abs(part) for part in parts]
    if any(math.isnan(x) for x in largest):  # NaN, as NumPy's (Python's max keeps inf
        return np.asarray(math.nan, dtype)   # before a NaN)
    biggest = max(largest)
    if biggest == 0 or not math.isfinite(biggest):
        return np.asarray(biggest, dtype)
    # a power of two brings the largest entry near 1 (clamped so 2**shift is finite);
    # the squares then neither overflow nor underflow in float64
    shift = max(min(-math.frexp(biggest)[1], 1020), -1020)
    total = _squares64(_scaled64(a, shift))
    with np.errstate(over="ignore"):  # a norm past the dtype's range is inf, as NumPy's
        return np.asarray(_ldexp(math.sqrt(total), -shift), dtype)


def _ldexp(x, exponent):
    """``x * 2**exponent``, inf where that is past float64's range (math.ldexp raises)."""
    try:
        return math.ldexp(x, exponent)
    except OverflowError:
        return math.inf


# A float64 sum of squares at least this large loses nothing that counts to squares that
# underflowed (each such square is off by less than float64's smallest normal, tiny, and
# this is tiny / eps**2); below it, or where a square overflowed, the norm scales first.
# One pass, where it was three (the largest entry, a scaled copy, its squares): the norm
# of a 4096^2 float64 array on Zen 1 185 -> 9.6 ms (NumPy's 9.6), of 8x8 176 -> 47 us.
_NO_LOST_SQUARES = 2.0 ** -918


_WIDE = (np.dtype(np.float64), np.dtype(np.complex128))
_FLOAT64 = np.dtype(np.float64)
_MAX_NORM = {np.dtype(t): float(ml_dtypes.finfo(t).max)
             for t in (np.float16, bfloat16, np.float32)}
_BLAS_TYPES = frozenset(map(np.dtype, ("float32", "float64", "complex64", "complex128")))


@functools.lru_cache(maxsize=64)
def _norm_type(dtype):
    """The (real) type of the norm of ``dtype`` data, checked once per dtype: NumPy's own
    object for it, which ``norm`` compares by identity (an array unpickled in another
    process, as Dask's workers get them, has a dtype equal to NumPy's but another object,
    which this cache would otherwise keep for every later call)."""
    return np.dtype(real_type(storage_type(dtype, "a")).type)


def _forwards(a, axes):
    """The index that reads those of ``a``'s ``axes`` whose strides are negative
    forwards (None where none is): a sum or norm over them reads memory in order.

    >>> _forwards(np.zeros((2, 3))[::-1, ::-1], (1,))
    (slice(None, None, None), slice(None, None, -1))
    """
    flips = tuple(slice(None, None, -1) if k in axes and step < 0 else slice(None)
                  for k, step in enumerate(a.strides))
    return flips if any(s.step for s in flips) else None


def _real_memory(a):
    """``a``'s entries in memory order as a real 1-D array (complex ones as pairs of real
    and imaginary parts): a view where ``a`` fills its memory, one copy otherwise (a
    complex64 or strided float32 norm went through a float64 copy: 60x NumPy's time)."""
    flip = _forwards(a, range(a.ndim))  # reversed axes: the same memory
    flat = (a if flip is None else a[flip]).ravel(order="K")
    return flat.view(real_type(a.dtype)) if a.dtype.kind == "c" else flat


def _squares64(x):
    """The sum of the squared moduli of float64 or complex128 ``x``: one BLAS dot, no
    plan (an 8 x 8 norm 46 -> 8 us), on ``x`` in memory order (a view where it fills its
    memory, one copy otherwise: vdot flattened each operand, two copies of a 256 MB view).
    """
    x = x.ravel(order="K")
    return float(np.vdot(x, x).real)


def _max_abs(a):
    """max |a| as a Python float (NaN if any entry is NaN)."""
    return float(run("reduction", [(a, range(a.ndim), Unary.ABS, "A")], (),
                      options=(("op", "max"),))[()])


def _scaled64(a, shift):
    """``a * 2**shift`` in float64 / complex128 (exact: a power of two)."""
    wide = np.complex128 if np.iscomplexobj(a) else np.float64
    modes = range(a.ndim)
    return run("permutation", [(a, modes, Unary.IDENTITY, "A")], modes,
                options=(("out_dtype", np.dtype(wide)),), alpha=math.ldexp(1.0, shift))


def norm_host(a):
    """:func:`norm` as a Python float."""
    return float(_host_scalar(norm(a)))


def to_host(x):
    """``x`` as a host NumPy array: an array of a kind with a front end of its own is
    brought there by its ``to_host`` (a Dask array computed), anything else read by
    ``numpy.asarray``.

    >>> to_host([1.0, 2.0])
    array([1., 2.])
    """
    if type(x) is not np.ndarray and (kind := foreign_kind((x,))):  # Dask arrays, say
        return call_front_end(kind, "to_host", x)
    return np.asarray(x)
