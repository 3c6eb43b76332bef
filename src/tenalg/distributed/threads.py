"""A task on a Dask worker computes on that worker's threads, not on every core.

Dask gives each worker a number of threads (``threads_per_worker``); tenalg's kernels,
a pack's chunks (:mod:`tenalg.tt.linalg.workers`) and BLAS would otherwise each take every
core of the machine. On two cores with two one-thread workers, one worker's pack rounding
took both cores, so two workers were no faster than one (W2's add + round of 8192 trains,
1.00-1.32x). :func:`run` runs a task on at most the worker's threads (Numba's setting is
the calling thread's own; BLAS's is the process's, so it goes to one thread only where
the worker has one, whose tasks run one at a time).

>>> run(sum, [1, 2])  # not on a worker: as it is
3
"""

import contextlib

import numba
from threadpoolctl import threadpool_limits


def run(fn, *args):
    """``fn(*args)`` within the calling worker's threads (outside a worker, as it is)."""
    threads = worker_threads()
    before = numba.get_num_threads()
    if threads is None or threads >= before:
        return fn(*args)
    numba.set_num_threads(threads)
    try:
        with (threadpool_limits(limits=1, user_api="blas") if threads == 1
              else contextlib.nullcontext()):
            return fn(*args)
    finally:
        numba.set_num_threads(before)


def worker_threads():
    """The number of threads of the Dask worker running this code; None outside one."""
    try:
        from distributed import get_worker  # only ever called with distributed present

        return get_worker().state.nthreads
    except (ImportError, ValueError, AttributeError):
        return None
