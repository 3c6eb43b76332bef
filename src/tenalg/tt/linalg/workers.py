"""The chunks of a pack operation, run side by side on worker threads.

A chunk of trains is a few GEMMs on small stacked matrices plus Numba kernels, all of
which release the GIL, so the chunks of a pack run in parallel on Python threads, one
per core (``numba.get_num_threads()``, which ``NUMBA_NUM_THREADS`` and
``numba.set_num_threads`` set). Meanwhile BLAS runs on one thread
(:func:`~tenalg.blas.one_blas_thread`), and so do tenalg's kernels inside each worker:
on small matrices a threaded GEMM costs more to start than it saves, and its threads
would contend with the workers for the cores.
Each worker has its own :class:`~tenalg.linalg.workspace.Workspace`; results do not depend on
which worker ran a chunk.

>>> map_chunks(lambda chunk, work: sum(chunk), [[1, 2], [3], [4, 5]])
[3, 3, 9]
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import numba

from ...blas import one_blas_thread
from ...kernels.cpu import one_thread
from ...linalg.workspace import Workspace


def map_chunks(fn, chunks):
    """``[fn(chunk, work) for chunk in chunks]`` with ``work`` a Workspace of the thread
    that runs it; on several threads when there are several chunks and cores."""
    threads = min(len(chunks), numba.get_num_threads())
    if threads <= 1:
        work = Workspace()
        return [fn(chunk, work) for chunk in chunks]
    local = threading.local()

    def run(chunk):
        if not hasattr(local, "work"):
            local.work = Workspace()
        with one_thread():
            return fn(chunk, local.work)

    with one_blas_thread(), ThreadPoolExecutor(threads) as pool:
        return list(pool.map(run, chunks))
