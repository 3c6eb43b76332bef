"""BLAS and LAPACK on one thread, for decompositions of small and skinny matrices.

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
Entering costs about 6 us (threadpoolctl), once per decomposition.

>>> with one_blas_thread():
...     q, r = np.linalg.qr(np.eye(3))
>>> bool(np.allclose(q @ r, np.eye(3)))
True
"""

import contextlib
import functools
import threading

import numpy as np

_depth = 0  # the main thread's uses open now


@functools.cache
def _controller():
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
    limiter = _controller().limit(limits=1, user_api="blas") if _depth == 0 else None
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if limiter is not None:
            limiter.restore_original_limits()
