"""Plans: analyse an Operation once, pick a kernel once, execute many times.

A plan holds no buffers; ``execute`` checks that the arrays match the operation's
descriptors (count, extents, strides, dtype, buffer bounds) and runs the kernel.

>>> import numpy as np, tenalg as ta
>>> a = np.arange(6.0).reshape(2, 3)
>>> plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out=a.dtype, out_modes="j"))
>>> plan.execute(a).tolist()
[3.0, 5.0, 7.0]
"""

import math
from itertools import repeat

import numpy as np

from . import layout
from .descriptors import Unary
from .dtypes import is_complex
from .errors import (
    AliasError,
    DescriptorError,
    DTypeError,
    InputCountError,
    InputMismatchError,
    OperationError,
    OutputMismatchError,
    ScalarCountError,
)
from .kernels import direct, reference
from .operations import Operation, input_name
from .views import check_in_buffer, made_by_numpy

try:  # the Numba kernels; the plan falls back to the reference kernels without them
    from .kernels import cpu
except ImportError:  # pragma: no cover - exercised only where Numba is missing
    cpu = None

# Scalars each kind takes, with their defaults.
SCALARS = {
    "contraction": {"alpha": 1, "beta": 0},
    "sum_product": {"alpha": 1, "beta": 0},
    "reduction": {"alpha": 1, "beta": 0},
    "permutation": {"alpha": 1},
    "elementwise_binary": {"alpha": 1, "beta": 1},
    "elementwise_trinary": {"alpha": 1, "beta": 1, "gamma": 1},
}


def _byte_strides(descriptor):
    item = descriptor.dtype.itemsize
    return tuple(s * item for s in descriptor.strides)


_LINE, _LINED_BYTES = 64, 1 << 20


def line_empty(shape, dtype):
    """``np.empty(shape, dtype)``, but from 1 MB on starting on a cache line (64 bytes):
    NumPy's large arrays start 16 bytes past one, where no row of 64 float64 holds a whole
    line, and the permutation kernel streams only whole lines past the caches (a
    (3, 1, 0, 2) permutation of (64,)^4 float64 into a new array 16.1 -> 14.6 ms on two
    threads of Zen 4).  The array is a view of a byte buffer 64 bytes longer.

    >>> a = line_empty((512, 512), np.float64)
    >>> a.ctypes.data % 64, a.shape, a.dtype.name, a.flags.c_contiguous
    (0, (512, 512), 'float64', True)
    """
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    if size < _LINED_BYTES:
        return np.empty(shape, dtype)
    buffer = np.empty(size + _LINE, np.uint8)
    start = -buffer.ctypes.data % _LINE
    return buffer[start:start + size].view(dtype).reshape(shape)


def allocator(descriptor):
    """A zero-argument function returning new arrays with ``descriptor``'s exact layout."""
    extents, strides, dtype = descriptor.extents, descriptor.strides, descriptor.dtype
    if descriptor.elements == 0:
        return lambda: np.empty(extents, dtype)
    order = sorted(range(len(extents)), key=lambda ax: -abs(strides[ax]))
    dense_shape = tuple(extents[ax] for ax in order)
    axes = tuple(int(ax) for ax in np.argsort(order))
    probe = np.empty(dense_shape, dtype).transpose(axes)
    if _strides_match(probe.strides, _byte_strides(descriptor), extents):
        if axes == tuple(range(len(axes))):
            return lambda: line_empty(extents, dtype)
        return lambda: line_empty(dense_shape, dtype).transpose(axes)
    lo, _ = descriptor.bounds()
    span, byte_strides = descriptor.span, _byte_strides(descriptor)

    def strided():
        buffer = np.empty(span, dtype)
        return np.lib.stride_tricks.as_strided(buffer[-lo:], extents, byte_strides,
                                               writeable=True)

    return strided


def _strides_match(actual, expected, extents):
    """Equal strides on every axis of extent > 1 (others never move; empty: none do)."""
    return actual == expected or 0 in extents or all(
        a == b for a, b, e in zip(actual, expected, extents, strict=True) if e > 1
    )


