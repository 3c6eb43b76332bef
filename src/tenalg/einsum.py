"""einsum: NumPy's grammar, planned once, executed pairwise through contraction plans.

``einsum(subscripts, *operands)`` accepts NumPy's forms: ``"ik,kj->ij"``, implicit
output (``"ij,jk"``: ellipsis axes first, then the labels used once, sorted), ellipses
broadcast right-aligned, repeated labels read diagonals, empty terms take scalars
(``",ij->ij"``), and the interleaved form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.
Matching labels need equal extents or extent 1.  A single operand that NumPy answers with
a view (a transpose, a diagonal) gives NumPy's view, writeable where the input is; other
single-operand expressions run as one reduction or permutation plan; several operands
contract pairwise along an opt_einsum path.  Dtypes without tenalg kernels (integers,
bool, longdouble, object) run NumPy's own einsum, chosen at planning
(:mod:`tenalg.einsum_numpy` holds NumPy's keywords, casting rules and that fallback).
:func:`einsum_plan` does the analysis once; :func:`einsum` keeps the plans in a
thread-safe LRU cache keyed by expression, layouts and options.

>>> import numpy as np
>>> a = np.arange(6.0).reshape(2, 3)
>>> einsum("ij,kj->ik", a, a).tolist()
[[5.0, 14.0], [14.0, 50.0]]
>>> plan = einsum_plan("ii->", np.ones((3, 3)))
>>> float(plan(np.eye(3)))
3.0
"""

import collections
import functools
import math
import string
import threading

import numpy as np

from . import seam
from .allocation import allocator, stand_in
from .contraction import Chain, RunnerStep, find_path
from .descriptors import Operand, TensorDescriptor
from .dtypes import STORAGE_TYPES, compute_type, result_type, storage_type
from .einsum_numpy import (
    NUMPY_OPTIMIZE,
    NumpyEinsum,
    check_casting,
    check_order,
    check_out_cast,
    exact_integers,
    f_contiguous,
    full_reduction_is_scalar,
    kernel_reason,
    mode_extents,
    native_order,
    numpy_dtype,
    numpy_expression,
    sublist_labels,
    wider_compute,
)
from .errors import (
    AliasError,
    DescriptorError,
    DTypeError,
    ExpressionError,
    InputCountError,
    InputMismatchError,
    OperationError,
    OutputMismatchError,
    type_name,
)
from .inputs import as_array
from .operations import Operation
from .plan import Plan
from .plan_cache import PlanCache
from .views import check_inside, diagonal_calls, diagonal_steps, made_by_numpy, strided_view

LABELS = string.ascii_letters
OPTIMIZERS = ("auto", "greedy", "optimal", "dp", "branch-all", "branch-2", "branch-1",
              "random-greedy", "random-greedy-128", "auto-hq", True, False)


def ellipsis_label(k):
    """The mode label of the k-th ellipsis axis counted from the right (k = 0 is last)."""
    return ("...", k)


class Parsed:
    """A parsed expression: input terms (label tuples), output labels, positions."""

    def __init__(self, expression, terms, starts, output, explicit):
        self.expression, self.terms, self.starts = expression, terms, starts
        self.output, self.explicit = output, explicit


def _scan_term(expression, start, stop):
    """Labels of one term (``"..."`` marks the ellipsis) from ``expression[start:stop]``."""
    labels, k = [], start
    while k < stop:
        ch = expression[k]
        if ch == " ":  # NumPy skips spaces, not other whitespace
            k += 1
        elif ch in LABELS or ch > "\x7f":  # beyond NumPy: any non-ASCII character, Unicode
            # spaces included (opt_einsum.get_symbol(8052) is U+2000)
            labels.append(ch)
            k += 1
        elif ch == ".":
            if expression[k:k + 3] != "..." or k + 3 > stop:
                raise ExpressionError("an ellipsis is three dots", expression, k)
            if "..." in labels:
                raise ExpressionError("a term has at most one ellipsis", expression, k)
            labels.append("...")
            k += 3
        else:
            what = "an arrow is '->'" if ch in "->" else f"invalid character {ch!r}"
            raise ExpressionError(what, expression, k)
    return labels


