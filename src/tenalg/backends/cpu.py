"""The cpu backend: the Numba kernels (:mod:`tenalg.kernels.cpu`), parallel, for
permutations, reductions and elementwise operations large enough to pay for them.

>>> import numpy as np, tenalg as ta
>>> a = np.arange(6.0).reshape(2, 3)
>>> plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"), backend="cpu")
>>> plan.backend, plan.execute(a).tolist()
('cpu', [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
"""

import numpy as np

from ..allocation import allocator, byte_strides, stand_in
from ..descriptors import Unary
from ..dtypes import is_complex
from ..kernels import compiler, cpu, direct
from ..operations import SCALARS
from .reference import ReferenceRunner
from .strided import STRIDED_KINDS, StridedRunner, analysis, work

_COMPILING = object()  # a call whose kernel is compiling: the twin runs meanwhile
# a permutation whose output and input share an innermost run of at least this many bytes
# moves whole rows; on one thread NumPy's copy does that as well or better (one thread of
# the 2-core VM, tenalg's row kernel against np.ascontiguousarray of the transpose: (32,)^4
# (0, 2, 1, 3) 625 against 586 us, (64,)^4 40.6 against 34.3 ms, (128,)^3 (1, 0, 2) 1.50
# against 1.35 ms; runs of 4 float64 18.5 against 22.4 ms), so a call on one thread (a
# loaded machine, or beside BLAS) takes it
_NUMPY_ROWS = 128


class CpuRunner(StridedRunner):
    """One operation on the Numba kernels.  The kernel call for a pattern of scalars and
    the threads now is made on the first run with them, on views, then kept rebased onto
    the arrays themselves, so that later runs skip the views and all preparation (a
    16 x 16 transpose plan 9.1 -> 4.9 us, a 16 x 16 add 17.8 -> 7.1 us).

    With a ``twin`` (a runner of NumPy code), a call whose kernel is not compiled yet runs
    the twin while :mod:`tenalg.backends.compiler` compiles the kernel off the thread;
    without one (the backend asked for by name) the call waits for the compiler."""

    beside_gemm = staticmethod(cpu.one_thread)

    def __init__(self, operation, reason, twin=None):
        super().__init__(operation)
        self.reason = reason
        # the permutation kernel streams whole lines: its new outputs start on one
        # (allocation.line_empty; a (64,)^4 (3, 1, 0, 2) into a new array 17.6 -> 15.0 ms)
        self.lined_output = operation.kind == "permutation"
        self._twin = twin
        self._calls = {}
        self._compiling = {}  # calls whose kernels are compiling, by key
        self._last = (None, None)  # the last scalars object seen and its pattern
        self._rows = _row_copy(operation, self.loops)
        self._work = work(operation, self.loops)
        self._threads = 1  # of the call under way (see _call)
        self.call = _default_call(self.run, allocator(operation.output, self.lined_output),
                                  dict(SCALARS[operation.kind]), len(operation.operands))

    def run(self, out, arrays, scalars):
        if self._skip:
            return
        call = self._call(out, arrays, scalars)
        if call is _ROWS:
            np.copyto(out, arrays[0].transpose(self._rows))
        elif call is _COMPILING:
            self._twin.run(out, arrays, scalars)
        elif call is not None:
            call.run((out, *arrays), tuple(self.scaled(scalars).values()))
        else:
            name, args, kwargs = self.request(out, arrays, scalars)
            with cpu.on_threads(self._threads):
                getattr(cpu, name)(*args, **kwargs)
        cpu.ended()

    def _call(self, out, arrays, scalars):
        """The kernel call for these scalars and the threads now; None where the work takes
        more than one call (a reduction in two passes)."""
        # the call depends on which scalars are 1 or 0 (they select codes) and the threads;
        # a plan passes the same object for its default scalars, so the last is kept
        seen, pattern = self._last
        if scalars is not seen:  # (as the kernel gets them: alpha times the factor)
            pattern = tuple((v == 1, v == 0) for v in self.scaled(scalars).values())
            self._last = scalars, pattern
        self._threads = threads = cpu.thread_count(self._work)
        key = (pattern, threads)
        try:
            return self._calls[key]
        except KeyError:
            pass
        if self._rows is not None and key == (_PLAIN, 1):  # alpha 1, on one thread
            self._calls[key] = _ROWS
            return _ROWS
        call = self._compiling.get(key)
        if call is None:
            with cpu.on_threads(threads):  # the call keyed by the count is made for it
                call = self._new_call(out, arrays, scalars)
            call = None if call is None else call.rebased((out, *arrays))
        if call is not None and not compiler.ready_for(  # (no twin: compiled now)
                call.kernel, call.arguments((out, *arrays), tuple(scalars.values())),
                now=self._twin is None):
            self._compiling[key] = call
            return _COMPILING
        self._compiling.pop(key, None)
        self._calls[key] = call
        return call

    def _new_call(self, out, arrays, scalars):
        name, args, kwargs = self.request(out, arrays, scalars)
        return getattr(cpu, name + "_call")(*args, **kwargs)

    def queue_kernels(self):
        """Queue the compilation of the kernel that a run with default scalars on the
        threads now takes (its siblings too: :func:`tenalg.kernels.compiler.siblings`)."""
        call, arrays = self._probe_call()
        if call is not None:
            values = tuple(SCALARS[self.operation.kind].values())
            compiler.ready_for(call.kernel, call.arguments(arrays, values))

    def _probe_call(self):
        """(the kernel call with default scalars on the threads now, or None for two
        passes; the arrays it was made on, out first): arrays of the plan's layouts over
        one element each, whose layouts alone are read."""
        op = self.operation
        arrays = [_probe(op.output, writeable=True)] + [_probe(x.descriptor)
                                                         for x in op.operands]
        return self._new_call(arrays[0], arrays[1:], dict(SCALARS[op.kind])), arrays

    def explain(self):
        rows = "" if self._rows is None else " (on one thread: NumPy's copy of whole rows)"
        lines = self.explain_layout() + [f"kernel: cpu.{self.kernel_name}: {self._about()}{rows}"]
        if self._compiling and compiler.pending():
            lines.append("compiling off the thread: the reference kernels run until it is done")
        return lines

    def _about(self):
        """What the kernel call does with default scalars and the threads now."""
        call, _ = self._probe_call()
        return "two passes, the outer axes into a plane, then its rows" if call is None else (
            call.about)


