"""Front-end calls: array-likes read as NumPy reads them, ``out=`` checked as NumPy
checks it, and each call run through a plan cached per argument and layout.

>>> import numpy as np
>>> plan = plan_for("permutation", [(np.ones((2, 3)), "ij", "identity", "A")], "ji")
>>> plan.execute(np.ones((2, 3))).shape
(3, 2)
"""

import functools

import numpy as np

from .allocation import stand_in
from .contraction import gemm_layout
from .descriptors import Operand, TensorDescriptor
from .dtypes import STORAGE_TYPES, result_type
from .einsum_numpy import check_out_cast
from .errors import AliasError, OutputMismatchError, OutputTypeError, type_name
from .kernels import compiler
from .operations import Operation
from .plan import Plan, base_view
from .plan_cache import cached_plans
from .seam import generation, on_change
from .views import made_by_numpy


def output_array(out):
    """``out`` checked as NumPy's ``out=`` is: an ndarray (or None); a masked array
    refused, as a plan refuses it (:func:`tenalg.plan.base_view`)."""
    if out is None or type(out) is np.ndarray:
        return out
    if isinstance(out, np.ndarray):
        base_view(out, "out", OutputMismatchError)
        return out
    raise OutputTypeError(f"out: expected a numpy.ndarray, got {type_name(out)}")


def check_cast(result, out):
    """Raise OutputTypeError (an OutputMismatchError and NumPy's TypeError) unless
    ``result`` (a dtype) casts to ``out``'s dtype under NumPy's 'same_kind' rule (a
    complex result into a real array, a float one into integers: refused); before any
    write.  (NumPy's own sum and trace cast ``out=`` unsafely; tenalg refuses what
    that would lose, as DESIGN's OutputMismatchError promises.)"""
    if out is None:
        return
    try:
        check_out_cast(result, out, "same_kind")
    except OutputTypeError:
        if not isinstance(out, np.ndarray):
            raise
        raise OutputTypeError(
            f"out: cannot cast the result's {result} to out's {out.dtype} under the rule "
            "'same_kind': tenalg refuses an out= that loses the result's kind (NumPy's sum "
            "and trace would cast it unsafely)") from None


# the types tenalg's kernels compute in (else NumPy's routine runs): a hash, not six
# comparisons
KERNEL_TYPES = frozenset(STORAGE_TYPES)


def kernel_array(x):
    """Whether ``x`` is an ndarray of a type the kernels store (a fast path's test)."""
    return type(x) is np.ndarray and x.dtype in KERNEL_TYPES


def rank0(value, out):
    """A full reduction's result as the dense layer returns it: ``out`` when given, else a
    rank-0 array (where NumPy gives a NumPy scalar; DESIGN: results stay arrays)."""
    return out if out is not None else np.asarray(value)


def _layout(x):
    return (x.shape, x.strides, x.dtype)


def _descriptor(layout, what):
    return TensorDescriptor.from_byte_strides(*layout, what)


# (front end, its arguments, the layouts of a and out) -> (plan, select); and, for calls
# of one array without out or scalars, (front end, its arguments, a's layout) -> the
# plan's unchecked one-array run (Plan.single), where it has one: the key is the layout
# the plan would check (an 8 x 8 ta.sum 1.65 -> 1.35 us, np.sum 1.66).  A plain dict (a
# hit is one lookup, no lock), emptied when full
CALLS = {}
MAX_CALLS = 4096  # two keys a layout, about 7 KB (with its plan): 2048 layouts
on_change(CALLS.clear)  # a plan keeps the backend chosen when it was made


def planned(key, a):
    """The planned call of front end ``key`` (its name and arguments) on ndarray ``a``
    alone, where one is cached (:data:`CALLS`) and ``a``'s memory is NumPy's own (a
    layout forced through an array interface is checked on the general path), else
    None: a front end's fewest steps (an 8 x 8 trace 2.6 -> 1.7 us, np.trace 1.3)."""
    single = CALLS.get((key, a.shape, a.strides, a.dtype))
    if single is not None and (a.base is None or made_by_numpy(a)):
        return single
    return None


def plain_ints(value):
    """Whether ``value`` is None, an int or a tuple of ints or of int tuples: arguments a
    cached call may key on, since equal keys then mean equal arguments (``True == 1`` and
    ``1.0 == 1`` must not reach a call cached for 1)."""
    if value is None or type(value) is int:
        return True
    if type(value) is not tuple:
        return False
    for v in value:  # a plain loop: front-end calls on small arrays are mostly overhead
        if type(v) is not int and (type(v) is not tuple
                                   or not all(type(w) is int for w in v)):
            return False
    return True


