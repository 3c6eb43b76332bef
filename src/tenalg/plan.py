"""Plans: analyse an Operation once, pick a kernel once, execute many times.

A plan holds no buffers; ``execute`` checks that the arrays match the operation's
descriptors (count, extents, strides, dtype, buffer bounds) and runs the kernel.

>>> import numpy as np, tenalg as ta
>>> a = np.arange(6.0).reshape(2, 3)
>>> plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out=a.dtype, out_modes="j"))
>>> plan.execute(a).tolist()
[3.0, 5.0, 7.0]
"""

import warnings
from itertools import repeat

import numpy as np

from . import seam
from .allocation import allocator, byte_strides, strides_match
from .descriptors import Unary, modes_text
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
    type_name,
)
from .operations import SCALARS, Operation, input_name
from .views import check_inside, made_by_numpy

# the deprecated ``kernels=``'s values, each also a ``backend=`` value
_KERNELS = ("auto", "cpu", "reference")


class Plan:
    """Analysis and backend choice for one :class:`Operation`; immutable and reusable.

    ``backend`` is "auto" (the first registered backend that takes the operation: see
    :mod:`tenalg.seam`), a registered backend's name ("blas", "cpu", "direct",
    "reference") or a backend object.  ``kind`` is the kind of arrays the plan will run
    on (:func:`tenalg.seam.array_kind`).  ``kernels`` is the old name of ``backend``.
    """

    def __init__(self, operation, backend="auto", *, kind="numpy", kernels=None):
        if not isinstance(operation, Operation):
            raise OperationError(f"Plan needs an Operation, got {type(operation).__name__}")
        if kernels is not None:
            warnings.warn("Plan(kernels=...) is deprecated; use Plan(backend=...)",
                          DeprecationWarning, stacklevel=2)
            if kernels not in _KERNELS:
                raise OperationError(
                    f"kernels must be 'auto', 'cpu' or 'reference', not {kernels!r}")
            backend = kernels
        self._asked = backend  # what a pickled plan is rebuilt with (see __reduce__)
        self.operation = op = operation
        self._operands = op.operands
        self._expected = [
            (x.descriptor.extents, byte_strides(x.descriptor), x.descriptor.dtype)
            for x in self._operands
        ]
        self._names = [_name(op, i) for i in range(len(self._operands))]
        self._out_expected = (op.output.extents, byte_strides(op.output), op.output.dtype)
        self._scalars = SCALARS[op.kind]
        self._scalar_cache = {}
        self._default_scalars = self._validate_scalars(None, None, None), True
        self.kind = kind
        self.backend, self.runner, self.reason = seam.choose(op, kind, backend)
        self._allocate = allocator(op.output, getattr(self.runner, "lined_output", False))
        self.loops = getattr(self.runner, "loops", None)
        self.single = None  # one input of exactly its layout into a new output, unchecked
        self._run = getattr(self.runner, "run", None)
        call = self._call = getattr(self.runner, "call", None)
        if kind != "numpy":  # arrays that are not NumPy's: the runner takes the call
            if not (hasattr(self.runner, "execute") and hasattr(self.runner, "execute_into")):
                raise OperationError(f"backend {self.backend!r} gave a runner for {kind} "
                                     "arrays without execute and execute_into (tenalg.seam)")
            self.execute = self._foreign_execute
            self.execute_into = self._foreign_execute_into
        elif call is not None:
            # the common call checked in one pass, anything else by the method
            self.single = call.single
            self.execute = _checked(call, self._expected, Plan.execute.__get__(self))
            self.execute_into = _checked_into(call, self._expected, self._out_expected,
                                              Plan.execute_into.__get__(self))

    # -- execution ----------------------------------------------------------------------
    def execute(self, *arrays, alpha=None, beta=None, gamma=None):
        """Run on ``arrays`` (inputs, then the addend C if any) into a new output.

        A plan whose runner offers an unchecked ``call`` shadows this method with a
        function of its own (:func:`_checked`) that runs the common call after one
        exact-layout check and hands anything else to this method."""
        call = self._call
        scalars, default = self._check_scalars(alpha, beta, gamma)
        arrays = self._check_inputs(arrays)
        if call is not None and (default or call.scaled):
            return call(arrays) if default else call(arrays, None, tuple(scalars.values()))
        out = self._allocate()
        self._run(out, arrays, scalars)
        return out

    def execute_into(self, out, *arrays, alpha=None, beta=None, gamma=None):
        """Run into ``out``, which must match the output descriptor; returns ``out``.

        Shadowed as :meth:`execute` is, by :func:`_checked_into`."""
        scalars, default = self._check_scalars(alpha, beta, gamma)
        arrays = self._check_inputs(arrays)
        target = base_view(out, "out", OutputMismatchError)
        self._check_output(target, arrays)
        if default and self._call is not None:
            self._call(arrays, target)
        else:
            self._run(target, arrays, scalars)
        return out

    def _foreign_execute(self, *arrays, alpha=None, beta=None, gamma=None):
        scalars, _ = self._check_scalars(alpha, beta, gamma)
        self._check_foreign(arrays)
        return self.runner.execute(arrays, scalars)

    def _foreign_execute_into(self, out, *arrays, alpha=None, beta=None, gamma=None):
        scalars, _ = self._check_scalars(alpha, beta, gamma)
        self._check_foreign(arrays)
        self._check_foreign_one(out, self._out_expected, "out", OutputMismatchError)
        self.runner.execute_into(out, arrays, scalars)
        return out

    def _check_foreign(self, arrays):
        """What a plan can check of arrays that are not NumPy's: their count, extents and
        dtype (where the array's dtype is NumPy's, as CuPy's and Dask's are); the
        runner checks the rest."""
        if len(arrays) != len(self._expected):
            raise InputCountError(
                f"{self.operation.kind} plan takes {len(self._expected)} arrays "
                f"({', '.join(self._names)}), got {len(arrays)}"
            )
        for name, x, expected in zip(self._names, arrays, self._expected, strict=True):
            self._check_foreign_one(x, expected, f"input {name}", InputMismatchError)

    @staticmethod
    def _check_foreign_one(x, expected, what, error):
        extents, _, dtype = expected
        shape = getattr(x, "shape", None)
        if shape is None:
            raise error(f"{what}: expected an array, got {type_name(x)}")
        if tuple(shape) != extents:
            raise error(f"{what}: extents {tuple(shape)}, the plan has {extents}")
        if isinstance(x.dtype, np.dtype) and x.dtype != dtype:
            raise error(f"{what}: dtype {x.dtype}, the plan has {dtype}")

    def _execute_unchecked(self, *arrays):
        """:meth:`execute` with the default scalars and without its checks, for tenalg's
        own layers, which made ``arrays`` in the plan's exact layouts: the symmetric
        layer's gathered blocks.  Checking them cost a product of (64, 2) and (2, 64)
        blocks half of its 4.2 us, and a U(1) MPS contraction with 41 sectors runs 35
        such plans."""
        out = self._allocate()
        if self._call is not None:
            return self._call(arrays, out)
        self._run(out, arrays, self._default_scalars[0])
        return out

    # -- checks -------------------------------------------------------------------------
    def _check_scalars(self, alpha, beta, gamma):
        """(validated scalars by name, whether they are all the kind's defaults)."""
        if alpha is None and beta is None and gamma is None:
            return self._default_scalars
        key = (alpha, beta, gamma, type(alpha), type(beta), type(gamma))  # True == 1
        try:
            return self._scalar_cache[key]
        except KeyError:
            keep = len(self._scalar_cache) < 64
        except TypeError:  # an unhashable scalar (a 0-d array): checked, not kept
            keep = False
        values = self._validate_scalars(alpha, beta, gamma)
        result = values, values == self._scalars
        if keep:
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
        """``arrays``, checked, as the kernels take them (a subclass as an ndarray)."""
        if self._exact(arrays):
            return arrays
        if len(arrays) == len(self._names):  # (else the count is wrong: said next)
            arrays = tuple(base_view(x, f"input {name}", InputMismatchError)
                           for x, name in zip(arrays, self._names, strict=True))
        self._check_inputs_in_detail(arrays)
        return arrays

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
                                         f"got {type_name(x)}")
            if x.shape != extents:
                raise InputMismatchError(f"input {name}: extents {x.shape}, the plan has "
                                         f"{extents}")
            if x.dtype != dtype:
                raise InputMismatchError(f"input {name}: dtype {x.dtype}, the plan has {dtype}")
            if not strides_match(x.strides, strides, extents):
                raise InputMismatchError(f"input {name}: byte strides {x.strides}, the plan has "
                                         f"{strides}")
            check_inside(x, f"input {name}")

    def _check_output(self, out, arrays):
        extents, strides, dtype = self._out_expected
        if not (type(out) is np.ndarray and out.shape == extents and out.strides == strides
                and out.dtype == dtype):
            self._check_output_in_detail(out)
        if not out.flags.writeable:
            raise OutputMismatchError("out is read-only")
        check_inside(out, "out")
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
            raise OutputMismatchError(f"out: expected a numpy.ndarray, got {type_name(out)}")
        if out.shape != extents:
            raise OutputMismatchError(f"out: extents {out.shape}, the plan has {extents}")
        if out.dtype != dtype:
            raise OutputMismatchError(f"out: dtype {out.dtype}, the plan has {dtype}")
        if not strides_match(out.strides, strides, extents):
            raise OutputMismatchError(f"out: byte strides {out.strides}, the plan has {strides}")

    def explain(self):
        """What the plan does: operands, the backend and why, what its runner does."""
        op = self.operation
        lines = [f"{op.kind} plan, compute {op.compute}"]
        for name, x in zip(self._names, self._operands, strict=True):
            lines.append(
                f"  {name}: modes {modes_text(x.modes)} extents {x.descriptor.extents} strides "
                f"{x.descriptor.strides} {x.dtype}"
                + ("" if x.unary is Unary.IDENTITY else f" unary {x.unary.value}")
            )
        lines.append(
            f"  D: modes {modes_text(op.out_modes)} extents {op.output.extents} strides "
            f"{op.output.strides} {op.output.dtype}"
        )
        lines.append(f"  backend: {self.backend} ({self.reason})")
        lines.extend("  " + line for line in self.runner.explain())
        return "\n".join(lines)

    def __reduce__(self):
        """A pickled plan is its operation and the backend asked for, planned again where
        it is unpickled (a Dask worker, a process pool): the choice among backends is that
        machine's.  A backend object pickles as it pickles."""
        return _replanned, (self.operation, self._asked, self.kind)

    def __repr__(self):
        return f"Plan({self.operation!r}, backend={self.backend})"