def _default_call(run, allocate, scalars, operands):
    """``run`` with the default ``scalars`` as a plan's unchecked call (``call(arrays,
    out=None)``, and, for an operation of one operand, ``call.single(a)`` into a new
    output), for which the plan checks the common call in one pass
    (:func:`tenalg.plan._checked`): through the plan's general checks a 16 x 16
    permutation plan took 6.2 us into ``out``, so 5.6."""

    def call(arrays, out=None):
        if out is None:
            out = allocate()
        run(out, arrays, scalars)
        return out

    call.single = (lambda a: call((a,))) if operands == 1 else None
    call.scaled, call.describe = False, "the Numba kernels"
    return call


_ROWS = object()  # the call of a row permutation on one thread: NumPy's copy
_PLAIN = tuple((v == 1, v == 0) for v in SCALARS["permutation"].values())  # alpha 1's pattern


def _row_copy(op, loops):
    """The axes that transpose the input of ``op`` into its output where ``op`` is a plain
    permutation (one dtype, no unary transform, distinct modes, no output mode that the
    input lacks) that moves runs of _NUMPY_ROWS bytes or more, shared innermost by output
    and input; else None."""
    if op.kind != "permutation" or not loops:
        return None
    a = op.inputs[0]
    dtypes = {a.descriptor.dtype, op.output.dtype, op.compute}
    run = loops[-1]
    if (len(dtypes) != 1 or a.unary is not Unary.IDENTITY or len(set(a.modes)) != len(a.modes)
            or run.strides != (1, 1) or run.extent * op.output.dtype.itemsize < _NUMPY_ROWS
            or not set(op.out_modes) <= set(a.modes)):
        return None
    return tuple(a.modes.index(m) for m in op.out_modes)


def _real_into_complex(op):
    """Whether ``op`` reduces in a real compute type into a complex output, which the
    reduction kernels do not type (their unused addend stands in as the output)."""
    return op.kind == "reduction" and is_complex(op.output.dtype) and not is_complex(op.compute)


def _probe(descriptor, writeable=False):
    return stand_in(descriptor.extents, byte_strides(descriptor), descriptor.dtype, writeable)


class CpuBackend:
    """Takes what :func:`tenalg.kernels.cpu.supports` says pays off; anything of its
    dtypes when asked for by name."""

    name = "cpu"

    def supports(self, operation, kind):
        dtypes = [x.dtype for x in operation.inputs] + [operation.output.dtype]
        return (kind == "numpy" and operation.kind in STRIDED_KINDS
                and cpu.supports(operation.kind, dtypes, 0, float("inf"))
                and not _real_into_complex(operation))

    def prepare(self, operation, chosen=False):
        if chosen:
            return CpuRunner(operation, "asked for by name")  # which waits for the compiler
        op = operation
        loops = analysis(op)[0]
        dtypes = tuple(x.dtype for x in op.operands) + (op.output.dtype,)
        # short fastest loops let a small reduction take the Numba kernels (NumPy's
        # add.reduce is weak there); not a diagonal sum that np.einsum runs, reading it well
        hint = None if direct.has_diagonal(op) and direct.runner(op) is not None else loops
        size = work(op, loops)
        if not cpu.supports(op.kind, dtypes, len(loops), size, hint):
            return None
        return CpuRunner(op, f"{size} elements of work pay for the Numba kernels",
                         twin=ReferenceRunner(op))