def parse(expression):
    """Split ``expression`` into terms and the output (None for implicit output).

    >>> p = parse("ij, jk -> ik")
    >>> p.terms, p.output
    ([['i', 'j'], ['j', 'k']], ['i', 'k'])
    """
    if not isinstance(expression, str):
        raise ExpressionError(f"subscripts must be a string, got {type(expression).__name__}")
    arrow = expression.find("->")
    if arrow >= 0 and expression.find("->", arrow + 2) >= 0:
        raise ExpressionError("more than one '->'", expression, expression.find("->", arrow + 2))
    left_end = arrow if arrow >= 0 else len(expression)
    terms, starts, start = [], [], 0
    while True:
        comma = expression.find(",", start, left_end)
        stop = left_end if comma < 0 else comma
        terms.append(_scan_term(expression, start, stop))
        starts.append(start)
        if comma < 0:
            break
        start = comma + 1
    output = None
    if arrow >= 0:
        out_start = arrow + 2
        if "," in expression[out_start:]:
            position = expression.index(",", out_start)
            raise ExpressionError("the output is a single term", expression, position)
        output = _scan_term(expression, out_start, len(expression))
        seen = set()
        for label in output:
            if label in seen:
                raise ExpressionError(f"output label {label!r} appears twice", expression,
                                      _position(expression, out_start, label, 2))
            seen.add(label)
            if label != "..." and not any(label in t for t in terms):
                raise ExpressionError(f"output label {label!r} is in no input", expression,
                                      _position(expression, out_start, label, 1))
    return Parsed(expression, terms, starts, output, arrow >= 0)


def _position(expression, start, label, nth):
    """Position of the ``nth`` occurrence of ``label`` at or after ``start``."""
    k = start - 1
    for _ in range(nth):
        k = expression.index(label, k + 1)
    return k


def interleaved(args):
    """NumPy's interleaved form ``(a, [0, 1], b, [1, 2], [0, 2])`` as (expression, operands).

    Ints 0-51 read as 'A'-'Z', 'a'-'z' (NumPy's letters); beyond NumPy, any other hashable
    is a label too (see :func:`tenalg.einsum_numpy.sublist_labels`); ``Ellipsis`` is ``...``.

    >>> interleaved((1.0, [0, 1], 2.0, [1, 26], [0, 26]))[0]
    'AB,Ba->Aa'
    """
    args = list(args)
    output = args.pop() if len(args) % 2 == 1 else None
    operands, terms = args[0::2], args[1::2]
    texts = sublist_labels(terms if output is None else [*terms, output])
    expression = ",".join(texts[:len(terms)])
    if output is not None:
        expression += "->" + texts[-1]
    return expression, operands


def bind(parsed, shapes):
    """Mode tuples of every operand and of the output, ellipses expanded.

    Checks each term against its operand's rank and repeated labels' extents.
    """
    expression = parsed.expression
    if len(parsed.terms) != len(shapes):
        raise InputCountError(f"{expression!r} has {len(parsed.terms)} terms but "
                              f"{len(shapes)} operands were given")
    modes, widest = [], 0
    for k, (term, shape, start) in enumerate(zip(parsed.terms, shapes, parsed.starts,
                                                 strict=True)):
        named = len(term) - term.count("...")
        if len(shape) < named or ("..." not in term and len(shape) != named):
            raise ExpressionError(f"term {k} names {named} axes but operand {k} has rank "
                                  f"{len(shape)}", expression, start)
        width = len(shape) - named
        widest = max(widest, width)
        expanded = []
        for label in term:
            if label == "...":
                expanded.extend(ellipsis_label(width - 1 - j) for j in range(width))
            else:
                expanded.append(label)
        seen = {}
        for label, extent in zip(expanded, shape, strict=True):
            if seen.get(label, extent) != extent:
                raise ExpressionError(
                    f"label {label!r} repeats in term {k} with extents {seen[label]} and "
                    f"{extent}", expression, _position(expression, start, label, 2))
            seen[label] = extent
        modes.append(tuple(expanded))
    dots = tuple(ellipsis_label(widest - 1 - j) for j in range(widest))
    if parsed.output is None:
        counts = collections.Counter(m for ms in modes for m in ms if isinstance(m, str))
        out = dots + tuple(sorted(m for m, n in counts.items() if n == 1))
    else:
        out = []
        for label in parsed.output:
            out.extend(dots if label == "..." else (label,))
        out = tuple(out)
    return modes, out


