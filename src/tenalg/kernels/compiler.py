"""Numba kernels compiled off the calling thread, so that no call waits on the compiler.

A kernel compiles for each new signature (dtypes, ranks of its arguments): seconds of
LLVM work, tens of seconds on a busy machine. :func:`ready` says whether a kernel is
compiled for a signature and, where it is not, queues the compilation on one background
thread and returns False: the caller then runs its NumPy twin for this call (the cpu
backend does; see :class:`tenalg.backends.cpu.CpuRunner`). Later calls take the kernel
once it is ready. Compiled code loads from Numba's on-disk cache where it is there
(:mod:`tenalg.kernels.jit` says where that is), which is fast but also off the thread.

The environment variable ``TENALG_COMPILE`` chooses: "background" (the default) or
"wait" (compile on the calling thread, as Numba does by itself). The same thread also
takes Python work that a call may leave for later (:func:`later`: the plan of a front
end's first call on a new layout, whose answer NumPy gives meanwhile). The thread is started
when this module is imported (a first call would wait for it to run) and begins a
compilation START_DELAY after it was queued (when it was idle), so the call that
queued it runs uncontended. :func:`wait` waits for
everything queued (``tenalg compile`` and the benchmarks use it). A kernel's compilation
into a shared on-disk cache takes that kernel's file lock (:func:`lock_cache`), so that
processes compiling at once (Dask's workers, a pool, the test suite's) do not
garble Numba's index, and compile different kernels side by side. A fork waits for the
compilation under way (a child must not inherit Numba's compiler lock held by a thread
it does not have). At exit the thread is stopped at its next call into LLVM
(:func:`_stop_at_exit`) and abandoned: Numba writes each cache file whole, under a
temporary name, so nothing half-written is left behind.

>>> import numba
>>> @numba.njit
... def twice(x):
...     return 2 * x
>>> sig = (numba.int64,)
>>> first = ready(twice, sig)      # queued (True only in "wait" mode)
>>> wait(), ready(twice, sig), twice(21)
(True, True, 42)
"""

import atexit
import contextlib
import functools
import os
import queue
import sys
import threading
import time
import warnings

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: compilations lock nothing
    fcntl = None
import numpy as np
from llvmlite.binding import ffi as _llvm_ffi
from numba import config, typeof
from numba.core import types
from numba.core.typing.typeof import Purpose
from numba.np.numpy_support import from_dtype

from ..shared_setting import SharedSetting

MODES = ("background", "wait")
START_DELAY = 0.1  # seconds from the first queued compilation after a pause to its start
MAX_QUEUED = 64  # jobs queued, past which calls do their work themselves (a busy thread)
SWITCH_INTERVAL = 0.0005  # seconds: how long a call waits for the GIL while a kernel compiles

_queue = queue.Queue()
_queued = set()  # (kernel id, signature) queued or being compiled; keys of later work
_failed = set()  # keys of later work that raised: their callers do it themselves
_lock = threading.Lock()
_busy = threading.Lock()  # held while a job (a compilation, later work) runs
_idle = threading.Condition(_lock)
_worker = None
_errors = []
_ready = set()  # (kernel id, key) known to be ready (see ready_for)
_siblings = {}  # kernel id -> the kernels compiled with it (see siblings)
_SCALARS = {bool: types.boolean, float: types.float64, complex: types.complex128}
_lock_directory = None  # where the kernels' lock files are (lock_cache), None: no locks
_stopping = False  # the interpreter exits: the thread starts no other job


def mode():
    """The compile mode now: ``TENALG_COMPILE`` ("background", the default, or "wait", in
    any case); another value warns once and means "background"."""
    value = os.environ.get("TENALG_COMPILE", "")
    return value if value in MODES else _mode_of(value)


@functools.cache
def _mode_of(value):
    chosen = value.strip().lower() or "background"
    if chosen not in MODES:
        warnings.warn(f"TENALG_COMPILE={value!r} is neither 'background' nor 'wait': "
                      "kernels compile in the background", stacklevel=3)
        chosen = "background"
    return chosen


def ready(kernel, signature, key=None, now=False):
    """Whether ``kernel`` (a Numba dispatcher) is compiled for ``signature`` (a tuple of
    Numba types, or of :func:`describe`'s stand-ins); if it is not, its compilation is
    queued (in "wait" mode, or ``now``: done on this thread).  A hashable ``key``
    standing for the signature skips the lookup once ready (hashing Numba types costs
    microseconds, 9 times a small train's rounding)."""
    if key is not None and (id(kernel), key) in _ready:
        return True
    if jit_off():
        return False
    wait = now or mode() == "wait"
    if kernel.overloads or wait:  # else nothing is compiled: not this either
        signature = numba_types(signature)
        if signature in kernel.overloads:
            if key is not None:
                _ready.add((id(kernel), key))
            return True
        if wait:
            _compile(kernel, signature)
            return True
    with _lock:
        for each in (kernel, *_siblings.get(id(kernel), ())):
            _put((id(each), signature), functools.partial(_compile, each, signature))
        _start()
    return False


