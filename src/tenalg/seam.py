"""The backend seam: how a :class:`~tenalg.plan.Plan` finds what runs its operation.

A **backend** is an object with

- ``name``: a short string (``plan.backend`` and ``explain()`` show it);
- ``supports(operation, kind)``: whether it can run ``operation`` on arrays of ``kind``
  (:func:`array_kind`: "numpy", "cupy", "dask", ...) at all;
- ``prepare(operation, chosen=False)``: a **runner**, or None where the backend declines
  (too small to pay off, say).  ``chosen`` is True when the user named this backend;
  it must then return a runner whenever it supports the operation.

A plan asks the registered backends in order (:func:`registered`) and keeps the first
runner.  A runner has

- ``run(out, arrays, scalars)``: ``out`` (allocated by the plan, or the caller's, both
  checked) receives the result; ``arrays`` are the inputs, then the addend C; ``scalars``
  a dict of the kind's scalars by name (alpha, beta, gamma), validated;
- ``explain()``: lines that say what it does; ``reason``: why it was chosen;
- optionally ``call(arrays, out=None)``: the whole operation with the default scalars and
  no checks at all, for the plan's one-pass fast path (``call.scaled``: it also takes
  ``call(arrays, out, scalars_tuple)``; ``call.single(a)``: one input, nothing between);
- optionally ``execute(arrays, scalars)`` and ``execute_into(out, arrays, scalars)``, for
  runners of arrays that are not NumPy's: the plan then hands them everything, checks
  included, since it knows only NumPy's layouts;
- optionally ``beside_gemm``: a context manager factory for running next to BLAS calls
  (the Numba kernels' one thread).

Backends live in :mod:`tenalg.backends`, each in its own module; this module and the plan
know none of them by name.

>>> class Echo:
...     name = "echo"
...     def supports(self, operation, kind):
...         return False
...     def prepare(self, operation, chosen=False):
...         return None
>>> register(Echo(), first=True)
>>> registered()[0].name
'echo'
>>> unregister("echo")
>>> "echo" in [b.name for b in registered()]
False
"""

import contextlib
import functools
import importlib
import inspect
import threading

import numpy as np

from .errors import OperationError

_BACKENDS = []
_LOCK = threading.Lock()
_FRONT_ENDS = {}  # array kind -> the module whose NumPy-named functions take such arrays


def register(backend, *, first=False, before=None):
    """Add ``backend`` to the ones plans ask, last (or ``first``, or ``before`` the backend
    of that name); a backend of the same name is replaced in its place."""
    for attribute in ("name", "supports", "prepare"):
        if not hasattr(backend, attribute):
            raise OperationError(f"a backend needs a {attribute!r}; "
                                 f"{type(backend).__name__} has none")
    with _LOCK:
        names = [b.name for b in _BACKENDS]
        if backend.name in names:
            _BACKENDS[names.index(backend.name)] = backend
            return
        if first:
            _BACKENDS.insert(0, backend)
        elif before is not None:
            if before not in names:
                raise OperationError(f"no backend {before!r} to register before "
                                     f"(there are {', '.join(names)})")
            _BACKENDS.insert(names.index(before), backend)
        else:
            _BACKENDS.append(backend)


def unregister(name):
    """Remove the backend called ``name`` (nothing if there is none)."""
    with _LOCK:
        _BACKENDS[:] = [b for b in _BACKENDS if b.name != name]


def registered():
    """The registered backends, in the order plans ask them."""
    return tuple(_BACKENDS)


def find(name):
    """The registered backend called ``name``."""
    for backend in _BACKENDS:
        if backend.name == name:
            return backend
    names = ", ".join(b.name for b in _BACKENDS)
    raise OperationError(f"no backend {name!r} is registered (there are {names})")


def array_kind(x):
    """The kind of array ``x`` is, by the package that defines its type: "numpy" for a
    ``numpy.ndarray``, "cupy", "dask", "torch", ...

    >>> import numpy as np
    >>> array_kind(np.ones(2)), array_kind(3.0)
    ('numpy', 'builtins')
    """
    return type(x).__module__.partition(".")[0]


