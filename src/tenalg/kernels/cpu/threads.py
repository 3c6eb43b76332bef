"""Thread control of the CPU kernels: how many threads a call runs on, and
:func:`one_thread` for work beside BLAS calls.

>>> with one_thread():
...     thread_count()
1
"""

import contextlib
import functools
import os
import threading
from time import monotonic as _clock

from numba import config, get_num_threads, set_num_threads, threading_layer
from numba.np.ufunc import parallel as _pool

from ...pools import free_cores

# Below this many elements a thread-pool launch costs more than it saves: on Zen 1 from
# 2^19; on Zen 4 two threads win from 2^18 float64 elements (a sum of (2048, 128) over
# axis 1 36.5 -> 23.0 us, over axis 0 of (512, 512) 49.8 -> 32.3, NumPy 40.7; a 512^2
# transpose into an array 162 -> 106 us, an add 92 -> 53), mostly from 2^17 and not below
_SERIAL_WORK = 1 << 18

@functools.cache
def _thread_counter():
    """The C getter behind ``numba.get_num_threads()`` (the calling thread's setting),
    without the two locks that takes on every call: 0.09 us instead of 0.9.  Starts
    Numba's thread pool, after which the getter exists."""
    get_num_threads()
    return getattr(_pool, "_get_num_threads", get_num_threads)


def _threads(work):
    """Threads to use for ``work`` elements: small problems run on one, others on
    :func:`thread_count`."""
    return thread_count() if work >= _SERIAL_WORK else 1


def one_thread():
    """The kernels run inside on the calling thread alone: for work next to BLAS calls.

    After a parallel kernel Numba's workers spin for milliseconds on the cores that the
    next GEMM's threads need, and OpenBLAS's threads spin after a GEMM on those that the
    kernels' workers need.  Memory-bound conversions lose little on one thread.
    """
    return on_threads(1)


@contextlib.contextmanager
def on_threads(threads):
    """The kernels run inside on at most ``threads`` threads (Numba's setting for the
    calling thread, lowered where it is more).  One thread before Numba's pool has
    started is this thread's mark instead (:func:`thread_count` reads it): Numba's
    setting would start the pool (21 ms, and a child forked later runs serially), which
    serial kernels do not need."""
    started = _pool._is_initialized
    if (threads <= 1 and not started) or _local.one:
        _local.one += 1
        try:
            yield
        finally:
            _local.one -= 1
        return
    if not started and threads >= config.NUMBA_NUM_THREADS:  # nothing to lower
        yield
        return
    before = get_num_threads()
    if threads < before:
        set_num_threads(threads)
    try:
        yield
    finally:
        if threads < before:
            set_num_threads(before)


# A parallel kernel's workers spin this long after it, then sleep (libgomp with
# GOMP_SPINCOUNT 10000: about 0.1 ms on the 2-core test VM); a call further from the last
# one finds them asleep ...
IDLE_S = 0.0005
# ... and runs on one thread below this much work, where waking them costs about what
# they save after a busy pause and far more after an idle one.  Medians on the 2-core
# test VM, 2 ms after the last call, the caller asleep meanwhile (busy), two threads
# against one: a sum over axis 0 of a 512^2 float64 array 254 (133) us against 120 (108),
# NumPy 112 (101); a (22,)^4 permutation 517 (240) against 271 (264).  Of 2^19 elements,
# where two threads stay: a permutation 688 (339) against 468 (490), a sum 439 (187)
# against 199 (204)
_IDLE_SERIAL_WORK = 1 << 19
_ended = [float("-inf")]  # when the last kernel call ended (or began, where not told)
_forked = [False]  # in a child forked after GNU OpenMP's pool started: serial twins only
_was_parallel = [True]  # whether the last parallel call took more than one thread
_whole_setting = [0]  # inside all_threads(): Numba's setting, whatever the load or pause


class _Marks(threading.local):
    one = 0  # on_threads(1) blocks the thread is in, entered before the pool started


_local = _Marks()


@contextlib.contextmanager
def all_threads():
    """Parallel kernels run inside on Numba's whole setting for the calling thread,
    whatever the machine's load or the pause since the last call: ``tenalg compile``
    compiles the kernels that calls in a loop on an idle machine take."""
    _whole_setting[0] += 1
    try:
        yield
    finally:
        _whole_setting[0] -= 1


def thread_count(work=None):
    """The threads a parallel kernel of ``work`` elements runs on now: numba's setting for
    the calling thread, and no more than the cores that other threads leave free
    (:func:`tenalg.pools.free_cores`); one where the work is small and the last kernel call
    ended more than :data:`IDLE_S` ago (:func:`ended`), so that the workers sleep.

    A kernel split evenly over the cores waits for whichever thread the OS deschedules:
    beside other busy processes a (64,)^4 float32 partial trace took 9.7 ms on two threads
    and 5.3 on the cores left free, NumPy's ``np.trace`` 5.3; a (32,)^4 permutation right
    after a 1024^2 GEMM (OpenBLAS's threads spinning) 4.4 ms against 1.5 (medians,
    ``python -m tenalg.bench.pools``, in one process, on a 2-core VM under load).  After
    a parallel call this pool's own workers may still spin: they are not counted as
    others then, so that a loop of parallel calls on an idle machine stays parallel.
    """
    if _forked[0]:
        return 1
    # before Numba's pool has started, its setting is the configured count: a first call
    # that runs NumPy while its kernel compiles starts no pool (21 ms)
    threads = _thread_counter()() if _pool._is_initialized else config.NUMBA_NUM_THREADS
    if threads > 1 and _local.one:  # on_threads(1) before the pool started
        return 1
    if threads > 1 and not _whole_setting[0]:
        now = _clock()
        last, _ended[0] = _ended[0], now  # the next call, soon after, finds them awake
        if work is not None and work < _IDLE_SERIAL_WORK and now - last > IDLE_S:
            return 1
        threads = min(threads, free_cores(ours=threads - 1 if _was_parallel[0] else 0,
                                          now=now))
        _was_parallel[0] = threads > 1
    return threads


def _after_fork_in_child():
    """GNU OpenMP's thread pool does not survive a fork: the child's first parallel kernel
    ends the process ("Terminating: fork() called from a process already using GNU
    OpenMP"; a fork-context multiprocessing pool then waits for good).  A child forked
    after the pool started runs the kernels' serial twins."""
    if _pool._is_initialized and threading_layer() == "omp":
        _forked[0] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def ended():
    """Note that a kernel call has just ended (see :func:`thread_count`)."""
    _ended[0] = _clock()


def _on_threads(about, threads):
    return f"{about}; {threads} thread{'s' if threads > 1 else ''}"
