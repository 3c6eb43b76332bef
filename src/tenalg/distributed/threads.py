"""A task on a Dask worker computes on that worker's threads, not on every core.

Dask gives each worker a number of threads (``threads_per_worker``); tenalg's kernels and
a pack's chunks (:mod:`tenalg.tt.linalg.workers`) would otherwise take every core of the
machine. On two cores with two one-thread workers, one worker's pack rounding took both
cores, so two workers were no faster than one (W2's add + round of 8192 trains,
1.00-1.32x). :func:`run` caps Numba's thread count (the calling thread's own setting) at
the worker's for the task. BLAS's threads are the process's: start workers with
``OPENBLAS_NUM_THREADS`` (and ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) set to their
thread count, as ``docs/distributed.md`` shows.

>>> run(sum, [1, 2])  # not on a worker: as it is
3
"""

import numba

from . import heap


def run(fn, *args):
    """``fn(*args)`` within the calling worker's threads, its temporaries kept in the heap
    (:func:`tenalg.distributed.heap.kept`); outside a worker, as it is."""
    threads = worker_threads()
    if threads is None:
        return fn(*args)
    before = numba.get_num_threads()
    numba.set_num_threads(min(before, threads))
    try:
        with heap.kept():
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