def _as_operand(x, i):
    """An ndarray or descriptor as it is; anything else as ``np.asarray`` reads it, as
    NumPy's einsum does (a Python float is a float64 array, a list an array, a matrix
    its ndarray), a masked array hiding entries refused (:mod:`tenalg.inputs`)."""
    if type(x) is np.ndarray or isinstance(x, TensorDescriptor):
        return x
    return as_array(x, f"operand {i}")


def _layout(x):
    """(shape, byte strides, dtype) of an array or descriptor."""
    if isinstance(x, np.ndarray):
        return x.shape, x.strides, x.dtype
    return _byte_layout(x)


def _byte_layout(d):
    return (d.extents, tuple(s * d.dtype.itemsize for s in d.strides), d.dtype)


def _is_view(modes, out):
    """True when one operand's expression is a pure relabelling (transpose / diagonal)."""
    return set(modes) == set(out)


def _numpy_view(x, pairs, axes):
    """The view of ``x`` made by NumPy's own calls: the diagonals of
    :func:`diagonal_steps`, then the transpose ``axes``; writeable when ``x`` is, as
    np.einsum's.  An 8x8 transpose on Zen 1 in 1.7 us; through ``as_strided`` and its
    bounds check 42 us (``np.einsum`` 3.0 us)."""
    view = diagonal_calls(x, pairs).transpose(axes)
    if pairs and x.flags.writeable:  # np.diagonal's views are read-only, einsum's are not
        view.flags.writeable = True
    return view