def _labels(value):
    """Whether ``value`` is a str or a tuple of ints and strs: mode labels a cached call
    may key on (a list is unhashable; other labels take the uncached path)."""
    return type(value) is str or (type(value) is tuple
                                  and all(type(v) is int or type(v) is str for v in value))


def call(arrays, out, key, build, *args, scalars=None, first=None, numpy_out=False):
    """Run a front-end call on ``arrays``: ``build(arrays, out, *args)`` (the argument
    checks and the plan) runs once per key and layouts and returns ``(plan, select)``,
    the plan and the index that slices ``arrays[0]`` first (None: all of it); ``key``
    None: no caching; ``scalars`` the non-default scalars by name, if any.  A
    module-level ``build`` and no keyword scalars where there are none: a closure per
    call and ``**scalars`` cost an 8 x 8 transpose 1.2 of its 5.6 us.

    ``first(arrays, *args)``, where given, is NumPy's answer to a call without ``out``
    (None where it declines), checks included: a layout's first call returns it and
    leaves the plan to the compiling thread (:func:`tenalg.kernels.compiler.later`).
    Planning costs about 0.5 ms of Python, which is all of a first small call's wait
    once its kernel compiles off the thread.

    ``numpy_out``: an ``out`` that shares memory with an input gets NumPy's answer, as
    ``numpy.sum(a, axis=0, out=a[0])`` does, through a new output of the plan copied
    into it (a plan's ``execute_into`` refuses it with AliasError, after every other
    check of ``out``: nothing has been written then)."""
    if key is None or (out is not None and type(out) is not np.ndarray):
        if _strides_in_bytes(arrays, out):
            return _on_copies(arrays, out, key, build, args, scalars, first, numpy_out)
        plan, select = build(arrays, out, *args)
    else:
        front = key
        if len(arrays) == 1:  # most calls: their key in one expression (0.4 us less)
            x = arrays[0]
            key = (key, x.shape, x.strides, x.dtype)
            if out is None and scalars is None:
                single = CALLS.get(key)
                if single is not None and (x.base is None or made_by_numpy(x)):
                    return single(x)
        else:
            for x in arrays:
                key += (x.shape, x.strides, x.dtype)
        key += (None,) if out is None else (out.shape, out.strides, out.dtype)
        built = CALLS.get(key)
        if built is None:
            if _strides_in_bytes(arrays, out):
                return _on_copies(arrays, out, front, build, args, scalars, first, numpy_out)
            # the calls while the plan is queued take the fewest steps (an 8 x 8 sum: 17 -> 6 us)
            queued = first is not None and out is None and compiler.deferred(key)
            if queued or (first is not None and out is None and compiler.deferring(key)):
                answer = first(arrays, *args)
                if answer is not None:
                    if not queued:
                        compiler.later(key, functools.partial(
                            _build_later, key, build,
                            tuple(stand_in(x.shape, x.strides, x.dtype) for x in arrays),
                            args))
                    return answer
            built = _build(key, build, arrays, args, out)
        plan, select = built
    if select is not None:
        arrays = (arrays[0][select], *arrays[1:])
    if out is None:
        return plan.execute(*arrays) if scalars is None else plan.execute(*arrays, **scalars)
    try:
        return (plan.execute_into(out, *arrays) if scalars is None
                else plan.execute_into(out, *arrays, **scalars))
    except AliasError:
        if not numpy_out or not any(np.may_share_memory(out, x) for x in arrays):
            raise  # out overlaps itself
    np.copyto(out, plan.execute(*arrays, **(scalars or {})))
    return out


def _whole_strides(x):
    return all(s % x.itemsize == 0 for s in x.strides) if x.itemsize else True


def _strides_in_bytes(arrays, out):
    """Whether an array or ``out`` has a stride that is no multiple of its item size (a
    field of a structured array): NumPy takes them, tenalg's descriptors count elements."""
    return not all(map(_whole_strides, arrays)) or (
        type(out) is np.ndarray and not _whole_strides(out))


def _on_copies(arrays, out, key, build, args, scalars, first, numpy_out):
    """:func:`call` with such arrays copied (C-ordered) and the result of such an ``out``
    computed into a C-ordered one of its shape, dtype and writeability (its checks are
    the plan's), then copied into it."""
    arrays = tuple(x if _whole_strides(x) else np.ascontiguousarray(x) for x in arrays)
    target = out
    if type(out) is np.ndarray and not _whole_strides(out):
        target = np.empty(out.shape, out.dtype)
        target.flags.writeable = out.flags.writeable
    result = call(arrays, target, key, build, *args, scalars=scalars, first=first,
                  numpy_out=numpy_out)
    if target is out:
        return result
    np.copyto(out, target)
    return out