def _replanned(operation, backend, kind):
    return Plan(operation, backend, kind=kind)


def _is_exactly(x, layout):
    """Whether ``x`` is a NumPy-made ndarray of ``layout`` (extents, byte strides, dtype;
    the dtype the same object: builtin dtypes are singletons, and an equal dtype that is
    another object only takes the detailed checks)."""
    return (type(x) is np.ndarray and x.dtype is layout[2] and x.shape == layout[0]
            and x.strides == layout[1] and (x.base is None or made_by_numpy(x)))


def base_view(x, what, error):
    """``x`` as the kernels take it: an ndarray subclass (``np.matrix``) as an ndarray
    view of its data, which Numba could not type; a masked array refused, since a plan
    reads every entry, masked or not."""
    if type(x) is np.ndarray or not isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise error(f"{what}: a masked array (a plan reads the masked entries too): pass "
                    "np.ma.getdata(x), or x.filled(value)")
    return x.view(np.ndarray)


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


def _scalar(value, name, compute):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, int | float | complex | np.number) or isinstance(value, bool):
        raise DescriptorError(f"{name} must be a number, got {value!r}")
    if isinstance(value, complex | np.complexfloating) and not is_complex(compute):
        if value.imag != 0:
            raise DTypeError(f"{name} = {value} is complex but the compute type is {compute}")
        value = value.real
    if isinstance(value, int):  # (a kernel's multiply would raise, maybe after a write)
        try:
            float(value)
        except OverflowError:
            raise DescriptorError(f"{name} is an integer of {len(str(abs(value)))} digits,"
                                  " past every float type's range") from None
    return value


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