def jit_off():
    """Whether Numba's JIT is disabled (``NUMBA_DISABLE_JIT=1``, set by users debugging
    their own Numba code): the kernels are then plain Python functions whose intrinsics
    do nothing, so no kernel is ever ready and every call takes its NumPy twin."""
    return config.DISABLE_JIT


def deferring(key):
    """Whether work keyed ``key`` may be left to :func:`later`: in "background" mode, with
    fewer than MAX_QUEUED jobs queued, unless that work raised there before (the caller
    then does it, and meets the error itself)."""
    return len(_queued) < MAX_QUEUED and key not in _failed and mode() != "wait"


def deferred(key):
    """Whether work keyed ``key`` is queued for :func:`later` or under way (a lookup
    without the lock: a call may then skip making the job)."""
    return ("later", key) in _queued


def later(key, job):
    """Queue ``job()``, Python work a call can do without now (building a plan), on the
    compiling thread, once while ``key`` (hashable) is queued or under way.  A job that
    raises is dropped and its key no longer deferred (:func:`deferring`)."""
    with _lock:
        _put(("later", key), functools.partial(_run_later, key, job))
        _start()


def _put(queued, job):
    if queued not in _queued:
        _queued.add(queued)
        _queue.put((job, queued))


def _run_later(key, job):
    try:
        job()
    except Exception:  # noqa: BLE001 - the caller does the work again and raises there
        _failed.add(key)


def _compile(kernel, signature):
    """Compile (or load from the cache) ``kernel`` for ``signature`` under the cache's
    lock, letting other threads have the GIL every SWITCH_INTERVAL meanwhile."""
    signature = numba_types(signature)
    if signature not in kernel.overloads:
        with _often_switching.held(), cache_locked(kernel):
            kernel.compile(signature)


def _switch_often():
    before = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    return before


# compilations on several threads (this one, callers in "wait" mode) share the interval
_often_switching = SharedSetting(_switch_often, sys.setswitchinterval)


def lock_cache(directory):
    """Compilations lock a file of their kernel's in ``directory`` (beside the on-disk
    cache; None: nothing) against other processes.  Numba reads a function's index of
    cached signatures, adds its own and writes it back unlocked: two processes that
    compile signatures of one function at once can both name their code file 1, and a
    third then runs one signature's machine code on the other's arguments (numba issue
    10128; here, 3 rounds in 20 of six processes compiling at once ended in "can't unbox
    array").  Locked, the second process finds the first's kernel in the cache and loads
    it.  A kernel's compilation writes its own index only (the helpers it calls are not
    cached: :data:`tenalg.kernels.jit.JIT`), so other kernels compile meanwhile."""
    global _lock_directory
    _lock_directory = directory


def lock_file(kernel):
    """The file that compilations of ``kernel`` lock (None: no locks).

    >>> before = _lock_directory
    >>> lock_cache("/cache"); lock_file(len); lock_cache(before)
    '/cache/tenalg-compile-builtins.len.lock'
    """
    if _lock_directory is None:
        return None
    function = getattr(kernel, "py_func", kernel)
    name = f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}"
    return os.path.join(_lock_directory, f"tenalg-compile-{name}.lock")