def _build_later(key, build, arrays, args):
    """:func:`_build` on the compiling thread, which then queues the kernels the plan's
    runs will take: the second call finds them compiled or compiling, and
    :func:`tenalg.kernels.compiler.wait` waits for them too."""
    plan, _ = _build(key, build, arrays, args)
    queue_kernels = getattr(plan.runner, "queue_kernels", None)
    if queue_kernels is not None:
        queue_kernels()


def _build(key, build, arrays, args, out=None):
    """``build``'s plan of a call, kept under ``key`` unless the backends changed while it
    was made (:func:`tenalg.seam.generation`)."""
    before = generation()
    built = build(arrays, out, *args)
    if len(CALLS) >= MAX_CALLS:
        CALLS.clear()
    CALLS[key] = built
    plan, select = built
    if out is None and select is None and plan.single is not None and len(arrays) == 1:
        CALLS[key[:-1]] = plan.single
    if generation() != before:
        CALLS.pop(key, None)
        CALLS.pop(key[:-1], None)
    return built


def cache_key(key, modes):
    """``key`` where a cached call may key on it: hashable, its ``modes`` labels (equal
    unaries, ops and compute types mean the same); else None."""
    try:
        hash(key)
    except TypeError:
        return None
    return key if all(map(_labels, modes)) else None


def is_one(value):
    """Whether a scalar is exactly 1 (a plan's default for it), as a key may say."""
    return (type(value) is int or type(value) is float) and value == 1


@cached_plans(2048)
def _plan_for_layouts(kind, operands, addend, out, out_modes, options):
    """Build (once per layout) the plan of a front-end call; arguments are hashable keys."""
    inputs = [
        Operand(_descriptor(layout, what), modes, unary, what)
        for layout, modes, unary, what in operands
    ]
    c = None if addend is None else Operand(_descriptor(addend[0], "C"), addend[1],
                                            addend[2], "C")
    options = dict(options)
    out = options.pop("out_dtype", None) if out is None else _descriptor(out, "out")
    if kind == "contraction" and out is None and all(
            m in inputs[0].modes or m in inputs[1].modes for m in out_modes):
        # a layout the GEMM writes in place (other modes: the operation's checks and C)
        dtypes = [x.dtype for x in inputs] + ([] if c is None else [c.dtype])
        out = gemm_layout(inputs[0], inputs[1], out_modes,
                          result_type(dtypes, options.get("compute")))
    if kind in ("contraction", "reduction"):
        operation = getattr(Operation, kind)(*inputs, c, out=out, out_modes=out_modes,
                                             **options)
    else:
        operation = getattr(Operation, kind)(*inputs, out=out, out_modes=out_modes, **options)
    return Plan(operation)


def plan_for(kind, operands, out_modes, *, addend=None, out=None, options=()):
    """The cached plan of a front-end operation: ``operands`` are ``(array, modes, unary,
    name)``, ``addend`` is ``(array, modes, unary)``; an ``out`` array must take the
    result under NumPy's 'same_kind' rule (:func:`check_cast`)."""
    key_operands = tuple((_layout(x), tuple(m), u, w) for x, m, u, w in operands)
    key_addend = None if addend is None else (_layout(addend[0]), tuple(addend[1]), addend[2])
    key_out = None if out is None else _layout(output_array(out))
    plan = _plan_for_layouts(kind, key_operands, key_addend, key_out, tuple(out_modes),
                             tuple(options))
    if out is not None:  # (after the plan's own checks: storage types only there)
        dtypes = [x.dtype for x, *_ in operands] + ([] if addend is None else [addend[0].dtype])
        check_cast(result_type(dtypes, dict(options).get("compute")), out)
    return plan


def run(kind, operands, out_modes, *, addend=None, out=None, options=(), **scalars):
    """Run a front-end operation (arguments as :func:`plan_for`'s)."""
    plan = plan_for(kind, operands, out_modes, addend=addend, out=out, options=options)
    arrays = [x for x, *_ in operands] + ([] if addend is None else [addend[0]])
    if out is None:
        return plan.execute(*arrays, **scalars)
    return plan.execute_into(out, *arrays, **scalars)
