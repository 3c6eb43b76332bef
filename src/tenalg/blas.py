"""BLAS on one thread: for decompositions of small and skinny matrices, and for stacks of
GEMMs shared among threads (:func:`matmul`).

LAPACK's QR and SVD of the tall matrices of a tensor-train sweep (1920 x 60, 960 x 60)
are dominated by level-2 steps on a panel: on two threads OpenBLAS pays more in
synchronisation than it gains, and its threads contend for the cores with Numba's,
which spin after each kernel. On the 2-core Zen 4 test VM, one thread against two:
``np.linalg.qr`` of 1920 x 60 4.0 against 6.5 ms, ``np.linalg.svd`` 3.2 against 5.3
ms, and a rounding of the sum of a train and itself (d = 20, n = 32, r = 30, where every
bond takes LAPACK's QR and SVD) 85-95 against 143-149 ms. Complex decompositions do
four times the arithmetic and gain from the second thread (the complex X + X: 187-192
ms on two threads, 229-233 on one), so a use that names a complex dtype keeps the
setting.

The setting is the process's (OpenBLAS has one), and OpenBLAS may ignore a thread
other than the one that lowered it raising it again (seen with 0.3.31), so only the
main thread changes it: the outermost use there sets one thread and restores what it
found; uses nested in it, and uses on other threads, change nothing (the workers of a
pack run inside the main thread's use; other threads of the caller keep its setting).
Entering and leaving cost about 6 us, once per decomposition.

>>> with one_blas_thread():
...     q, r = np.linalg.qr(np.eye(3))
>>> bool(np.allclose(q @ r, np.eye(3)))
True

How long OpenBLAS's idle threads spin after a call is set where this module is imported,
by :mod:`tenalg.pools` (the process's pools share the cores: their policy lives there).

A stack of GEMMs each too small for OpenBLAS to thread (it threads none of 256 products
of 64 x 64 float32 matrices: ``np.matmul`` ran them on one core in 1.21 ms, torch's
``bmm`` in 0.96) is cut into parts that the threads take in turn, each part a
``np.matmul`` on one BLAS thread: 0.73 ms (float64: 3.7 -> 2.1 ms, torch 3.4).
"""

import contextlib
import functools
import itertools
import os
import threading
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from . import pools  # noqa: F401 - sets the pools' spins before a kernel loads libgomp

_depth = 0  # the main thread's uses open now


@functools.cache
def _controller():
    """threadpoolctl's controller of the BLAS libraries, SciPy's included: it knows the
    libraries loaded when it is made, and SciPy's LAPACK (``tenalg.linalg.householder``) runs
    on an OpenBLAS of its own, whose threads left at two made a rounding sweep 3x slower."""
    import scipy.linalg  # noqa: F401 - loads SciPy's OpenBLAS before the controller looks
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread(dtype=None):
    """BLAS (and LAPACK) run on one thread inside, when entered on the main thread and
    ``dtype`` (of the data decomposed inside, if given) is not complex; also a
    decorator."""
    global _depth
    complex_data = dtype is not None and np.dtype(dtype).kind == "c"
    if complex_data or threading.current_thread() is not threading.main_thread():
        yield
        return
    found = _lower_to_one() if _depth == 0 else ()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for library, threads in found:  # (raised inside, or lowered here)
            if library.get_num_threads() != threads:
                library.set_num_threads(threads)


@functools.cache
def _blas_libraries():
    """threadpoolctl's controllers of the BLAS libraries (:func:`_controller`)."""
    return tuple(lib for lib in _controller().lib_controllers if lib.user_api == "blas")


def _lower_to_one():
    """Set every BLAS library with more threads to one; returns every library with the
    count it had.  The libraries' own getters and setters: threadpoolctl's ``limit``
    (which reads every library's whole description first) made entering and leaving
    12 us, these 6 us."""
    found = [(lib, threads) for lib in _blas_libraries()
             if (threads := lib.get_num_threads()) is not None]
    for library, threads in found:
        if threads > 1:
            library.set_num_threads(1)
    return found


# Inside one_blas_thread (a tensor-train rounding), where OpenBLAS has one thread, a stack
# of GEMMs or one GEMM is shared among threads from this much work; outside it one GEMM
# stays OpenBLAS's, whose own threads start faster on an idle machine (512^3
# cut in parts: 4.2-4.7 ms against 4.0, a 512 GEMM-and-sum loop 0.86x NumPy's), though
# beside one busy process their even split waits for the delayed thread (256^3: 15 ms
# against 1.8 in parts, a 120 x 7680 Gram 248 ms against 6.7)
SPLIT_FLOPS = 1 << 22
# parts per thread, taken as threads come free: a core that another process (or torch's
# and Numba's spinning workers) slows does fewer of them (one part each: the stack of
# 256 64 x 64 float32 products ran 0.88x np.matmul inside a full 'tenalg bench --quick',
# against 1.45-1.8x alone)
PARTS_PER_THREAD = 4
# Outside one_blas_thread cutting a stack costs about 0.2 ms (entering one_blas_thread,
# handing parts to the pool): a stack is cut from this much work, of products that
# OpenBLAS's threads take poorly one by one (medians against np.matmul, float64, 2-core
# Zen 3 VM: g 100 of 8 x 32 x 100, 5 MFLOP, 2.0x slower; 200 of 32^3, 13 MFLOP, 1.3x;
# 400 of 32^3 0.67x, 128 of 64^3 0.44x; 16 of 128^3, products of SPLIT_FLOPS, 1.56x)
STACK_SPLIT_FLOPS = 1 << 24
# the largest product cut along k (each part then needs an output of its own, summed)
GRAM_SIZE = 1 << 16