def register_front_end(kind, module):
    """Arrays of ``kind`` given to tenalg's NumPy-named front ends (``ta.einsum``,
    ``ta.sum``, ...) go to the functions of the same names in ``module`` (a module name,
    imported on first use: such modules hold optional dependencies, Dask's for "dask").
    Importing it is also what registers its backends."""
    _FRONT_ENDS[kind] = module


def foreign_kind(operands):
    """The kind of the first of ``operands`` that a registered front end takes (not a
    NumPy array, not a scalar), or None: the front ends' one check, a type test per
    operand for NumPy arrays.

    >>> foreign_kind([np.ones(2), 1.0]) is None
    True
    """
    for x in operands:
        if type(x) is np.ndarray:
            continue
        kind = array_kind(x)
        if kind in _FRONT_ENDS:
            return kind
    return None


def front_end(kind):
    """The module that implements the NumPy-named front ends for arrays of ``kind``."""
    return importlib.import_module(_FRONT_ENDS[kind])  # optional dependency: loaded lazily


def call_front_end(kind, name, *args, **options):
    """The front end ``name`` ("sum", ...) for arrays of ``kind`` on ``args`` and the
    ``options`` given (None or False: not given).  One it does not take is refused, not
    dropped: ``ta.sum(x, axis=0, keepdims=True)`` of a Dask array keeps its dimensions or
    says that it cannot.

    >>> register_front_end("builtins", "math")
    >>> call_front_end("builtins", "floor", 2.5), call_front_end("builtins", "floor", 2.5, out=None)
    (2, 2)
    >>> call_front_end("builtins", "floor", 2.5, out=[0])
    Traceback (most recent call last):
    ...
    tenalg.errors.OperationError: ta.floor of builtins arrays does not take out=
    >>> del _FRONT_ENDS["builtins"]
    """
    function = getattr(front_end(kind), name)
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    refused = [k for k in given if k not in _keywords(function)]
    if refused:
        raise OperationError(f"ta.{name} of {kind} arrays does not take "
                             f"{', '.join(k + '=' for k in refused)}")
    return function(*args, **given)


@functools.cache
def _keywords(function):
    try:
        return frozenset(inspect.signature(function).parameters)
    except ValueError:  # a builtin without a signature: its keywords are unknown
        return frozenset()


def choose(operation, kind, backend="auto"):
    """(backend name, runner, reason) for ``operation`` on arrays of ``kind``.

    ``backend`` is "auto" (the first registered backend with a runner), a backend's name
    or a backend object (that one, which must support the operation).
    """
    if kind in _FRONT_ENDS:
        front_end(kind)  # its backends register themselves when it is first imported
    if backend == "auto":
        declined = []
        for candidate in registered():
            if not candidate.supports(operation, kind):
                continue
            runner = candidate.prepare(operation)
            if runner is not None:
                reason = getattr(runner, "reason", "") or "the first that took it"
                if declined:
                    reason += f" ({', '.join(declined)} declined)"
                return candidate.name, runner, reason
            declined.append(candidate.name)
        raise OperationError(f"no registered backend runs a {operation.kind} on {kind} "
                             f"arrays (asked: {', '.join(b.name for b in registered())})")
    candidate = find(backend) if isinstance(backend, str) else backend
    if not candidate.supports(operation, kind):
        raise OperationError(f"backend {candidate.name!r} does not run a {operation.kind} "
                             f"of these dtypes on {kind} arrays")
    runner = candidate.prepare(operation, chosen=True)
    if runner is None:
        raise OperationError(f"backend {candidate.name!r} declined a {operation.kind} "
                             "it was asked for by name")
    return candidate.name, runner, "asked for by name"


def beside_gemm(runner):
    """The context ``runner`` runs in next to BLAS calls (see the module docstring)."""
    return getattr(runner, "beside_gemm", contextlib.nullcontext)