@contextlib.contextmanager
def cache_locked(kernel):
    """Hold ``kernel``'s lock (:func:`lock_file`); a lock file that cannot be opened (a
    read-only cache) locks nothing."""
    path = lock_file(kernel)
    try:
        fd = None if path is None or fcntl is None else os.open(
            path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a fresh descriptor: a forked child's is its own
        yield
    finally:
        if fd is not None:
            os.close(fd)  # (which releases the lock)


def ready_for(kernel, args, key=None, now=False):
    """:func:`ready` for the types of the arguments ``args`` (as the kernel's dispatcher
    reads them); anything that is not a Numba dispatcher is ready.  ``key``, hashable and
    cheap, stands for those types (None: their description); once ready, a key is not
    looked at again (reading the types costs microseconds, a 4096^2 trace 19 us in all)."""
    if key is not None and (id(kernel), key) in _ready:
        return True
    if not hasattr(kernel, "overloads"):
        return not jit_off()
    signature = tuple(map(describe, args))
    return ready(kernel, signature, signature if key is None else key, now)


def describe(value):
    """A hashable stand-in for the Numba type of the argument ``value``, cheaper to make
    than the type: an array's dtype, rank, layout and writeability (Numba's typeof took
    10-20 us an array, 0.2 ms of a first ``ta.sum``); a scalar's Numba type itself.

    >>> describe(np.zeros((2, 3)).T), numba_types((describe(7),))
    ((dtype('float64'), 2, 'F', False), (int64,))
    """
    if type(value) is np.ndarray:
        flags = value.flags
        layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        return value.dtype, value.ndim, layout, not flags.writeable
    if type(value) is int and -2**63 <= value < 2**63:
        return types.int64
    if type(value) in _SCALARS:
        return _SCALARS[type(value)]
    try:  # as the dispatcher reads it (Dispatcher.typeof_pyval)
        return typeof(value, Purpose.argument) or types.pyobject
    except ValueError:
        return types.pyobject


def numba_types(signature):
    """The Numba types of a signature of types or :func:`describe`'s stand-ins."""
    return tuple(map(_numba_type, signature))


@functools.lru_cache(maxsize=512)
def _numba_type(described):
    if type(described) is tuple:
        dtype, ndim, layout, readonly = described
        return types.Array(from_dtype(dtype), ndim, layout, readonly=readonly)
    return described  # a scalar's stand-in is its Numba type


def siblings(*kernels):
    """Kernels that take the same arguments and stand in for one another (the parallel and
    serial twins of one kernel): queuing one for a signature queues the others too, so
    that a call on another count of threads finds its twin ready (the count follows the
    machine's load)."""
    for kernel in kernels:
        _siblings[id(kernel)] = [k for k in kernels if k is not kernel]


def pending():
    """How many compilations are queued or under way."""
    with _lock:
        return len(_queued)


def wait(timeout=None):
    """Wait until no compilation is queued or under way (at most ``timeout`` seconds);
    returns whether that is so.  Raises the first error a compilation met."""
    with _idle:
        done = _idle.wait_for(lambda: not _queued, timeout)
    if _errors:
        raise _errors.pop(0)
    return done


def _start():
    global _worker
    if _worker is None or not _worker.is_alive():
        _worker = threading.Thread(target=_compile_forever, name="tenalg-compiler",
                                   daemon=True)
        _worker.start()


def _compile_forever():
    idle = True  # the thread starts idle, and is again when its queue runs empty
    while True:
        job, key = _queue.get()
        if _stopping:
            continue
        if idle:
            # the call that queued it runs its twin first, uncontended: compiling holds
            # the GIL for most of its seconds, and a first ta.sum took 5.3 ms beside it
            # against 1.3 ms alone (NumPy's own first call: 0.7 ms)
            time.sleep(START_DELAY)
        try:
            with _busy:
                job()
        except Exception as error:  # noqa: BLE001 - kept for wait(); the call ran its twin
            _errors.append(error)
        finally:
            with _idle:
                _queued.discard(key)
                _idle.notify_all()
            idle = _queue.empty()


def _stop_at_exit():
    """At interpreter exit, let the compiling thread start no other job and take
    llvmlite's lock for good: the LLVM call the thread may be inside ends first, and it
    makes no other.  Left running inside LLVM while the interpreter and LLVM's static
    objects were torn down, a compilation aborted the process (LLVM's assertions
    "dyn_cast on a non-existent value", "Value type out of range", 2 exits in 25 with a
    kernel compiling).  The exit waits for one LLVM call at most (a module's
    optimisation: a second or two), not for the compilation.  Where llvmlite keeps no
    such lock, it waits for the job under way.  (A Numba compilation that exit handlers
    run after this one, while the thread holds Numba's compiler lock, would wait for
    good: tenalg's calls queue theirs instead.)"""
    global _stopping
    _stopping = True
    if _worker is None or not _worker.is_alive():
        return
    lock = getattr(getattr(getattr(_llvm_ffi, "lib", None), "_lock", None), "_lock", None)
    (lock or _busy).acquire()  # and kept: this thread's own LLVM calls may re-enter it


atexit.register(_stop_at_exit)


def _before_fork():
    _busy.acquire()  # a fork waits for the compilation under way
    _lock.acquire()


def _after_fork_in_parent():
    _lock.release()
    _busy.release()


def _after_fork_in_child():
    global _worker, _busy, _lock, _idle, _queue
    # the compiling thread is not in the child: its queue and locks start afresh
    _lock = threading.Lock()
    _idle = threading.Condition(_lock)
    _busy, _queue, _worker = threading.Lock(), queue.Queue(), None
    _queued.clear()
    _often_switching.forget_holders()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
try:  # now rather than on a first call, which would wait 0.45 ms for the thread to run
    _start()
except RuntimeError:  # no thread can start now (a process shutting down): on first use
    _worker = None