def splits(g, m, n, k, limited=None):
    """Whether a stack of ``g`` products (m x k) (k x n), or one product where BLAS is on
    one thread (``limited``), has the work to share among threads (:func:`matmul`): a
    contraction asks when it is planned (``limited`` None: whether it may), :func:`matmul`
    when it runs (whether BLAS is on one thread now).  Where BLAS has its threads, a
    stack is cut only from :data:`STACK_SPLIT_FLOPS`, of products under
    :data:`SPLIT_FLOPS` each."""
    flops = 2 * g * m * n * k
    if flops < SPLIT_FLOPS or (limited is False and g == 1):
        return False
    return limited is not False or STACK_SPLIT_FLOPS <= flops < g * SPLIT_FLOPS


@functools.cache
def _pool(workers, pid):
    """The worker threads of :func:`matmul` in process ``pid`` (a child forked after the
    parent made its pool gets its own: the parent's threads do not exist there)."""
    return ThreadPoolExecutor(workers, thread_name_prefix="tenalg-gemm")


def matmul(a, b, out=None):
    """``np.matmul(a, b, out=out)``, with the work shared among the threads
    (``numba.get_num_threads()``, as tenalg's kernels use) in :data:`PARTS_PER_THREAD`
    parts per thread, which the threads take in turn, each part a ``np.matmul`` on one
    BLAS thread: a stack (a (g, m, k), b (g, k, n), either a stack of one matrix,
    broadcast) cut along g, one product (2-d, or a stack of one) cut along the longer of m
    and n, or along k where k is over four times both and the output small (a Gram
    matrix, :data:`GRAM_SIZE`: the parts' products summed) inside
    :func:`one_blas_thread`, where the work is enough (:func:`splits`); from the main
    thread only, where ``out`` shares no memory with ``a`` or ``b``.

    OpenBLAS's own threads split a product evenly and wait for each other: beside one
    busy process, rounding a (d 8, n 64, r 40) train, whose tall Gram and Cholesky
    products took its threads, took 3.0 s against 80 ms alone (one BLAS thread: 149 ms).

    >>> a = np.ones((64, 64, 64))
    >>> bool((matmul(a, a, np.empty_like(a)) == 64).all())
    True
    >>> with one_blas_thread():
    ...     bool((matmul(np.ones((64, 4096)), np.ones((4096, 32))) == 4096).all())
    True
    """
    if (type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != b.ndim
            or a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[0] != b.shape[0]
                                        and 1 not in (a.shape[0], b.shape[0]))
            or (out is not None and out.shape != _product_shape(a, b))
            or not splits(max(a.shape[0], b.shape[0]) if a.ndim == 3 else 1, a.shape[-2],
                          b.shape[-1], a.shape[-1], limited=_depth > 0)):
        return np.matmul(a, b, out=out)  # (small ones first: the cheap checks)
    threads = numba.get_num_threads()
    if (threads < 2 or threading.current_thread() is not threading.main_thread()
            or (out is not None and (np.may_share_memory(out, a)
                                     or np.may_share_memory(out, b)))):
        return np.matmul(a, b, out=out)
    out = np.empty(_product_shape(a, b), np.result_type(a, b)) if out is None else out
    g, (m, k), n = (out.shape[0] if a.ndim == 3 else 1), a.shape[-2:], b.shape[-1]
    if g > 1:  # (an operand of one matrix is broadcast along the stack)
        _shared(lambda lo, hi: np.matmul(a[lo:hi] if len(a) > 1 else a,
                                         b[lo:hi] if len(b) > 1 else b, out=out[lo:hi]),
                g, threads)
        return out
    if k <= 4 * max(m, n) or m * n > GRAM_SIZE:  # (cutting k: the parts' products summed)
        if m >= n:
            _shared(lambda lo, hi: np.matmul(a[..., lo:hi, :], b, out=out[..., lo:hi, :]),
                    m, threads)
        else:
            _shared(lambda lo, hi: np.matmul(a, b[..., lo:hi], out=out[..., lo:hi]), n,
                    threads)
    else:
        terms = np.empty((min(k, PARTS_PER_THREAD * threads),) + out.shape, out.dtype)
        cuts = _shared(lambda lo, hi, p: np.matmul(a[..., lo:hi], b[..., lo:hi, :],
                                                   out=terms[p]), k, threads, numbered=True)
        np.sum(terms[:len(cuts) - 1], axis=0, out=out)
    return out


def _product_shape(a, b):
    """The shape of ``np.matmul(a, b)`` for two stacks of one depth (or matrices)."""
    return tuple(map(max, a.shape[:-2], b.shape[:-2])) + (a.shape[-2], b.shape[-1])


def _shared(work, size, threads, numbered=False):
    """Run ``work(lo, hi)`` (and the part's number, when ``numbered``) over the parts of
    range(size), :data:`PARTS_PER_THREAD` per thread, taken in turn by ``threads``
    threads (this one and the pool's), each on one BLAS thread; returns the cuts."""
    parts = min(size, PARTS_PER_THREAD * threads)
    cuts = [size * p // parts for p in range(parts + 1)]
    taken = itertools.count()  # next() is atomic under the GIL: each part runs once

    def run():
        while (p := next(taken)) < parts:
            if numbered:
                work(cuts[p], cuts[p + 1], p)
            else:
                work(cuts[p], cuts[p + 1])

    with one_blas_thread():
        helpers = [_pool(threads - 1, os.getpid()).submit(run) for _ in range(threads - 1)]
        try:
            run()
        finally:  # no part still writing when this returns or raises
            futures.wait(helpers)
        for helper in helpers:
            helper.result()
    return cuts