class Plan:
    """Analysis and kernel choice for one :class:`Operation`; immutable and reusable.

    ``kernels`` is "auto" (the Numba kernels where they pay off, else the reference),
    "cpu" or "reference".
    """

    def __init__(self, operation, kernels="auto"):
        if not isinstance(operation, Operation):
            raise OperationError(f"Plan needs an Operation, got {type(operation).__name__}")
        if kernels not in ("auto", "cpu", "reference"):
            raise OperationError(f"kernels must be 'auto', 'cpu' or 'reference', not {kernels!r}")
        if kernels == "cpu" and cpu is None:
            raise OperationError("the Numba kernels are not available (is numba installed?)")
        self.operation = operation
        op = operation
        self._operands = list(op.inputs) + ([op.addend] if op.addend is not None else [])
        self._expected = [
            (x.descriptor.extents, _byte_strides(x.descriptor), x.descriptor.dtype)
            for x in self._operands
        ]
        self._names = [_name(op, i) for i in range(len(self._operands))]
        self._out_expected = (op.output.extents, _byte_strides(op.output), op.output.dtype)
        self._scalars = SCALARS[op.kind]
        self._allocate = allocator(op.output)
        self._scalar_cache = {}
        self._calls = {}  # Numba kernel calls by scalar pattern and threads (see _run)
        self._default_scalars = self._validate_scalars(None, None, None), True
        self._default_pattern = _pattern(self._default_scalars[0].values())
        self._kernel = self._direct = None
        self.loops = None
        if op.kind in ("contraction", "sum_product"):
            from .contraction import ContractionKernel

            self._kernel = ContractionKernel(op)
            self.backend = "contraction"
            return
        operands = [(op.output.strides, op.out_modes)] + [
            (x.descriptor.strides, x.modes) for x in self._operands
        ]
        extents = [op.output.extents] + [x.descriptor.extents for x in self._operands]
        self.loops = layout.analyse(op.out_modes, op.extents, operands, extents)
        self._free = tuple(loop for loop in self.loops if not loop.reduced)
        self._out_recipe = layout.view_recipe(op.out_modes, op.output, self._free)
        self._recipes = [
            layout.view_recipe(x.modes, x.descriptor,
                               self.loops if k < len(op.inputs) else self._free)
            for k, x in enumerate(self._operands)
        ]
        self._skip = op.output.elements == 0
        dtypes = tuple(x.dtype for x in self._operands) + (op.output.dtype,)
        # the iteration space, not the operands' extents: a trace of a 4096^2 matrix reads
        # 4096 elements
        work = max(math.prod(loop.extent for loop in self.loops), op.output.elements)
        # below the Numba kernels' sizes, Python overhead is the cost: one NumPy call
        runner = direct.runner(op, self._allocate) if kernels == "auto" else None
        # short fastest loops let a small reduction take the Numba kernels (NumPy's
        # add.reduce is weak there); not a diagonal sum that np.einsum runs, reading it well
        hint = None if runner is not None and direct.has_diagonal(op) else self.loops
        use_cpu = kernels == "cpu" or (
            kernels == "auto"
            and cpu is not None
            and cpu.supports(op.kind, dtypes, len(self.loops), work, hint)
        )
        self._module = cpu if use_cpu else reference
        self.backend = "cpu" if use_cpu else "reference"
        self._direct = None if use_cpu else runner
        if self._direct is not None:
            self.backend = "direct"
            # the common call checked in one pass, anything else by the method
            self.execute = _checked(runner, self._expected, Plan.execute.__get__(self))
            self.execute_into = _checked_into(runner, self._expected, self._out_expected,
                                              Plan.execute_into.__get__(self))

    # -- execution ----------------------------------------------------------------------
    def execute(self, *arrays, alpha=None, beta=None, gamma=None):
        """Run on ``arrays`` (inputs, then the addend C if any) into a new output.

        A plan with a direct runner shadows this method with a function of its own
        (:func:`_checked`) that runs the common call after one exact-layout check and
        hands anything else to this method."""
        direct = self._direct
        scalars, default = self._check_scalars(alpha, beta, gamma)
        self._check_inputs(arrays)
        if default and direct is not None:
            return direct(arrays)
        if direct is not None and direct.scaled:
            return direct(arrays, None, tuple(scalars.values()))
        out = self._allocate()
        self._run(out, arrays, scalars)
        return out

    def execute_into(self, out, *arrays, alpha=None, beta=None, gamma=None):
        """Run into ``out``, which must match the output descriptor; returns ``out``.

        A plan with a direct runner shadows this method as it does :meth:`execute`
        (:func:`_checked_into`)."""
        scalars, default = self._check_scalars(alpha, beta, gamma)
        self._check_inputs(arrays)
        self._check_output(out, arrays)
        if default and self._direct is not None:
            return self._direct(arrays, out)
        if self._direct is not None and self._direct.scaled:
            return self._direct(arrays, out, tuple(scalars.values()))
        self._run(out, arrays, scalars)
        return out

    def _execute_unchecked(self, *arrays):
        """:meth:`execute` with the default scalars and without its checks, for tenalg's
        own layers, which made ``arrays`` in the plan's exact layouts: the symmetric
        layer's gathered blocks.  Checking them cost a product of (64, 2) and (2, 64)
        blocks half of its 4.2 us, and a U(1) MPS contraction with 41 sectors runs 35
        such plans."""
        out = self._allocate()
        if self._direct is not None:
            return self._direct(arrays, out)
        self._run(out, arrays, self._default_scalars[0])
        return out

    def _run(self, out, arrays, scalars):
        op = self.operation
        if self._kernel is not None:
            c = arrays[len(op.inputs)] if op.addend is not None else None
            self._kernel.run(out, arrays[: len(op.inputs)], c, scalars["alpha"], scalars["beta"])
            return
        if self._skip:
            return
        call = self._cpu_call(out, arrays, scalars) if self._module is cpu else None
        if call is not None:
            call.run((out, *arrays), tuple(scalars.values()))
            return
        name, args, kwargs = self._request(out, arrays, scalars)
        getattr(self._module, name)(*args, **kwargs)

    def _cpu_call(self, out, arrays, scalars):
        """The Numba kernel call for these scalars and the threads now: made on the first
        run with them, on views, then kept rebased onto the arrays themselves, so that
        later runs skip the views and all preparation (a 16 x 16 transpose plan 9.1 -> 4.9
        us, a 16 x 16 add 17.8 -> 7.1 us).  None where the work takes more than one call
        (a reduction in two passes)."""
        # the call depends on which scalars are 1 or 0 (they select codes) and the threads
        pattern = (self._default_pattern if scalars is self._default_scalars[0]
                   else _pattern(scalars.values()))
        key = (pattern, cpu.thread_count())
        try:
            return self._calls[key]
        except KeyError:
            call = self._new_call(out, arrays, scalars)
            call = self._calls[key] = None if call is None else call.rebased((out, *arrays))
            return call

    def _new_call(self, out, arrays, scalars):
        """The Numba kernel call of one execution on these arrays (views made, nothing
        run), or None where it takes more than one."""
        name, args, kwargs = self._request(out, arrays, scalars)
        return getattr(cpu, name + "_call")(*args, **kwargs)

    def _request(self, out, arrays, scalars):
        """(kernel function, positional, keyword arguments) of one execution: the arrays
        as views in the analysed layout, the operation's options, the scalars."""
        op = self.operation
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

    # -- checks -------------------------------------------------------------------------
    def _check_scalars(self, alpha, beta, gamma):
        """(validated scalars by name, whether they are all the kind's defaults)."""
        if alpha is None and beta is None and gamma is None:
            return self._default_scalars
        key = (alpha, beta, gamma)
        try:
            return self._scalar_cache[key]
        except (KeyError, TypeError):  # TypeError: an unhashable scalar, checked below
            pass
        values = self._validate_scalars(alpha, beta, gamma)
        result = values, values == self._scalars
        if len(self._scalar_cache) < 64:
            self._scalar_cache[key] = result
        return result

    def _validate_scalars(self, alpha, beta, gamma):
        given = {"alpha": alpha, "beta": beta, "gamma": gamma}
        values = {}
        for name, value in given.items():
            if name not in self._scalars:
                if value is not None:
                    raise ScalarCountError(
                        f"a {self.operation.kind} takes no {name} "
                        f"(it takes {', '.join(self._scalars)})"
                    )
                continue
            value = self._scalars[name] if value is None else value
            values[name] = _scalar(value, name, self.operation.compute)
        if (
            "beta" in values
            and self.operation.kind in ("contraction", "sum_product", "reduction")
            and self.operation.addend is None
            and values["beta"] != 0
        ):
            raise ScalarCountError(f"beta = {values['beta']} but the operation has no addend C")
        return values

    def _exact(self, arrays):
        """Whether ``arrays`` are NumPy-made arrays of exactly the plan's layouts (the
        common case, which needs no further check)."""
        expected = self._expected
        if len(arrays) == 1 == len(expected):  # most plans: no loop (a tenth of a us)
            return _is_exactly(arrays[0], expected[0])
        return len(arrays) == len(expected) and all(map(_is_exactly, arrays, expected))

    def _check_inputs(self, arrays):
        if not self._exact(arrays):
            self._check_inputs_in_detail(arrays)

    def _check_inputs_in_detail(self, arrays):
        if len(arrays) != len(self._expected):
            raise InputCountError(
                f"{self.operation.kind} plan takes {len(self._expected)} arrays "
                f"({', '.join(self._names)}), got {len(arrays)}"
            )
        for name, x, (extents, strides, dtype) in zip(
            self._names, arrays, self._expected, strict=True
        ):
            if not isinstance(x, np.ndarray):
                raise InputMismatchError(f"input {name}: expected a numpy.ndarray, "
                                         f"got {type(x).__name__}")
            if x.shape != extents:
                raise InputMismatchError(f"input {name}: extents {x.shape}, the plan has "
                                         f"{extents}")
            if x.dtype != dtype:
                raise InputMismatchError(f"input {name}: dtype {x.dtype}, the plan has {dtype}")
            if not _strides_match(x.strides, strides, extents):
                raise InputMismatchError(f"input {name}: byte strides {x.strides}, the plan has "
                                         f"{strides}")
            if not made_by_numpy(x):
                check_in_buffer(x, 0, x.shape, [s // x.itemsize for s in x.strides],
                                f"input {name}")

    def _check_output(self, out, arrays):
        extents, strides, dtype = self._out_expected
        if not (type(out) is np.ndarray and out.shape == extents and out.strides == strides
                and out.dtype == dtype):
            self._check_output_in_detail(out)
        if not out.flags.writeable:
            raise OutputMismatchError("out is read-only")
        if not (out.base is None or made_by_numpy(out)):
            check_in_buffer(out, 0, out.shape, [s // out.itemsize for s in out.strides], "out")
        addend = len(self.operation.inputs) if self.operation.addend is not None else None
        for k, x in enumerate(arrays):
            if not np.may_share_memory(out, x):
                continue
            if k == addend and _same_layout(x, out):
                continue  # D = alpha * ... + beta * D, in place
            if _shares_memory(out, x):
                raise AliasError(f"out shares memory with input {self._names[k]}")

    def _check_output_in_detail(self, out):
        extents, strides, dtype = self._out_expected
        if not isinstance(out, np.ndarray):
            raise OutputMismatchError(f"out: expected a numpy.ndarray, got {type(out).__name__}")
        if out.shape != extents:
            raise OutputMismatchError(f"out: extents {out.shape}, the plan has {extents}")
        if out.dtype != dtype:
            raise OutputMismatchError(f"out: dtype {out.dtype}, the plan has {dtype}")
        if not _strides_match(out.strides, strides, extents):
            raise OutputMismatchError(f"out: byte strides {out.strides}, the plan has {strides}")

    def explain(self):
        """What the plan does: operands, layout before and after analysis, the kernel."""
        op = self.operation
        lines = [f"{op.kind} plan, compute {op.compute}"]
        for name, x in zip(self._names, self._operands, strict=True):
            lines.append(
                f"  {name}: modes {_modes(x.modes)} extents {x.descriptor.extents} strides "
                f"{x.descriptor.strides} {x.dtype}"
                + ("" if x.unary is Unary.IDENTITY else f" unary {x.unary.value}")
            )
        lines.append(
            f"  D: modes {_modes(op.out_modes)} extents {op.output.extents} strides "
            f"{op.output.strides} {op.output.dtype}"
        )
        if self._kernel is not None:
            lines.extend("  " + line for line in self._kernel.explain())
            return "\n".join(lines)
        before = layout.mode_records(
            op.out_modes, op.extents,
            [(op.output.strides, op.out_modes)]
            + [(x.descriptor.strides, x.modes) for x in self._operands],
            [op.output.extents] + [x.descriptor.extents for x in self._operands],
        )
        lines.append(f"  modes before: {layout.describe(before)}")
        lines.append(f"  loops after:  {layout.describe(self.loops)}")
        name = {"permutation": "permute", "reduction": "reduce"}.get(op.kind, "elementwise")
        if self._direct is not None:
            lines.append(f"  kernel: direct ({self._direct.describe}"
                         + (")" if self._direct.scaled
                            else f"; reference.{name} when scalars are given)"))
        elif self._module is cpu:
            lines.append(f"  kernel: cpu.{name}: {self._call_about()}")
        else:
            lines.append(f"  kernel: {self.backend}.{name}")
        return "\n".join(lines)

    def _call_about(self):
        """What the Numba kernel call does with the default scalars and the threads now,
        made on arrays of the plan's layouts that span one element (only their layouts
        are read)."""
        def probe(descriptor, writeable=False):
            return np.lib.stride_tricks.as_strided(
                np.empty(1, descriptor.dtype), descriptor.extents, _byte_strides(descriptor),
                writeable=writeable)

        arrays = [probe(x.descriptor) for x in self._operands]
        call = self._new_call(probe(self.operation.output, writeable=True), arrays,
                              self._default_scalars[0])
        return "two passes, the outer axes into a plane, then its rows" if call is None else (
            call.about)

    def __repr__(self):
        return f"Plan({self.operation!r}, backend={self.backend})"


def _is_exactly(x, layout):
    """Whether ``x`` is a NumPy-made ndarray of ``layout`` (extents, byte strides, dtype;
    the dtype the same object: builtin dtypes are singletons, and an equal dtype that is
    another object only takes the detailed checks)."""
    return (type(x) is np.ndarray and x.dtype is layout[2] and x.shape == layout[0]
            and x.strides == layout[1] and (x.base is None or made_by_numpy(x)))


_ABSENT = object()  # no array given at all (the plan's checks then say how many it takes)


def _checked(run, expected, general):
    """A plan's ``execute`` for a direct runner ``run``: arrays exactly of the plan's
    layouts (:func:`_is_exactly`) and default scalars go straight to ``run``, anything
    else to ``general`` (the full checks).  One input, the common case, is checked inline
    with its layout in local variables and handed to the runner's one-array shortcut
    (``run.single``) where it has one: an 8x8 transpose plan 0.84 -> 0.63-0.65 us, NumPy's
    ``np.ascontiguousarray(a.T)`` 0.34."""
    if len(expected) != 1:
        def execute_many(*arrays, alpha=None, beta=None, gamma=None):
            if (alpha is None and beta is None and gamma is None
                    and len(arrays) == len(expected) and all(map(_is_exactly, arrays, expected))):
                return run(arrays)
            return general(*arrays, alpha=alpha, beta=beta, gamma=gamma)

        return execute_many
    shape, strides, dtype = expected[0]
    single = run.single or (lambda x: run((x,)))
    ndarray = np.ndarray  # a local: no module attribute lookup per call

    def execute(x=_ABSENT, /, *more, alpha=None, beta=None, gamma=None):
        if (type(x) is ndarray and not more and alpha is None and beta is None
                and gamma is None and x.dtype is dtype and x.shape == shape
                and x.strides == strides and (x.base is None or made_by_numpy(x))):
            return single(x)
        arrays = more if x is _ABSENT else (x, *more)
        return general(*arrays, alpha=alpha, beta=beta, gamma=gamma)

    return execute


def _checked_into(run, expected, out_layout, general):
    """A plan's ``execute_into`` for a direct runner ``run``: ``out`` exactly of the
    plan's layout, writeable and sharing no memory with the inputs (:func:`_apart`), the
    inputs exactly of their layouts (:func:`_is_exactly`) and default scalars go straight
    to ``run``; anything else to ``general``, whose checks say what is wrong.  An 8x8
    transpose into ``out`` on Zen 1: 6.7 -> 3.6 us (``np.copyto(out, a.T)`` 1.5)."""
    shape, strides, dtype = out_layout
    ndarray = np.ndarray
    if len(expected) != 1:
        def execute_many_into(out, *arrays, alpha=None, beta=None, gamma=None):
            if (type(out) is ndarray and alpha is None and beta is None and gamma is None
                    and out.dtype is dtype and out.shape == shape and out.strides == strides
                    and out.flags.writeable and len(arrays) == len(expected)
                    and all(map(_is_exactly, arrays, expected))
                    and all(map(_apart, repeat(out), arrays))):
                return run(arrays, out)
            return general(out, *arrays, alpha=alpha, beta=beta, gamma=gamma)

        return execute_many_into
    layout = expected[0]

    def execute_into(out, x=_ABSENT, /, *more, alpha=None, beta=None, gamma=None):
        if (type(out) is ndarray and not more and alpha is None and beta is None
                and gamma is None and out.dtype is dtype and out.shape == shape
                and out.strides == strides and out.flags.writeable and _is_exactly(x, layout)
                and _apart(out, x)):
            return run((x,), out)
        arrays = more if x is _ABSENT else (x, *more)
        return general(out, *arrays, alpha=alpha, beta=beta, gamma=gamma)

    return execute_into


def _apart(out, x):
    """Whether ``out`` and ``x``, NumPy arrays, share no memory: both own their data, or
    ``out`` is NumPy-made (in its buffer) and NumPy's bounds say so."""
    return (out.base is None and x.base is None and x is not out
            or made_by_numpy(out) and not np.may_share_memory(out, x))


def _name(op, index):
    return "C" if index == len(op.inputs) else input_name(op.kind, index)


def _modes(modes):
    if all(isinstance(m, str) and len(m) == 1 for m in modes):
        return "".join(modes) or "(none)"
    return str(modes)


def _scalar(value, name, compute):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, int | float | complex | np.number) or isinstance(value, bool):
        raise DescriptorError(f"{name} must be a number, got {value!r}")
    if isinstance(value, complex | np.complexfloating) and not is_complex(compute):
        if value.imag != 0:
            raise DTypeError(f"{name} = {value} is complex but the compute type is {compute}")
        value = value.real
    return value


def _pattern(values):
    """Which scalars are 1 and which are 0: what a Numba kernel call depends on."""
    return tuple((v == 1, v == 0) for v in values)


def _same_layout(x, out):
    return (
        x.__array_interface__["data"][0] == out.__array_interface__["data"][0]
        and x.strides == out.strides
        and x.shape == out.shape
    )


def _shares_memory(a, b):
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except np.exceptions.TooHardError:
        return True
