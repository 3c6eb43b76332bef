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
- ``execute(arrays, scalars)`` (returns the result) and ``execute_into(out, arrays,
  scalars)`` (writes ``out``) instead, for runners of arrays that are not NumPy's (a plan
  of another ``kind``): the plan checks the count, extents and dtypes of what it is
  given and hands the rest to them (strides, bounds, aliasing, allocation), since it
  knows only NumPy's layouts;
- optionally ``beside_gemm``: a context manager factory for running next to BLAS calls
  (the Numba kernels' one thread);
- optionally ``step``, for a contraction: what einsum's chain of pairwise contractions
  calls for it, ``step.run(out, arrays, c, alpha, beta)`` (the blas runner's GEMM kernel,
  without the dict of scalars); a chain calls ``run`` of a runner without one.

Backends live in :mod:`tenalg.backends`, each in its own module; this module and the plan
know none of them by name.  Caches of plans empty themselves when the registry changes
(:func:`on_change`), so that a backend registered or removed is asked from the next call.

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
_LISTENERS = []  # what empties each cache of plans, called when the registry changes
_GENERATION = [0]  # how many times the registry changed (see generation)


def on_change(callback):
    """Call ``callback()`` whenever a backend is registered or removed: the caches of
    plans (the front ends', einsum's, the symmetric layer's) empty themselves with it,
    since each plan keeps the backend that was chosen when it was made.  Returns
    ``callback``."""
    _LISTENERS.append(callback)
    return callback


def generation():
    """How many times the registry has changed: a cache keeps a plan only where this did
    not change while the plan was made (one made from the old registry, put after the
    caches were emptied, would stay)."""
    return _GENERATION[0]


def _changed():
    _GENERATION[0] += 1  # first: a plan being made now is not kept (see generation)
    for callback in _LISTENERS:
        callback()


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
        elif first:
            _BACKENDS.insert(0, backend)
        elif before is not None:
            if before not in names:
                raise OperationError(f"no backend {before!r} to register before "
                                     f"(there are {', '.join(names)})")
            _BACKENDS.insert(names.index(before), backend)
        else:
            _BACKENDS.append(backend)
    _changed()


def unregister(name):
    """Remove the backend called ``name`` (nothing if there is none)."""
    with _LOCK:
        kept = [b for b in _BACKENDS if b.name != name]
        removed = len(kept) != len(_BACKENDS)
        _BACKENDS[:] = kept
    if removed:
        _changed()


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


def only_shipped():
    """Whether every backend that plans ask before tenalg's catch-all ``reference`` is
    one of tenalg's own: a front end may then take another of tenalg's ways to the same
    result (no backend registered by someone else is passed over)."""
    for backend in registered():
        if backend.name == "reference":
            return True
        if _package(type(backend)) != "tenalg":
            return False
    return True


def _package(cls):
    return cls.__module__.partition(".")[0]


def array_kind(x):
    """The kind of array ``x`` is, by the package that defines its type: "numpy" for a
    ``numpy.ndarray``, "cupy", "dask", "torch", ...  A subclass defined elsewhere (a
    ``torch.Tensor`` subclass of another package) has the kind of the nearest class it
    derives from whose package has a front end (:func:`register_front_end`).

    >>> import numpy as np
    >>> array_kind(np.ones(2)), array_kind(3.0)
    ('numpy', 'builtins')
    """
    cls = type(x)
    kind = _package(cls)
    if kind == "numpy" or kind in _FRONT_ENDS:
        return kind
    for base in cls.__mro__[1:-1]:  # (the last is object)
        if (package := _package(base)) in _FRONT_ENDS:
            return package
    return kind


def register_front_end(kind, module):
    """Arrays of ``kind`` given to tenalg's NumPy-named front ends (``ta.einsum``,
    ``ta.sum``, ``ta.norm``, ...) go to the functions of the same names in ``module``: a
    module, or a module's name, imported on first use (such modules hold optional
    dependencies, Dask's for "dask"; importing it is also what registers its backends).

    A front end takes the arguments the user gave, with the options (keywords) left out
    that are None or False, or tenalg's defaults (``optimize="auto"``): one it does not
    take is refused with a clear error (:func:`call_front_end`), as is a function the
    module lacks."""
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
    module = _FRONT_ENDS.get(kind)
    if module is None:
        raise OperationError(f"no front end takes {kind} arrays (register one: "
                             f"tenalg.seam.register_front_end); there are for "
                             f"{', '.join(sorted(_FRONT_ENDS)) or 'none'}")
    if isinstance(module, str):  # an optional dependency: loaded lazily
        module = importlib.import_module(module)
    return module


def call_front_end(kind, name, *args, **options):
    """The front end ``name`` ("sum", ...) for arrays of ``kind`` on ``args`` and the
    ``options`` given (None: not given; the callers pass tenalg's defaults as None, see
    :func:`changed`).  One it does not take is refused, not dropped:
    ``ta.sum(x, axis=0, keepdims=True)`` of a Dask array keeps its dimensions or says
    that it cannot.

    >>> register_front_end("builtins", "math")
    >>> call_front_end("builtins", "floor", 2.5), call_front_end("builtins", "floor", 2.5, out=None)
    (2, 2)
    >>> call_front_end("builtins", "floor", 2.5, out=[0])
    Traceback (most recent call last):
    ...
    tenalg.errors.OperationError: ta.floor of builtins arrays does not take out=
    >>> call_front_end("builtins", "norm", 2.5)
    Traceback (most recent call last):
    ...
    tenalg.errors.OperationError: ta.norm does not take builtins arrays (math has no norm)
    >>> del _FRONT_ENDS["builtins"]
    """
    module = front_end(kind)
    function = getattr(module, name, None)
    if function is None:  # refused, not computed after a conversion to NumPy
        raise OperationError(f"ta.{name} does not take {kind} arrays "
                             f"({module.__name__} has no {name})")
    given = {k: v for k, v in options.items() if v is not None}
    refused = [k for k in given if k not in _keywords(function)]
    if refused:
        raise OperationError(f"ta.{name} of {kind} arrays does not take "
                             f"{', '.join(k + '=' for k in refused)}")
    return function(*args, **given)


def changed(value, default):
    """``value``, or None where it is ``default`` (equal, and of its type): a front end of
    another kind of array is given the options the user changed, so that one may leave
    out what it does not do (a front end without ``alpha`` serves every call with alpha
    1).  A value of another type is passed on, for the front end to judge (an offset of
    0.0 is refused as NumPy refuses it).

    >>> changed(1, 1), changed(2, 1), changed(False, False), changed(0.0, 0)
    (None, 2, None, 0.0)
    """
    if value is default or (type(value) is type(default) and value == default):
        return None
    return value


@functools.cache
def _keywords(function):
    """The keywords ``function`` takes: its parameters' names, or everything (a
    ``_Any``) where it takes ``**options``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except ValueError:  # a builtin without a signature: its keywords are unknown
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return _Any()
    return frozenset(p.name for p in parameters)


class _Any:
    def __contains__(self, name):
        return True


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
        raise OperationError(f"backend {candidate.name!r} does not run this "
                             f"{operation.kind} on {kind} arrays (its dtypes or unary "
                             f"transforms, or the kind of array: Plan(kind=...) names it)")
    runner = candidate.prepare(operation, chosen=True)
    if runner is None:
        raise OperationError(f"backend {candidate.name!r} declined a {operation.kind} "
                             "it was asked for by name")
    return candidate.name, runner, "asked for by name"


def beside_gemm(runner):
    """The context ``runner`` runs in next to BLAS calls (see the module docstring)."""
    return getattr(runner, "beside_gemm", contextlib.nullcontext)