class EinsumPlan:
    """A planned einsum: parse, path and every pairwise contraction plan, done once.

    ``plan(*arrays, out=None)`` runs it on arrays of the planned layouts;
    ``plan.explain()`` describes the path and each step.

    >>> import numpy as np
    >>> x = np.ones((2, 3))
    >>> plan = EinsumPlan("ij,jk,kl->il", x, x.T, x)
    >>> plan(x, x.T, x).tolist()
    [[6.0, 6.0, 6.0], [6.0, 6.0, 6.0]]
    """

    def __init__(self, subscripts, *operands, dtype=None, compute_dtype=None,
                 optimize="auto", order="K", casting="safe"):
        if not isinstance(subscripts, str):
            subscripts, operands = interleaved((subscripts, *operands))
        self.subscripts = subscripts
        self._options = dict(dtype=dtype, compute_dtype=compute_dtype, optimize=optimize,
                             order=order, casting=casting)  # (see __reduce__)
        order, self.casting = check_order(order), check_casting(casting)
        _check_optimize(optimize)
        operands = [_as_operand(x, i) for i, x in enumerate(operands)]
        self._layouts = layouts = [_layout(x) for x in operands]
        self.modes, self.out_modes = bind(parse(subscripts), [shape for shape, _, _ in layouts])
        dtypes = [dt for _, _, dt in layouts]
        self.view = self.numpy = self._new = None
        if len(operands) == 1 and _is_view(self.modes[0], self.out_modes) and (
                compute_dtype is None):  # NumPy returns these views whatever dtype= says
            self.view = self._view_layout(*layouts[0])
            pairs, labels = diagonal_steps(self.modes[0])
            self._view_steps = pairs, tuple(labels.index(m) for m in self.out_modes)
        self._cast_error = None
        try:
            numpy_result = numpy_dtype(dtypes, dtype, self.casting)
        except DTypeError as exc:
            if self.view is None:
                raise
            # NumPy returns the view unchecked; only a run into out= casts (and raises)
            self._cast_error, numpy_result, dtype = exc, dtypes[0], None
        if order == "A":
            order = "F" if f_contiguous((s, b, d.itemsize) for s, b, d in layouts) else "C"
        self.order, self.optimize = order, optimize
        # a full reduction comes back as np.einsum returns it: a NumPy scalar with its
        # default call (tenalg's "auto"), and after some of its paths a 0-d array
        self.scalar = not self.out_modes and (
            (isinstance(optimize, str) and optimize == "auto")
            or full_reduction_is_scalar(numpy_expression(self.modes, self.out_modes),
                                        tuple(x for x, _, _ in layouts), optimize))
        self._plan_order = "K" if order == "F" else order  # ("F": a column-major descriptor)
        reason = kernel_reason(dtypes, dtype)
        if reason is None:
            try:
                descriptors = [x if isinstance(x, TensorDescriptor) else
                               TensorDescriptor.from_array(x, f"operand {k}")
                               for k, x in enumerate(operands)]
            except DescriptorError as exc:  # e.g. byte strides that are not whole items
                reason = str(exc)
        if reason is not None:
            self._plan_numpy(numpy_result, dtype, optimize, reason)
            return
        self.operands = [Operand(d, ms, what=f"operand {k}")
                         for k, (d, ms) in enumerate(zip(descriptors, self.modes, strict=True))]
        self.dtype = result_type(dtypes) if dtype is None else storage_type(dtype, "dtype")
        if compute_dtype is None:  # a wider dtype= computes in it, as in NumPy
            compute_dtype = wider_compute(dtypes, dtype, compute_type(dtypes))
        self.compute = compute_type(dtypes, compute_dtype)
        self.extents = Operation.sum_product(
            self.operands, out=self.dtype, out_modes=self.out_modes, compute=self.compute
        ).extents
        self.path = (find_path(self.modes, self.out_modes, self.extents, optimize)
                     if len(self.operands) > 1 else [])
        self._lock = threading.Lock()
        self._runs = {}
        # "F": the steps planned for a column-major output (run into one, steps planned
        # for "K" had refused it where they check their output's layout)
        self._default = self._build(self._column_major() if order == "F" else None)
        self._allocate = allocator(self._default[0])
        # one operand: its plan allocates and runs a new output itself, with no out checks
        runner = self._default[1]
        # ... as two operands may, where their plan is np.matmul on them alone (an 8 x 8
        # 'ij,jk->ik' 2.59 -> 1.68 us with the call below, np.einsum's 1.63)
        self._execute_new = (runner.plan.execute if isinstance(runner, _Single)
                             else runner.bare_matmul)
        # what einsum() calls for a new array result with nothing else to do
        if self.view is None and not self.scalar:
            self._new = self._execute_new
        self.one_pass = self._one_pass(dtype, compute_dtype, runner)
        if self.one_pass is not None:  # (a full reduction: the plan's result stays 0-d)
            self._new = self.one_pass.call
            self._execute_new = (self.one_pass.call if self.out_modes
                                 else functools.partial(_zero_d, self.one_pass.call))

    def _column_major(self):
        """The descriptor of a column-major output of this einsum."""
        extents = [self.extents[m] for m in self.out_modes]
        strides, step = [], 1
        for extent in extents:
            strides.append(step)
            step *= max(extent, 1)
        return TensorDescriptor(extents, strides, self.dtype)

    def _one_pass(self, dtype, compute_dtype, runner):
        """NumPy's own einsum, one pass without a path, for the new arrays of a tiny
        einsum (at most ONE_PASS_POSITIONS index positions, types that NumPy computes
        in as tenalg does), einsum()'s and the plan's alike, or None.  Its C loop
        answers in 1.5-3 us where the plan's steps cost 2-6 us of Python: 'ij,ij->i' of
        16 x 16 8.0 -> 2.4 us, 'lnr,n->lr' of (16, 4, 16) 8.4 -> 3.0.  Not where a
        backend other than tenalg's runs the steps, nor for one bare GEMM call (2.2-2.4
        us up to 4096 positions, np.einsum's 1.9-3.2)."""
        positions = math.prod(self.extents.values())
        if (self.view is not None or dtype is not None or compute_dtype is not None
                or positions > ONE_PASS_POSITIONS or (not self.out_modes and not self.scalar)
                or not all(d in ONE_PASS_TYPES for _, _, d in self._layouts)
                or not seam.only_shipped()
                or (not isinstance(runner, _Single) and runner.bare_matmul is not None)):
            return None
        expression = numpy_expression(self.modes, self.out_modes)
        if expression is None:
            return None
        return NumpyEinsum(expression, None, self.casting, self.order, False,
                           f"a tiny einsum ({positions} index positions)")

    def _plan_numpy(self, numpy_result, dtype, optimize, reason):
        """Plan NumPy's own einsum (explicit labels, a path for three or more operands)."""
        self.dtype, self.compute = numpy_result, numpy_result
        self.extents = extents = mode_extents(self.modes, [x for x, _, _ in self._layouts])
        # NumPy's pairwise path hands a bool product to np.dot: 256^2 'ij,jk->ik' 0.96 ms,
        # its one-loop einsum 147 ms; int64 the other way round (53 ms against 26)
        # object data loop once: NumPy's pairwise path turns a 0-d object intermediate
        # into a bare Python object and fails on it (',,' of three 0-d object arrays)
        dot = len(self.modes) == 2 and numpy_result == np.bool_
        once = (len(self.modes) < 3 or numpy_result.kind == "O") and not dot
        if optimize in NUMPY_OPTIMIZE or (once and not isinstance(optimize, list | tuple)):
            self.path, numpy_optimize = [], optimize if optimize in NUMPY_OPTIMIZE else False
        else:
            self.path = find_path(self.modes, self.out_modes, extents, optimize)
            numpy_optimize = ["einsum_path", *self.path]
        fallback = NumpyEinsum(numpy_expression(self.modes, self.out_modes), dtype,
                               self.casting, self.order, numpy_optimize, reason)
        dtypes = [d for _, _, d in self._layouts]
        run_float = functools.partial(_float_einsum, self.subscripts, self.order, optimize)
        run_native = functools.partial(_native_einsum, self.subscripts, self.order, optimize,
                                       dtype, self.casting)
        self.numpy = native_order(exact_integers(fallback, run_float, dtypes, dtype,
                                                 self.out_modes, extents),
                                  run_native, dtypes, dtype)
        if self.numpy is fallback and numpy_optimize is False and self.view is None:
            self._new = fallback.call  # NumPy's one pass, called as np.einsum calls it

    def _view_layout(self, shape, byte_strides, dtype):
        """Extents and element strides of the single operand's view (strides None when a
        byte stride is not a whole number of items: only NumPy's own calls make that view)."""
        extents = dict(zip(self.modes[0], shape, strict=True))
        strides = {}
        for mode, stride in zip(self.modes[0], byte_strides, strict=True):
            strides[mode] = strides.get(mode, 0) + stride
        whole = all(s % dtype.itemsize == 0 for s in byte_strides)
        return ([extents[m] for m in self.out_modes],
                [strides[m] // dtype.itemsize for m in self.out_modes] if whole else None)

    def _build(self, out):
        """(output descriptor, runner) for an output layout (None: allocate)."""
        target = self.dtype if out is None else out
        if len(self.operands) == 1:
            operand = self.operands[0]
            reduces = set(operand.modes) != set(self.out_modes)
            kind = Operation.reduction if reduces else Operation.permutation
            operation = kind(operand, out=target, out_modes=self.out_modes,
                             compute=self.compute, order=self._plan_order)
            return operation.output, _Single(Plan(operation))
        chain = Chain(self.operands, self.out_modes, self.path, out=target, addend=None,
                      compute=self.compute, make=_chain_step, order=self._plan_order)
        return chain.steps[-1][2].output, chain

    # -- execution ----------------------------------------------------------------------
    def __call__(self, *arrays, out=None):
        layouts = self._layouts
        if len(arrays) != len(layouts):
            self._check(arrays)
        for x, layout in zip(arrays, layouts, strict=True):
            if type(x) is not np.ndarray or (x.shape, x.strides, x.dtype) != layout:
                if any(type(y) is not np.ndarray for y in arrays):  # array-likes (torch
                    # tensors) as the plan was made from them: as np.asarray reads them
                    return self(*(y if type(y) is np.ndarray else _as_operand(y, k)
                                  for k, y in enumerate(arrays)), out=out)
                self._check(arrays)
                break
            if x.base is not None:
                check_inside(x, "operand")
        if out is not None:  # the plan's strict rule (the front end's is NumPy's)
            if type(out) is np.ndarray and out.dtype != self.dtype:  # NumPy's own for its
                check_out_cast(self.dtype, out,  # einsum (whose error is not tenalg's)
                               "same_kind" if self.numpy is None else self.casting)
            if self.numpy is not None:
                self._check_out(out, arrays)
        return self._run(arrays, out)

    def _run(self, arrays, out):
        """Execute on arrays already known to match the plan."""
        if self.view is not None and out is None:
            x = arrays[0]
            # NumPy's views cannot leave its memory; others are checked against their buffer
            if x.base is None or self.view[1] is None or made_by_numpy(x):
                return _numpy_view(x, *self._view_steps)
            return strided_view(x, *self.view, writeable=x.flags.writeable)
        if self.numpy is not None:
            return self.numpy(arrays, out)
        if out is None:
            if self._execute_new is not None:
                return self._execute_new(*arrays)
            runner = self._default[1]
            result = self._allocate()
        else:
            runner = self._runner_for(out, arrays)
            result = out
        runner.run(result, arrays, None, 1, 0)
        return result

    def _into(self, arrays, out):
        """Run into ``out`` under NumPy's rules: its casting rule, and an ``out`` that shares
        memory with an operand (or that tenalg cannot store) gets the result through a
        temporary, as does one of another type than ``dtype=`` (the result is rounded to
        it first).  (The plan's own ``out=`` refuses both.)"""
        if self._cast_error is not None:
            raise self._cast_error
        if isinstance(out, np.ndarray):
            check_inside(out, "out")
        if self.numpy is not None:
            return self.numpy(arrays, out)
        # NumPy's optimized path (two operands or more) writes a 0-d result into out
        # without its casting check
        quirk = len(arrays) > 1 and isinstance(out, np.ndarray) and out.ndim == 0
        casting = "unsafe" if quirk and self.optimize not in (False, "auto") else self.casting
        check_out_cast(self.dtype, out, casting)
        rounded = self._options["dtype"] is not None and out.dtype != self.dtype
        if out.dtype in STORAGE_TYPES and not rounded and not any(
                np.may_share_memory(out, x) for x in arrays):
            return self._run(arrays, out)
        expected = tuple(self.extents[m] for m in self.out_modes)
        if out.shape != expected:
            raise OutputMismatchError(f"out: extents {out.shape}, expected {expected}")
        np.copyto(out, self._run(arrays, None), casting="unsafe")
        return out

    def _check(self, arrays):
        if len(arrays) != len(self._layouts):
            raise InputCountError(f"the plan of {self.subscripts!r} takes "
                                  f"{len(self._layouts)} arrays, got {len(arrays)}")
        for k, (x, (shape, strides, dtype)) in enumerate(zip(arrays, self._layouts,
                                                             strict=True)):
            if not isinstance(x, np.ndarray):
                raise InputMismatchError(f"operand {k}: expected a numpy.ndarray, "
                                         f"got {type_name(x)}")
            if x.shape != shape or x.dtype != dtype or (
                    x.strides != strides and any(a != b for a, b, e in zip(
                        x.strides, strides, shape, strict=True) if e > 1)):
                raise InputMismatchError(
                    f"operand {k}: layout {x.shape} {x.strides} {x.dtype} differs from the "
                    f"planned {shape} {strides} {dtype}")

    def _check_out(self, out, arrays, known=False):
        """The checks of an ``out`` before anything is written: an ndarray, writeable,
        inside its buffer, sharing no memory with an operand; of the result's extents
        unless its layout is ``known`` (run before)."""
        if not isinstance(out, np.ndarray):
            raise OutputMismatchError(f"out: expected a numpy.ndarray, got {type_name(out)}")
        if not out.flags.writeable:
            raise OutputMismatchError("out is read-only")
        if not known:
            expected = tuple(self.extents[m] for m in self.out_modes)
            if out.shape != expected:
                raise OutputMismatchError(f"out: extents {out.shape}, expected {expected}")
        check_inside(out, "out")
        for k, x in enumerate(arrays):
            if np.may_share_memory(out, x) and np.shares_memory(out, x, max_work=100_000):
                raise AliasError(f"out shares memory with operand {k}")

    def _runner_for(self, out, arrays):
        # keyed by out's layout: a descriptor made per call cost a small einsum into out
        # half of its 16.5 us (a rounding sweep writes every bond's product into a buffer)
        layout = (out.shape, out.strides, out.dtype) if isinstance(out, np.ndarray) else None
        built = self._runs.get(layout)
        self._check_out(out, arrays, known=built is not None)
        if built is None:
            descriptor = TensorDescriptor.from_array(out, "out")
            with self._lock:
                if len(self._runs) > 16:
                    self._runs.clear()
                built = self._runs[layout] = self._build(descriptor)
        return built[1]

    def explain(self):
        """The expression, the path, each step's kind, GEMM shape, copies, FLOPs, bytes."""
        lines = [f"einsum {self.subscripts!r}: {len(self.modes)} operand(s), "
                 f"compute {self.compute}, output {self.dtype}"]
        if self.view is not None:
            strides = "NumPy's" if self.view[1] is None else tuple(self.view[1])
            lines.append(f"  a view: extents {tuple(self.view[0])} strides {strides}")
        if self.numpy is not None:
            lines.extend("  " + line for line in self.numpy.explain())
        if self.view is not None or self.numpy is not None:
            return "\n".join(lines)
        lines.extend("  " + line for line in self._default[1].explain())
        if self.one_pass is not None:
            lines.append("  new arrays: numpy.einsum's one pass, " + self.one_pass.reason)
        return "\n".join(lines)

    def __reduce__(self):
        """A pickled plan is its expression, options and operand layouts, planned again
        where it is unpickled (a Dask worker, a process pool)."""
        return _replanned, (self.subscripts, self._layouts, self._options)

    def __repr__(self):
        return f"EinsumPlan({self.subscripts!r}, path={getattr(self, 'path', None)})"


def _replanned(subscripts, layouts, options):
    """An einsum plan for operands of ``layouts`` (shape, byte strides, dtype), planned on
    arrays of those layouts over one element each (planning reads layouts only)."""
    return EinsumPlan(subscripts, *(stand_in(*layout) for layout in layouts), **options)


class _Single:
    """A one-operand reduction or permutation plan with the chain's interface."""

    def __init__(self, plan):
        self.plan = plan

    def run(self, out, arrays, c, alpha, beta):
        self.plan.execute_into(out, *arrays)

    def explain(self):
        return self.plan.explain().splitlines()


def _zero_d(call, *arrays):
    return np.asarray(call(*arrays))


def _float_einsum(subscripts, order, optimize, arrays):
    """The einsum of an integer plan on its operands converted to float64."""
    return einsum(subscripts, *arrays, order=order, optimize=optimize)


def _native_einsum(subscripts, order, optimize, dtype, casting, arrays):
    """The einsum of a plan of swapped byte order on its operands in the native order."""
    return einsum(subscripts, *arrays, order=order, optimize=optimize, dtype=dtype,
                  casting=casting)


def _check_optimize(optimize):
    known = optimize in OPTIMIZERS if isinstance(optimize, str | bool) else (
        optimize is None or isinstance(optimize, list | tuple) or callable(optimize))
    if not known:
        raise OperationError(f"optimize={optimize!r}: use one of {OPTIMIZERS}, a path, or an "
                             "opt_einsum PathOptimizer")


def einsum_plan(subscripts, *operands_or_descriptors, dtype=None, compute_dtype=None,
                optimize="auto", order="K", casting="safe", kind=None):
    """An :class:`EinsumPlan` for operands (arrays or TensorDescriptors) of these layouts;
    for arrays of another ``kind`` (given, or read off the operands: "dask", say), the
    plan of that kind's front end (:func:`tenalg.seam.register_front_end`).

    >>> import numpy as np
    >>> d = TensorDescriptor.contiguous((4, 4), np.float32)
    >>> plan = einsum_plan("ij,jk->ik", d, d)
    >>> plan(np.eye(4, dtype=np.float32), np.ones((4, 4), np.float32)).sum().item()
    16.0
    """
    kind = kind or seam.foreign_kind(operands_or_descriptors)
    if kind not in (None, "numpy"):  # a front end's plans, or none
        if not isinstance(subscripts, str):
            subscripts, operands_or_descriptors = interleaved((subscripts,
                                                               *operands_or_descriptors))
        return seam.call_front_end(kind, "einsum_plan", subscripts, *operands_or_descriptors,
                                   dtype=dtype, compute_dtype=compute_dtype,
                                   **_given(optimize, order, casting))
    return EinsumPlan(subscripts, *operands_or_descriptors, dtype=dtype,
                      compute_dtype=compute_dtype, optimize=optimize, order=order,
                      casting=casting)


def _foreign_einsum(kind, subscripts, operands, out, dtype, compute_dtype, optimize, order,
                    casting):
    """The einsum of ``kind``'s front end (operands or ``out`` of that kind)."""
    return seam.call_front_end(kind, "einsum", subscripts, *operands, dtype=dtype, out=out,
                               compute_dtype=compute_dtype, **_given(optimize, order, casting))


def _given(optimize, order, casting):
    """einsum's options as a front end of another kind of array is given them: those at
    tenalg's defaults are not given (None)."""
    auto = type(optimize) is str and optimize == "auto"
    return {"optimize": None if auto else optimize, "order": None if order == "K" else order,
            "casting": None if casting == "safe" else casting}


# 2048 layouts, about 10 KB each: a sweep over 300 to 1200 bond shapes thrashed 256
# (every call a new plan, 40x np.einsum's time)
PLANS = PlanCache(maxsize=2048)
ONE_PASS_POSITIONS = 4096  # see EinsumPlan._one_pass
ONE_PASS_TYPES = frozenset(map(np.dtype, ("float32", "float64", "complex64", "complex128")))
seam.on_change(PLANS.clear)  # a plan keeps the backends chosen when it was made


def _chain_step(operation):
    """What runs one pairwise contraction of an einsum: the runner the seam chooses for
    it, as for any plan (the blas backend's GEMM kernel unless a backend comes first)."""
    _, runner, _ = seam.choose(operation, "numpy")
    step = getattr(runner, "step", None)
    return step if step is not None else RunnerStep(runner, operation)


def _hashable(optimize):
    if isinstance(optimize, list | tuple):
        return tuple(tuple(step) for step in optimize)
    return optimize


def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize="auto",
           compute_dtype=None):
    """np.einsum's drop-in (``einsum(subscripts, *operands, ...)``), through a cached plan.

    NumPy's signature, results, result types (a full reduction is a NumPy scalar, or a 0-d
    array where ``optimize`` asks NumPy for a path of several operands), views
    and casting rules, for every dtype NumPy takes: float and complex data run on tenalg's
    kernels, other dtypes on NumPy's own einsum (see ``einsum_plan(...).explain()``).
    Beyond NumPy: any number of labels, ``compute_dtype=``, optimize="auto".

    >>> import numpy as np
    >>> einsum(",ij->ij", 2.0, np.ones((1, 2))).tolist()
    [[2.0, 2.0]]
    >>> einsum(np.ones(3), [0], np.ones(3), [0], [])
    np.float64(3.0)
    >>> einsum("ij,jk", [[1, 2]], [[3], [4]])
    array([[11]])
    """
    if not operands:
        raise ExpressionError("einsum takes the subscripts and at least one operand")
    subscripts, operands = operands[0], operands[1:]
    if not isinstance(subscripts, str):
        subscripts, operands = interleaved((subscripts, *operands))
    arrays = operands
    key = (subscripts, dtype, compute_dtype,
           optimize if type(optimize) is str else _hashable(optimize), order, casting)
    # one loop both checks the operands and keys their layouts: a comprehension or all()
    # over a generator costs 0.2-0.6 us a call
    for x in operands:
        if type(x) is not np.ndarray:
            if (kind := seam.foreign_kind((*operands, out))) is not None:  # Dask arrays, say
                return _foreign_einsum(kind, subscripts, operands, out, dtype, compute_dtype,
                                       optimize, order, casting)
            arrays = [_as_operand(x, i) for i, x in enumerate(operands)]
            key = key[:6] + tuple((x.shape, x.strides, x.dtype) for x in arrays)
            break
        key += ((x.shape, x.strides, x.dtype),)
        if x.base is not None:
            check_inside(x, "operand")
    if out is not None and type(out) is not np.ndarray and (kind := seam.foreign_kind((out,))):
        return _foreign_einsum(kind, subscripts, operands, out, dtype, compute_dtype, optimize,
                               order, casting)
    plan = PLANS.get(key)
    if plan is None:
        plan = PLANS.build(key, lambda: EinsumPlan(subscripts, *arrays, dtype=dtype,
                                                   compute_dtype=compute_dtype,
                                                   optimize=optimize, order=order,
                                                   casting=casting))
    if out is not None:
        return plan._into(arrays, out)
    if plan._new is not None:  # a new array, nothing else to do (an 8 x 8 GEMM 1.79 -> 1.70 us)
        return plan._new(*arrays)
    result = plan._run(arrays, None)
    if plan.scalar and type(result) is np.ndarray:
        return result[()]  # NumPy's einsum returns this full reduction as a NumPy scalar
    return result
